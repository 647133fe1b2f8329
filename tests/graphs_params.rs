//! Run params end to end through the engine (issue #18 item 2): a start's
//! params over the definition's defaults reach `{params.NAME}`; an
//! undeclared name is refused and starts nothing; the params are in the
//! run's record, survive a restart, and a rerun renders them again; a
//! second start of the same run changes nothing; backfills take the
//! defaults.

mod graphs_support;

use std::collections::BTreeMap;
use std::time::Duration;

use graphs_support::{command_engine, from_toml, node_record, settled};
use weir::{BackfillOrder, EngineError, Partition, PartitionRange, RerunOutcome, RunState};

const DEF: &str = r#"
name = "p"
partitioning = "daily"

[params]
region = "eu"
limit = "10"

[[nodes]]
name = "show"
command = ["sh", "-c", "printf '%s|%s|%s' \"$1\" \"$2\" \"$WEIR_ATTEMPT\" > \"$WEIR_OUTPUT\"", "sh", "{params.region}", "{params.limit}"]
retry = { attempts = 1 }
"#;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn output(engine: &weir::Engine, p: &Partition) -> String {
    String::from_utf8(node_record(engine, "p", p, "show").3).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn params_are_set_per_run_kept_in_its_record_and_survive_a_restart() {
    let defs = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let def = from_toml(defs.path(), DEF);
    let engine = command_engine(data.path(), 2).open().await.unwrap();
    engine.adopt(def.clone()).await.unwrap();
    let d1: Partition = "2026-11-01".parse().unwrap();
    let d2: Partition = "2026-11-02".parse().unwrap();

    // An undeclared name refuses the whole start: no run at all.
    let e = engine
        .start_runs_with(
            "p",
            vec![d2.clone()],
            map(&[("zone", "a"), ("region", "us")]),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&e, EngineError::BadParam(m) if m.contains("param \"zone\" is not a param of graph \"p\" (its params: limit, region)")),
        "{e:?}"
    );
    assert!(engine.graph_run("p", &d2).unwrap().is_none());

    engine
        .start_runs_with("p", vec![d1.clone()], map(&[("region", "us west")]))
        .await
        .unwrap();
    assert_eq!(settled(&engine, "p", &d1).await, RunState::Complete);
    assert_eq!(output(&engine, &d1), "us west|10|1");
    let view = engine.graph_run("p", &d1).unwrap().unwrap();
    assert_eq!(view.params, map(&[("limit", "10"), ("region", "us west")]));
    // Starting it again, with other params, changes nothing.
    let again = engine
        .start_runs_with("p", vec![d1.clone()], map(&[("region", "ap")]))
        .await
        .unwrap();
    assert!(!again[0].started);
    assert_eq!(
        engine.graph_run("p", &d1).unwrap().unwrap().params,
        view.params
    );

    // A restart: the record keeps them, and a rerun renders them again.
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
    let engine = command_engine(data.path(), 2).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    assert_eq!(
        engine.graph_run("p", &d1).unwrap().unwrap().params,
        view.params
    );
    let r = engine.rerun("p", d1.clone(), "show").await.unwrap();
    assert!(matches!(r, RerunOutcome::Submitted(_)), "{r:?}");
    assert_eq!(settled(&engine, "p", &d1).await, RunState::Complete);
    let after = engine.graph_run("p", &d1).unwrap().unwrap();
    assert_eq!(after.nodes[0].rerun, 1, "the rerun's record is current");
    assert_eq!(output(&engine, &d1), "us west|10|1");

    // A backfill's runs take the defaults.
    let range: PartitionRange = "2026-11-03..2026-11-04".parse().unwrap();
    engine
        .backfill("p", range, BackfillOrder::Oldest)
        .await
        .unwrap();
    for day in ["2026-11-03", "2026-11-04"] {
        let d: Partition = day.parse().unwrap();
        let t0 = std::time::Instant::now();
        while engine.graph_run("p", &d).unwrap().is_none() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{day} never started"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(settled(&engine, "p", &d).await, RunState::Complete);
        assert_eq!(output(&engine, &d), "eu|10|1", "{day}");
        assert_eq!(
            engine.graph_run("p", &d).unwrap().unwrap().params,
            map(&[("limit", "10"), ("region", "eu")])
        );
    }
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
