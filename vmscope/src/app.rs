//! Dispatch from the parsed command line to each subcommand, and the mapping
//! of errors to exit codes and one-line messages.

use crate::{
    cli::{Cli, Command},
    exit,
};

/// Runs vmscope and returns its exit code.
pub fn run(cli: Cli) -> u8 {
    init_logging(cli.verbose);
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
        Command::Record(args) => {
            let wraps = !args.command.is_empty();
            let code = if wraps {
                exit::WRAPPER_FAILED
            } else {
                exit::FAILURE
            };
            (crate::record::command::run(args), code)
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

fn init_logging(verbose: bool) {
    let level = if verbose { "debug" } else { "warn" };
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_timestamp(None)
        .format_target(false)
        .try_init();
}
