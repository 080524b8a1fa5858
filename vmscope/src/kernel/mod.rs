//! What the running kernel offers: privileges, tracefs, hook catalogue, and
//! the `doctor` report built from them.

pub mod btf;
pub mod caps;
pub mod doctor;
pub mod format;
pub mod hooks;
pub mod privdrop;
pub mod system;
pub mod tracefs;
