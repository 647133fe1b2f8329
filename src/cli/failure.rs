//! How a command fails: an exit code and a message that says what and
//! where.

use crate::exit::{EXIT_BAD_INPUT, EXIT_STORE};

/// A command's failure: its message and exit code.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// What went wrong, and where.
    pub message: String,
}

impl Failure {
    /// Bad input.
    pub fn input(message: impl Into<String>) -> Failure {
        Failure {
            code: EXIT_BAD_INPUT,
            message: message.into(),
        }
    }
    /// A store or I/O error.
    pub fn store(message: impl Into<String>) -> Failure {
        Failure {
            code: EXIT_STORE,
            message: message.into(),
        }
    }
}
