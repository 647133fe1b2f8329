//! `weir bench mapped`: a mapped node beside the plain fan-out it stands
//! for, in one run, through the whole engine in fsync mode.
//!
//! Both graphs are 1 → 1,000 → 1 no-op tasks (200 with `--quick`) in a pool
//! of 64: `mapped` is `root → each → sink` where `each` maps over the
//! 1,000 items of root's output (`max_active_members` at the item count,
//! so the pool bounds both alike); `fanout` is `root → m0000…m0999 → sink`.
//! Both roots leave the same array as their output, so every middle task
//! gets the same input. The figure is the time from the start request to
//! the run's settle event, for each; `ratio` = fanout_ms / mapped_ms is the
//! mapped node's throughput over the fan-out's (goal ≥ 0.8). Each graph runs
//! `ROUNDS` times (once with `--quick`) in alternating order, each in a
//! fresh engine and data directory, and the medians are compared: on this
//! shared machine the first engine of a process pays warm-up costs, and
//! one run's time moves by a third between runs. swale 0.3's
//! mapped scenario took 27.6 s on this machine (its published figure, not
//! measured here); the line says how weir's compares.

use std::time::{Duration, Instant};

use weir_actors::store::Durability;
use weir_core::graph::GraphDef;
use weir_core::mapped::{MapSource, MapSpec};
use weir_core::partition::Partition;

use super::drain::tempfile_dir;
use super::graphs::{collect, failed, name, noop_node};
use super::report::{result_line, BenchError};
use crate::Engine;

/// The pool's slots, as `weir bench fanout` has them.
const CAPACITY: u32 = 64;
/// Runs of each graph, alternating, whose medians are compared.
const ROUNDS: usize = 5;
/// swale 0.3's mapped scenario on this machine, in ms (its figure).
const SWALE_MAPPED_MS: f64 = 27_600.0;

/// An engine whose `noop` task leaves `items` as a root's output.
async fn engine(dir: &std::path::Path, items: usize) -> Result<Engine, BenchError> {
    let array = serde_json::to_vec(&(0..items).collect::<Vec<usize>>()).map_err(failed)?;
    Engine::builder(dir)
        .durability(Durability::Fsync)
        .pool("default", CAPACITY)
        .task_fn("noop", move |ctx| {
            let out = if ctx.key.contains("/root/") {
                array.clone()
            } else {
                Vec::new()
            };
            async move { Ok(out) }
        })
        .open()
        .await
        .map_err(failed)
}

/// Start request to settle of the run of `def`, in an engine in `dir`.
async fn settle(
    dir: &std::path::Path,
    def: GraphDef,
    items: usize,
) -> Result<Duration, BenchError> {
    let graph = def.name.to_string();
    let engine = engine(dir, items).await?;
    engine.adopt(def).await.map_err(failed)?;
    let collector = collect(engine.subscribe(), graph.clone());
    let started = Instant::now();
    engine
        .start_run(&graph, Partition::NONE)
        .await
        .map_err(failed)?;
    let stamps = tokio::time::timeout(Duration::from_secs(600), collector)
        .await
        .map_err(|_| BenchError::Failed(format!("{graph} did not settle in 600 s")))?
        .map_err(failed)?;
    let (settled_at, state) = stamps
        .settled
        .ok_or_else(|| BenchError::Failed("the event stream closed before the settle".into()))?;
    if state != "complete" {
        return Err(BenchError::Failed(format!("{graph} settled {state}")));
    }
    engine
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)?;
    Ok(settled_at.duration_since(started))
}

fn mapped_def(items: usize) -> Result<GraphDef, BenchError> {
    let mut each = noop_node("each", &["root".to_string()])?;
    let mut spec = MapSpec::new(MapSource::Upstream(name("root")?));
    spec.max_active_members = items.max(1) as u32;
    each.map = Some(spec);
    Ok(GraphDef::new(
        name("mapped")?,
        vec![
            noop_node("root", &[])?,
            each,
            noop_node("sink", &["each".to_string()])?,
        ],
    ))
}

fn fanout_def(width: usize) -> Result<GraphDef, BenchError> {
    let mids: Vec<String> = (0..width).map(|i| format!("m{i:04}")).collect();
    let mut nodes = Vec::with_capacity(width + 2);
    nodes.push(noop_node("root", &[])?);
    for m in &mids {
        nodes.push(noop_node(m, &["root".to_string()])?);
    }
    nodes.push(noop_node("sink", &mids)?);
    Ok(GraphDef::new(name("fanout")?, nodes))
}

/// Runs `weir bench mapped`.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let items = if quick { 200 } else { 1_000 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    rt.block_on(async {
        let dir = tempfile_dir()?;
        let rounds = if quick { 1 } else { ROUNDS };
        let (mut ms, mut fs) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            // Alternate which goes first.
            let m_dir = dir.join(format!("mapped-{r}"));
            let f_dir = dir.join(format!("fanout-{r}"));
            if r % 2 == 0 {
                ms.push(settle(&m_dir, mapped_def(items)?, items).await?);
                fs.push(settle(&f_dir, fanout_def(items)?, items).await?);
            } else {
                fs.push(settle(&f_dir, fanout_def(items)?, items).await?);
                ms.push(settle(&m_dir, mapped_def(items)?, items).await?);
            }
            let _ = std::fs::remove_dir_all(&m_dir);
            let _ = std::fs::remove_dir_all(&f_dir);
        }
        ms.sort_unstable();
        fs.sort_unstable();
        let (mapped, fanout) = (ms[ms.len() / 2], fs[fs.len() / 2]);
        let (mapped_ms, fanout_ms) = (mapped.as_secs_f64() * 1e3, fanout.as_secs_f64() * 1e3);
        let spread = |v: &[Duration]| {
            format!(
                "{:.0}..{:.0} ms",
                v[0].as_secs_f64() * 1e3,
                v[v.len() - 1].as_secs_f64() * 1e3
            )
        };
        let ratio = fanout_ms / mapped_ms;
        println!(
            "mapped: root -> each (mapped over {items} items) -> sink, no-op members, pool {CAPACITY}, fsync: settled in {mapped_ms:.1} ms = {:.0} members/s (median of {rounds}; {})",
            items as f64 / mapped.as_secs_f64(),
            spread(&ms)
        );
        println!(
            "fanout: root -> {items} nodes -> sink, the same tasks and pool: settled in {fanout_ms:.1} ms (median of {rounds}; {}); mapped/fanout throughput = {ratio:.2} (goal >= 0.80)",
            spread(&fs)
        );
        if !quick {
            println!(
                "swale 0.3's mapped scenario took {:.1} s on this machine (its figure, not measured here): weir's took {:.2} s, {:.0}x less",
                SWALE_MAPPED_MS / 1e3,
                mapped.as_secs_f64(),
                SWALE_MAPPED_MS / mapped_ms
            );
        }
        println!(
            "{}",
            result_line(
                "mapped",
                &[
                    ("items", items.to_string()),
                    ("mapped_ms", format!("{mapped_ms:.1}")),
                    ("fanout_ms", format!("{fanout_ms:.1}")),
                    ("ratio", format!("{ratio:.3}")),
                    ("swale_ms", format!("{SWALE_MAPPED_MS:.0}")),
                ]
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    })
}
