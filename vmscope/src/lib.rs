//! vmscope: eBPF-instrumented observability for the Linux virtual-memory system.
//!
//! Data flows one way, one folder per layer: the kernel-facing [`source`]
//! loads the eBPF programs, which aggregate in maps, and reads them on its
//! own thread into raw cumulative samples; the pure [`model`] replays them
//! and derives rates, totals and tables; the views ([`top`], [`record`],
//! [`serve`], [`report`], [`compare`], [`doctor`]) only format, writing and
//! reading recordings through [`document`], and [`top`] and [`serve`] keep
//! a [`flight`] recorder; the [`experiments`] (workloads, labs, bench)
//! drive workloads around them.

pub mod child;
pub mod cli;
pub mod compare;
pub mod dispatch;
pub mod doctor;
pub mod document;
pub mod driver;
pub mod exit;
pub mod experiments;
pub mod export;
pub mod flight;
pub mod model;
pub mod procstat;
pub mod record;
pub mod report;
pub mod sampling;
pub mod schema;
pub mod serve;
pub mod source;
pub mod stats;
pub mod timefmt;
pub mod top;
pub mod units;
