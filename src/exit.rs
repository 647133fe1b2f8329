//! The process's exit codes, shared by every command (the CLI's and
//! `weir bench`'s): 0 success, 1 a run failed, 2 bad input or a refused
//! request, 3 a store or I/O error.

/// Exit code: a run failed.
pub const EXIT_RUN_FAILED: u8 = 1;

/// Exit code: bad input (a definition, an argument).
pub const EXIT_BAD_INPUT: u8 = 2;

/// Exit code: a store or I/O error.
pub const EXIT_STORE: u8 = 3;
