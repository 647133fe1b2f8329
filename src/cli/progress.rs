//! The progress line of `weir run` (indicatif), and a tracing writer that
//! prints log lines above it.
//!
//! On a terminal the line shows nodes done of the total known (with the
//! windows of a backfill still to come counted in), running and queued
//! apart, retries and deferrals, rate and ETA; log lines (WARN, INFO) go
//! through the bar's `suspend`, so each is printed on its own line and the
//! bar is redrawn under it. When stderr is not a terminal there is no bar
//! and no escape code at all: log lines are written plainly.

use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bar that log lines are printed above, once one is shown.
static BAR: OnceLock<ProgressBar> = OnceLock::new();

/// What the line shows at one tick.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Line {
    /// Runs settled.
    pub runs_done: usize,
    /// Runs watched (started or still to come).
    pub runs_total: usize,
    /// Runs failed or cancelled.
    pub runs_failed: usize,
    /// Backfill windows whose run has not started yet.
    pub windows_to_come: usize,
    /// Nodes ended.
    pub nodes_done: u64,
    /// Nodes of started runs, plus those of windows to come.
    pub nodes_total: u64,
    /// Tickets running now (holding a pool slot).
    pub running: usize,
    /// Tickets waiting for a slot or their due time.
    pub queued: usize,
    /// Attempts that failed and were retried.
    pub retries: u64,
    /// Hand-outs a breaker deferred.
    pub deferred: u64,
}

/// The progress line: a bar on a terminal, nothing otherwise.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Nodes already ended at the first update (a re-run's): the rate
    /// counts only what ends after.
    base: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// The rate of nodes ended since the first update, once a second has
/// passed (before, or with none ended, `-`): a re-run that finds every
/// node ended shows no rate at all.
fn rate(ended: u64, elapsed: Duration) -> String {
    let s = elapsed.as_secs_f64();
    if ended == 0 || s < 1.0 {
        return "-".into();
    }
    format!("{:.1}/s", ended as f64 / s)
}

impl Progress {
    /// A bar on stderr when `shown`, else a no-op.
    pub fn new(shown: bool) -> Progress {
        let base = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        if !shown {
            return Progress { bar: None, base };
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(4));
        let from = base.clone();
        bar.set_style(
            ProgressStyle::with_template(
                "[{elapsed_precise}] {bar:24.cyan/blue} {pos}/{len} nodes ({rate}, ETA {eta}) {msg}",
            )
            .expect("the progress template is valid")
            .with_key(
                "rate",
                move |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let base = from.load(std::sync::atomic::Ordering::Relaxed);
                    let ended = state.pos().saturating_sub(if base == u64::MAX { state.pos() } else { base });
                    let _ = w.write_str(&rate(ended, state.elapsed()));
                },
            )
            .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(250));
        let _ = BAR.set(bar.clone());
        Progress {
            bar: Some(bar),
            base,
        }
    }

    /// Whether a bar is shown.
    pub fn shown(&self) -> bool {
        self.bar.is_some()
    }

    /// Redraws the line.
    pub fn update(&self, l: &Line) {
        let Some(bar) = &self.bar else { return };
        let _ = self.base.compare_exchange(
            u64::MAX,
            l.nodes_done,
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
        );
        bar.set_length(l.nodes_total.max(l.nodes_done));
        bar.set_position(l.nodes_done);
        bar.set_message(message(l));
    }

    /// Prints a line above the bar (or plainly, without one).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// Removes the bar, leaving the terminal as it was before it.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The text after the bar.
pub fn message(l: &Line) -> String {
    let mut m = format!(
        "| runs {}/{} done ({} failed)",
        l.runs_done, l.runs_total, l.runs_failed
    );
    if l.windows_to_come > 0 {
        m.push_str(&format!(", {} window(s) to come", l.windows_to_come));
    }
    m.push_str(&format!(
        " | running {} queued {} | retries {} deferred {}",
        l.running, l.queued, l.retries, l.deferred
    ));
    m
}

/// A tracing writer that prints above the bar when one is shown.
#[derive(Clone, Copy, Default)]
pub struct Writer;

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match BAR.get() {
            Some(bar) if !bar.is_finished() => {
                bar.suspend(|| std::io::stderr().lock().write_all(buf))?
            }
            _ => std::io::stderr().lock().write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Writer {
    type Writer = Writer;

    fn make_writer(&'a self) -> Writer {
        Writer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_shows_running_queued_and_windows_apart() {
        let cases = [
            (
                Line {
                    runs_done: 1,
                    runs_total: 7,
                    windows_to_come: 3,
                    running: 4,
                    queued: 8,
                    ..Line::default()
                },
                "| runs 1/7 done (0 failed), 3 window(s) to come | running 4 queued 8 | retries 0 deferred 0",
            ),
            (
                Line {
                    runs_total: 1,
                    runs_failed: 1,
                    runs_done: 1,
                    retries: 2,
                    deferred: 3,
                    ..Line::default()
                },
                "| runs 1/1 done (1 failed) | running 0 queued 0 | retries 2 deferred 3",
            ),
        ];
        for (i, (line, want)) in cases.iter().enumerate() {
            assert_eq!(message(line), *want, "#{i}: {line:?}");
        }
    }

    /// A re-run whose nodes had all ended shows no rate; a rate counts
    /// only nodes ended during the run, once a second has passed.
    #[test]
    fn rate_counts_only_what_ended_here() {
        let cases = [
            (0, 0.0, "-"),
            (0, 5.0, "-"),
            (7, 0.003, "-"),
            (10, 2.0, "5.0/s"),
            (3, 1.5, "2.0/s"),
        ];
        for (ended, s, want) in cases {
            assert_eq!(
                rate(ended, Duration::from_secs_f64(s)),
                want,
                "{ended} in {s}s"
            );
        }
    }
}
