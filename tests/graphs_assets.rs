//! Assets end to end (issue #18): a node that produces an asset starts,
//! when it succeeds for a partition, the run of every graph that triggers
//! on it — the same partition, or the window that contains it when the
//! consumer partitions otherwise; the materialization is durable with the
//! producer's record, so a restart between the producer's success and
//! the consumer's start loses nothing; `Engine::assets` lists the
//! lineage and the last materialization; an asset has one producer.

mod graphs_support;

use std::time::Duration;

use graphs_support::{command_engine, from_toml, settled};
use weir::{Partition, RunState};

const SALES: &str = r#"
name = "sales"
partitioning = "daily"

[[nodes]]
name = "extract"
command = ["true"]

[[nodes]]
name = "load"
upstreams = ["extract"]
produces = ["sales.daily"]
command = ["true"]
"#;

const REPORT: &str = r#"
name = "report"
partitioning = "daily"

[trigger]
assets = ["sales.daily", "clicks.hourly"]

[[nodes]]
name = "render"
command = ["sh", "-c", "echo {partition} >> report.txt"]
"#;

const CLICKS: &str = r#"
name = "clicks"
partitioning = "hourly"

[[nodes]]
name = "count"
produces = ["clicks.hourly"]
command = ["true"]
"#;

async fn wait_run(engine: &weir::Engine, graph: &str, p: &Partition) -> RunState {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while engine.graph_run(graph, p).unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no run of {graph} for {p}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    settled(engine, graph, p).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_materialization_starts_its_consumers_partition() {
    let defs = tempfile::tempdir().unwrap();
    let dir = defs.path();
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 4).open().await.unwrap();
    for text in [SALES, REPORT, CLICKS] {
        let sub = dir.join(text.lines().nth(1).unwrap().split('"').nth(1).unwrap());
        std::fs::create_dir_all(&sub).unwrap();
        engine.adopt(from_toml(&sub, text)).await.unwrap();
    }
    // Same partitioning: the day starts the day.
    let day: Partition = "2026-11-29".parse().unwrap();
    engine.start_run("sales", day.clone()).await.unwrap();
    assert_eq!(settled(&engine, "sales", &day).await, RunState::Complete);
    assert_eq!(wait_run(&engine, "report", &day).await, RunState::Complete);
    // Finer producer: an hour starts the day that contains it; a second
    // hour of the same day, materialized after the day's run read the
    // first, refreshes that run (Dagster's behaviour: the day re-reads its
    // hours), rather than leaving it without the second.
    let other_day: Partition = "2026-11-30".parse().unwrap();
    for hour in ["2026-11-30T05", "2026-11-30T06"] {
        let h: Partition = hour.parse().unwrap();
        engine.start_run("clicks", h.clone()).await.unwrap();
        assert_eq!(settled(&engine, "clicks", &h).await, RunState::Complete);
        assert_eq!(
            wait_run(&engine, "report", &other_day).await,
            RunState::Complete
        );
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while engine.assets().unwrap().iter().any(|a| a.pending > 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "deliveries stayed pending"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let rendered = std::fs::read_to_string(dir.join("report/report.txt")).unwrap();
        if rendered == "2026-11-29\n2026-11-30\n2026-11-30\n" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "one run per day, the second day's refreshed once: {rendered:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let runs: Vec<String> = engine
        .list_runs("report", None)
        .unwrap()
        .into_iter()
        .map(|r| r.partition)
        .collect();
    assert_eq!(runs, vec!["2026-11-29", "2026-11-30"]);
    // The lineage and the last materializations.
    let assets = engine.assets().unwrap();
    let names: Vec<&str> = assets.iter().map(|a| a.asset.as_str()).collect();
    assert_eq!(names, vec!["clicks.hourly", "sales.daily"]);
    let sales = &assets[1];
    assert_eq!(
        (
            sales.producers[0].graph.as_str(),
            sales.producers[0].node.as_str()
        ),
        ("sales", "load")
    );
    assert_eq!(sales.consumers, vec!["report"]);
    let last = sales.last.as_ref().unwrap();
    assert_eq!((last.partition.as_str(), last.count), ("2026-11-29", 1));
    assert_eq!(last.triggered, vec!["report/2026-11-29"]);
    let clicks = assets[0].last.as_ref().unwrap();
    assert_eq!(
        (clicks.partition.as_str(), clicks.count),
        ("2026-11-30T06", 2)
    );
    assert_eq!(clicks.triggered, vec!["report/2026-11-30 (refreshed)"]);
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_the_producer_and_its_consumer_loses_no_start() {
    let defs = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let day: Partition = "2026-11-29".parse().unwrap();
    {
        let engine = command_engine(data.path(), 4).open().await.unwrap();
        engine.adopt(from_toml(defs.path(), SALES)).await.unwrap();
        let report_dir = defs.path().join("report");
        std::fs::create_dir_all(&report_dir).unwrap();
        engine.adopt(from_toml(&report_dir, REPORT)).await.unwrap();
        // The engine stops after the producer's success and before any
        // delivery.
        engine.hold_assets(true).unwrap();
        engine.start_run("sales", day.clone()).await.unwrap();
        assert_eq!(settled(&engine, "sales", &day).await, RunState::Complete);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let pending: usize = engine.assets().unwrap().iter().map(|a| a.pending).sum();
        assert_eq!(pending, 1, "the materialization is in the store");
        assert!(engine.graph_run("report", &day).unwrap().is_none());
        engine.shutdown(Duration::from_secs(10)).await.unwrap();
    }
    let engine = command_engine(data.path(), 4).open().await.unwrap();
    assert_eq!(wait_run(&engine, "report", &day).await, RunState::Complete);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while engine.assets().unwrap().iter().any(|a| a.pending > 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the delivery stayed pending"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Delivered once: a second pass starts nothing.
    assert_eq!(engine.deliver_assets().await.unwrap(), 0);
    assert_eq!(engine.list_runs("report", None).unwrap().len(), 1);
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asset_has_one_producer() {
    let defs = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 4).open().await.unwrap();
    engine.adopt(from_toml(defs.path(), SALES)).await.unwrap();
    let other = SALES.replace("name = \"sales\"", "name = \"sales2\"");
    let e = engine
        .adopt(from_toml(defs.path(), &other))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("asset \"sales.daily\" is produced by graph \"sales\" (node \"load\")"),
        "{e}"
    );
    // A new definition of the producing graph itself is no conflict.
    let again = SALES.replace(
        "command = [\"true\"]\n\n[[nodes]]",
        "command = [\"true\", \"x\"]\n\n[[nodes]]",
    );
    engine.adopt(from_toml(defs.path(), &again)).await.unwrap();
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}
