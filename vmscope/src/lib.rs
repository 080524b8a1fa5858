//! vmscope: eBPF-instrumented observability for the Linux virtual-memory system.
//!
//! Data flows one way: eBPF programs aggregate in maps ([`loader`]), the
//! [`collect`] module turns maps and /proc into raw cumulative [`collect::Sample`]s,
//! the pure [`model`] derives deltas and tables, and views ([`record`], doctor)
//! only format.

pub mod app;
pub mod bench;
pub mod child;
pub mod cli;
pub mod compare;
pub mod doctor;
pub mod driver;
pub mod exit;
pub mod export;
pub mod lab;
pub mod model;
pub mod overhead;
pub mod pressure;
pub mod procstat;
pub mod record;
pub mod recorder;
pub mod report;
pub mod schema;
pub mod serve;
pub mod source;
pub mod stats;
pub mod timefmt;
pub mod tui;
pub mod units;
pub mod workload;
