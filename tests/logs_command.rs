//! Logs of command tasks end to end: an engine runs commands through the
//! command task, and the readers of `weir::logs` find every attempt's
//! record and lines in the data directory; a running attempt can be
//! followed; a large output keeps its head and tail; expiry takes a run's
//! logs (and a plain job's) with its records.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use weir::logs::{self, LogLimits, LogPaths, Outcome, Stream};
use weir::task::command::{CommandConfig, CommandTask, COMMAND_TASK};
use weir::{
    Durability, Engine, GraphDef, Job, NodeDef, Partition, RetryPolicy, RunState, TaskSpec,
};
use weir_core::names::Name;

const WAIT: Duration = Duration::from_secs(30);

async fn engine(data: &Path, expiry_interval_ms: u64) -> Engine {
    let task = CommandTask {
        scratch: data.join("scratch"),
        work: data.join("work"),
        logs: Some(LogPaths::new(data)),
        log_limits: LogLimits::default(),
        remote: None,
        artifacts: weir::artifacts::ArtifactStore::in_folder(&data.join("artifacts")).unwrap(),
    };
    Engine::builder(data)
        .durability(Durability::Flush)
        .pool("default", 4)
        .expiry_interval_ms(expiry_interval_ms)
        .task(COMMAND_TASK, Arc::new(task))
        .open()
        .await
        .unwrap()
}

fn config(script: &str, permanent: &[i32]) -> serde_json::Value {
    serde_json::to_value(CommandConfig {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        permanent_exit_codes: permanent.to_vec(),
        env: Default::default(),
        cwd: std::env::temp_dir().display().to_string(),
        artifacts: Vec::new(),
        artifact_limits: None,
    })
    .unwrap()
}

/// A node running `sh -c script`, tried at most `attempts` times, 10 ms
/// apart.
fn command_node(name: &str, script: &str, attempts: u32) -> NodeDef {
    let mut n = NodeDef::new(
        Name::new(name).unwrap(),
        Vec::new(),
        TaskSpec {
            task: Name::new(COMMAND_TASK).unwrap(),
            config: config(script, &[9]),
        },
    );
    n.retry = RetryPolicy {
        attempts_max: attempts,
        initial_ms: 10,
        max_ms: 10,
        ..RetryPolicy::default()
    };
    n
}

async fn run_graph(engine: &Engine, node: NodeDef, partition: &str) -> RunState {
    let mut def = GraphDef::new(Name::new("g").unwrap(), vec![node]);
    def.retention_ms = 300;
    engine.adopt(def).await.unwrap();
    let p: Partition = partition.parse().unwrap();
    engine.start_run("g", p.clone()).await.unwrap();
    engine.wait_settled("g", &[p], WAIT).await.unwrap()[0]
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_and_lines_of_a_command_that_fails_then_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let engine = engine(data, 60_000).await;
    // Exit 9 (permanent) if WEIR_DATA is missing: the first attempt would
    // be the only one.
    let script = r#"[ -d "$WEIR_DATA" ] || { echo "no WEIR_DATA" >&2; exit 9; }
echo "out $WEIR_ATTEMPT"
echo "err $WEIR_ATTEMPT" >&2
printf 'more out\nlast, no newline'
[ "$WEIR_ATTEMPT" -ge 2 ] || exit 3"#;
    let state = run_graph(&engine, command_node("n", script, 2), "2026-11-29").await;
    assert_eq!(state, RunState::Complete);

    let paths = LogPaths::new(data);
    let id = "g/2026-11-29/n/0";
    let records = logs::attempts(&paths, id).unwrap();
    assert_eq!(records.len(), 2, "{records:#?}");
    let (first, second) = (&records[0], &records[1]);
    assert_eq!((first.attempt, second.attempt), (1, 2));
    assert_eq!(first.outcome, Some(Outcome::Failed));
    assert_eq!(first.exit_code, Some(3));
    assert!(
        first.error.as_deref().unwrap().contains("exit code 3"),
        "{first:?}"
    );
    assert_eq!(first.stderr_tail, vec!["err 1"]);
    assert_eq!(second.outcome, Some(Outcome::Succeeded));
    assert_eq!(second.exit_code, Some(0));
    assert_eq!(second.error, None);
    assert_eq!(second.stderr_tail, vec!["err 2"]);
    for r in &records {
        assert_eq!(r.run_id, id);
        assert!(r.finished_ms.unwrap() >= r.started_ms, "{r:?}");
        assert_eq!(r.lines_logged, 4, "{r:?}");
        assert_eq!((r.lines_cut, r.bytes_cut), (0, 0));
    }
    assert!(second.started_ms >= first.finished_ms.unwrap());

    for (attempt, record) in [(1, first), (2, second)] {
        let chunk = logs::read(&paths, id, attempt, 0, 100).unwrap();
        assert!(chunk.finished);
        assert_eq!(chunk.next_line, 4);
        let numbers: Vec<u64> = chunk.lines.iter().map(|l| l.line).collect();
        assert_eq!(numbers, vec![0, 1, 2, 3]);
        // Each stream's lines in their order (the two pipes are read apart,
        // so their interleaving is the order of arrival).
        let of = |s: Stream| -> Vec<&str> {
            chunk
                .lines
                .iter()
                .filter(|l| l.stream == s)
                .map(|l| l.text.as_str())
                .collect()
        };
        let out = format!("out {attempt}");
        assert_eq!(
            of(Stream::Out),
            vec![out.as_str(), "more out", "last, no newline"]
        );
        let err = format!("err {attempt}");
        assert_eq!(of(Stream::Err), vec![err.as_str()]);
        for l in &chunk.lines {
            assert!(
                (record.started_ms..=record.finished_ms.unwrap()).contains(&l.ts_ms),
                "{l:?} outside {record:?}"
            );
        }
        // Paged.
        let page = logs::read(&paths, id, attempt, 1, 2).unwrap();
        assert_eq!(page.lines, chunk.lines[1..3]);
        assert_eq!((page.next_line, page.finished), (3, false));
    }
    assert!(matches!(
        logs::read(&paths, id, 3, 0, 10),
        Err(logs::LogError::NotFound { .. })
    ));
    assert!(logs::attempts(&paths, "g/2026-11-29/other/0")
        .unwrap()
        .is_empty());
    engine.shutdown(WAIT).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_streams_a_running_attempt_and_ends_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let engine = engine(data, 60_000).await;
    let script = r#"i=0; while [ $i -lt 40 ]; do echo "tick $i"; i=$((i+1)); sleep 0.05; done; echo done >&2"#;
    let mut def = GraphDef::new(Name::new("g").unwrap(), vec![command_node("n", script, 1)]);
    def.retention_ms = 60_000;
    engine.adopt(def).await.unwrap();
    let p: Partition = "2026-11-29".parse().unwrap();
    engine.start_run("g", p.clone()).await.unwrap();
    let paths = LogPaths::new(data);
    let id = "g/2026-11-29/n/0";
    wait_for("the attempt's record", || {
        !logs::attempts(&paths, id).unwrap().is_empty()
    })
    .await;

    let mut lines = Box::pin(logs::follow(paths.clone(), id.to_string(), 1, 0));
    let first = tokio::time::timeout(WAIT, lines.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((first.line, first.text.as_str()), (0, "tick 0"));
    // The command runs two seconds: the first line came while it ran.
    let record = &logs::attempts(&paths, id).unwrap()[0];
    assert_eq!(record.finished_ms, None, "{record:?}");
    let mut got = vec![first];
    let rest = tokio::time::timeout(WAIT, async {
        while let Some(line) = lines.next().await {
            got.push(line.unwrap());
        }
    });
    rest.await.expect("the follower ends when the attempt does");
    let texts: Vec<String> = got.iter().map(|l| l.text.clone()).collect();
    let mut want: Vec<String> = (0..40).map(|i| format!("tick {i}")).collect();
    want.push("done".into());
    assert_eq!(texts, want);
    let numbers: Vec<u64> = got.iter().map(|l| l.line).collect();
    assert_eq!(numbers, (0..41).collect::<Vec<_>>());
    let record = &logs::attempts(&paths, id).unwrap()[0];
    assert_eq!(record.outcome, Some(Outcome::Succeeded));

    // Following an ended attempt from the middle yields the rest and ends.
    let rest: Vec<_> = logs::follow(paths.clone(), id.to_string(), 1, 38)
        .collect()
        .await;
    let texts: Vec<String> = rest.into_iter().map(|l| l.unwrap().text).collect();
    assert_eq!(texts, vec!["tick 38", "tick 39", "done"]);
    // An attempt that never ran.
    let missing: Vec<_> = logs::follow(paths.clone(), id.to_string(), 2, 0)
        .collect()
        .await;
    assert!(
        matches!(missing.as_slice(), [Err(logs::LogError::NotFound { .. })]),
        "{missing:?}"
    );
    engine.wait_settled("g", &[p], WAIT).await.unwrap();
    engine.shutdown(WAIT).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_output_keeps_its_head_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let engine = engine(data, 60_000).await;
    // 280,000 lines of 45 bytes (with the newline): 12 MiB of output.
    let count = 280_000u64;
    let pad = "x".repeat(29);
    let script = format!(r#"seq -f "line %09.0f {pad}" 1 {count}"#);
    let state = run_graph(&engine, command_node("n", &script, 1), "2026-11-29").await;
    assert_eq!(state, RunState::Complete);
    let paths = LogPaths::new(data);
    let id = "g/2026-11-29/n/0";
    let record = &logs::attempts(&paths, id).unwrap()[0];
    assert_eq!(record.lines_logged, count);
    assert_eq!(record.bytes_logged, count * 45);
    assert!(record.lines_cut > 0, "{record:?}");
    let limits = LogLimits::default();
    let size = std::fs::metadata(paths.log_file(id, 1).unwrap())
        .unwrap()
        .len();
    assert!(
        size <= limits.head_bytes_max + limits.tail_bytes_max + 100,
        "{size} bytes kept"
    );
    assert!(
        size >= limits.head_bytes_max + limits.tail_bytes_max - 2 * 100,
        "{size} bytes kept"
    );

    let chunk = logs::read(&paths, id, 1, 0, usize::MAX).unwrap();
    assert!(chunk.finished);
    let lines = &chunk.lines;
    let cuts: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].stream == Stream::Cut)
        .collect();
    assert_eq!(cuts.len(), 1, "one cut line");
    let cut = &lines[cuts[0]];
    assert_eq!(
        cut.text,
        format!(
            "{} bytes in {} lines cut",
            record.bytes_cut, record.lines_cut
        )
    );
    assert_eq!(record.bytes_cut, record.lines_cut * 45);
    // The head from the first line, the tail to the last, numbered as the
    // command wrote them.
    let text = |n: u64| format!("line {n:09} {pad}");
    assert_eq!((lines[0].line, &lines[0].text), (0, &text(1)));
    let before = &lines[cuts[0] - 1];
    assert_eq!(before.text, text(before.line + 1));
    let after = &lines[cuts[0] + 1];
    assert_eq!(after.line, cut.line + record.lines_cut);
    assert_eq!(after.text, text(after.line + 1));
    let last = lines.last().unwrap();
    assert_eq!((last.line, &last.text), (count - 1, &text(count)));
    assert_eq!(lines.len() as u64 + record.lines_cut - 1, count);
    assert_eq!(chunk.next_line, count);
    engine.shutdown(WAIT).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_attempt_is_recorded_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let engine = engine(data, 60_000).await;
    let mut node = command_node("n", "echo started; exec sleep 30", 1);
    node.timeout_ms = Some(300);
    let state = run_graph(&engine, node, "2026-11-29").await;
    assert_eq!(state, RunState::Failed);
    let paths = LogPaths::new(data);
    let id = "g/2026-11-29/n/0";
    // The record is written once the killed group's pipes close.
    wait_for("the timed-out attempt's end", || {
        logs::attempts(&paths, id).unwrap()[0].finished_ms.is_some()
    })
    .await;
    let record = &logs::attempts(&paths, id).unwrap()[0];
    assert_eq!(record.outcome, Some(Outcome::TimedOut), "{record:?}");
    let chunk = logs::read(&paths, id, 1, 0, 10).unwrap();
    assert_eq!(chunk.lines.len(), 1);
    assert_eq!(chunk.lines[0].text, "started");
    assert!(chunk.finished);
    engine.shutdown(WAIT).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_removes_the_logs_of_runs_and_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let engine = engine(data, 25).await;
    let paths = LogPaths::new(data);
    // A plain job running the command task: its key is its log folder.
    let input = weir::TaskInput {
        graph: String::new(),
        partition: String::new(),
        node: "job-1".into(),
        rerun: 0,
        definition: String::new(),
        config: config("echo from a job", &[]),
        upstreams: Default::default(),
        params: Default::default(),
        member: None,
        zone: None,
    };
    let mut job = Job::new("job-1", COMMAND_TASK, "default");
    job.payload = weir::core::codec::encode(&input).unwrap();
    job.retention_ms = Some(300);
    engine.enqueue(job).await.unwrap();
    let state = run_graph(
        &engine,
        command_node("n", "echo from a node", 1),
        "2026-11-29",
    )
    .await;
    assert_eq!(state, RunState::Complete);
    let run_dir = paths.run_dir("g/2026-11-29").unwrap();
    let job_dir = paths.run_dir("job-1").unwrap();
    wait_for("the job's log", || {
        logs::attempts(&paths, "job-1")
            .unwrap()
            .first()
            .is_some_and(|r| r.finished_ms.is_some())
    })
    .await;
    let chunk = logs::read(&paths, "job-1", 1, 0, 10).unwrap();
    assert_eq!(chunk.lines[0].text, "from a job");
    // A short log is kept in its attempt's record, in the run's folder.
    let chunk = logs::read(&paths, "g/2026-11-29/n/0", 1, 0, 10).unwrap();
    assert_eq!(chunk.lines[0].text, "from a node");
    assert!(paths
        .records_file("g/2026-11-29/n/0")
        .unwrap()
        .starts_with(&run_dir));
    assert!(paths.records_file("g/2026-11-29/n/0").unwrap().exists());

    // Logs go just before their records, in the same expiry pass.
    let p: Partition = "2026-11-29".parse().unwrap();
    wait_for("the run and its logs to expire", || {
        !run_dir.exists() && engine.graph_run("g", &p).unwrap().is_none()
    })
    .await;
    wait_for("the job's record and logs to expire", || {
        !job_dir.exists() && engine.store().scan_keys("done/job-1").unwrap().is_empty()
    })
    .await;
    // The graph's folder may stay; nothing of the run is in it.
    assert!(logs::attempts(&paths, "g/2026-11-29/n/0")
        .unwrap()
        .is_empty());
    engine.shutdown(WAIT).await.unwrap();
}
