//! `weir bench api`: the HTTP API's read routes against a live engine
//! holding 100,000 settled runs (10,000 with `--quick`) of a 3-node graph,
//! beside the same reads made as direct calls in the same run.
//!
//! Figures:
//! - `GET /api/v1/runs?graph=G&limit=100` (newest first): p50/p99 over
//!   2,000 sequential requests (200 with `--quick`) on one keep-alive
//!   connection;
//! - `GET /api/v1/graphs/G/runs/P` over random partitions: p50/p99;
//! - the list's requests per second with 16 concurrent clients;
//! - the same two reads without HTTP (`views::list_runs`,
//!   `views::run_detail` on the engine's store, as the handlers call them):
//!   p50/p99, and `http_overhead` = HTTP p50 / direct p50 of the list.
//!
//! Goals printed beside: p99 <= 20 ms for a page of 100 runs, HTTP
//! overhead <= 2x the direct call at p50.
//!
//! The store is filled by writing records directly, not by running 100,000
//! runs: through the engine, 300,000 node tickets at the drain rate of this
//! machine (13-29 k/s in fsync mode, less for graphs) would take a minute or
//! more in release and far longer in the debug build that
//! `tests/bench_smoke.rs` runs. To write exactly what the scheduler writes,
//! one run is made by the engine first and its records are the template:
//! every other run is that run's records with only the partition (and so
//! the keys and run ids) and the ticket ids changed, written with the same
//! store calls the scheduler and queue use (node records in batches, the
//! run record by compare-and-put with its expiry entry). Before measuring,
//! the bench checks that the views read a copied run exactly as they read
//! the engine's own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use weir_actors::done::{done_key, DoneRecord};
use weir_actors::scheduler::records::{run_id, run_key, GraphRunRecord, RunState};
use weir_actors::store::{Durability, Expiring, Store};
use weir_core::graph::{GraphDef, NodeDef, TaskSpec};
use weir_core::names::Name;
use weir_core::partition::{Partition, Partitioning};
use weir_core::queue::TicketId;

use super::drain::tempfile_dir;
use super::report::{result_line, BenchError};
use crate::serve::views::{self, RunDetail, RunQuery, OUTPUT_INLINE_BYTES_MAX};
use crate::serve::{self, ServeOptions};
use crate::Engine;

/// The graph's name.
const GRAPH: &str = "api";
/// Its nodes, a chain.
const NODES: [&str; 3] = ["extract", "transform", "load"];
/// What each node outputs (a small JSON document, as real tasks do).
const OUTPUT: &[u8] = br#"{"rows":1000,"bytes":65536}"#;
/// The first partition: 2015-01-01T00 UTC; run i is i hours later.
const FIRST_WINDOW_MS: u64 = 1_420_070_400_000;
const HOUR_MS: u64 = 3_600_000;
/// Runs a page of the list holds.
const PAGE: usize = 100;
/// Runs written per durable batch during the fill.
const FILL_BATCH_RUNS: usize = 5_000;
/// Concurrent clients of the throughput figure.
const CLIENTS: usize = 16;
/// The goal for a page's p99.
const LIST_P99_GOAL_MS: f64 = 20.0;
/// The goal for HTTP p50 / direct p50.
const OVERHEAD_GOAL: f64 = 2.0;
/// The token the bench's server asks for.
const TOKEN: &str = "weir-bench-api-token";

/// Serves `engine` (its data in `data`) on a free loopback port under
/// `token`, as `weir serve` would, without TLS.
pub(super) async fn serve_on(
    engine: Arc<Engine>,
    data: &std::path::Path,
    token: &str,
) -> Result<serve::Server, BenchError> {
    serve::start(
        engine,
        ServeOptions {
            listen: "127.0.0.1:0".parse().map_err(failed)?,
            token: token.to_string(),
            data_dir: data.to_path_buf(),
            reloader: None,
            tls: None,
            audit_retention: serve::access::audit::AUDIT_RETENTION_DEFAULT,
            otlp_endpoint: None,
            token_file: None,
        },
    )
    .await
    .map_err(failed)
}

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

fn name(s: &str) -> Result<Name, BenchError> {
    Name::new(s).map_err(failed)
}

fn graph_def() -> Result<GraphDef, BenchError> {
    let mut nodes = Vec::with_capacity(NODES.len());
    for (i, n) in NODES.iter().enumerate() {
        let ups = if i == 0 {
            Vec::new()
        } else {
            vec![name(NODES[i - 1])?]
        };
        nodes.push(NodeDef::new(
            name(n)?,
            ups,
            TaskSpec {
                task: name("emit")?,
                config: serde_json::Value::Null,
            },
        ));
    }
    let mut g = GraphDef::new(name(GRAPH)?, nodes);
    g.partitioning = Partitioning::Hourly;
    Ok(g)
}

/// The partition of run `i`.
fn partition(i: usize) -> Result<Partition, BenchError> {
    Partition::of_time(
        Partitioning::Hourly,
        FIRST_WINDOW_MS + i as u64 * HOUR_MS,
        weir_core::zone::Zone::UTC,
    )
    .ok_or_else(|| BenchError::Failed(format!("no hourly partition for run {i}")))
}

pub(super) async fn open_engine(dir: &std::path::Path) -> Result<Engine, BenchError> {
    Engine::builder(dir)
        .durability(Durability::Fsync)
        .pool("default", 8)
        .task_fn("emit", |_ctx| async { Ok(OUTPUT.to_vec()) })
        .open()
        .await
        .map_err(failed)
}

/// What the engine wrote for its one run: the template of the others.
pub(super) struct Template {
    run: GraphRunRecord,
    /// Per node, in [`NODES`] order.
    nodes: Vec<DoneRecord>,
}

/// Runs partition 0 through the engine and reads back its records.
pub(super) async fn reference_run(engine: &Engine) -> Result<Template, BenchError> {
    engine.adopt(graph_def()?).await.map_err(failed)?;
    let p0 = partition(0)?;
    engine.start_run(GRAPH, p0.clone()).await.map_err(failed)?;
    let states = engine
        .wait_settled(GRAPH, std::slice::from_ref(&p0), Duration::from_secs(60))
        .await
        .map_err(failed)?;
    if states != [RunState::Complete] {
        return Err(BenchError::Failed(format!(
            "the reference run settled {states:?}, not complete"
        )));
    }
    let store = engine.store();
    let run = store
        .get::<GraphRunRecord>(&run_key(GRAPH, &p0))
        .map_err(failed)?
        .ok_or_else(|| BenchError::Failed("the reference run has no record".into()))?;
    let mut nodes = Vec::with_capacity(NODES.len());
    for n in NODES {
        let key = done_key(&run_id(GRAPH, &p0, n, 0));
        nodes.push(
            store
                .get::<DoneRecord>(&key)
                .map_err(failed)?
                .ok_or_else(|| BenchError::Failed(format!("the reference run has no {key}")))?,
        );
    }
    Ok(Template { run, nodes })
}

/// Writes runs `1..runs` as copies of the template (see the module doc).
pub(super) fn fill(store: &Store, t: &Template, runs: usize) -> Result<(), BenchError> {
    let run_bytes = store.encode("run record", &t.run).map_err(failed)?;
    let settled = t
        .run
        .settled_at_ms
        .ok_or_else(|| BenchError::Failed("the reference run has no settle instant".into()))?;
    // Ticket ids past the reference run's, three per run as the queue would
    // number them (the queue of a later engine may hand out the same ids to
    // new tickets; nothing reads done records by id).
    let first_id: TicketId = t.nodes.iter().map(|d| d.id).max().unwrap_or(0) + 1;
    let mut i = 1;
    while i < runs {
        let end = (i + FILL_BATCH_RUNS).min(runs);
        let mut puts = Vec::with_capacity((end - i) * NODES.len());
        for r in i..end {
            let p = partition(r)?;
            for (k, (n, d)) in NODES.iter().zip(&t.nodes).enumerate() {
                let mut d = d.clone();
                d.key = run_id(GRAPH, &p, n, 0);
                d.id = first_id + ((r - 1) * NODES.len() + k) as TicketId;
                let bytes = store.encode("done record", &d).map_err(failed)?;
                puts.push((done_key(&d.key), bytes));
            }
        }
        // The node records first, as the queue makes them durable before
        // the scheduler settles the run.
        store.put_batch(&puts, &[]).map_err(failed)?;
        for r in i..end {
            let key = run_key(GRAPH, &partition(r)?);
            let expiring = Expiring {
                at_ms: settled.saturating_add(t.run.retention_ms),
                key: key.clone(),
            };
            let created = store
                .compare_and_put_unsynced(&key, None, Some(&run_bytes), &[expiring], &[])
                .map_err(failed)?;
            if !created {
                return Err(BenchError::Failed(format!("{key} exists already")));
            }
        }
        store.sync().map_err(failed)?;
        i = end;
    }
    Ok(())
}

/// Checks that the views read run `i` (copied) as they read run 0 (the
/// engine's), and that the list's first page is the newest runs.
fn check_views(store: &Store, runs: usize) -> Result<(), BenchError> {
    let detail = |i: usize| -> Result<RunDetail, BenchError> {
        let p = partition(i)?;
        views::run_detail(store, GRAPH, &p, OUTPUT_INLINE_BYTES_MAX)
            .map_err(failed)?
            .ok_or_else(|| BenchError::Failed(format!("run {p} is missing")))
    };
    let engines = detail(0)?;
    for i in [1, runs / 2, runs - 1] {
        let copy = detail(i)?;
        let p = partition(i)?;
        let mut expected = engines.clone();
        expected.partition = p.to_string();
        // The window is the copy's own.
        expected.window = views::WindowView::of(&expected.partition, weir_core::zone::Zone::UTC);
        for n in &mut expected.nodes {
            n.run_id = run_id(GRAPH, &p, &n.node, n.rerun);
        }
        if copy != expected {
            return Err(BenchError::Failed(format!(
                "the views read the copied run {p} differently from the engine's run:\n{copy:?}\n{expected:?}"
            )));
        }
    }
    let page = list_direct(store)?;
    let newest = partition(runs - 1)?.to_string();
    if page.runs.len() != PAGE
        || page.runs[0].partition != newest
        || page.runs.iter().any(|r| r.state != RunState::Complete)
        || page.next_cursor.is_none()
    {
        return Err(BenchError::Failed(format!(
            "the first page is not the {PAGE} newest complete runs from {newest}: {} runs, first {:?}",
            page.runs.len(),
            page.runs.first().map(|r| &r.partition)
        )));
    }
    Ok(())
}

fn list_query() -> RunQuery {
    RunQuery {
        graph: Some(GRAPH.to_string()),
        limit: Some(PAGE),
        ..RunQuery::default()
    }
}

fn list_direct(store: &Store) -> Result<views::RunPage, BenchError> {
    views::list_runs(store, &list_query()).map_err(failed)
}

/// Sorted latencies and their percentiles, in ms.
struct Latencies(Vec<Duration>);

impl Latencies {
    fn new(mut v: Vec<Duration>) -> Self {
        v.sort_unstable();
        Latencies(v)
    }

    fn ms(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let i = ((self.0.len() as f64 - 1.0) * q).round() as usize;
        self.0[i].as_secs_f64() * 1e3
    }

    fn p50(&self) -> f64 {
        self.ms(0.50)
    }

    fn p99(&self) -> f64 {
        self.ms(0.99)
    }
}

/// Times `n` calls of `f` after `n / 10` unmeasured ones.
fn time_direct(
    n: usize,
    mut f: impl FnMut(usize) -> Result<(), BenchError>,
) -> Result<Latencies, BenchError> {
    for i in 0..n / 10 {
        f(i)?;
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i)?;
        out.push(t.elapsed());
    }
    Ok(Latencies::new(out))
}

/// One GET, its whole body read; returns the body's length in bytes. An
/// answer other than 2xx is an error.
async fn get(client: &reqwest::Client, url: &str) -> Result<usize, BenchError> {
    let resp = client
        .get(url)
        .bearer_auth(TOKEN)
        .send()
        .await
        .map_err(|e| BenchError::Failed(format!("GET {url}: {e}")))?;
    let status = resp.status();
    let body = resp
        .bytes()
        .await
        .map_err(|e| BenchError::Failed(format!("GET {url}: body: {e}")))?;
    if !status.is_success() {
        return Err(BenchError::Failed(format!(
            "GET {url}: {status}: {}",
            String::from_utf8_lossy(&body)
        )));
    }
    Ok(body.len())
}

/// Times `n` sequential GETs of `url(i)` after `n / 10` unmeasured ones.
async fn time_http(
    client: &reqwest::Client,
    n: usize,
    url: impl Fn(usize) -> String,
) -> Result<(Latencies, usize), BenchError> {
    for i in 0..n / 10 {
        get(client, &url(i)).await?;
    }
    let mut out = Vec::with_capacity(n);
    let mut body_bytes = 0;
    for i in 0..n {
        let u = url(i);
        let t = Instant::now();
        let len = get(client, &u).await?;
        out.push(t.elapsed());
        body_bytes = len;
    }
    Ok((Latencies::new(out), body_bytes))
}

/// Requests per second of `url` with [`CLIENTS`] concurrent clients for
/// `window` (each client stops at the deadline or after `cap` requests).
async fn throughput(
    client: &reqwest::Client,
    url: &str,
    window: Duration,
    cap: u64,
) -> Result<f64, BenchError> {
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + window;
    let mut tasks = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        let client = client.clone();
        let url = url.to_string();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = 0u64;
            while Instant::now() < deadline && mine < cap {
                get(&client, &url).await?;
                mine += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, BenchError>(())
        }));
    }
    for t in tasks {
        t.await.map_err(failed)??;
    }
    let elapsed = started.elapsed();
    Ok(done.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64())
}

/// A row of the table: the figure, its value, its goal and whether met.
fn row(figure: &str, value: String, goal: &str, met: Option<bool>) {
    let verdict = match met {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "",
    };
    println!("  {figure:<44} {value:>12}   {goal:<24} {verdict}");
}

/// Runs `weir bench api`.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let runs = if quick { 10_000 } else { 100_000 };
    let requests = if quick { 200 } else { 2_000 };
    let window = if quick {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(5)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    let dir = tempfile_dir()?;
    let result = rt.block_on(measure(&dir.join("api"), runs, requests, window));
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn measure(
    data: &std::path::Path,
    runs: usize,
    requests: usize,
    window: Duration,
) -> Result<(), BenchError> {
    // The fill: one run by the engine, the rest copied from it.
    let filled = Instant::now();
    let engine = open_engine(data).await?;
    let template = reference_run(&engine).await?;
    let store = engine.store().clone();
    tokio::task::spawn_blocking(move || fill(&store, &template, runs))
        .await
        .map_err(failed)??;
    engine
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)?;
    println!(
        "filled {runs} settled runs of a 3-node graph in {:.1} s (1 run by the engine, the rest copied from its records)",
        filled.elapsed().as_secs_f64()
    );

    // The live engine, serving as `weir serve` does.
    let opened = Instant::now();
    let engine = Arc::new(open_engine(data).await?);
    let open_ms = opened.elapsed().as_secs_f64() * 1e3;
    let server = serve_on(engine.clone(), data, TOKEN).await?;
    println!(
        "engine opened on them in {open_ms:.0} ms; API at {}",
        server.url()
    );
    let outcome = measure_live(&engine, &server.url(), runs, requests, window).await;
    server.stop().await;
    take_back(engine)
        .await?
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)?;
    outcome
}

/// The engine back from the server's connection tasks, which let go of it
/// once they see their client's connections closed (within
/// [`serve::STOP_GRACE`]).
pub(super) async fn take_back(mut engine: Arc<Engine>) -> Result<Engine, BenchError> {
    let deadline = Instant::now() + serve::STOP_GRACE;
    loop {
        match Arc::try_unwrap(engine) {
            Ok(e) => return Ok(e),
            Err(back) if Instant::now() < deadline => {
                engine = back;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(_) => {
                return Err(BenchError::Failed(format!(
                    "the server still held the engine {} s after its stop",
                    serve::STOP_GRACE.as_secs()
                )))
            }
        }
    }
}

async fn measure_live(
    engine: &Arc<Engine>,
    base: &str,
    runs: usize,
    requests: usize,
    window: Duration,
) -> Result<(), BenchError> {
    let store = engine.store().clone();
    {
        let store = store.clone();
        tokio::task::spawn_blocking(move || check_views(&store, runs))
            .await
            .map_err(failed)??;
    }
    let partitions: Vec<String> = {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(12);
        (0..requests + requests / 10)
            .map(|_| partition(rng.gen_range(0..runs)).map(|p| p.to_string()))
            .collect::<Result<_, _>>()?
    };

    // Direct calls, as the handlers make them (on a blocking thread); and
    // the list with its JSON encoding, the handler's work without HTTP.
    let (direct_list, direct_run, direct_list_json) = {
        let store = store.clone();
        let partitions = partitions.clone();
        tokio::task::spawn_blocking(move || {
            let list = time_direct(requests, |_| list_direct(&store).map(|_| ()))?;
            let parsed: Vec<Partition> = partitions
                .iter()
                .map(|p| p.parse().map_err(failed))
                .collect::<Result<_, _>>()?;
            let run = time_direct(requests, |i| {
                views::run_detail(&store, GRAPH, &parsed[i], OUTPUT_INLINE_BYTES_MAX)
                    .map_err(failed)?
                    .ok_or_else(|| BenchError::Failed(format!("run {} is missing", parsed[i])))
                    .map(|_| ())
            })?;
            let json = time_direct(requests, |_| {
                let page = list_direct(&store)?;
                serde_json::to_vec(&page).map(|_| ()).map_err(failed)
            })?;
            Ok::<_, BenchError>((list, run, json))
        })
        .await
        .map_err(failed)??
    };

    // The same reads over HTTP, one keep-alive connection.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .build()
        .map_err(failed)?;
    let list_url = format!("{base}/api/v1/runs?graph={GRAPH}&limit={PAGE}");
    let (http_list, list_bytes) = time_http(&client, requests, |_| list_url.clone()).await?;
    let (http_run, run_bytes) = time_http(&client, requests, |i| {
        format!("{base}/api/v1/graphs/{GRAPH}/runs/{}", partitions[i])
    })
    .await?;
    // The floor of one request over HTTP: a route that reads nothing.
    let healthz_url = format!("{base}/healthz");
    let (http_floor, _) = time_http(&client, requests, |_| healthz_url.clone()).await?;
    let cap = 1_000_000;
    let list_per_s = throughput(&client, &list_url, window, cap).await?;

    let overhead = http_list.p50() / direct_list.p50();
    println!(
        "api: {runs} settled runs, {requests} sequential requests per figure after {} unmeasured; a page of {PAGE} is {list_bytes} bytes of JSON, a run {run_bytes} bytes",
        requests / 10
    );
    row("figure", "value".into(), "goal", None);
    row(
        "GET /runs?graph&limit=100 p50",
        format!("{:.3} ms", http_list.p50()),
        "",
        None,
    );
    row(
        "GET /runs?graph&limit=100 p99",
        format!("{:.3} ms", http_list.p99()),
        &format!("<= {LIST_P99_GOAL_MS} ms"),
        Some(http_list.p99() <= LIST_P99_GOAL_MS),
    );
    row(
        "GET /graphs/G/runs/P p50",
        format!("{:.3} ms", http_run.p50()),
        "",
        None,
    );
    row(
        "GET /graphs/G/runs/P p99",
        format!("{:.3} ms", http_run.p99()),
        &format!("<= {LIST_P99_GOAL_MS} ms"),
        Some(http_run.p99() <= LIST_P99_GOAL_MS),
    );
    row(
        &format!("GET /runs, {CLIENTS} concurrent clients"),
        format!("{list_per_s:.0} /s"),
        "",
        None,
    );
    row(
        "views::list_runs direct p50 / p99",
        format!("{:.3} / {:.3} ms", direct_list.p50(), direct_list.p99()),
        "",
        None,
    );
    row(
        "views::run_detail direct p50 / p99",
        format!("{:.3} / {:.3} ms", direct_run.p50(), direct_run.p99()),
        "",
        None,
    );
    row(
        "list + JSON encoding, direct p50 / p99",
        format!(
            "{:.3} / {:.3} ms",
            direct_list_json.p50(),
            direct_list_json.p99()
        ),
        "",
        None,
    );
    row(
        "GET /healthz p50 / p99 (HTTP floor)",
        format!("{:.3} / {:.3} ms", http_floor.p50(), http_floor.p99()),
        "",
        None,
    );
    row(
        "HTTP overhead, list p50 (HTTP / direct)",
        format!("{overhead:.2}x"),
        &format!("<= {OVERHEAD_GOAL}x"),
        Some(overhead <= OVERHEAD_GOAL),
    );
    row(
        "HTTP overhead, run p50 (HTTP / direct)",
        format!("{:.2}x", http_run.p50() / direct_run.p50()),
        "",
        None,
    );
    println!(
        "{}",
        result_line(
            "api",
            &[
                ("runs", runs.to_string()),
                ("list_p50_ms", format!("{:.3}", http_list.p50())),
                ("list_p99_ms", format!("{:.3}", http_list.p99())),
                ("run_p50_ms", format!("{:.3}", http_run.p50())),
                ("run_p99_ms", format!("{:.3}", http_run.p99())),
                ("list_per_s", format!("{list_per_s:.0}")),
                ("direct_list_p50_ms", format!("{:.3}", direct_list.p50())),
                ("direct_run_p50_ms", format!("{:.3}", direct_run.p50())),
                ("http_overhead", format!("{overhead:.2}")),
            ]
        )
    );
    Ok(())
}
