//! Built-in tasks of the `weir` program.

pub mod command;
pub mod http;
pub mod notify;
