//! Logs and attempt history of command tasks, kept as plain files in the
//! data directory so they can be read with or without a running engine.
//!
//! Layout: `DATA/logs/<run id or job key>/<attempt>.log` holds an attempt's
//! stdout and stderr, one line per line of output (see [`mod@format`] for the
//! line format, readable with `cat`); an attempt that printed nothing has
//! no log file (its record says `lines_logged: 0`). The [`AttemptRecord`]s
//! of a graph run's attempts, every node's, are appended to one file,
//! `DATA/logs/<graph>/<partition>/@attempts.jsonl` (a plain job's to
//! `DATA/logs/<key>/@attempts.jsonl`), one JSON object a line, an
//! attempt's last line its record. So a run whose commands print nothing
//! costs one folder and one file. (Records of the layout before, an
//! `<attempt>.json` beside the log, are still read.) A run id
//! `graph/partition/node/rerun` is a path of four folders; a plain job's
//! key (which never holds `/`) is one folder.
//! Every component is checked ([`LogPaths::run_dir`]): no empty, `.` or
//! `..` component, so no id can name a file outside `DATA/logs`.
//!
//! Bounds ([`LogLimits`]): an attempt keeps its first `head_bytes_max`
//! bytes of log and its last `tail_bytes_max`; what is dropped between them
//! is replaced by one `cut` line saying how many bytes and lines went. A
//! line longer than `line_bytes_max` is split into pieces. Invalid UTF-8 is
//! kept lossily.
//!
//! Writing ([`writer`]) never fails or stalls an attempt on a log error: an
//! error is traced at WARN and that attempt's log stops. The record is
//! written when the attempt starts (without its end) and again when it
//! ends, each time as one appended line, so a reader never sees half a
//! record (a line a crash cut short is passed over). A crash in between leaves a record without an
//! end; the next attempt's record shows it was superseded.
//!
//! Line numbers: every line the command produced has a number from 0,
//! counting the dropped ones, so a follower's position stays valid when the
//! writer cuts the middle of a running attempt's log. A `cut` line stands
//! for the dropped lines (`line` is the first of them).
//!
//! Expiry: the supervisor's expiry pass removes `logs/<graph>/<partition>/`
//! with the run's records and a plain job's attempt files with its done
//! record (weir-actors holds that copy of the layout; [`remove_run`] and
//! [`remove_job`] are the same removals for tools).

pub mod format;
pub mod intake;
mod paths;
pub mod reader;
mod record;
pub mod writer;

pub use paths::{remove_job, remove_run, LogPaths, LOGS_DIR, RUN_ID_BYTES_MAX};
pub use reader::{attempts, follow, read};
pub use record::{AttemptRecord, LogChunk, LogError, LogLimits, LogLine, Outcome, Stream};
pub use writer::{AttemptEnd, AttemptLog, LogSink, RemoteLog};

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use super::paths::attempt_file;

    #[test]
    fn run_ids_map_to_folders_under_the_root() {
        let paths = LogPaths::new(Path::new("/data"));
        let ok = [
            ("g/2026-11-01/n/0", "/data/logs/g/2026-11-01/n/0"),
            ("job-7", "/data/logs/job-7"),
            (
                "g/key=web-2@2026-12-01T04:08:47.486Z/n/3",
                "/data/logs/g/key=web-2@2026-12-01T04:08:47.486Z/n/3",
            ),
            ("a..b/..c/c../n/0", "/data/logs/a..b/..c/c../n/0"),
        ];
        for (i, (id, want)) in ok.iter().enumerate() {
            assert_eq!(paths.run_dir(id).unwrap(), Path::new(want), "#{i}: {id}");
        }
        let refused = [
            "",
            "/etc/passwd",
            "..",
            "../x",
            "g/../../etc",
            "g/./n/0",
            "g//n/0",
            "g/p/n/",
        ];
        for (i, id) in refused.iter().enumerate() {
            let got = paths.run_dir(id);
            assert!(
                matches!(got, Err(LogError::BadRunId { .. })),
                "#{i}: {id:?} gave {got:?}"
            );
        }
        // A component a file name cannot hold (a backslash, a NUL, more
        // than 200 bytes: a long key) is named by its head and a hash, one
        // folder under the run's, so every valid key keeps its logs.
        for (i, id) in [
            "g/p\0/n/0".to_string(),
            "g/..\\..\\x/n/0".to_string(),
            format!("g/key={}@2026-12-01T00:00:00Z/n/0", "k".repeat(300)),
        ]
        .iter()
        .enumerate()
        {
            let dir = paths.run_dir(id).unwrap();
            let parts: Vec<_> = dir
                .strip_prefix("/data/logs")
                .unwrap()
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            assert_eq!(parts.len(), 4, "#{i}: {id:?} → {dir:?}");
            assert_eq!((parts[0].as_str(), parts[2].as_str()), ("g", "n"), "#{i}");
            assert!(
                parts[1].len() <= 200 && !parts[1].contains(['\\', '\0']),
                "#{i}: {parts:?}"
            );
        }
        let long = "x".repeat(RUN_ID_BYTES_MAX + 1);
        assert!(paths.run_dir(&long).is_err());
        assert!(remove_run(&paths, "..", "x").is_err());
        assert!(remove_run(&paths, "g", "../..").is_err());
        assert!(remove_job(&paths, "../x").is_err());
    }

    #[test]
    fn attempt_file_names() {
        let cases = [
            ("1.log", Some(1)),
            ("12.json", Some(12)),
            ("3.json.tmp", Some(3)),
            ("x.log", None),
            (".log", None),
            ("+1.log", None),
            ("1.txt", None),
            ("none", None),
        ];
        for (i, (name, want)) in cases.iter().enumerate() {
            assert_eq!(
                attempt_file(std::ffi::OsStr::new(name)),
                *want,
                "#{i}: {name}"
            );
        }
    }

    #[test]
    fn job_removal_keeps_a_graphs_folders() {
        let dir = tempfile::tempdir().unwrap();
        let paths = LogPaths::new(dir.path());
        let job = paths.run_dir("g").unwrap();
        std::fs::create_dir_all(job.join("none/n/0")).unwrap();
        std::fs::write(job.join("1.log"), "x").unwrap();
        std::fs::write(job.join("1.json"), "{}").unwrap();
        std::fs::write(paths.records_file("g").unwrap(), "{}\n").unwrap();
        std::fs::write(job.join("none/n/0/1.log"), "x").unwrap();
        remove_job(&paths, "g").unwrap();
        assert!(!job.join("1.log").exists());
        assert!(!job.join("1.json").exists());
        assert!(!paths.records_file("g").unwrap().exists());
        assert!(job.join("none/n/0/1.log").exists());
        remove_run(&paths, "g", "none").unwrap();
        assert!(!job.join("none").exists());
        remove_job(&paths, "g").unwrap();
        assert!(!job.exists());
        remove_job(&paths, "g").unwrap();
        remove_run(&paths, "g", "none").unwrap();
    }
}
