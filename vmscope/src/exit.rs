//! Exit codes and the error type that carries one.

use std::fmt;

/// Command-line usage error.
pub const USAGE: u8 = 2;
/// Not enough privilege to load eBPF programs.
pub const NO_PRIVILEGE: u8 = 77;
/// vmscope itself failed while wrapping a command.
pub const WRAPPER_FAILED: u8 = 125;
/// The wrapped command was found but could not be executed.
pub const CANNOT_EXECUTE: u8 = 126;
/// The wrapped command was not found.
pub const NOT_FOUND: u8 = 127;
/// Any other failure of vmscope.
pub const FAILURE: u8 = 1;

/// An error that ends vmscope with a specific exit code and one-line message.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// Builds an `anyhow::Error` that exits with `code`.
pub fn failure(code: u8, message: impl Into<String>) -> anyhow::Error {
    Failure {
        code,
        message: message.into(),
    }
    .into()
}

/// The exit code an error asks for, or `default`.
pub fn code_of(err: &anyhow::Error, default: u8) -> u8 {
    err.chain()
        .find_map(|e| e.downcast_ref::<Failure>())
        .map_or(default, |f| f.code)
}

/// One line for the user: the outermost message plus its causes.
pub fn message_of(err: &anyhow::Error) -> String {
    if let Some(f) = err.downcast_ref::<Failure>() {
        return f.message.clone();
    }
    format!("{err:#}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_code_survives_context() {
        let e = failure(NO_PRIVILEGE, "not root").context("loading probes");
        assert_eq!(code_of(&e, FAILURE), NO_PRIVILEGE);
        assert_eq!(code_of(&anyhow::anyhow!("x"), FAILURE), FAILURE);
    }
}
