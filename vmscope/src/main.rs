use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    vmscope::source::kernel::few_heaps();
    let cli = match vmscope::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                vmscope::exit::USAGE
            } else {
                0
            });
        }
    };
    ExitCode::from(vmscope::dispatch::run(cli))
}
