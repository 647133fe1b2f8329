//! What commands print: lines on stdout (a closed pipe ends the program
//! quietly), and logs on stderr in plain or JSON form.

use clap::ValueEnum;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Plain,
    /// One JSON object a line.
    Json,
}

/// Prints a line to stdout; a closed stdout (`| head`) ends the program
/// quietly with success.
pub fn out(line: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if writeln!(o, "{line}").is_err() {
        std::process::exit(0);
    }
}

/// Sets up logging to stderr at `default_level` (RUST_LOG overrides).
pub fn init_logging(format: LogFormat, default_level: &str) {
    init_logging_to(format, default_level, std::io::stderr);
}

/// Sets up logging at `default_level` (RUST_LOG overrides) through
/// `writer`, which writes to stderr: no escape codes when stderr is not a
/// terminal.
pub fn init_logging_to<W>(format: LogFormat, default_level: &str, writer: W)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(writer)
        // A log line that cannot be written (stderr a closed pipe) is
        // dropped: tracing-subscriber would report it with eprintln!, which
        // panics there, and a panic in one of sled's I/O threads between
        // its write and its mark leaves every later flush waiting forever.
        .log_internal_errors(false);
    let _ = match format {
        LogFormat::Plain => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
