//! Crash test: a child process commits and acknowledges in a loop; the
//! parent kills it with SIGKILL at random moments and, after each kill,
//! reopens the store and checks that everything acknowledged is there, the
//! queue's invariants hold and nothing is duplicated.
//!
//! The child is this test binary run again (`crash_child`, a no-op unless
//! `WEIR_CRASH_CHILD_DIR` is set), in the `fsync` durability mode. It plays
//! the queue actor: it requeues the orphans its recovery found, then loops:
//! enqueue new keys, select, complete, requeue and cancel, each terminal op
//! committed with a `done/<key>` record in the same commit, snapshots as
//! `snapshot_due` says (the first one after its recovery starting from
//! `Store::changed_since_snapshot`, the tickets the replayed journal tail
//! changed); only after `Store::commit` returns does it print
//! the keys acknowledged (`E key` for an enqueue, `D key` for a terminal
//! op). Kills land anywhere: in a commit, in a snapshot or between a
//! snapshot and the removal of the journal entries it covers, in recovery.
//! Rounds alternate the journal's value size, so commits are written both
//! as one value carrying their records and as a transaction of several.
//!
//! 50 kills in a normal run (a few seconds each: the child is killed within
//! 300 ms of being ready); `WEIR_SOAK=1` makes it 500. `WEIR_CRASH_SEED`
//! replays a run; the seed is printed.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use weir_actors::store::{Commit, Durability, Store, StoreCold, StoreSettings};
use weir_core::codec;
use weir_core::queue::{Applied, Job, Op, TicketId};

const CHILD_DIR_ENV: &str = "WEIR_CRASH_CHILD_DIR";
const CHILD_KEY0_ENV: &str = "WEIR_CRASH_CHILD_KEY0";

fn settings() -> StoreSettings {
    settings_for(0)
}

/// The child's settings in round `round`: in even rounds small values, so
/// a commit of a few ops spans several of them (a transaction); in odd
/// ones most commits fit one value, which carries their records.
fn settings_for(round: u64) -> StoreSettings {
    StoreSettings {
        durability: Durability::Fsync,
        // Often, so kills land in and around snapshots.
        snapshot_ops: 400,
        entry_ops_max: if round.is_multiple_of(2) { 4 } else { 32 },
        cache_bytes: 16 << 20,
        // Small windows, so most of the queue stays in the store and kills
        // land while windows are read.
        window_tickets: 32,
        ..StoreSettings::default()
    }
}

fn job(key: &str, payload_bytes: usize) -> Job {
    Job {
        payload: vec![0x5a; payload_bytes],
        ..Job::new(key, "noop", "p")
    }
}

/// The child: commit, acknowledge, repeat until killed.
#[test]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let mut next_key: u64 = std::env::var(CHILD_KEY0_ENV).unwrap().parse().unwrap();
    let mut rng = StdRng::seed_from_u64(next_key);
    let (store, recovered) =
        Store::open(&dir, settings_for(next_key / 10_000_000)).expect("child opens the store");
    let mut state = recovered.state;
    // The tickets the replayed tail changed go into the next snapshot.
    let mut dirty = store.changed_since_snapshot();
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    let now_ms = 1_000;
    // Attempts that were running when the last child died will never
    // report: requeue them (or fail them) first, as the queue actor does.
    let mut pending_ops: Vec<Op> = state
        .orphans(now_ms, || 0)
        .into_iter()
        .map(|(op, _)| op)
        .collect();
    loop {
        let mut ops = std::mem::take(&mut pending_ops);
        for _ in 0..rng.gen_range(1..=6) {
            ops.push(Op::Enqueue(job(
                &format!("k{next_key}"),
                rng.gen_range(0..200),
            )));
            next_key += 1;
        }
        for _ in 0..rng.gen_range(0..=7) {
            ops.push(Op::Select {
                pool: "p".into(),
                now_ms,
                worker: "w".into(),
                lease_until_ms: now_ms + 60_000,
            });
        }
        let mut commit = Commit::default();
        let mut acks = Vec::new();
        for op in ops {
            // The key of a ticket that may end, read before it leaves.
            // As the queue actor: what the op names is read in first, and
            // the windows refilled after.
            let cold = StoreCold::new(&store);
            state.prepare(&op, &cold).expect("child reads the store");
            let key = match &op {
                Op::Complete { id, .. } | Op::Cancel { id } => {
                    state.ticket(*id).map(|t| t.job.key.clone())
                }
                _ => None,
            };
            let applied = state.step(&op);
            state
                .refill(&cold, store.settings().window_tickets)
                .expect("child reads the store");
            match applied {
                Applied::Enqueued(id) => {
                    dirty.insert(id);
                    if let Op::Enqueue(j) = &op {
                        acks.push(format!("E {}", j.key));
                    }
                }
                Applied::Completed(id, _) | Applied::Cancelled(id) => {
                    dirty.insert(id);
                    let key = key.expect("an ended ticket had a key");
                    commit
                        .puts
                        .push((format!("done/{key}"), codec::encode(&id).unwrap()));
                    acks.push(format!("D {key}"));
                }
                Applied::Selected(id) | Applied::Requeued(id) | Applied::Extended(id) => {
                    dirty.insert(id);
                }
                // A cancel of a ticket completed earlier in the same commit.
                Applied::NoneDue | Applied::Ignored(_) => {}
                other => panic!("child: op {op:?} gave {other:?}"),
            }
            commit.ops.push(op);
        }
        store.commit(&commit).expect("child commit");
        for ack in &acks {
            writeln!(out, "{ack}").unwrap();
        }
        out.flush().unwrap();
        // The next commit ends some of what is running now: most complete,
        // some are requeued, now and then a pending one is cancelled.
        let running: Vec<TicketId> = state.expired_leases(u64::MAX);
        for id in running.into_iter().take(rng.gen_range(0..=7)) {
            pending_ops.push(match rng.gen_range(0..10) {
                0 => Op::Requeue { id, due_ms: 0 },
                _ => Op::Complete {
                    id,
                    terminal: weir_core::queue::Terminal::Succeeded,
                },
            });
        }
        if rng.gen_range(0..10) == 0 {
            if let Some(t) = state.tickets().next() {
                pending_ops.push(Op::Cancel { id: t.id });
            }
        }
        if store.snapshot_due() {
            let changed = std::mem::take(&mut dirty);
            store
                .write_snapshot(
                    store.last_seq(),
                    state.next_id(),
                    state.len() as u64,
                    changed.into_iter().map(|id| (id, state.ticket(id))),
                )
                .expect("child snapshot");
            state.snapshot_taken();
        }
    }
}

/// One round: spawn the child, kill it, return the lines it printed whole.
fn run_child(dir: &Path, key0: u64, kill_after: Duration, wait_ready: bool) -> Vec<String> {
    let stderr = File::create(dir.with_extension("stderr")).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_KEY0_ENV, key0.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .spawn()
        .expect("child spawns");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut reader = BufReader::new(stdout);
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                // A line cut by the kill was not acknowledged whole.
                Ok(_) if !line.ends_with('\n') => break,
                Ok(_) => {
                    let line = line.trim_end().to_string();
                    if line.ends_with("READY") {
                        let _ = tx.send(());
                    }
                    lines.push(line);
                }
            }
        }
        lines
    });
    if wait_ready {
        let ready = rx.recv_timeout(Duration::from_secs(30));
        if ready.is_err() {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "child never became ready: {}",
                std::fs::read_to_string(dir.with_extension("stderr")).unwrap_or_default()
            );
        }
    }
    std::thread::sleep(kill_after);
    // SIGKILL, unless it already died on its own (a failure).
    let _ = child.kill();
    let status = child.wait().unwrap();
    let lines = reader.join().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "the child died before it was killed ({status}): {}",
        std::fs::read_to_string(dir.with_extension("stderr")).unwrap_or_default()
    );
    lines
}

#[test]
fn acknowledged_commits_survive_kill_9() {
    let soak = std::env::var_os("WEIR_SOAK").is_some();
    let rounds = if soak { 500 } else { 50 };
    let seed: u64 = std::env::var("WEIR_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    eprintln!("crash test: {rounds} rounds, WEIR_CRASH_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    // Every key acknowledged as enqueued, and as ended, over all rounds.
    let mut enqueued: BTreeSet<String> = BTreeSet::new();
    let mut ended: BTreeSet<String> = BTreeSet::new();
    let started = Instant::now();
    let mut killed_before_ready = 0;
    let mut last_seq = 0;
    for round in 0..rounds {
        // A fifth of the kills land at a random moment after the spawn,
        // often during the child's recovery; the rest after it is ready.
        let wait_ready = rng.gen_range(0..5) != 0;
        let kill_after = Duration::from_millis(if wait_ready {
            rng.gen_range(0..300)
        } else {
            rng.gen_range(0..150)
        });
        let key0 = round as u64 * 10_000_000 + rng.gen_range(0..1_000);
        let lines = run_child(&dir, key0, kill_after, wait_ready);
        if !lines.iter().any(|l| l.ends_with("READY")) {
            killed_before_ready += 1;
        }
        let mut acked = 0;
        for line in &lines {
            if let Some(key) = line.strip_prefix("E ") {
                enqueued.insert(key.to_string());
                acked += 1;
            } else if let Some(key) = line.strip_prefix("D ") {
                ended.insert(key.to_string());
                acked += 1;
            }
        }

        let (store, recovered) = Store::open(&dir, settings()).unwrap_or_else(|e| {
            panic!("round {round} (seed {seed}): the store does not reopen after a kill: {e}")
        });
        // Every ticket read in, from the store's windows on: the checks
        // below see the whole queue, and the indexes must list it all.
        let mut state = recovered.state;
        state
            .read_in_all(&StoreCold::new(&store))
            .unwrap_or_else(|e| panic!("round {round} (seed {seed}): {e}"));
        assert_eq!(state.cold_len(), 0);
        let state = &state;
        state.assert_invariants();
        let done: BTreeSet<String> = store
            .scan_keys("done/")
            .unwrap()
            .into_iter()
            .map(|k| k["done/".len()..].to_string())
            .collect();
        for key in &enqueued {
            assert!(
                state.by_key(key).is_some() || done.contains(key),
                "round {round} (seed {seed}): acknowledged enqueue of {key} is lost"
            );
        }
        for key in &ended {
            assert!(
                done.contains(key),
                "round {round} (seed {seed}): acknowledged end of {key} is lost"
            );
        }
        for key in &done {
            assert!(
                state.by_key(key).is_none(),
                "round {round} (seed {seed}): {key} ended but is live again"
            );
        }
        // Each key is enqueued once: no key is live under two ids.
        let live_keys: BTreeSet<&str> = state.tickets().map(|t| &*t.job.key).collect();
        assert_eq!(
            live_keys.len(),
            state.len(),
            "round {round}: a key is live twice"
        );
        assert!(
            store.last_seq() >= last_seq,
            "round {round}: the journal went back from {last_seq} to {}",
            store.last_seq()
        );
        last_seq = store.last_seq();
        if round % 10 == 0 || round + 1 == rounds {
            eprintln!(
                "round {round}: {acked} acks this round, {} enqueues and {} ends acknowledged in all, {} live, snapshot at {}, {} entries replayed, {:.1} s",
                enqueued.len(),
                ended.len(),
                state.len(),
                recovered.snapshot.seq,
                recovered.entries_replayed,
                started.elapsed().as_secs_f64()
            );
        }
    }
    assert!(
        enqueued.len() > rounds,
        "the children made too little progress to test anything: {} acknowledged enqueues",
        enqueued.len()
    );
    eprintln!(
        "{rounds} kills ({killed_before_ready} before the child was ready), {} enqueues and {} ends acknowledged, {:.1} s",
        enqueued.len(),
        ended.len(),
        started.elapsed().as_secs_f64()
    );
}
