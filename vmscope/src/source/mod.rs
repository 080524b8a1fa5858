//! The kernel-facing source: what the running kernel offers (`kernel`),
//! loading and attaching the eBPF programs (`loader`, `rmap`), and reading
//! their maps into samples (`collect`, `batch`). Everything that imports
//! aya lives here; the model and the views get owned samples.

pub mod batch;
pub mod collect;
pub mod containers;
pub mod damon;
pub mod ebpf;
pub mod kernel;
pub mod loader;
pub mod mglru;
pub mod procfs;
pub mod rmap;
pub mod shed;
pub mod teardown;
pub mod thread;
pub mod wss;

pub use thread::{Reading, Source};
