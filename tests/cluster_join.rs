//! A worker given several members (`--join A,B`) whose first does not
//! answer at all — its packets dropped, as by a powered-off machine or a
//! firewall — reaches the second: each address has its own deadline, and
//! its warning names every address tried with its own cause.

mod cluster_support;
mod serve_support;

use std::time::{Duration, Instant};

use cluster_support::{free_port, SilentLink};
use serve_support::write_def;

#[test]
fn a_silent_first_member_does_not_keep_a_worker_from_the_second() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    write_def(
        &defs,
        "one",
        "name = \"one\"\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n",
    );
    let c = cluster_support::start(tmp.path(), &defs, free_port(), 5_000, &[]);
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
}
