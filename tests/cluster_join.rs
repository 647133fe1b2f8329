//! A worker given several members (`--join A,B`) whose first does not
//! answer at all — its packets dropped, as by a powered-off machine or a
//! firewall — reaches the second: each address has its own deadline, and
//! its warning names every address tried with its own cause.

mod cluster_support;
mod serve_support;

use std::time::{Duration, Instant};

use cluster_support::{free_port, Decoy, SilentLink};
use serve_support::write_def;

/// An engine with a cluster node in `dir`, its one graph a one-node
/// `true`, workers' leases 5 s.
fn one_node_cluster(dir: &std::path::Path) -> cluster_support::Cluster {
    let defs = dir.join("defs");
    write_def(
        &defs,
        "one",
        "name = \"one\"\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n",
    );
    cluster_support::start(dir, &defs, free_port(), 5_000, &[])
}

#[test]
fn a_silent_first_member_does_not_keep_a_worker_from_the_second() {
    let tmp = tempfile::tempdir().unwrap();
    let c = one_node_cluster(tmp.path());
    // Nothing listens on the silent address, and its packets are dropped:
    // a connect there hangs until its deadline (with a proxy standing in,
    // it is accepted and closed instead).
    let silent = SilentLink::start(&format!("127.0.0.1:{}", free_port()));
    silent.cut();
    let join = format!("{},{}", silent.addr, c.join);
    let started = Instant::now();
    let w = c.worker_through("w1", &["default=1"], &join);
    c.wait_worker("w1", "joined", Duration::from_secs(30));
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "joined through the second member after {took:?}"
    );
    drop(w);
    // With both silent, the warning names each address and its cause.
    let other = SilentLink::start(&format!("127.0.0.1:{}", free_port()));
    other.cut();
    let join = format!("{},{}", silent.addr, other.addr);
    let w = c.worker_through("w2", &["default=1"], &join);
    if silent.is_real() {
        serve_support::wait_for("a warning naming both", Duration::from_secs(30), || {
            w.stderr()
                .lines()
                .find(|l| {
                    l.contains("cannot reach the engine")
                        && l.contains(&silent.addr)
                        && l.contains(&other.addr)
                })
                .map(str::to_string)
        });
    } else {
        // A proxy takes the connection (it cannot drop the packets of a
        // connect), so no connect fails: the worker must go on trying
        // both, each connection held silent until it gives up on it.
        let (before, other_before) = (silent.attempts(), other.attempts());
        serve_support::wait_for("a second try of each", Duration::from_secs(30), || {
            (silent.attempts() >= before + 2 && other.attempts() >= other_before + 2).then_some(())
        });
    }
}

/// A first member that takes the connection and closes it at once, or
/// holds it and says nothing (no engine behind a proxy, a port another
/// program holds), does not keep a worker from the second: its connect
/// succeeds, so only a session ended before it was ready tells the worker
/// to start its next connect with the next member.
#[test]
fn a_first_member_that_is_no_engine_does_not_keep_a_worker_from_the_second() {
    let tmp = tempfile::tempdir().unwrap();
    let c = one_node_cluster(tmp.path());
    for (name, decoy) in [("closing", Decoy::closing()), ("silent", Decoy::silent())] {
        let join = format!("{},{}", decoy.addr, c.join);
        let started = Instant::now();
        let w = c.worker_through(name, &["default=1"], &join);
        c.wait_worker(name, "joined", Duration::from_secs(30));
        let took = started.elapsed();
        assert!(decoy.attempts() >= 1, "{name}: the decoy was never tried");
        // A closed session is left at once; a silent one after the
        // worker's wait for a session to get ready (5 s before an engine
        // told it its lease).
        assert!(
            took < Duration::from_secs(12),
            "{name}: joined through the second member after {took:?}"
        );
        let line = w
            .stderr()
            .lines()
            .find(|l| l.contains("the next connect starts with the next member"))
            .map(str::to_string);
        assert!(
            line.is_some_and(|l| l.contains(&decoy.addr)),
            "{name}: {}",
            w.stderr()
        );
        drop(w);
    }
}
