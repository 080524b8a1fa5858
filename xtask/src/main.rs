//! vmscope's development tasks: `cargo xtask <command>`.

mod bench_footprint;
mod bench_soak;
mod bench_soak_cgroups;
mod bench_startup;
mod bench_top;
mod bootstrap;
mod circles;
mod fn_length;
mod fuzz;
mod kernels;
mod layers;
mod process;
mod tasks;
mod workspace;

use std::{ffi::OsString, process::ExitCode};

use clap::{Parser, Subcommand};

use crate::{process::Exit, workspace::Workspace};

#[derive(Parser)]
#[command(
    name = "xtask",
    bin_name = "cargo xtask",
    about = "vmscope's development tasks"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what building the eBPF programs needs: rust-src for the
    /// nightly toolchain, LLVM's development files matching the nightly's
    /// LLVM, and bpf-linker built against them
    Bootstrap {
        /// Only report what is missing (exit status 1 if anything is)
        #[arg(long)]
        check: bool,
    },
    /// Bootstrap, then build vmscope (release)
    Build,
    /// Bootstrap, build, then run vmscope with ARGS (through sudo when not root)
    Run {
        /// Arguments for vmscope, after `--`
        #[arg(last = true, value_name = "ARGS")]
        args: Vec<OsString>,
    },
    /// Bootstrap, then check formatting, run clippy, build, and run the tests
    Test {
        /// Extra arguments for `cargo test`, after `--`
        #[arg(last = true, value_name = "CARGO_TEST_ARGS")]
        args: Vec<OsString>,
    },
    /// Bootstrap, build, then run a benchmark (through sudo when not root):
    /// `overhead` prints the probes' cost per page fault against nothing
    /// attached and against empty programs on the same tracepoints (`--
    /// --workloads`: record's, serve's and the peer's cost on the fault
    /// loop, the syscall loops, redis and a zram swap loop); `top`
    /// (as root) prints the CPU share `vmscope top` takes with 500 faulting
    /// processes; `startup` (as root) prints how long record, bench, top
    /// and serve take to start and to stop, against their goals; `soak`
    /// (as root, `--processes N --minutes M`) runs serve, top --batch and
    /// record --format jsonl through N short-lived processes and prints
    /// their memory growth, CPU, losses and any exported series that went
    /// down; `soak --cgroups N` (`--concurrency K --pages P --minutes M`,
    /// or `--ci`) runs them through N cgroups made, given one faulting
    /// process each and removed, and checks memory, bounded per-cgroup
    /// series, that every cgroup is named and charged its faults, and that
    /// the system is restored; `footprint` (as root, `-- SECONDS`) prints
    /// the resident memory of serve, record and top after SECONDS against
    /// their goals
    Bench {
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(["overhead", "top", "startup", "soak", "footprint"]))]
        name: String,
        /// Arguments for the benchmark (e.g. `-r 15`, or after `--`)
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<OsString>,
    },
    /// Boot Debian's kernels (default: the newest 6.1 and 6.12 cloud
    /// kernels) under qemu with vmscope inside, run the core suite in each,
    /// print the compatibility table and write target/kernels/matrix.json
    Kernels {
        /// A kernel series to run (repeatable), e.g. `--kernel 6.1`
        #[arg(long = "kernel", value_name = "SERIES")]
        kernels: Vec<String>,
        /// KVM when a guest boots with it (auto), or always one or the other
        #[arg(long, value_enum, default_value = "auto")]
        accel: kernels::Accel,
        /// Keep each kernel's unpacked initramfs tree under target/kernels
        #[arg(long)]
        keep: bool,
        /// Run this shell script in each guest instead of the core suite
        /// (after the same mounts, with vmscope and the test child on PATH)
        /// and print what it wrote, judging nothing: for trying things out
        #[arg(long, value_name = "FILE")]
        script: Option<std::path::PathBuf>,
    },
    /// Print vmscope's module graph and its cycles; fail when the pure
    /// model (vmscope/src/model/) names aya or the kernel-facing source,
    /// or when a function is over 100 lines and not on the allow-list
    Layers,
    /// Fuzz the parsers of untrusted input (vmscope/fuzz) with cargo-fuzz on
    /// the nightly toolchain, installing cargo-fuzz if it is missing
    Fuzz {
        /// Seconds to run each target
        #[arg(long, value_name = "SECS", default_value_t = fuzz::DEFAULT_SECS)]
        time: u64,
        /// The target to run (default: every target, one after the other)
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(fuzz::TARGETS))]
        target: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = Workspace::new().and_then(|mut ws| match cli.command {
        Cmd::Bootstrap { check } => bootstrap::bootstrap(&mut ws, check),
        Cmd::Build => tasks::build(&mut ws),
        Cmd::Run { args } => tasks::run(&mut ws, &args),
        Cmd::Test { args } => tasks::test(&mut ws, &args),
        Cmd::Bench { name, args } if name == "top" => bench_top::bench_top(&mut ws, &args),
        Cmd::Bench { name, args } if name == "soak" => bench_soak::bench_soak(&mut ws, &args),
        Cmd::Bench { name, args } if name == "footprint" => {
            bench_footprint::bench_footprint(&mut ws, &args)
        }
        Cmd::Bench { name, args } if name == "startup" => {
            bench_startup::bench_startup(&mut ws, &args)
        }
        Cmd::Bench { name, args } => {
            let argv: Vec<OsString> = std::iter::once(OsString::from(name)).chain(args).collect();
            tasks::run(&mut ws, &argv)
        }
        Cmd::Layers => layers::layers(&ws),
        Cmd::Fuzz { time, target } => fuzz::fuzz(&ws, time, target.as_deref()),
        Cmd::Kernels {
            kernels: k,
            accel,
            keep,
            script,
        } => kernels::kernels(&mut ws, &k, accel, keep, script.as_deref()),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<Exit>() {
            Some(Exit(code)) => ExitCode::from(*code),
            None => {
                eprintln!("xtask: error: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}
