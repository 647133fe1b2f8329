//! Reading attempt logs and records: files only, so the same calls serve a
//! running engine and a stopped one.
//!
//! Line numbers are the writer's (every line the command produced, from
//! 0): a line's number is its place in the file shifted by the lines its
//! `cut` line stands for. A follower keeps a byte offset into the file and
//! reads only what was appended; when the writer replaces the file (a cut)
//! the follower sees another inode or a shorter file and reads it again
//! from the start, skipping the numbers it already yielded.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use super::format::{parse_cut, parse_line};
use super::paths::{attempt_file, LogPaths};
use super::record::{AttemptRecord, LogChunk, LogError, LogLine, Stream};

/// How often a follower looks for new lines.
pub const FOLLOW_POLL_MS: u64 = 100;
/// Lines a follower reads in one look at most (the rest at the next).
pub const FOLLOW_LINES_MAX: usize = 4096;

/// The records of a run's (or job's) attempts, sorted by attempt; none
/// when nothing was logged for it. Read from the run's records file (an
/// attempt's last line there is its record) and from the `<n>.json` files
/// of the layout before it, which a data directory may still hold.
pub fn attempts(paths: &LogPaths, run_id: &str) -> Result<Vec<AttemptRecord>, LogError> {
    let mut records = BTreeMap::new();
    for record in old_records(paths, run_id)? {
        records.insert(record.attempt, record);
    }
    let path = paths.records_file(run_id)?;
    let bytes = match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(LogError::io(&path, &e)),
        Ok(b) => b,
    };
    // The run id as it is written in a line: most lines of a run's file
    // are other nodes' records, passed over before they are parsed.
    let needle = serde_json::to_string(run_id).map_err(|e| LogError::Malformed {
        path: path.clone(),
        line: 0,
        why: e.to_string(),
    })?;
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() || finder.find(line).is_none() {
            continue;
        }
        match serde_json::from_slice::<AttemptRecord>(line) {
            Ok(record) if record.run_id == run_id => {
                records.insert(record.attempt, record);
            }
            Ok(_) => {}
            // A line a crash cut short: the writer ended it, and the
            // attempt's other line (or its next attempt) tells its story.
            Err(e) => tracing::warn!(
                path = %path.display(),
                line = i + 1,
                error = %e,
                "an attempt record line is not whole; passed over"
            ),
        }
    }
    Ok(records.into_values().collect())
}

/// The records of the layout before the records file: `<n>.json` in the
/// run's folder.
fn old_records(paths: &LogPaths, run_id: &str) -> Result<Vec<AttemptRecord>, LogError> {
    let dir = paths.run_dir(run_id)?;
    let entries = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LogError::io(&dir, &e)),
        Ok(entries) => entries,
    };
    let mut records = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| LogError::io(&dir, &e))?;
        let name = entry.file_name();
        let is_record = name.to_str().is_some_and(|n| n.ends_with(".json"));
        if !is_record || attempt_file(&name).is_none() {
            continue;
        }
        if let Some(record) = read_record(&entry.path())? {
            records.push(record);
        }
    }
    Ok(records)
}

/// One attempt's record in the old layout; `None` when it has none.
fn read_record(path: &Path) -> Result<Option<AttemptRecord>, LogError> {
    let bytes = match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(path, &e)),
        Ok(b) => b,
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| LogError::Malformed {
            path: path.to_path_buf(),
            line: 0,
            why: format!("not an attempt record: {e}"),
        })
}

/// What the records say of an attempt, for reading its log.
struct Standing {
    /// It will write no more: its record says it ended, or a later attempt
    /// started (the process running it died before its end).
    ended: bool,
    /// Its lines, when its record keeps them ([`AttemptRecord::log_inline`]).
    inline: Option<String>,
}

/// The attempt's [`Standing`]; `None` when neither its record nor its log
/// exists.
fn standing(paths: &LogPaths, run_id: &str, attempt: u32) -> Result<Option<Standing>, LogError> {
    let records = attempts(paths, run_id)?;
    let superseded = records.iter().any(|r| r.attempt > attempt);
    let record = records.into_iter().find(|r| r.attempt == attempt);
    let log_path = paths.log_file(run_id, attempt)?;
    if record.is_none() && !log_path.exists() {
        return Ok(None);
    }
    let finished = record.as_ref().is_some_and(|r| r.finished_ms.is_some());
    Ok(Some(Standing {
        ended: finished || superseded,
        inline: record.and_then(|r| r.log_inline),
    }))
}

/// Where a reader is in a log file.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cursor {
    ino: u64,
    /// The byte after the last whole line read.
    offset: u64,
    /// Lines read (the place in the file of the next).
    index: u64,
    /// What to add to a line's place to get its number.
    shift: u64,
}

/// Reads whole lines from `cursor` on, keeping those numbered at least
/// `from_line`, until `lines_max` are kept. Returns the lines and whether
/// more follow. A line still being written (no newline yet) is left for
/// the next read.
fn read_lines(
    path: &Path,
    cursor: &mut Cursor,
    from_line: u64,
    lines_max: usize,
) -> Result<(Vec<LogLine>, bool), LogError> {
    let file = File::open(path).map_err(|e| LogError::io(path, &e))?;
    let meta = file.metadata().map_err(|e| LogError::io(path, &e))?;
    if meta.ino() != cursor.ino || meta.len() < cursor.offset {
        // New file (the writer cut it) or a new attempt over the old one.
        *cursor = Cursor {
            ino: meta.ino(),
            ..Cursor::default()
        };
    }
    let mut r = BufReader::new(file);
    r.seek(SeekFrom::Start(cursor.offset))
        .map_err(|e| LogError::io(path, &e))?;
    let mut lines = Vec::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = r
            .read_until(b'\n', &mut buf)
            .map_err(|e| LogError::io(path, &e))?;
        if n == 0 || buf.last() != Some(&b'\n') {
            return Ok((lines, false));
        }
        let malformed = |why: String| LogError::Malformed {
            path: path.to_path_buf(),
            line: cursor.index + 1,
            why,
        };
        let text =
            std::str::from_utf8(&buf[..n - 1]).map_err(|e| malformed(format!("not UTF-8: {e}")))?;
        let (ts_ms, stream, text) = parse_line(text).map_err(malformed)?;
        let first = cursor.index + cursor.shift;
        // A cut line stands for `stands_for` lines.
        let stands_for = if stream == Stream::Cut {
            let (_, cut) =
                parse_cut(text).ok_or_else(|| malformed(format!("bad cut line {text:?}")))?;
            cut.max(1)
        } else {
            1
        };
        if first + stands_for > from_line {
            if lines.len() == lines_max {
                // Not consumed: the next read starts with it.
                return Ok((lines, true));
            }
            lines.push(LogLine {
                line: first,
                ts_ms,
                stream,
                text: text.to_string(),
            });
        }
        cursor.offset += n as u64;
        cursor.index += 1;
        cursor.shift += stands_for - 1;
    }
}

/// Up to `lines_max` lines of an attempt's log from line `from_line` on.
pub fn read(
    paths: &LogPaths,
    run_id: &str,
    attempt: u32,
    from_line: u64,
    lines_max: usize,
) -> Result<LogChunk, LogError> {
    let path = paths.log_file(run_id, attempt)?;
    // Before the lines: an attempt seen ended has all its lines written.
    let standing = standing(paths, run_id, attempt)?;
    let mut cursor = Cursor::default();
    let (lines, more) = match (
        read_lines(&path, &mut cursor, from_line, lines_max),
        &standing,
    ) {
        // A recorded attempt without a log file printed nothing (yet), or
        // kept its few lines in its record.
        (Err(LogError::NotFound { .. }), Some(s)) => inline_lines(
            paths,
            run_id,
            attempt,
            s.inline.as_deref(),
            from_line,
            lines_max,
        )?,
        (other, _) => other?,
    };
    let ended = standing.is_some_and(|s| s.ended);
    let next_line = lines
        .last()
        .map_or(from_line, |l| next_after(l).max(from_line));
    Ok(LogChunk {
        lines,
        next_line,
        finished: ended && !more,
    })
}

/// The lines of an attempt's log kept in its record (`text`, its
/// [`AttemptRecord::log_inline`]) from `from_line` on, at most
/// `lines_max`, and whether more follow; none when its record holds none.
fn inline_lines(
    paths: &LogPaths,
    run_id: &str,
    attempt: u32,
    text: Option<&str>,
    from_line: u64,
    lines_max: usize,
) -> Result<(Vec<LogLine>, bool), LogError> {
    let Some(text) = text else {
        return Ok((Vec::new(), false));
    };
    let mut lines = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let number = i as u64;
        if number < from_line {
            continue;
        }
        if lines.len() == lines_max {
            return Ok((lines, true));
        }
        let (ts_ms, stream, text) = parse_line(l).map_err(|why| LogError::Malformed {
            path: paths.records_file(run_id).unwrap_or_default(),
            line: number + 1,
            why: format!("attempt {attempt}'s inline log: {why}"),
        })?;
        lines.push(LogLine {
            line: number,
            ts_ms,
            stream,
            text: text.to_string(),
        });
    }
    Ok((lines, false))
}

/// The number after `line` (after the lines a cut line stands for).
fn next_after(line: &LogLine) -> u64 {
    match line.stream {
        Stream::Cut => line.line + parse_cut(&line.text).map_or(1, |(_, lines)| lines.max(1)),
        _ => line.line + 1,
    }
}

struct Follow {
    paths: LogPaths,
    run_id: String,
    attempt: u32,
    next_line: u64,
    cursor: Cursor,
    ready: VecDeque<LogLine>,
    /// The last look found nothing new: wait before the next.
    idle: bool,
    done: bool,
}

/// What one look at the files found.
struct Look {
    cursor: Cursor,
    lines: Vec<LogLine>,
    ended: bool,
}

fn look(
    paths: &LogPaths,
    run_id: &str,
    attempt: u32,
    mut cursor: Cursor,
    from_line: u64,
) -> Result<Look, LogError> {
    let Some(Standing { ended, inline }) = standing(paths, run_id, attempt)? else {
        return Err(LogError::NotFound {
            path: paths.log_file(run_id, attempt)?,
        });
    };
    let path = paths.log_file(run_id, attempt)?;
    let (lines, more) = match read_lines(&path, &mut cursor, from_line, FOLLOW_LINES_MAX) {
        // The log file is made when lines outgrow the record: a recorded
        // attempt without one has printed nothing so far, or, once ended,
        // nothing or the few lines its record holds.
        Err(LogError::NotFound { .. }) => inline_lines(
            paths,
            run_id,
            attempt,
            inline.as_deref(),
            from_line,
            FOLLOW_LINES_MAX,
        )?,
        other => other?,
    };
    Ok(Look {
        cursor,
        lines,
        ended: ended && !more,
    })
}

/// The lines of an attempt's log from `from_line` on, then its new lines
/// as they are written (looking every [`FOLLOW_POLL_MS`]), until the
/// attempt has ended and every line was yielded. An attempt that has
/// neither record nor log yields one [`LogError::NotFound`].
pub fn follow(
    paths: LogPaths,
    run_id: String,
    attempt: u32,
    from_line: u64,
) -> impl futures::Stream<Item = Result<LogLine, LogError>> + Send + 'static {
    let state = Follow {
        paths,
        run_id,
        attempt,
        next_line: from_line,
        cursor: Cursor::default(),
        ready: VecDeque::new(),
        idle: false,
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(line) = st.ready.pop_front() {
                return Some((Ok(line), st));
            }
            if st.done {
                return None;
            }
            if st.idle {
                tokio::time::sleep(Duration::from_millis(FOLLOW_POLL_MS)).await;
            }
            let (paths, run_id, attempt, cursor, from) = (
                st.paths.clone(),
                st.run_id.clone(),
                st.attempt,
                st.cursor,
                st.next_line,
            );
            let looked =
                tokio::task::spawn_blocking(move || look(&paths, &run_id, attempt, cursor, from))
                    .await
                    .unwrap_or_else(|e| {
                        Err(LogError::Io {
                            path: st.paths.root().to_path_buf(),
                            error: format!("the reading task failed: {e}"),
                        })
                    });
            match looked {
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
                Ok(look) => {
                    st.cursor = look.cursor;
                    st.idle = look.lines.is_empty();
                    st.done = look.ended;
                    if let Some(last) = look.lines.last() {
                        st.next_line = next_after(last);
                    }
                    st.ready.extend(look.lines);
                }
            }
        }
    })
}

#[cfg(test)]
pub(crate) fn tests_cursor() -> Cursor {
    Cursor::default()
}

#[cfg(test)]
pub(crate) fn tests_read(path: &Path, cursor: &mut Cursor, from_line: u64) -> Vec<LogLine> {
    read_lines(path, cursor, from_line, usize::MAX).unwrap().0
}
