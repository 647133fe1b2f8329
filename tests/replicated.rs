//! The replicated engine (DESIGN §7a): three `weir serve --raft-id N`
//! processes on loopback, the leader killed, partitioned, restarted; every
//! acknowledged write must survive and none be recorded twice.

mod replica_support;
mod serve_support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use replica_support::{chain_defs, days, executions, request, Group, ELECTION_MS};
use serde_json::{json, Value};

/// Each of the chain's nodes ran at least once per partition, and — with no
/// failover in between — at most `max` times.
fn assert_ran(dir: &std::path::Path, parts: &[String], max: u32) {
    let ran = executions(dir);
    for p in parts {
        for node in ["a", "b", "c"] {
            let n = ran.get(&format!("{p} {node}")).copied().unwrap_or(0);
            assert!(n >= 1, "{p} {node} never ran");
            assert!(n <= max, "{p} {node} ran {n} times (at most {max})");
        }
    }
}

/// When member `id` stopped its engine as leader (its log's times).
fn engine_stops(g: &Group, id: u64) -> Vec<String> {
    let mut all = g.log_times(id, &["replica: no longer leads"]);
    all.extend(g.log_times(id, &["replica: the engine stopped; stepping down"]));
    all.sort();
    all
}

/// Every node record of a run is `succeeded`, once: `weir status` of the
/// run lists each node once.
fn assert_nodes_once(g: &Group, part: &str) {
    let r = g.api(
        "GET",
        &format!("/api/v1/graphs/chain/runs/{part}"),
        None,
        Duration::from_secs(20),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let nodes: Vec<(String, String)> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["node"].as_str().unwrap().to_string(),
                n["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let names: BTreeSet<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(nodes.len(), 3, "{part}: {nodes:?}");
    assert_eq!(names.len(), 3, "{part}: a node recorded twice: {nodes:?}");
    assert!(
        nodes.iter().all(|(_, s)| s == "succeeded"),
        "{part}: {nodes:?}"
    );
}

#[test]
fn the_leader_killed_mid_backfill_with_two_workers_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let defs = chain_defs(dir, "0.2");
    let mut g = Group::start(dir, &defs, 3, &["--no-local-workers"]);
    let mut w1 = g.worker("w1", 4);
    let mut w2 = g.worker("w2", 4);
    let parts = days(30);
    g.backfill_chain(&parts);
    // Mid-backfill: some runs complete, most not.
    g.wait("a third of the runs", Duration::from_secs(60), || {
        let done = g.runs().values().filter(|s| *s == "complete").count();
        (done >= 8).then_some(())
    });
    let old = g.leader().expect("a leader");
    let killed = Instant::now();
    g.kill(old);
    let new = g.wait_leader(Duration::from_secs(10));
    let failover = killed.elapsed();
    assert_ne!(new, old);
    eprintln!("failover: member {old} killed, member {new} leads and serves after {failover:?}");
    assert!(
        failover < Duration::from_millis(ELECTION_MS * 8),
        "failover took {failover:?}"
    );
    g.spawn(old);
    let runs = g.wait_complete(&parts, Duration::from_secs(120));
    assert_eq!(runs.len(), 30, "exactly the backfill's runs: {runs:?}");
    for p in &parts {
        assert_nodes_once(&g, p);
    }
    // At-least-once across the failover: an attempt in flight on a worker
    // when the leader died may have run again, but at most once more.
    assert_ran(dir, &parts, 2);
    // The old leader came back a follower and caught up.
    let view = g.view(old).expect("the old leader answers");
    assert_eq!(view["state"], "follower", "{view}");
    let _ = w1.kill();
    let _ = w2.kill();
    let _ = (w1.wait(), w2.wait());
}

#[test]
fn a_partitioned_leader_stops_granting_and_rejoins_as_a_follower() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let defs = chain_defs(dir, "0.05");
    let g = Group::start(dir, &defs, 3, &[]);
    let parts = days(40);
    let start = |p: &str| {
        g.api(
            "POST",
            "/api/v1/graphs/chain/runs",
            Some(&json!({"partitions": [p]})),
            Duration::from_secs(20),
        )
    };
    for p in &parts[..10] {
        assert_eq!(start(p).status, 200);
    }
    let old = g.leader().expect("a leader");
    let old_api = g.members[&old].api.clone();
    let stops_before = engine_stops(&g, old).len();
    g.partition(old);
    let cut = Instant::now();
    // The old leader stops within its election timeout (and a check):
    // its members view says it no longer leads, and a start sent to it is
    // not acknowledged.
    g.wait(
        "the old leader to stop leading",
        Duration::from_secs(5),
        || {
            let v = g.view(old)?;
            (v["state"] != "leader" || v["quorum_ack_ms_ago"].as_u64() > Some(ELECTION_MS))
                .then_some(())
        },
    );
    let stopped = cut.elapsed();
    let refused = request(
        &old_api,
        &g.token,
        "POST",
        "/api/v1/graphs/chain/runs",
        Some(&json!({"partitions": [parts[10]]})),
        Duration::from_secs(15),
    );
    assert!(
        refused.as_ref().map_or(true, |r| r.status != 200),
        "a start on the cut-off leader was acknowledged: {refused:?}"
    );
    // The majority elects and goes on.
    let new = g.wait("a new leader", Duration::from_secs(10), || {
        g.running()
            .into_iter()
            .filter(|id| *id != old)
            .find(|id| g.view(*id).is_some_and(|v| v["state"] == "leader"))
    });
    eprintln!("cut at 0; old leader {old} stopped after {stopped:?}; member {new} leads");
    // Fencing: the cut-off leader stopped its engine (its fence, or a
    // commit that failed) before the new leader was elected — no voter
    // grants a vote within the lease of its last append, and the fence is
    // shorter than the lease.
    let stops = g.wait(
        "the old leader's engine to stop",
        Duration::from_secs(10),
        || {
            let all: Vec<String> = engine_stops(&g, old).split_off(stops_before);
            (!all.is_empty()).then_some(all)
        },
    );
    let elected = g.log_times(new, &["replica: leadership", "state=Leader"]);
    let elected = elected.last().expect("the new leader logged its election");
    let stopped_at = stops.iter().min().unwrap();
    assert!(
        stopped_at < elected,
        "member {old} stopped its engine at {stopped_at}, after member {new} was elected at {elected}\n{}",
        g.logs_tail()
    );
    let new_api = g.members[&new].api.clone();
    let mut acked = parts[..10].to_vec();
    for p in &parts[11..25] {
        let r = request(
            &new_api,
            &g.token,
            "POST",
            "/api/v1/graphs/chain/runs",
            Some(&json!({"partitions": [p]})),
            Duration::from_secs(15),
        )
        .unwrap();
        if r.status == 200 {
            acked.push(p.clone());
        }
    }
    assert!(
        acked.len() >= 20,
        "the majority side took starts: {acked:?}"
    );
    std::thread::sleep(Duration::from_secs(10).saturating_sub(cut.elapsed()));
    g.heal();
    g.wait("the old leader to follow", Duration::from_secs(10), || {
        g.view(old)
            .filter(|v| v["state"] == "follower" && v["leader"].as_u64() == Some(new))
    });
    for p in &parts[25..] {
        assert_eq!(start(p).status, 200);
        acked.push(p.clone());
    }
    let runs = g.wait_complete(&acked, Duration::from_secs(120));
    // The start the cut-off leader never acknowledged is not there either
    // (it was never committed), unless the client's retry landed it.
    assert!(
        !runs.contains_key(&parts[10]) || refused.is_ok_and(|r| r.status == 200),
        "{runs:?}"
    );
    for p in &acked {
        assert_nodes_once(&g, p);
    }
}

#[test]
fn a_follower_restarted_after_compaction_catches_up_from_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let defs = chain_defs(dir, "0");
    let mut g = Group::start_with(dir, &defs, 3, &[], &[("WEIR_RAFT_SNAPSHOT_ENTRIES", "40")]);
    let leader = g.leader().unwrap();
    let follower = *g.members.keys().find(|id| **id != leader).unwrap();
    // The follower's log ends at most where the leader's was when killed.
    let behind = g.view(leader).unwrap()["last_log_index"]
        .as_u64()
        .unwrap_or(0);
    g.kill(follower);
    let parts = days(30);
    g.backfill_chain(&parts);
    g.wait_complete(&parts, Duration::from_secs(120));
    // The leader compacted its log past the follower's end: the follower
    // cannot catch up from entries.
    g.wait("the leader to compact", Duration::from_secs(30), || {
        let lv = g.view(leader)?;
        (lv["purged_index"].as_u64()? > behind).then_some(())
    });
    g.spawn(follower);
    // It catches up: its applied index reaches the leader's log.
    g.wait("the follower to catch up", Duration::from_secs(30), || {
        let lv = g.view(leader)?;
        let fv = g.view(follower)?;
        let want = lv["last_log_index"].as_u64()?;
        (fv["applied_index"].as_u64()? >= want).then_some(())
    });
    let log = std::fs::read_to_string(dir.join(format!("m{follower}.log"))).unwrap();
    assert!(
        log.contains("snapshot installed"),
        "the follower caught up from a snapshot:\n{log}"
    );
    // Its store is the group's: stopped alone, it reads the same runs.
    for id in g.running() {
        g.stop(id);
    }
    let out = g.cli(
        follower,
        &["runs", "--graph", "chain", "--json", "--limit", "1000"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v
        .as_array()
        .cloned()
        .or_else(|| v["runs"].as_array().cloned())
        .unwrap();
    let complete = rows.iter().filter(|r| r["state"] == "complete").count();
    assert_eq!(complete, 30, "{v}");
}

#[test]
fn a_rolling_restart_then_all_three_killed_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let defs = chain_defs(dir, "0.1");
    let mut g = Group::start(dir, &defs, 3, &[]);
    let parts = days(60);
    g.backfill_chain(&parts);
    // Rolling restart under the backfill's load: one member at a time,
    // each back and caught up before the next goes.
    for id in [1u64, 2, 3] {
        assert_eq!(g.stop(id), Some(0), "member {id} stops cleanly");
        g.spawn(id);
        g.wait_leader(Duration::from_secs(15));
    }
    // Then every member at once, by kill -9.
    for id in [1u64, 2, 3] {
        g.kill(id);
    }
    for id in [1u64, 2, 3] {
        g.spawn(id);
    }
    g.wait_leader(Duration::from_secs(20));
    let runs = g.wait_complete(&parts, Duration::from_secs(180));
    assert_eq!(runs.len(), 60);
    for p in parts.iter().step_by(7) {
        assert_nodes_once(&g, p);
    }
}

/// Jepsen's idea on loopback: a client starts uniquely named runs and
/// records each acknowledgement while a nemesis kills or partitions the
/// leader again and again; every acknowledged run ends complete, once.
#[test]
fn every_acknowledged_start_survives_a_nemesis() {
    let events: usize = if std::env::var_os("WEIR_SOAK").is_some() {
        100
    } else {
        20
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let defs = chain_defs(dir, "0");
    let mut g = Group::start(dir, &defs, 3, &[]);
    let parts = days(4000);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let apis: Vec<String> = g.members.values().map(|m| m.api.clone()).collect();
    let token = g.token.clone();
    let client = {
        let stop = stop.clone();
        let parts = parts.clone();
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            let mut unknown = Vec::new();
            let mut i = 0usize;
            let mut turn = 0usize;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && i < parts.len() {
                let p = &parts[i];
                let api = &apis[turn % apis.len()];
                match request(
                    api,
                    &token,
                    "POST",
                    "/api/v1/graphs/chain/runs",
                    Some(&json!({"partitions": [p]})),
                    Duration::from_secs(5),
                ) {
                    Ok(r) if r.status == 200 => {
                        acked.push(p.clone());
                        i += 1;
                    }
                    // Not sent, or sent on by no member (503): not applied.
                    Ok(r) if r.status == 503 => turn += 1,
                    Err(e) if e.starts_with("connect:") => {
                        turn += 1;
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    // No answer, or an error after the request went on:
                    // it may or may not have taken effect.
                    _ => {
                        unknown.push(p.clone());
                        i += 1;
                        turn += 1;
                    }
                }
            }
            (acked, unknown)
        })
    };
    let mut rng_state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state
    };
    for event in 0..events {
        std::thread::sleep(Duration::from_millis(300 + next() % 700));
        let Some(leader) = g.leader() else {
            g.wait_leader(Duration::from_secs(15));
            continue;
        };
        if next() % 2 == 0 {
            eprintln!("nemesis {event}: kill -9 member {leader}");
            g.kill(leader);
            g.wait_leader(Duration::from_secs(15));
            g.spawn(leader);
        } else {
            eprintln!("nemesis {event}: partition member {leader}");
            g.partition(leader);
            std::thread::sleep(Duration::from_millis(ELECTION_MS * 3));
            g.heal();
            g.wait_leader(Duration::from_secs(15));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (acked, unknown) = client.join().unwrap();
    eprintln!(
        "{} starts acknowledged, {} unanswered, over {events} nemesis events",
        acked.len(),
        unknown.len()
    );
    assert!(
        acked.len() >= 20,
        "the client made progress: {}",
        acked.len()
    );
    let runs = g.wait_complete(&acked, Duration::from_secs(180));
    let acked_set: BTreeSet<&String> = acked.iter().collect();
    let unknown_set: BTreeSet<&String> = unknown.iter().collect();
    for p in runs.keys() {
        assert!(
            acked_set.contains(p) || unknown_set.contains(p),
            "run {p} exists but was never started"
        );
    }
    for p in &acked {
        assert_nodes_once(&g, p);
    }
}

#[test]
fn a_member_added_online_catches_up_and_a_removed_one_leaves_the_group() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let defs = chain_defs(dir, "0");
    let mut g = Group::start_with(dir, &defs, 3, &[], &[("WEIR_RAFT_SNAPSHOT_ENTRIES", "40")]);
    let parts = days(20);
    g.backfill_chain(&parts);
    g.wait_complete(&parts, Duration::from_secs(120));
    // A fourth member, started with the group's peers and its own, is
    // added online by an admin through any member: a follower passes the
    // change to the leader.
    let before = g.wait_leader(Duration::from_secs(10));
    let follower = (1..=3).find(|id| *id != before).unwrap();
    g.add(4);
    let raft4 = g.members[&4].raft.clone();
    let out = g.cli(follower, &["members", "add", "4", &raft4]);
    assert!(
        out.status.success(),
        "weir members add: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let leader = g.wait_leader(Duration::from_secs(10));
    g.wait("member 4 to catch up", Duration::from_secs(30), || {
        let lv = g.view(leader)?;
        let v4 = g.view(4)?;
        let want = lv["last_log_index"].as_u64()?;
        let voter = lv["members"]
            .as_array()?
            .iter()
            .any(|m| m["id"] == 4 && m["role"] == "follower");
        (voter && v4["applied_index"].as_u64()? + 2 >= want).then_some(())
    });
    let log = std::fs::read_to_string(dir.join("m4.log")).unwrap();
    assert!(
        log.contains("snapshot installed"),
        "from a snapshot:\n{log}"
    );
    // Its store is the group's: it reads the backfill's runs.
    let v4 = request(
        &g.members[&4].api,
        &g.token,
        "GET",
        "/api/v1/runs?graph=chain&limit=100",
        None,
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(v4.status, 200, "{}", v4.body);
    assert_eq!(
        v4.json()["runs"].as_array().unwrap().len(),
        20,
        "{}",
        v4.body
    );
    // Removed, it leaves the group: the leader lists three members again.
    let out = g.cli(2, &["members", "remove", "4"]);
    assert!(
        out.status.success(),
        "weir members remove: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    g.wait("three members", Duration::from_secs(10), || {
        let id = g.leader()?;
        let v = g.view(id)?;
        (v["members"].as_array()?.len() == 3).then_some(())
    });
    // A viewer may read the members, not change them.
    let out = g.cli(
        1,
        &[
            "token", "create", "--name", "dash", "--role", "viewer", "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let secret = made["secret"].as_str().unwrap_or_else(|| panic!("{made}"));
    let api = &g.members[&2].api;
    let read = request(
        api,
        secret,
        "GET",
        "/api/v1/members",
        None,
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(read.status, 200, "{}", read.body);
    let refused = request(
        api,
        secret,
        "POST",
        "/api/v1/members/3/remove",
        Some(&json!({})),
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("admin"), "{}", refused.body);
}
