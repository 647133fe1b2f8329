//! The trace exporter: a task beside the API that, whenever a graph run
//! settles, reads its records, plans its spans ([`super::plan`]) and sends
//! them to an OTLP/HTTP collector (protobuf, `POST {endpoint}/v1/traces`).
//!
//! Spans are built from the records, with the times they hold, not from
//! live `tracing` spans: a run outlives processes (a restart, a worker on
//! another machine), and its records are where its whole story is. Node
//! instances already sent for a run are remembered (in memory, bounded),
//! so a rerun that settles the run again sends only the new instances and
//! the run's span once more (same id, later end). A collector that does
//! not answer costs a warning, never the engine's work.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};
use opentelemetry_sdk::Resource;
use weir_actors::events::EngineEvent;

use super::plan::{spans_of, SpanPlan};
use crate::Engine;

/// The environment variable naming the collector (OpenTelemetry's own).
pub const ENV_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The environment variables choosing OTLP's transport (OpenTelemetry's
/// own): weir speaks OTLP over HTTP with protobuf only.
pub const ENV_OTLP_PROTOCOLS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
];

/// Refuses a transport weir does not speak, naming the variable that
/// asked for it (`grpc` would otherwise send HTTP to a gRPC port and fail
/// every export with a network error).
pub fn check_protocol(
    endpoint: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), ExportError> {
    for name in ENV_OTLP_PROTOCOLS {
        match env(name).as_deref().map(str::trim) {
            None | Some("") | Some("http/protobuf") => {}
            Some(other) => {
                return Err(ExportError {
                    endpoint: endpoint.to_string(),
                    reason: format!(
                        "{name}={other:?}: weir exports OTLP over HTTP with protobuf only; unset it \
                         (or set http/protobuf) and give the collector's HTTP endpoint (port 4318 by default)"
                    ),
                })
            }
        }
    }
    Ok(())
}

/// Runs whose sent node instances are remembered, at most.
pub const RUNS_REMEMBERED_MAX: usize = 10_000;
/// One export waits this long for the collector at most.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the exporter cannot start.
#[derive(Debug, thiserror::Error)]
#[error("--otlp-endpoint {endpoint:?}: {reason}")]
pub struct ExportError {
    endpoint: String,
    reason: String,
}

/// The traces URL of an OTLP endpoint: `{base}/v1/traces`, as
/// `OTEL_EXPORTER_OTLP_ENDPOINT` means it.
pub fn traces_url(endpoint: &str) -> Result<String, ExportError> {
    let bad = |reason: &str| ExportError {
        endpoint: endpoint.to_string(),
        reason: reason.to_string(),
    };
    let url = reqwest::Url::parse(endpoint).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("write an http:// or https:// URL (OTLP over HTTP)"));
    }
    Ok(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
}

/// Starts exporting the traces of `engine`'s runs to `endpoint`, until
/// `stop`: then the runs that settled before it are still sent (a `weir
/// run --until-idle` ends right after its last run settles), and the task
/// ends.
pub fn spawn(
    engine: Arc<Engine>,
    data_dir: PathBuf,
    endpoint: &str,
    stop: tokio_util::sync::CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, ExportError> {
    check_protocol(endpoint, |n| std::env::var(n).ok())?;
    let url = traces_url(endpoint)?;
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| ExportError {
            endpoint: endpoint.to_string(),
            reason: e.to_string(),
        })?;
    exporter.set_resource(&Resource::builder().with_service_name("weir").build());
    let mut events = engine.subscribe();
    tracing::info!(url = %url, "exporting run traces");
    Ok(tokio::spawn(async move {
        let mut sent = Sent::default();
        let mut draining = false;
        loop {
            use tokio::sync::broadcast::error::{RecvError, TryRecvError};
            let event = if draining {
                match events.try_recv() {
                    Ok(e) => Ok(e),
                    Err(TryRecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
                    Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                }
            } else {
                tokio::select! {
                    e = events.recv() => e,
                    () = stop.cancelled() => {
                        draining = true;
                        continue;
                    }
                }
            };
            let (graph, partition) = match event {
                Ok(EngineEvent::RunSettled {
                    graph, partition, ..
                }) => (graph, partition),
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(
                        missed = n,
                        "trace exporter lagged: some runs' traces are not sent"
                    );
                    continue;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            };
            let key = format!("{graph}/{partition}");
            let before = sent.of(&key);
            let engine2 = engine.clone();
            let dir = data_dir.clone();
            let planned = tokio::task::spawn_blocking(move || {
                plan_run(&engine2, &dir, &graph, &partition, &before)
            })
            .await;
            let plans = match planned {
                Ok(Ok(p)) => p,
                Ok(Err(e)) => {
                    tracing::warn!(run = %key, error = %e, "run trace not built");
                    continue;
                }
                Err(e) => {
                    tracing::warn!(run = %key, error = %e, "run trace not built");
                    continue;
                }
            };
            if plans.is_empty() {
                continue;
            }
            let count = plans.len();
            let instances: Vec<String> = plans
                .iter()
                .filter_map(|p| {
                    p.attrs
                        .iter()
                        .find(|(k, _)| *k == "weir.run_id")
                        .map(|(_, v)| v.clone())
                })
                .collect();
            let batch: Vec<SpanData> = plans.into_iter().map(span_data).collect();
            match exporter.export(batch).await {
                Ok(()) => {
                    tracing::debug!(run = %key, spans = count, "run trace exported");
                    sent.add(key, instances);
                }
                Err(e) => tracing::warn!(run = %key, error = %e, "run trace not exported"),
            }
        }
        let _ = exporter.shutdown();
    }))
}

/// Node instances sent, by run, oldest runs forgotten first.
#[derive(Default)]
struct Sent {
    by_run: BTreeMap<String, BTreeSet<String>>,
    order: VecDeque<String>,
}

impl Sent {
    fn of(&self, run: &str) -> BTreeSet<String> {
        self.by_run.get(run).cloned().unwrap_or_default()
    }

    fn add(&mut self, run: String, instances: Vec<String>) {
        if !self.by_run.contains_key(&run) {
            self.order.push_back(run.clone());
            if self.order.len() > RUNS_REMEMBERED_MAX {
                if let Some(old) = self.order.pop_front() {
                    self.by_run.remove(&old);
                }
            }
        }
        self.by_run.entry(run).or_default().extend(instances);
    }
}

fn plan_run(
    engine: &Engine,
    data_dir: &std::path::Path,
    graph: &str,
    partition: &str,
    sent: &BTreeSet<String>,
) -> Result<Vec<SpanPlan>, String> {
    run_spans(engine.store(), data_dir, graph, partition, sent)
}

/// The spans of the run of `graph` for `partition`, read from `store` and
/// the attempt records under `data_dir` (empty when there is no such
/// settled run): what the exporter sends and `weir trace` prints.
pub fn run_spans(
    store: &weir_actors::store::Store,
    data_dir: &std::path::Path,
    graph: &str,
    partition: &str,
    sent: &BTreeSet<String>,
) -> Result<Vec<SpanPlan>, String> {
    let p: weir_core::partition::Partition = partition.parse().map_err(|e| format!("{e}"))?;
    let Some(run) =
        crate::serve::views::run_detail(store, graph, &p, 0).map_err(|e| e.to_string())?
    else {
        return Ok(Vec::new());
    };
    let paths = crate::logs::LogPaths::new(data_dir);
    let attempts = run
        .nodes
        .iter()
        .map(|n| n.run_id.clone())
        .chain(super::plan::member_ids(&run).into_values())
        .map(|id| {
            let a = crate::logs::attempts(&paths, &id).unwrap_or_default();
            (id, a)
        })
        .collect();
    Ok(spans_of(&run, &attempts, sent))
}

fn at(ms: u64) -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn span_data(p: SpanPlan) -> SpanData {
    let kv = |(k, v): (&'static str, String)| KeyValue::new(k, v);
    let mut events = SpanEvents::default();
    events.events = p
        .events
        .into_iter()
        .map(|(name, ms, attrs)| Event::new(name, at(ms), attrs.into_iter().map(kv).collect(), 0))
        .collect();
    SpanData {
        span_context: SpanContext::new(
            TraceId::from_bytes(p.trace),
            SpanId::from_bytes(p.span),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: p.parent.map_or(SpanId::INVALID, SpanId::from_bytes),
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: p.name.into(),
        start_time: at(p.start_ms),
        end_time: at(p.end_ms),
        attributes: p.attrs.into_iter().map(kv).collect(),
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status: match p.error {
            Some(e) => Status::error(e),
            None => Status::Ok,
        },
        instrumentation_scope: InstrumentationScope::builder("weir")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_otlp_over_http_is_taken() {
        let env = |v: Option<&'static str>| {
            move |n: &str| {
                (n == "OTEL_EXPORTER_OTLP_PROTOCOL")
                    .then(|| v.map(str::to_string))
                    .flatten()
            }
        };
        assert!(check_protocol("http://c:4318", env(None)).is_ok());
        assert!(check_protocol("http://c:4318", env(Some("http/protobuf"))).is_ok());
        let e = check_protocol("http://c:4317", env(Some("grpc")))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\"") && e.contains("4318"),
            "{e}"
        );
        let e = check_protocol("http://c:4318", env(Some("http/json")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("http/json"), "{e}");
    }
}
