//! Writing one attempt's log and record, off the attempt's path.
//!
//! The command's pipe readers hand chunks of output to [`LogSink`]s; a
//! bounded channel carries them to one writer thread per attempt, which
//! splits them into lines, writes the lines and the record, and keeps the
//! log within its [`LogLimits`]. The readers wait only when the channel is
//! full (the disk is slower than the command), which slows the command as a
//! pipe to a file would; an error never reaches them: the writer traces it,
//! stops writing that attempt's log and keeps draining the channel, so the
//! command is never blocked on a dead log.
//!
//! Bounds: lines go to the file while the file is within
//! `head_bytes_max`; the first line that does not fit ends the head for
//! good. Past it, lines are appended too (so a follower sees them at once)
//! until more than twice `tail_bytes_max` follow the head; the writer then
//! rewrites the file as head, one `cut` line with the totals dropped so far,
//! and the last `tail_bytes_max` bytes of whole lines, and renames it over
//! the log. At the end the same cut brings the tail down to
//! `tail_bytes_max`. Copying streams through the file, so memory stays at a
//! line or two whatever the output.
//!
//! The record is appended to the run's records file when the writer starts
//! and when the attempt ends, after the log's last line, so a reader that
//! sees an ended record and then reads the log to its end has every line.
//! The log file is made at the first line: an attempt that prints nothing
//! leaves its record only (`lines_logged` 0).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use weir_actors::protocol::{LogEvent, LogFrame};

use super::format::{cut_text, format_line, PREFIX_BYTES};
use super::paths::LogPaths;
use super::record::{AttemptRecord, LogLimits, Outcome, Stream};

/// Where a worker process sends its attempts' log events.
pub type RemoteLog = Arc<dyn Fn(LogFrame) + Send + Sync>;

/// A stream's number on the wire: 0 stdout, 1 stderr.
pub fn stream_code(s: Stream) -> u8 {
    match s {
        Stream::Err => 1,
        Stream::Out | Stream::Cut => 0,
    }
}

/// The stream of a wire number.
pub fn stream_of(code: u8) -> Stream {
    if code == 1 {
        Stream::Err
    } else {
        Stream::Out
    }
}

/// An outcome's name on the wire (its serde name).
pub fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Succeeded => "succeeded",
        Outcome::Failed => "failed",
        Outcome::TimedOut => "timed_out",
        Outcome::Cancelled => "cancelled",
    }
}

/// The outcome of a wire name; an unknown one is a failure.
pub fn outcome_of(name: &str) -> Outcome {
    match name {
        "succeeded" => Outcome::Succeeded,
        "timed_out" => Outcome::TimedOut,
        "cancelled" => Outcome::Cancelled,
        _ => Outcome::Failed,
    }
}

/// The current time in ms since the epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How an attempt ended, as the task saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptEnd {
    /// The outcome.
    pub outcome: Outcome,
    /// The exit code, when the command exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it.
    pub signal: Option<i32>,
    /// Why it failed.
    pub error: Option<String>,
}

enum Msg {
    Chunk {
        stream: Stream,
        at_ms: u64,
        bytes: Vec<u8>,
    },
    Eof {
        stream: Stream,
        at_ms: u64,
    },
}

/// Where one output stream of an attempt writes. Dropping it without
/// [`LogSink::close`] is fine: the stream's last partial line is written
/// when the attempt ends.
#[derive(Debug)]
pub struct LogSink {
    tx: Option<mpsc::Sender<Msg>>,
    stream: Stream,
}

impl LogSink {
    /// Hands `bytes` (any cut of the output) to the writer; waits only
    /// while the writer's queue is full.
    pub async fn write(&mut self, bytes: &[u8]) {
        self.write_at(bytes, now_ms()).await;
    }

    /// As [`LogSink::write`], for output read at `at_ms` (a remote
    /// worker's clock).
    pub async fn write_at(&mut self, bytes: &[u8], at_ms: u64) {
        let Some(tx) = &self.tx else { return };
        let msg = Msg::Chunk {
            stream: self.stream,
            at_ms,
            bytes: bytes.to_vec(),
        };
        if tx.send(msg).await.is_err() {
            // The writer is gone (it panicked): output goes on unlogged.
            self.tx = None;
        }
    }

    /// The stream ended: its last line is written even without a newline.
    pub async fn close(mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx
                .send(Msg::Eof {
                    stream: self.stream,
                    at_ms: now_ms(),
                })
                .await;
        }
    }
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Msg::Chunk { stream, bytes, .. } => write!(f, "Chunk({stream}, {} bytes)", bytes.len()),
            Msg::Eof { stream, .. } => write!(f, "Eof({stream})"),
        }
    }
}

/// The log of one running attempt. [`AttemptLog::finish`] records its end;
/// dropped without it (the attempt's future was dropped on a timeout or a
/// cancel), it records the attempt as cancelled when `cancel` fired and as
/// timed out otherwise, once the command's pipes close.
pub struct AttemptLog {
    tx: Option<mpsc::Sender<Msg>>,
    end: Arc<Mutex<Option<AttemptEnd>>>,
    done: Option<oneshot::Receiver<AttemptRecord>>,
    cancel: CancellationToken,
}

impl std::fmt::Debug for AttemptLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttemptLog")
            .field("open", &self.tx.is_some())
            .finish()
    }
}

impl AttemptLog {
    /// Starts the log of `attempt` of `run_id` under `paths` (none: output
    /// is not kept). Never fails: a log that cannot be written is traced
    /// and the attempt runs without it.
    pub fn start(
        paths: Option<&LogPaths>,
        run_id: &str,
        attempt: u32,
        limits: &LogLimits,
        cancel: CancellationToken,
    ) -> AttemptLog {
        let end = Arc::new(Mutex::new(None));
        let disabled = AttemptLog {
            tx: None,
            end: end.clone(),
            done: None,
            cancel: cancel.clone(),
        };
        let Some(paths) = paths else { return disabled };
        let (dir, records) = match paths
            .run_dir(run_id)
            .and_then(|d| Ok((d, paths.records_file(run_id)?)))
        {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(run_id, attempt, error = %e, "attempt log not kept");
                return disabled;
            }
        };
        let (tx, rx) = mpsc::channel(limits.queue_chunks_max.max(1));
        let (done_tx, done) = oneshot::channel();
        let writer = Writer::new(dir, records, run_id, attempt, limits.clone());
        let end_slot = end.clone();
        let spawned = std::thread::Builder::new()
            .name("weir-log".into())
            .spawn(move || {
                let record = writer.run(rx, &end_slot);
                let _ = done_tx.send(record);
            });
        if let Err(e) = spawned {
            tracing::warn!(run_id, attempt, error = %e, "attempt log not kept: no writer thread");
            return disabled;
        }
        AttemptLog {
            tx: Some(tx),
            end,
            done: Some(done),
            cancel,
        }
    }

    /// Starts the log of `attempt` of `run_id` in a worker process: its
    /// events go to `forward` (to the engine, which keeps them as it keeps
    /// local attempts' logs) instead of files. Never fails.
    pub fn start_remote(
        forward: RemoteLog,
        run_id: &str,
        attempt: u32,
        limits: &LogLimits,
        cancel: CancellationToken,
    ) -> AttemptLog {
        let end = Arc::new(Mutex::new(None));
        let (tx, mut rx) = mpsc::channel::<Msg>(limits.queue_chunks_max.max(1));
        let key = run_id.to_string();
        let end_slot = end.clone();
        let frame = move |event| LogFrame {
            key: key.clone(),
            attempt,
            event,
        };
        forward(frame(LogEvent::Start));
        tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                forward(frame(match m {
                    Msg::Chunk {
                        stream,
                        at_ms,
                        bytes,
                    } => LogEvent::Chunk {
                        stream: stream_code(stream),
                        at_ms,
                        bytes,
                    },
                    Msg::Eof { stream, at_ms } => LogEvent::Eof {
                        stream: stream_code(stream),
                        at_ms,
                    },
                }));
            }
            let end = end_slot
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .unwrap_or(AttemptEnd {
                    outcome: Outcome::Failed,
                    exit_code: None,
                    signal: None,
                    error: Some("the attempt's log ended without its outcome".into()),
                });
            forward(frame(LogEvent::End {
                outcome: outcome_name(end.outcome).to_string(),
                exit_code: end.exit_code,
                signal: end.signal,
                error: end.error,
            }));
        });
        AttemptLog {
            tx: Some(tx),
            end,
            done: None,
            cancel,
        }
    }

    /// Where `stream` writes.
    pub fn sink(&self, stream: Stream) -> LogSink {
        LogSink {
            tx: self.tx.clone(),
            stream,
        }
    }

    /// Records the end once every sink is closed or dropped, and returns
    /// the record written (`None` when the log was not kept). Waits for the
    /// sinks: call it once the command's pipes are read to their end.
    pub async fn finish(mut self, end: AttemptEnd) -> Option<AttemptRecord> {
        set_end(&self.end, end);
        self.tx = None;
        self.done.take()?.await.ok()
    }

    /// [`AttemptLog::finish`] without waiting: the record is written once
    /// the sinks are closed or dropped.
    pub fn end(mut self, end: AttemptEnd) {
        set_end(&self.end, end);
        self.tx = None;
    }
}

impl Drop for AttemptLog {
    fn drop(&mut self) {
        if self.tx.take().is_none() {
            return;
        }
        let end = if self.cancel.is_cancelled() {
            AttemptEnd {
                outcome: Outcome::Cancelled,
                exit_code: None,
                signal: None,
                error: Some("cancelled; the process group was killed".into()),
            }
        } else if std::thread::panicking() {
            AttemptEnd {
                outcome: Outcome::Failed,
                exit_code: None,
                signal: None,
                error: Some("the task panicked".into()),
            }
        } else {
            AttemptEnd {
                outcome: Outcome::TimedOut,
                exit_code: None,
                signal: None,
                error: Some("timed out; the process group was killed".into()),
            }
        };
        set_end(&self.end, end);
    }
}

fn set_end(slot: &Mutex<Option<AttemptEnd>>, end: AttemptEnd) {
    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
    slot.get_or_insert(end);
}

/// Whether a file's last byte is not a newline (a line a crash cut short).
fn ends_torn(f: &mut File) -> std::io::Result<bool> {
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(false);
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1))?;
    f.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// The writer thread's state.
struct Writer {
    log_path: PathBuf,
    /// The run's records file, which every attempt's record is appended to.
    records_path: PathBuf,
    /// The attempt's folder, made with its log file at its first line.
    dir: PathBuf,
    limits: LogLimits,
    record: AttemptRecord,
    /// `None` before the first line (an attempt that prints nothing has no
    /// log file) and once writing failed.
    file: Option<BufWriter<File>>,
    /// Writing the log failed: no more lines go to a file.
    log_failed: bool,
    /// Bytes in the file.
    file_len: u64,
    /// Where the head ends, once a line did not fit in it.
    head_end: Option<u64>,
    /// The cut line's length, once there is one.
    cut_line_bytes: u64,
    /// Partial lines of stdout and stderr.
    pending: [Vec<u8>; 2],
    stderr_tail: VecDeque<String>,
    stderr_tail_bytes: usize,
    /// Lines held in memory, formatted as the file would hold them, while
    /// the log may still be kept in the record (`holding`).
    held: Vec<u8>,
    /// The log may still end up in the record: it is within
    /// `inline_bytes_max` and the attempt within `inline_hold_ms` of its
    /// start. Once false, lines go to the file.
    holding: bool,
}

impl Writer {
    fn new(
        dir: PathBuf,
        records_path: PathBuf,
        run_id: &str,
        attempt: u32,
        limits: LogLimits,
    ) -> Writer {
        let holding = limits.inline_bytes_max > 0;
        Writer {
            log_path: dir.join(format!("{attempt}.log")),
            records_path,
            dir,
            limits,
            record: AttemptRecord {
                run_id: run_id.to_string(),
                attempt,
                started_ms: now_ms(),
                finished_ms: None,
                outcome: None,
                exit_code: None,
                signal: None,
                error: None,
                stderr_tail: Vec::new(),
                bytes_logged: 0,
                lines_logged: 0,
                bytes_cut: 0,
                lines_cut: 0,
                log_error: None,
                log_inline: None,
            },
            held: Vec::new(),
            holding,
            file: None,
            log_failed: false,
            file_len: 0,
            head_end: None,
            cut_line_bytes: 0,
            pending: [Vec::new(), Vec::new()],
            stderr_tail: VecDeque::new(),
            stderr_tail_bytes: 0,
        }
    }

    fn run(
        mut self,
        mut rx: mpsc::Receiver<Msg>,
        end: &Mutex<Option<AttemptEnd>>,
    ) -> AttemptRecord {
        self.open();
        loop {
            let msg = match rx.try_recv() {
                Ok(m) => m,
                Err(mpsc::error::TryRecvError::Empty) => {
                    // Idle: what is written becomes visible to followers.
                    self.flush();
                    let next = if self.holding && !self.held.is_empty() {
                        self.wait_holding(&mut rx)
                    } else {
                        rx.blocking_recv()
                    };
                    match next {
                        Some(m) => m,
                        None => break,
                    }
                }
                Err(mpsc::error::TryRecvError::Disconnected) => break,
            };
            match msg {
                Msg::Chunk {
                    stream,
                    at_ms,
                    bytes,
                } => self.chunk(stream, at_ms, &bytes),
                Msg::Eof { stream, at_ms } => self.eof(stream, at_ms),
            }
        }
        let at_ms = now_ms();
        self.eof(Stream::Out, at_ms);
        self.eof(Stream::Err, at_ms);
        self.flush();
        if self.tail_bytes() > self.limits.tail_bytes_max {
            if let Err(e) = self.cut() {
                self.failed("cut the log", &e);
            }
        }
        let end = end.lock().unwrap_or_else(|p| p.into_inner()).take();
        let end = end.unwrap_or(AttemptEnd {
            outcome: Outcome::Failed,
            exit_code: None,
            signal: None,
            error: Some("the attempt ended without an outcome".into()),
        });
        self.record.finished_ms = Some(now_ms().max(self.record.started_ms));
        self.record.outcome = Some(end.outcome);
        self.record.exit_code = end.exit_code;
        self.record.signal = end.signal;
        self.record.error = end.error;
        self.record.stderr_tail = self.stderr_tail.iter().cloned().collect();
        if self.holding && !self.held.is_empty() {
            // Small and short: the log lives in the record, no file.
            self.record.log_inline = Some(String::from_utf8_lossy(&self.held).into_owned());
        }
        self.write_record();
        tracing::debug!(
            run_id = %self.record.run_id,
            attempt = self.record.attempt,
            outcome = %end.outcome,
            lines = self.record.lines_logged,
            lines_cut = self.record.lines_cut,
            "attempt log closed"
        );
        self.record
    }

    /// Waits for the next message while lines are held: past the hold the
    /// held lines go to the file (so followers see them while the attempt
    /// runs), and the wait goes on without a deadline.
    fn wait_holding(&mut self, rx: &mut mpsc::Receiver<Msg>) -> Option<Msg> {
        /// How often a held log looks for more output, or its deadline.
        const HOLD_POLL_MS: u64 = 5;
        let until = self
            .record
            .started_ms
            .saturating_add(self.limits.inline_hold_ms);
        loop {
            match rx.try_recv() {
                Ok(m) => return Some(m),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            if now_ms() >= until {
                self.spill();
                self.flush();
                return rx.blocking_recv();
            }
            std::thread::sleep(std::time::Duration::from_millis(HOLD_POLL_MS));
        }
    }

    /// Stops holding: the log file is made and the held lines written to
    /// it, in order, before any later line.
    fn spill(&mut self) {
        if !self.holding {
            return;
        }
        self.holding = false;
        let held = std::mem::take(&mut self.held);
        if held.is_empty() || self.log_failed {
            return;
        }
        self.create_log();
        // Line by line, as they would have been written: the head ends
        // where it would have.
        for line in held.split_inclusive(|&b| b == b'\n') {
            let len = line.len() as u64;
            if self.head_end.is_none() && self.file_len + len > self.limits.head_bytes_max {
                self.head_end = Some(self.file_len);
            }
            let Some(f) = &mut self.file else { return };
            if let Err(e) = f.write_all(line) {
                self.failed("write", &e);
                return;
            }
            self.file_len += len;
        }
    }

    /// Records the attempt's start. The log file waits for the first line.
    fn open(&mut self) {
        if let Some(dir) = self.records_path.parent() {
            if let Err(e) = std::fs::create_dir_all(dir) {
                let dir = dir.to_path_buf();
                self.failed_at(&dir, "create", &e);
                return;
            }
        }
        self.write_record();
    }

    /// Makes the attempt's folder and log file, at its first line.
    fn create_log(&mut self) {
        let created = std::fs::create_dir_all(&self.dir)
            .map_err(|e| (self.dir.clone(), e))
            .and_then(|()| File::create(&self.log_path).map_err(|e| (self.log_path.clone(), e)));
        match created {
            Ok(f) => self.file = Some(BufWriter::with_capacity(64 << 10, f)),
            Err((path, e)) => self.failed_at(&path, "create", &e),
        }
    }

    /// Appends the record to the run's records file as one line, in one
    /// write: attempts of a run append to it at once (O_APPEND keeps each
    /// write whole), and a reader takes an attempt's last line. A line a
    /// crash left torn is ended first, so the torn part stays a line of its
    /// own that readers pass over.
    fn write_record(&mut self) {
        let result = serde_json::to_vec(&self.record)
            .map_err(std::io::Error::other)
            .and_then(|json| {
                let mut f = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .read(true)
                    .open(&self.records_path)?;
                let mut line = Vec::with_capacity(json.len() + 2);
                if ends_torn(&mut f)? {
                    line.push(b'\n');
                }
                line.extend_from_slice(&json);
                line.push(b'\n');
                f.write_all(&line)
            });
        if let Err(e) = result {
            tracing::warn!(
                path = %self.records_path.display(),
                error = %e,
                "attempt record not written"
            );
        }
    }

    fn failed(&mut self, what: &str, e: &std::io::Error) {
        let path = self.log_path.clone();
        self.failed_at(&path, what, e);
    }

    fn failed_at(&mut self, path: &Path, what: &str, e: &std::io::Error) {
        let error = format!("cannot {what} {}: {e}", path.display());
        tracing::warn!(
            run_id = %self.record.run_id,
            attempt = self.record.attempt,
            error = %error,
            "attempt log stopped; the attempt goes on"
        );
        self.record.log_error.get_or_insert(error);
        self.file = None;
        self.log_failed = true;
    }

    fn flush(&mut self) {
        if let Some(f) = &mut self.file {
            if let Err(e) = f.flush() {
                self.failed("write", &e);
            }
        }
    }

    fn chunk(&mut self, stream: Stream, at_ms: u64, bytes: &[u8]) {
        let i = usize::from(stream == Stream::Err);
        let mut pending = std::mem::take(&mut self.pending[i]);
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            pending.extend_from_slice(&rest[..nl]);
            self.split_long(stream, at_ms, &mut pending);
            self.line(stream, at_ms, &pending);
            pending.clear();
            rest = &rest[nl + 1..];
        }
        pending.extend_from_slice(rest);
        self.split_long(stream, at_ms, &mut pending);
        self.pending[i] = pending;
    }

    fn eof(&mut self, stream: Stream, at_ms: u64) {
        let i = usize::from(stream == Stream::Err);
        let pending = std::mem::take(&mut self.pending[i]);
        if !pending.is_empty() {
            self.line(stream, at_ms, &pending);
        }
    }

    /// Writes pieces of `pending` while it is longer than a line may be,
    /// cutting between characters where the bytes are UTF-8.
    fn split_long(&mut self, stream: Stream, at_ms: u64, pending: &mut Vec<u8>) {
        let max = self.limits.line_bytes_max.max(4);
        while pending.len() > max {
            let mut cut = max;
            let is_continuation = |b: u8| b & 0b1100_0000 == 0b1000_0000;
            while cut > max - 3 && is_continuation(pending[cut]) {
                cut -= 1;
            }
            if is_continuation(pending[cut]) {
                cut = max;
            }
            self.line(stream, at_ms, &pending[..cut]);
            pending.drain(..cut);
        }
    }

    fn line(&mut self, stream: Stream, at_ms: u64, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        self.record.lines_logged += 1;
        self.record.bytes_logged += text.len() as u64 + 1;
        if stream == Stream::Err {
            self.keep_stderr(&text);
        }
        let line = format_line(at_ms, stream, &text);
        let len = line.len() as u64;
        if self.holding {
            let fits = self.held.len() + line.len() <= self.limits.inline_bytes_max;
            let early = now_ms()
                < self
                    .record
                    .started_ms
                    .saturating_add(self.limits.inline_hold_ms);
            if fits && early {
                self.held.extend_from_slice(line.as_bytes());
                return;
            }
            self.spill();
        }
        if self.file.is_none() && !self.log_failed {
            self.create_log();
        }
        if self.file.is_none() {
            return;
        }
        if self.head_end.is_none() && self.file_len + len > self.limits.head_bytes_max {
            self.head_end = Some(self.file_len);
        }
        let Some(f) = &mut self.file else { return };
        if let Err(e) = f.write_all(line.as_bytes()) {
            self.failed("write", &e);
            return;
        }
        self.file_len += len;
        if self.tail_bytes() > self.limits.tail_bytes_max.saturating_mul(2) {
            self.flush();
            if let Err(e) = self.cut() {
                self.failed("cut the log", &e);
            }
        }
    }

    fn keep_stderr(&mut self, text: &str) {
        let max = self.limits.stderr_tail_bytes_max;
        let mut text = text;
        if text.len() > max {
            // Keep the end of a long line, from a character boundary.
            let mut from = text.len() - max;
            while !text.is_char_boundary(from) {
                from += 1;
            }
            text = &text[from..];
        }
        self.stderr_tail.push_back(text.to_string());
        self.stderr_tail_bytes += text.len();
        while self.stderr_tail.len() > self.limits.stderr_tail_lines_max
            || self.stderr_tail_bytes > max
        {
            let Some(old) = self.stderr_tail.pop_front() else {
                break;
            };
            self.stderr_tail_bytes -= old.len();
        }
    }

    /// Bytes after the head and the cut line.
    fn tail_bytes(&self) -> u64 {
        match self.head_end {
            None => 0,
            Some(h) => self.file_len - h - self.cut_line_bytes,
        }
    }

    /// Rewrites the log as head, cut line and the last `tail_bytes_max`
    /// bytes of whole lines, then renames it over the log.
    fn cut(&mut self) -> std::io::Result<()> {
        let (Some(head_end), Some(_)) = (self.head_end, self.file.as_ref()) else {
            return Ok(());
        };
        self.file = None;
        let end = self.file_len;
        let tail_start = head_end + self.cut_line_bytes;
        let keep_from = end.saturating_sub(self.limits.tail_bytes_max);
        let mut src = BufReader::new(File::open(&self.log_path)?);
        src.seek(SeekFrom::Start(tail_start))?;
        let (mut at, mut lines) = (tail_start, 0u64);
        let mut buf = Vec::new();
        while at < keep_from {
            buf.clear();
            let n = src.read_until(b'\n', &mut buf)? as u64;
            if n == 0 {
                break;
            }
            at += n;
            lines += 1;
        }
        let dropped_bytes = at - tail_start;
        self.record.lines_cut += lines;
        self.record.bytes_cut += dropped_bytes - lines * PREFIX_BYTES as u64;
        let marker = format_line(
            now_ms(),
            Stream::Cut,
            &cut_text(self.record.bytes_cut, self.record.lines_cut),
        );
        let tmp = self.log_path.with_extension("log.tmp");
        let written = (|| {
            let mut out = BufWriter::with_capacity(64 << 10, File::create(&tmp)?);
            src.seek(SeekFrom::Start(0))?;
            std::io::copy(&mut (&mut src).take(head_end), &mut out)?;
            out.write_all(marker.as_bytes())?;
            src.seek(SeekFrom::Start(at))?;
            std::io::copy(&mut src, &mut out)?;
            out.flush()?;
            std::fs::rename(&tmp, &self.log_path)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        let f = OpenOptions::new().append(true).open(&self.log_path)?;
        self.file = Some(BufWriter::with_capacity(64 << 10, f));
        self.cut_line_bytes = marker.len() as u64;
        self.file_len = head_end + self.cut_line_bytes + (end - at);
        tracing::debug!(
            path = %self.log_path.display(),
            lines_cut = self.record.lines_cut,
            bytes_cut = self.record.bytes_cut,
            "attempt log cut"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::reader::{attempts, read};
    use crate::logs::LogError;
    use futures::StreamExt as _;
    use std::time::Duration;

    /// Limits whose logs all go to files (these tests read the files).
    fn limits(head: u64, tail: u64, line: usize) -> LogLimits {
        LogLimits {
            head_bytes_max: head,
            tail_bytes_max: tail,
            line_bytes_max: line,
            inline_bytes_max: 0,
            ..LogLimits::default()
        }
    }

    /// A writer driven by hand, without its thread.
    fn writer(dir: &Path, limits: LogLimits) -> (LogPaths, Writer) {
        let paths = LogPaths::new(dir);
        let mut w = Writer::new(
            paths.run_dir("g/none/n/0").unwrap(),
            paths.records_file("g/none/n/0").unwrap(),
            "g/none/n/0",
            1,
            limits,
        );
        w.open();
        (paths, w)
    }

    fn texts(paths: &LogPaths) -> Vec<(u64, Stream, String)> {
        read(paths, "g/none/n/0", 1, 0, usize::MAX)
            .unwrap()
            .lines
            .into_iter()
            .map(|l| (l.line, l.stream, l.text))
            .collect()
    }

    #[tokio::test]
    async fn lines_and_record_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let paths = LogPaths::new(dir.path());
        let log = AttemptLog::start(
            Some(&paths),
            "g/none/n/0",
            1,
            &LogLimits::default(),
            CancellationToken::new(),
        );
        let (mut out, mut err) = (log.sink(Stream::Out), log.sink(Stream::Err));
        out.write(b"first\nsec").await;
        err.write(b"oops\n").await;
        out.write(b"ond\n\nlast without newline").await;
        err.write(&[b'b', b'a', b'd', 0xff, b'!', b'\n']).await;
        out.close().await;
        err.close().await;
        let record = log
            .finish(AttemptEnd {
                outcome: Outcome::Failed,
                exit_code: Some(3),
                signal: None,
                error: Some("exit code 3".into()),
            })
            .await
            .unwrap();
        let want = vec![
            (0, Stream::Out, "first".to_string()),
            (1, Stream::Err, "oops".to_string()),
            (2, Stream::Out, "second".to_string()),
            (3, Stream::Out, String::new()),
            (4, Stream::Err, "bad\u{fffd}!".to_string()),
            (5, Stream::Out, "last without newline".to_string()),
        ];
        assert_eq!(texts(&paths), want);
        let chunk = read(&paths, "g/none/n/0", 1, 2, 2).unwrap();
        assert_eq!(chunk.lines.len(), 2);
        assert_eq!(chunk.lines[0].text, "second");
        assert_eq!(chunk.next_line, 4);
        assert!(!chunk.finished, "lines are left");
        let chunk = read(&paths, "g/none/n/0", 1, 4, 10).unwrap();
        assert_eq!(
            (chunk.lines.len(), chunk.next_line, chunk.finished),
            (2, 6, true)
        );
        let chunk = read(&paths, "g/none/n/0", 1, 6, 10).unwrap();
        assert_eq!(
            (chunk.lines.len(), chunk.next_line, chunk.finished),
            (0, 6, true)
        );

        assert_eq!(record.stderr_tail, vec!["oops", "bad\u{fffd}!"]);
        assert_eq!(record.lines_logged, 6);
        let bytes: usize = want.iter().map(|(_, _, t)| t.len() + 1).sum();
        assert_eq!(record.bytes_logged, bytes as u64);
        assert_eq!((record.lines_cut, record.bytes_cut), (0, 0));
        assert_eq!(
            attempts(&paths, "g/none/n/0").unwrap(),
            vec![record.clone()]
        );
        assert_eq!(record.outcome, Some(Outcome::Failed));
        assert_eq!(record.exit_code, Some(3));
        assert!(record.finished_ms.unwrap() >= record.started_ms);
        // Six short lines of a short attempt: kept in its record, no file
        // (faults #24), in the file's format.
        assert!(!paths.log_file("g/none/n/0", 1).unwrap().exists());
        assert!(!paths.run_dir("g/none/n/0").unwrap().exists());
        let cat = record.log_inline.as_deref().expect("the log in the record");
        assert!(
            cat.lines().nth(2).unwrap().ends_with("Z out second"),
            "{cat}"
        );
    }

    /// An exit 0.
    fn succeeded() -> AttemptEnd {
        AttemptEnd {
            outcome: Outcome::Succeeded,
            exit_code: Some(0),
            signal: None,
            error: None,
        }
    }

    /// Attempt `attempt` of `run_id`, printing `chunks` on stdout and
    /// exiting 0; its record.
    async fn printing_attempt(
        paths: &LogPaths,
        run_id: &str,
        attempt: u32,
        limits: &LogLimits,
        chunks: &[&[u8]],
    ) -> AttemptRecord {
        let log = AttemptLog::start(
            Some(paths),
            run_id,
            attempt,
            limits,
            CancellationToken::new(),
        );
        let mut out = log.sink(Stream::Out);
        for c in chunks {
            out.write(c).await;
        }
        out.close().await;
        log.finish(succeeded()).await.unwrap()
    }

    /// A log goes to a file of its own once it outgrows the record's share
    /// or the attempt runs past the hold (so followers see it grow), with
    /// every line, in order, and none in the record (faults #24).
    #[tokio::test]
    async fn a_log_outgrowing_the_record_or_the_hold_goes_to_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let paths = LogPaths::new(dir.path());
        let l = LogLimits {
            inline_bytes_max: 200,
            inline_hold_ms: 300,
            ..LogLimits::default()
        };
        let lines = |run: &str| -> Vec<String> {
            read(&paths, run, 1, 0, usize::MAX)
                .unwrap()
                .lines
                .into_iter()
                .map(|l| l.text)
                .collect()
        };
        // Small and quick: in the record.
        let r = printing_attempt(&paths, "g/none/small/0", 1, &l, &[b"a\nb\n"]).await;
        assert!(r.log_inline.is_some());
        assert!(!paths.log_file("g/none/small/0", 1).unwrap().exists());
        assert_eq!(lines("g/none/small/0"), ["a", "b"]);
        // Past 200 bytes: a file, the first lines in it too.
        let long = [b"x".repeat(150), b"\n".to_vec()].concat();
        let r = printing_attempt(&paths, "g/none/big/0", 1, &l, &[b"first\n", &long, &long]).await;
        assert_eq!(r.log_inline, None);
        assert!(paths.log_file("g/none/big/0", 1).unwrap().exists());
        assert_eq!(
            lines("g/none/big/0"),
            ["first".to_string(), "x".repeat(150), "x".repeat(150)]
        );
        // Quiet past the hold: its first line reaches the file while the
        // attempt runs.
        let log = AttemptLog::start(
            Some(&paths),
            "g/none/slow/0",
            1,
            &l,
            CancellationToken::new(),
        );
        let mut out = log.sink(Stream::Out);
        out.write(b"early\n").await;
        let file = paths.log_file("g/none/slow/0", 1).unwrap();
        let t0 = std::time::Instant::now();
        while !file.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the held line never reached a file"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            read(&paths, "g/none/slow/0", 1, 0, 10).unwrap().lines.len(),
            1
        );
        out.write(b"late\n").await;
        out.close().await;
        let r = log.finish(succeeded()).await.unwrap();
        assert_eq!(r.log_inline, None);
        assert_eq!(lines("g/none/slow/0"), ["early", "late"]);
    }

    async fn silent_attempt(paths: &LogPaths, run_id: &str, attempt: u32) -> AttemptRecord {
        printing_attempt(paths, run_id, attempt, &LogLimits::default(), &[]).await
    }

    /// A run whose commands print nothing costs one folder and one file:
    /// no log file, no node folders; its records, every node's, in one
    /// file, each attempt's found by its run id.
    #[tokio::test]
    async fn silent_attempts_leave_records_only_in_one_file_a_run() {
        let dir = tempfile::tempdir().unwrap();
        let paths = LogPaths::new(dir.path());
        let a = silent_attempt(&paths, "g/p/a/0", 1).await;
        let b1 = silent_attempt(&paths, "g/p/b/0", 1).await;
        let b2 = silent_attempt(&paths, "g/p/b/0", 2).await;
        let member = silent_attempt(&paths, "g/p/b/0/3", 1).await;
        let run = paths.run_dir("g/p").unwrap();
        let entries: Vec<_> = std::fs::read_dir(&run)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(entries, vec![weir_core::names::ATTEMPT_RECORDS_FILE]);
        assert_eq!((a.lines_logged, a.bytes_logged), (0, 0));
        assert_eq!(attempts(&paths, "g/p/a/0").unwrap(), vec![a]);
        assert_eq!(attempts(&paths, "g/p/b/0").unwrap(), vec![b1, b2]);
        assert_eq!(attempts(&paths, "g/p/b/0/3").unwrap(), vec![member]);
        assert_eq!(attempts(&paths, "g/p/c/0").unwrap(), vec![]);
        // Its log reads as empty and ended, for a reader and a follower.
        let chunk = read(&paths, "g/p/b/0", 2, 0, 10).unwrap();
        assert_eq!((chunk.lines.len(), chunk.finished), (0, true));
        let followed: Vec<_> = crate::logs::follow(paths.clone(), "g/p/b/0".into(), 2, 0)
            .collect::<Vec<_>>()
            .await;
        assert!(followed.is_empty(), "{followed:?}");
        // An attempt never started is not found.
        assert!(matches!(
            read(&paths, "g/p/b/0", 9, 0, 10),
            Err(LogError::NotFound { .. })
        ));
    }

    /// A record line a crash cut short is passed over, and the records
    /// appended after it are read whole.
    #[tokio::test]
    async fn a_torn_record_line_does_not_hide_the_next() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let paths = LogPaths::new(dir.path());
        let first = silent_attempt(&paths, "g/p/a/0", 1).await;
        let file = paths.records_file("g/p/a/0").unwrap();
        let mut f = OpenOptions::new().append(true).open(&file).unwrap();
        f.write_all(br#"{"run_id":"g/p/a/0","attempt":2,"started"#)
            .unwrap();
        drop(f);
        let third = silent_attempt(&paths, "g/p/a/0", 3).await;
        assert_eq!(attempts(&paths, "g/p/a/0").unwrap(), vec![first, third]);
    }

    /// Records of the layout before (`<n>.json` beside the log) are read.
    #[test]
    fn records_of_the_old_layout_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let paths = LogPaths::new(dir.path());
        let (_, mut w) = writer(dir.path(), LogLimits::default());
        w.record.finished_ms = Some(w.record.started_ms);
        let old = paths.record_file("g/none/n/0", 7).unwrap();
        std::fs::create_dir_all(old.parent().unwrap()).unwrap();
        let mut record = w.record.clone();
        record.attempt = 7;
        std::fs::write(&old, serde_json::to_vec_pretty(&record).unwrap()).unwrap();
        let got = attempts(&paths, "g/none/n/0").unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[1], record);
    }

    /// Head and tail of 5 lines each (38 bytes a line: 29 of prefix, 8 of
    /// text, a newline), 92 lines cut between them.
    #[test]
    fn head_and_tail_are_kept_and_the_cut_marked() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, mut w) = writer(dir.path(), limits(200, 200, 1000));
        let mut sizes = Vec::new();
        for i in 0..102 {
            w.chunk(Stream::Out, 1_000 + i, format!("line {i:03}\n").as_bytes());
            w.flush();
            sizes.push(std::fs::metadata(&w.log_path).unwrap().len());
        }
        let cut_line = 29 + "828 bytes in 92 lines cut".len() as u64 + 1;
        let most = sizes.iter().max().unwrap();
        assert!(
            *most <= 200 + cut_line + 2 * 200,
            "the file grew to {most} bytes"
        );
        // While running, up to twice the tail is kept: 7 lines here; the
        // end cuts it to its limit.
        assert_eq!(w.tail_bytes(), 7 * 38);
        w.cut().unwrap();
        let got = texts(&paths);
        assert_eq!(got.len(), 11, "{got:?}");
        for i in 0..5u64 {
            assert_eq!(got[i as usize], (i, Stream::Out, format!("line {i:03}")));
        }
        assert_eq!(
            got[5],
            (5, Stream::Cut, "828 bytes in 92 lines cut".to_string())
        );
        for i in 97..102u64 {
            assert_eq!(
                got[i as usize - 91],
                (i, Stream::Out, format!("line {i:03}"))
            );
        }
        assert_eq!((w.record.lines_cut, w.record.bytes_cut), (92, 828));
        assert_eq!(w.record.lines_logged, 102);
        // From inside the cut: the cut line, then the tail.
        let chunk = read(&paths, "g/none/n/0", 1, 50, 3).unwrap();
        let lines: Vec<u64> = chunk.lines.iter().map(|l| l.line).collect();
        assert_eq!(lines, vec![5, 97, 98]);
        assert_eq!(chunk.next_line, 99);
        let chunk = read(&paths, "g/none/n/0", 1, 99, 10).unwrap();
        let lines: Vec<u64> = chunk.lines.iter().map(|l| l.line).collect();
        assert_eq!(lines, vec![99, 100, 101]);
    }

    /// A reader's position survives the writer cutting the file under it.
    #[test]
    fn a_reader_keeps_its_place_across_cuts() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, mut w) = writer(dir.path(), limits(200, 200, 1000));
        let path = paths.log_file("g/none/n/0", 1).unwrap();
        let mut cursor = super::super::reader::tests_cursor();
        let mut seen = Vec::new();
        let mut next = 0;
        for i in 0..300u64 {
            w.chunk(Stream::Err, i, format!("line {i:03}\n").as_bytes());
            if i % 4 == 0 {
                w.flush();
                let lines = super::super::reader::tests_read(&path, &mut cursor, next);
                for l in lines {
                    next = l.line + 1;
                    seen.push(l);
                }
            }
        }
        w.flush();
        seen.extend(super::super::reader::tests_read(&path, &mut cursor, next));
        // Every line once, in order, none skipped: each was read before a
        // cut could drop it (4 lines between reads; a cut keeps 5).
        let numbers: Vec<u64> = seen.iter().map(|l| l.line).collect();
        assert_eq!(numbers, (0..300).collect::<Vec<_>>());
        assert!(w.record.lines_cut > 0, "the test cut nothing");
        for l in &seen {
            assert_eq!(l.text, format!("line {:03}", l.line));
        }
    }

    #[test]
    fn long_lines_are_split_between_characters() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, mut w) = writer(dir.path(), limits(1 << 20, 1 << 20, 10));
        w.chunk(Stream::Out, 1, b"0123456789abcdefghijKLM\n");
        // 2-byte characters: a cut at 10 falls between two of them.
        w.chunk(
            Stream::Out,
            2,
            "a\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}".as_bytes(),
        );
        w.chunk(Stream::Out, 3, "\u{e9}\n".as_bytes());
        // 3-byte characters: the cut backs off to a boundary.
        w.chunk(
            Stream::Err,
            4,
            "\u{20ac}\u{20ac}\u{20ac}\u{20ac}\n".as_bytes(),
        );
        // Not UTF-8 at all: cut at the limit, shown lossily.
        w.chunk(Stream::Err, 5, &[0x80; 12]);
        w.eof(Stream::Err, 6);
        w.flush();
        let got: Vec<String> = texts(&paths).into_iter().map(|(_, _, t)| t).collect();
        let lossy = |n| "\u{fffd}".repeat(n);
        assert_eq!(
            got,
            vec![
                "0123456789".to_string(),
                "abcdefghij".to_string(),
                "KLM".to_string(),
                "a\u{e9}\u{e9}\u{e9}\u{e9}".to_string(),
                "\u{e9}\u{e9}\u{e9}".to_string(),
                "\u{20ac}\u{20ac}\u{20ac}".to_string(),
                "\u{20ac}".to_string(),
                lossy(10),
                lossy(2),
            ]
        );
    }

    #[test]
    fn the_stderr_tail_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = limits(1 << 20, 1 << 20, 1 << 10);
        l.stderr_tail_lines_max = 3;
        l.stderr_tail_bytes_max = 10;
        let (_paths, mut w) = writer(dir.path(), l);
        w.chunk(Stream::Err, 1, b"a\nb\nc\nd\n");
        assert_eq!(w.stderr_tail, ["b", "c", "d"]);
        w.chunk(Stream::Err, 2, b"0123456789xyz\n");
        assert_eq!(w.stderr_tail, ["3456789xyz"]);
        w.chunk(Stream::Out, 3, b"not stderr\n");
        assert_eq!(w.stderr_tail, ["3456789xyz"]);
    }

    #[tokio::test]
    async fn a_log_that_cannot_be_written_does_not_stop_the_attempt() {
        let dir = tempfile::tempdir().unwrap();
        // `logs` is a file: no folder can be made under it.
        std::fs::write(dir.path().join("logs"), "").unwrap();
        let paths = LogPaths::new(dir.path());
        let log = AttemptLog::start(
            Some(&paths),
            "j",
            1,
            &LogLimits::default(),
            CancellationToken::new(),
        );
        let mut out = log.sink(Stream::Out);
        for _ in 0..1000 {
            out.write(&[b'x'; 8192]).await;
        }
        out.close().await;
        let end = AttemptEnd {
            outcome: Outcome::Succeeded,
            exit_code: Some(0),
            signal: None,
            error: None,
        };
        let record = log.finish(end).await.unwrap();
        assert!(record.log_error.unwrap().contains("cannot create"));
        // Counted still: 125 pieces of 64 KiB (no newline in the output).
        assert_eq!(
            (record.lines_logged, record.bytes_logged),
            (125, 8_192_000 + 125)
        );
        assert_eq!(record.outcome, Some(Outcome::Succeeded));
    }

    #[tokio::test]
    async fn a_run_id_outside_the_logs_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let paths = LogPaths::new(&data);
        let log = AttemptLog::start(
            Some(&paths),
            "../../escape",
            1,
            &LogLimits::default(),
            CancellationToken::new(),
        );
        let mut out = log.sink(Stream::Out);
        out.write(b"x\n").await;
        drop(out);
        let end = AttemptEnd {
            outcome: Outcome::Succeeded,
            exit_code: Some(0),
            signal: None,
            error: None,
        };
        assert_eq!(log.finish(end).await, None);
        let found: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(found.is_empty(), "{found:?}");
        assert!(matches!(
            attempts(&paths, "../../escape"),
            Err(crate::logs::LogError::BadRunId { .. })
        ));
        assert!(read(&paths, "/etc", 1, 0, 10).is_err());
    }
}
