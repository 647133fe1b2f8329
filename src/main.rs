//! The `weir` program: run graph definitions, inspect a store, benchmark.

use std::process::ExitCode;

fn main() -> ExitCode {
    weir::cli::main()
}
