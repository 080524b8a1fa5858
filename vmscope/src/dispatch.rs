//! Dispatch from the parsed command line to each subcommand, and the mapping
//! of errors to exit codes and one-line messages.

use crate::{
    cli::{Cli, Command},
    exit,
};

/// Runs vmscope and returns its exit code.
pub fn run(cli: Cli) -> u8 {
    init_logging(cli.verbose);
    guard_stack_dump();
    let (result, default_code) = match cli.command {
        Command::Doctor(args) => (crate::doctor::run(&args), exit::FAILURE),
        Command::Overhead(args) => (crate::experiments::overhead::run(&args), exit::FAILURE),
        Command::Compare(args) => (crate::compare::run(&args), exit::USAGE),
        Command::Workload(w) => (crate::experiments::workload::run(&w), exit::FAILURE),
        Command::Lab(l) => (crate::experiments::lab::run(&l), exit::FAILURE),
        Command::Bench(args) => (crate::experiments::bench::run(args), exit::WRAPPER_FAILED),
        Command::Report(args) => (crate::report::run(&args), exit::FAILURE),
        Command::Serve(args) => (crate::serve::run(args), exit::FAILURE),
        Command::Top(args) => (crate::top::run(args), exit::FAILURE),
        Command::Schema(args) => (crate::schema::print(&args), exit::FAILURE),
        Command::Export(args) => (crate::export::run(&args), exit::FAILURE),
        Command::Record(args) => {
            let wraps = !args.command.is_empty();
            let code = if wraps {
                exit::WRAPPER_FAILED
            } else {
                exit::FAILURE
            };
            (crate::record::run(args), code)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vmscope: {}", exit::message_of(&e));
            exit::code_of(&e, default_code)
        }
    }
}

/// `VMSCOPE_DUMP_STACKS` is dropped, in one warning line, when dumping
/// would leak kernel addresses or write through a symbolic link (see
/// [`crate::source::kernel::caps::stack_dump_refusal`]).
fn guard_stack_dump() {
    use crate::source::{kernel::caps, rmap::sampler::DUMP_ENV};
    let Some(path) = std::env::var_os(DUMP_ENV) else {
        return;
    };
    let refusal =
        caps::stack_dump_refusal(&caps::Privileges::current(), std::path::Path::new(&path));
    if let Some(why) = refusal {
        log::warn!("{why}");
        // SAFETY: called from `run` before any thread is started, so no
        // other thread reads the environment.
        unsafe { std::env::remove_var(DUMP_ENV) };
    }
}

fn init_logging(verbose: bool) {
    let level = if verbose { "debug" } else { "warn" };
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_timestamp(None)
        .format_target(false)
        .try_init();
}
