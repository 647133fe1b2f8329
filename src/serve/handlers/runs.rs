//! `GET /api/v1/runs`, one run with its nodes, one node, a node's logs.

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;

use super::extract::{blocking, run_partition, Path, Query};
use crate::serve::error::{ApiError, ApiResult};
use crate::serve::state::AppState;
use crate::serve::views::{self, NodeDetail, RunDetail, RunPage, RunQuery};

/// The run list's query string.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    graph: Option<String>,
    state: Option<String>,
    from: Option<String>,
    to: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
    sla_missed: Option<bool>,
}

/// Runs, newest partition first, filtered and paged.
pub async fn list(
    State(s): State<AppState>,
    Query(p): Query<ListParams>,
) -> ApiResult<Json<RunPage>> {
    let q = RunQuery {
        state: p
            .state
            .as_deref()
            .map(|s| s.parse().map_err(|e| ApiError::bad(format!("state {e}"))))
            .transpose()?,
        graph: p.graph,
        from: p.from,
        to: p.to,
        limit: p.limit,
        cursor: p.cursor,
        sla_missed: p.sla_missed.unwrap_or(false),
    };
    let engine = s.engine.clone();
    blocking(move || {
        views::list_runs(engine.store(), &q)
            .map(Json)
            .map_err(|e| match e {
                views::QueryError::Bad(m) => ApiError::bad(m),
                views::QueryError::Store(e) => e.into(),
            })
    })
    .await
}

fn detail(s: &AppState, graph: &str, part: &str, inline_max: usize) -> Result<RunDetail, ApiError> {
    let p = run_partition(s, graph, part)?;
    views::run_detail(s.engine.store(), graph, &p, inline_max)?
        .ok_or_else(|| ApiError::not_found(format!("graph {graph:?} has no run for partition {p}")))
}

/// A ready node's ticket, as the queue holds it now.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct NodeLive {
    /// Running now (else queued: waiting for a slot, its due instant, or a
    /// breaker).
    pub running: bool,
    /// Attempts that started their task.
    pub attempts: u32,
    /// Attempts that failed.
    pub failures: u32,
    /// Hand-outs a breaker deferred.
    pub deferrals: u32,
    /// When it is due (queued) or its lease ends (running).
    pub at_ms: u64,
    /// A sensor's checks not met so far, while it waits.
    #[serde(default)]
    pub pokes: u32,
    /// A waiting sensor's last check: when it ended and what it saw.
    #[serde(default)]
    pub last_check: Option<weir_actors::queue::LastCheck>,
    /// Running: where (`local`, or a worker's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// Running: when its attempt started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
}

/// A run with its nodes, and the live tickets of its ready nodes.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RunWithLive {
    /// The run.
    #[serde(flatten)]
    pub run: RunDetail,
    /// The queue's ticket of each ready node, by node: running or queued.
    #[serde(default)]
    pub live: std::collections::BTreeMap<String, NodeLive>,
}

/// A run with its nodes: state, rerun, attempts, timings, error, output,
/// and for ready nodes whether they run or wait in the queue.
pub async fn one(
    State(s): State<AppState>,
    Path((graph, part)): Path<(String, String)>,
) -> ApiResult<Json<RunWithLive>> {
    let st = s.clone();
    let (partition, mut run) = blocking(move || {
        let p = run_partition(&st, &graph, &part)?;
        let run = detail(&st, &graph, &part, views::OUTPUT_INLINE_BYTES_MAX)?;
        Ok((p, run))
    })
    .await?;
    let mut live = std::collections::BTreeMap::new();
    for n in run.nodes.iter_mut().filter(|n| n.state == "ready") {
        // The store says "ready" for queued and running alike; the queue
        // knows which. A node that settled meanwhile has no live ticket.
        if let Ok(Some(weir_actors::queue::TicketView::Live {
            running,
            attempts,
            deferrals,
            failures,
            at_ms,
            pokes,
            last_check,
            worker,
            started_ms,
            ..
        })) = s.engine.ticket(&n.run_id).await
        {
            // A waiting sensor's checks are counted in its live ticket
            // until it ends (its record counts them after).
            n.pokes = n.pokes.max(pokes);
            live.insert(
                n.node.clone(),
                NodeLive {
                    running,
                    attempts,
                    failures,
                    deferrals,
                    at_ms,
                    pokes,
                    last_check,
                    worker,
                    started_ms,
                },
            );
        }
    }
    members_live(&s, &partition, &mut run).await;
    Ok(Json(RunWithLive { run, live }))
}

/// The most members of one run whose tickets a run's view asks the queue
/// for: members not ended, in item order. Those running are among the
/// first (members start in item order, `max_active_members` at a time);
/// past the bound a member shows as pending.
const MEMBER_LIVE_LOOKUPS_MAX: usize = 256;

/// Marks the members that run now as running, with their attempts: the
/// store has no record of a member before it ends, so it says "pending"
/// for queued and running alike; the queue knows which.
async fn members_live(
    s: &AppState,
    partition: &weir_core::partition::Partition,
    run: &mut RunDetail,
) {
    let mut lookups = 0;
    for n in run.nodes.iter_mut() {
        let Some(m) = n.members.as_mut() else {
            continue;
        };
        for x in m.list.iter_mut().filter(|x| x.state == "pending") {
            if lookups == MEMBER_LIVE_LOOKUPS_MAX {
                return;
            }
            lookups += 1;
            let key = weir_actors::scheduler::records::member_id(
                &run.graph,
                partition,
                &n.node,
                x.rerun,
                x.index as u32,
            );
            if let Ok(Some(weir_actors::queue::TicketView::Live {
                running, attempts, ..
            })) = s.engine.ticket(&key).await
            {
                x.attempts = attempts;
                if running {
                    x.state = "running".to_string();
                }
            }
        }
    }
}

/// A node of a run with its whole output and its attempts.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct NodeWithAttempts {
    /// The node and its record.
    #[serde(flatten)]
    pub node: NodeDetail,
    /// Its attempts (command tasks), oldest first.
    pub attempt_log: Vec<crate::logs::AttemptRecord>,
}

/// One node with its whole output and its attempts.
pub async fn node(
    State(s): State<AppState>,
    Path((graph, part, node)): Path<(String, String, String)>,
) -> ApiResult<Json<NodeWithAttempts>> {
    let st = s.clone();
    blocking(move || {
        let run = detail(&st, &graph, &part, usize::MAX)?;
        let n = run
            .nodes
            .into_iter()
            .find(|n| n.node == node)
            .ok_or_else(|| ApiError::not_found(format!("graph {graph:?} has no node {node:?}")))?;
        let paths = crate::logs::LogPaths::new(&st.data_dir);
        let mut attempt_log = crate::logs::attempts(&paths, &n.run_id).unwrap_or_default();
        // A log kept in its record is read through the logs route, as
        // any log: not repeated here.
        for a in &mut attempt_log {
            a.log_inline = None;
        }
        Ok(Json(NodeWithAttempts {
            node: n,
            attempt_log,
        }))
    })
    .await
}

/// A node's log query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogParams {
    /// The attempt (default: the newest).
    attempt: Option<u32>,
    /// The first line to return (0-based).
    from_line: Option<u64>,
    /// At most this many lines.
    limit: Option<usize>,
    /// Stream the lines as Server-Sent Events while the attempt runs.
    follow: Option<bool>,
    /// The rerun (default: the node's current instance).
    rerun: Option<u32>,
    /// A mapped node's member (its index): that member's logs.
    member: Option<u32>,
}

/// A node's log lines, or (with `follow=true`) a stream of them.
pub async fn logs(
    State(s): State<AppState>,
    Path((graph, part, node)): Path<(String, String, String)>,
    Query(q): Query<LogParams>,
) -> ApiResult<axum::response::Response> {
    let st = s.clone();
    let (g, pt, nd) = (graph.clone(), part.clone(), node.clone());
    let run_id = blocking(move || {
        let run = detail(&st, &g, &pt, 0)?;
        let n = run
            .nodes
            .into_iter()
            .find(|n| n.node == nd)
            .ok_or_else(|| ApiError::not_found(format!("graph {g:?} has no node {nd:?}")))?;
        let p = run_partition(&st, &g, &pt)?;
        if let Some(m) = q.member {
            return match q.rerun {
                Some(r) => Ok(weir_actors::scheduler::records::member_id(&g, &p, &nd, r, m)),
                None => n.member_run_id(&g, &p, m).ok_or_else(|| {
                    ApiError::not_found(format!(
                        "node {nd:?} of graph {g:?} has no member {m} (it is not mapped, or its items are fewer)"
                    ))
                }),
            };
        }
        Ok(match q.rerun {
            Some(r) => weir_actors::scheduler::records::run_id(&g, &p, &nd, r),
            None => n.run_id,
        })
    })
    .await?;
    super::stream::logs(
        s,
        run_id,
        q.attempt,
        q.from_line.unwrap_or(0),
        q.limit,
        q.follow.unwrap_or(false),
    )
    .await
    .map(IntoResponse::into_response)
}
