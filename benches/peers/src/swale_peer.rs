//! swale 0.3 through its library, wired as its `swale run` command wires
//! it (cli/store.rs and cli/run.rs of the crate): a directory store
//! (object_store's `LocalFileSystem` under taquba, whose durable
//! transitions await SlateDB's WAL flush; no fsync), pools of 8 steps, the
//! scheduler at `swale run`'s options. Each node runs the `subprocess`
//! operator on the same no-op program as weir's command nodes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use swale::records::{self, graph_run_key, GraphRunRecord, GraphRunState};
use swale::{
    DefinitionStore, OperatorSet, Partition, Pools, RecordHook, Scheduler, SchedulerOptions,
    REQUESTS_QUEUE,
};
use taquba::object_store::local::LocalFileSystem;
use taquba::object_store::ObjectStore;
use taquba::{InboxOptions, OpenOptions, Queue};
use tokio_util::sync::CancellationToken;

use crate::{fresh, result, Error};

/// A chain of `nodes` subprocess nodes running `program`.
pub async fn chain(dir: &std::path::Path, nodes: u64, program: &str) -> Result<(), Error> {
    fresh(dir)?;
    let mut text = String::from("[graph]\nname = \"chain\"\n");
    for i in 0..nodes {
        text.push_str(&format!("\n[[node]]\nname = \"n{i:04}\"\n"));
        if i > 0 {
            text.push_str(&format!("after = [\"n{:04}\"]\n", i - 1));
        }
        text.push_str(&format!(
            "operator = \"subprocess\"\n[node.params]\nargv = [\"{program}\"]\n"
        ));
    }
    let objects: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(dir)?);
    let operators = Arc::new(OperatorSet::builtin());
    let definitions = Arc::new(DefinitionStore::new(objects.clone(), "", operators.clone()));
    let (hash, graph) = definitions.put(&text).await?;
    let options = OpenOptions::default().inbox(InboxOptions::new([REQUESTS_QUEUE]));
    let queue = Arc::new(Queue::open_with_options(objects.clone(), "swale", options).await?);
    let hook = RecordHook::new(queue.clock());
    let pools = Pools::builder(queue.clone(), objects, operators, hook)
        .poll_interval(Duration::from_millis(100))
        .pool("default", 8)
        .build();
    let pools = Arc::new(pools);
    let scheduler = Arc::new(Scheduler::new(queue.clone(), definitions, pools.clone()));
    let stop = CancellationToken::new();
    let _pool_handles = pools.spawn(&stop);
    let _scheduler_handle = scheduler.clone().spawn(
        SchedulerOptions {
            concurrency: 2,
            poll_interval: Duration::from_millis(100),
            reconcile_interval: Duration::from_secs(10),
        },
        stop.clone().cancelled_owned(),
    );
    let partition = Partition::none();
    let began = Instant::now();
    scheduler.start_run(&hash, &partition).await?;
    let key = graph_run_key(graph.name(), &partition);
    let state = loop {
        tokio::time::sleep(Duration::from_millis(10)).await;
        if let Some(run) = records::read::<GraphRunRecord>(queue.view(), &key).await? {
            if run.state != GraphRunState::Active {
                break run.state;
            }
        }
        if began.elapsed() > Duration::from_secs(600) {
            return Err("swale chain did not settle in 600 s".into());
        }
    };
    let total = began.elapsed();
    let edge_mean_us = total.as_secs_f64() * 1e6 / nodes as f64;
    println!(
        "swale chain of {nodes} subprocess nodes: {state}, {:.1} ms (mean {edge_mean_us:.0} us per node and edge)",
        total.as_secs_f64() * 1e3
    );
    stop.cancel();
    result(
        "chain",
        &[
            ("nodes", nodes.to_string()),
            ("settle_ms", format!("{:.1}", total.as_secs_f64() * 1e3)),
            ("edge_mean_us", format!("{edge_mean_us:.0}")),
            ("state", state.to_string()),
        ],
    );
    Ok(())
}
