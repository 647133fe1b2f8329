//! `weir serve … --raft-id N --raft-peers 1=…,2=…,3=…`: one member of a
//! replicated engine (DESIGN §7a). Every member opens its store, joins the
//! Raft group and serves the API at `--listen` (a follower passes requests
//! to the leader). The member that leads opens the engine on its store —
//! what a restart does — and runs it while it hears a majority; when it
//! stops leading it stops the engine and follows again.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};
use weir_actors::store::{Durability, Store, StoreSettings};

use super::failure::Failure;
use super::serve::ServeArgs;
use super::{datadir, host};
use crate::definition;
use crate::replica::{Front, Replica, ReplicaSettings};
use crate::serve::discovery::{self, EngineInfo};

/// How often the leader checks that it still leads.
const LEAD_CHECK_MS: u64 = 25;
/// How long a member that stops leading gives its running attempts: the
/// new leader requeues them anyway.
const STEP_DOWN_GRACE: Duration = Duration::from_secs(1);
/// How often the members' URLs in engine.json are refreshed.
const MEMBERS_REFRESH: Duration = Duration::from_secs(2);
/// An engine still opening this long after its member won says so, and
/// again at each such interval.
const OPEN_SLOW_AFTER: Duration = Duration::from_secs(3);

/// Runs the member.
pub fn run(a: ServeArgs) -> Result<u8, Failure> {
    // openraft narrates every vote and append at info.
    // openraft warns on every normal start (votes refused while members
    // come up); its errors stay, the rest is behind RUST_LOG.
    super::init_logging(a.log_format, "info,openraft=error");
    let durability: Durability = a.durability.parse().map_err(Failure::input)?;
    let security = super::serve::api_security(&a)?;
    let listen = host::listen_addr(&a.listen, a.token_file.as_deref(), &security)?;
    let id = a.raft_id.unwrap_or_default();
    let peers = ReplicaSettings::parse_peers(a.raft_peers.as_deref().unwrap_or(""))
        .map_err(Failure::input)?;
    if !peers.contains_key(&id) {
        return Err(Failure::input(format!(
            "--raft-id {id}: not among --raft-peers (members {})",
            peers
                .keys()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let peer_tls = match &a.peer_ca {
        Some(ca) => {
            let (Some(cert), Some(key)) = (
                a.peer_cert.as_ref().or(a.tls_cert.as_ref()),
                a.peer_key.as_ref().or(a.tls_key.as_ref()),
            ) else {
                return Err(Failure::input(
                    "--peer-ca needs this member's certificate: --peer-cert/--peer-key, or --tls-cert/--tls-key",
                ));
            };
            Some(
                crate::replica::PeerTls::load(&crate::replica::PeerTlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    ca: ca.clone(),
                })
                .map_err(Failure::input)?,
            )
        }
        None => {
            let remote: Vec<&String> = peers.values().filter(|a| !loopback(a)).collect();
            if !remote.is_empty() && !a.insecure_raft_http {
                return Err(Failure::input(format!(
                    "--raft-peers names members off this machine ({}): their Raft traffic needs \
                     mutual TLS (--peer-ca CA with --tls-cert/--tls-key), or --insecure-raft-http \
                     to send the cookie and every write in the clear",
                    remote
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            None
        }
    };
    let Some(cookie_file) = &a.cookie_file else {
        return Err(Failure::input(
            "--raft-id needs --cookie-file F: a secret every member (and worker) shares",
        ));
    };
    let cookie = weir_actors::cluster::node::read_cookie(cookie_file)
        .map_err(|e| Failure::input(e.to_string()))?;
    if a.election_timeout_ms < 100 {
        return Err(Failure::input(format!(
            "--election-timeout-ms {}: at least 100",
            a.election_timeout_ms
        )));
    }
    let defs = definition::load(&a.path).map_err(|e| Failure::input(e.to_string()))?;
    let data = datadir::for_definitions(a.data.as_deref(), &defs.root);
    let cluster = super::serve::cluster_config(&a, &defs.root)?;
    let backups = super::serve::backup_schedule(&a, &data)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::store(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        // Checked before the member joins its group: a member that cannot
        // reach the shared store refuses to start, naming it.
        let artifacts = a
            .artifacts
            .open(
                crate::artifacts::options::Default::Missing(
                    "this engine is replicated and was given no --artifacts URL (a store every member and worker reaches: s3://…, or a file:// folder they share)",
                ),
                &format!("member-{id}"),
            )
            .await?;
        let settings = StoreSettings {
            durability,
            ..StoreSettings::default()
        }
        .with_env_overrides()
        .map_err(Failure::input)?;
        let store = {
            let data = data.clone();
            tokio::task::spawn_blocking(move || Store::open(data, settings))
                .await
                .map_err(|e| Failure::store(format!("store open panicked: {e}")))?
                .map_err(|e| Failure::store(e.to_string()))?
                .0
        };
        let token = match a.token_file.as_deref() {
            Some(f) => discovery::read_token_file(f).map_err(Failure::input)?,
            None => discovery::ensure_token(&data).map_err(Failure::store)?,
        };
        let tls = match &security.tls {
            None => None,
            Some((cert, key)) => Some(
                weir_actors::cluster::node::tls_acceptor(cert, key)
                    .map_err(|e| Failure::input(format!("--tls-cert/--tls-key: {e}")))?,
            ),
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| Failure::input(format!("cannot listen on {listen}: {e} (pick another with --listen)")))?;
        let local = listener
            .local_addr()
            .map_err(|e| Failure::store(e.to_string()))?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let api_url = format!("{scheme}://{local}");
        let replica = Replica::start(
            store.clone(),
            ReplicaSettings {
                id,
                peers: peers.clone(),
                cookie,
                api_url: api_url.clone(),
                cluster: a.cluster.clone(),
                heartbeat_ms: (a.election_timeout_ms / 4).max(20),
                election_min_ms: a.election_timeout_ms,
                election_max_ms: a.election_timeout_ms * 3 / 2,
                snapshot_entries: crate::replica::snapshot_entries(),
                tls: peer_tls,
            },
        )
        .await
        .map_err(Failure::input)?;
        let ca = std::env::var_os(super::client::ENV_CA)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        let front = Front::spawn(
            listener,
            tls,
            replica.clone(),
            &token,
            ca.as_deref(),
            security
                .audit_retention
                .unwrap_or(crate::serve::access::audit::AUDIT_RETENTION_DEFAULT),
        )
            .map_err(Failure::store)?;
        let started_at_ms = crate::replica::wall_ms();
        let engine_file = EngineFile::new(
            data.clone(),
            EngineInfo {
                url: api_url.clone(),
                pid: std::process::id(),
                started_at_ms,
                data_dir: std::path::absolute(&data).unwrap_or(data.clone()),
                version: env!("CARGO_PKG_VERSION").to_string(),
                members: Vec::new(),
            },
        );
        engine_file.write();
        let refresher = engine_file.refresh(replica.clone());
        let _backups = backups
            .map(|s| super::serve::AbortOnDrop(crate::backup::spawn_schedule(store.clone(), s)));
        eprintln!(
            "weir: member {id} of {} (Raft at {}); API and UI at {api_url}/ (every member serves it); data in {}",
            peers.len(),
            peers[&id],
            data.display()
        );
        let io = |e: std::io::Error| Failure::store(format!("cannot watch signals: {e}"));
        let mut hup = signal(SignalKind::hangup()).map_err(io)?;
        let mut term = signal(SignalKind::terminate()).map_err(io)?;
        let mut int = signal(SignalKind::interrupt()).map_err(io)?;
        let mut failure = None;
        'member: loop {
            tokio::select! {
                _ = replica.until_leading() => {}
                why = replica.core_stopped() => {
                    failure = Some(core_failure(id, &data, &why));
                    break 'member;
                }
                _ = term.recv() => break 'member,
                _ = int.recv() => break 'member,
            }
            if replica.disk_low() {
                // It may still lead for its lease: it opens no engine, and
                // with no heartbeat another member takes over.
                tokio::time::sleep(Duration::from_millis(LEAD_CHECK_MS * 10)).await;
                continue 'member;
            }
            let promoted = Instant::now();
            store.clear_failure();
            let raft_term = replica.raft.metrics().borrow().current_term;
            // Workers that joined this term refuse a deposed leader's
            // engine, should one still run.
            let mut cluster = cluster.clone();
            if let Some((c, _)) = cluster.as_mut() {
                c.settings.term = raft_term;
            }
            let opening = host::open_engine_with(
                &defs,
                &data,
                durability,
                a.default_capacity,
                cluster,
                Some(store.clone()),
                artifacts.clone(),
            );
            // An open that takes long says so while it waits: its first
            // writes wait for the group, and a member whose followers do
            // not answer would otherwise say nothing at all.
            let opened = {
                tokio::pin!(opening);
                let mut slow = tokio::time::interval_at(
                    tokio::time::Instant::now() + OPEN_SLOW_AFTER,
                    OPEN_SLOW_AFTER,
                );
                loop {
                    tokio::select! {
                        opened = &mut opening => break opened,
                        _ = slow.tick() => {
                            let m = replica.raft.metrics().borrow().clone();
                            tracing::warn!(
                                member = id,
                                waited_ms = promoted.elapsed().as_millis() as u64,
                                leader = ?m.current_leader,
                                term = m.current_term,
                                last_log = ?m.last_log_index,
                                applied = ?m.last_applied.map(|l| l.index),
                                "replica: the engine is still opening"
                            );
                        }
                    }
                }
            };
            let engine = match opened {
                Ok(e) => e,
                // The lead was lost while the engine opened (its first
                // writes were not committed: another member leads, or
                // none yet): not this disk's failure. It follows again,
                // and opens an engine when it next leads.
                Err(e)
                    if replica.leader() != Some(id)
                        // StoreError::NotReplicated, as the engine's
                        // open error carries it (in words).
                        || e.message.contains("was not committed by the group") =>
                {
                    tracing::warn!(member = id, error = %e.message, "replica: the lead was lost while the engine opened; following");
                    // Not at once: a member cut from its majority still
                    // believes it leads for its lease.
                    tokio::time::sleep(Duration::from_millis(LEAD_CHECK_MS)).await;
                    continue 'member;
                }
                Err(e) => {
                    // A store that cannot recover is the disk's failure,
                    // not the group's: the member stops (exit 3).
                    failure = Some(Failure::store(format!("the engine did not open on member {id}: {}", e.message)));
                    break 'member;
                }
            };
            if let Err(e) = host::adopt_all(&engine, &defs).await {
                tracing::error!(error = %e.message, "replica: definitions not adopted; stepping down");
            }
            let server = host::serve_api(
                engine.clone(),
                &data,
                "127.0.0.1:0",
                a.token_file.as_deref(),
                Some(host::reloader(a.path.clone())),
                &host::ApiSettings {
                    tls: None,
                    insecure_http: false,
                    audit_retention: security.audit_retention,
                    otlp_endpoint: security.otlp_endpoint.clone(),
                },
                artifacts.clone(),
            )
            .await;
            let server = match server {
                Ok(s) => s,
                Err(e) => {
                    failure = Some(e);
                    if let Ok(engine) = host::unwrap_engine(engine).await {
                        let _ = engine.shutdown(STEP_DOWN_GRACE).await;
                    }
                    break 'member;
                }
            };
            front.set_local(Some(server.url()));
            engine_file.write();
            tracing::info!(member = id, term = raft_term, open_ms = promoted.elapsed().as_millis() as u64, "replica: leading; the engine runs here");
            eprintln!("weir: member {id} leads; the engine runs here");
            let mut tick = tokio::time::interval(Duration::from_millis(LEAD_CHECK_MS));
            let stopping = loop {
                tokio::select! {
                    _ = tick.tick() => {
                        if replica.disk_low() {
                            tracing::warn!(member = id, "replica: the disk is under the reserve; stopping the engine so that another member leads");
                            break false;
                        }
                        if !replica.leads() {
                            tracing::warn!(member = id, "replica: no longer leads (or no majority heard within the election timeout); stopping the engine");
                            break false;
                        }
                        if let Some(e) = engine.error() {
                            tracing::warn!(member = id, error = %e, "replica: the engine stopped; stepping down");
                            break false;
                        }
                    }
                    _ = hup.recv() => {
                        if let Some(r) = server.reload().await {
                            eprintln!("weir: reloaded: {} adopted, {} unchanged, {} refused", r.adopted.len(), r.unchanged.len(), r.refused.len());
                        }
                    }
                    why = replica.core_stopped() => {
                        failure = Some(core_failure(id, &data, &why));
                        break false;
                    }
                    _ = term.recv() => break true,
                    _ = int.recv() => break true,
                }
            };
            front.set_local(None);
            server.stop().await;
            engine_file.write();
            let grace = if stopping {
                Duration::from_secs(a.grace_secs)
            } else {
                STEP_DOWN_GRACE
            };
            match host::unwrap_engine(engine).await {
                Ok(engine) => {
                    if let Err(e) = engine.shutdown(grace).await {
                        tracing::warn!(error = %e, "replica: engine shutdown");
                    }
                }
                Err(e) => tracing::warn!(error = %e.message, "replica: engine shutdown"),
            }
            if stopping || failure.is_some() {
                break 'member;
            }
            eprintln!("weir: member {id} follows");
            // A leader that stepped down on its own (the engine failed)
            // lets another stand: it waits an election timeout before it
            // may lead again.
            if replica.leads() && !replica.disk_low() {
                let _ = replica.raft.trigger().elect().await;
            }
        }
        refresher.abort();
        front.stop();
        replica.shutdown().await;
        // The file stays, with the members' URLs: a client given this
        // member's data directory follows the group to the members that
        // still serve (its pid is gone, its URL no longer answers).
        engine_file.write();
        match failure {
            Some(f) => Err(f),
            None => Ok(0),
        }
    })
}

/// Whether a Raft address stays on this machine: a loopback IP, or the
/// name `localhost`.
fn loopback(addr: &str) -> bool {
    if let Ok(a) = addr.parse::<std::net::SocketAddr>() {
        return crate::serve::is_loopback(&a);
    }
    addr.rsplit_once(':')
        .is_some_and(|(host, _)| host.eq_ignore_ascii_case("localhost"))
}

/// A member whose Raft core stopped (a storage error, a panic) can
/// neither vote nor apply: it stops with a store failure (exit 3), naming
/// its data directory and the space left there, so that a supervisor
/// restarts it (or an operator looks) instead of a process that answers
/// healthy with no Raft.
fn core_failure(id: u64, data: &std::path::Path, why: &str) -> Failure {
    let space = match weir_actors::store::statvfs_space(data) {
        Ok(s) => format!(
            "{} MiB free of {} MiB",
            s.free_bytes >> 20,
            s.total_bytes >> 20
        ),
        Err(e) => format!("free space unknown: {e}"),
    };
    tracing::error!(member = id, why = %why, data = %data.display(), space = %space, "replica: the Raft core stopped; the member stops");
    Failure::store(format!(
        "member {id}: its Raft core stopped ({why}); data in {} ({space}). The member stops; \
         it rejoins the group when restarted on a sound disk",
        data.display()
    ))
}

/// This member's `DATA/engine.json`: its own API URL and every member's,
/// so a client follows the group when this member is down.
#[derive(Clone)]
struct EngineFile {
    data: PathBuf,
    info: std::sync::Arc<std::sync::Mutex<EngineInfo>>,
}

impl EngineFile {
    fn new(data: PathBuf, info: EngineInfo) -> EngineFile {
        EngineFile {
            data,
            info: std::sync::Arc::new(std::sync::Mutex::new(info)),
        }
    }

    fn write(&self) {
        // Written under the lock: the member's own path and the refresh
        // task write it, and the one that read the info last must also
        // rename last, or an older members' list would stand.
        let info = self.info.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = discovery::write_engine_file(&self.data, &info) {
            tracing::warn!(error = %e, "cannot write engine.json");
        }
    }

    /// Rewrites the file whenever the members' URLs change. A member whose
    /// info did not come back in time (a loaded or cut-off member) keeps
    /// the URL last known for it: a view that missed it must not shrink the
    /// list clients fail over with. A member gone from the group leaves it.
    fn refresh(&self, replica: Replica) -> tokio::task::JoinHandle<()> {
        let file = self.clone();
        tokio::spawn(async move {
            let mut known: std::collections::BTreeMap<u64, String> = Default::default();
            loop {
                let view = replica.members_view().await;
                known.retain(|id, _| view.members.iter().any(|m| m.id == *id));
                for m in &view.members {
                    if let Some(url) = &m.api_url {
                        known.insert(m.id, url.clone());
                    }
                }
                let mut urls: Vec<String> = known.values().cloned().collect();
                urls.sort();
                let changed = {
                    let mut info = file.info.lock().unwrap_or_else(|p| p.into_inner());
                    let changed = !urls.is_empty() && urls != info.members;
                    if changed {
                        info.members = urls;
                    }
                    changed
                };
                if changed {
                    file.write();
                }
                tokio::time::sleep(MEMBERS_REFRESH).await;
            }
        })
    }
}
