//! The messages that cross processes: what a worker process and the
//! engine's gateway say to each other over ractor_cluster, with the
//! protocol's version.
//!
//! Two actors are remote-visible, one on each side: the engine's gateway
//! ([`crate::cluster::gateway`], in the process group [`ENGINE_GROUP`]) and
//! each worker process's link ([`crate::cluster::link`], in
//! [`WORKERS_GROUP`], named [`link_name`]); their message enums carry a
//! [`ToEngine`] or a [`ToWorker`] in their `Wire` variant. Everything else — the queue, the pools, the breakers, the
//! store — stays local to its process; the gateway's proxies stand in for
//! remote pools in the engine (see [`crate::cluster`]).
//!
//! Encoding. Each message is one ractor_cluster cast whose variant tag is
//! [`WIRE_TAG`] and whose bytes are the rmp-serde *named* encoding of a
//! [`ToEngine`] or [`ToWorker`]: a field added with `#[serde(default)]` is
//! read by an older peer and defaulted by a newer one. The `Message` impls
//! are written out here rather than derived with `RactorClusterMessage`:
//! the derive tags by Rust variant name (a rename would break old peers)
//! and its `BytesConvertable::from_bytes` cannot fail, so a frame that does
//! not decode would panic in the actor's decoder; here it is refused and
//! logged at WARN, naming the actor, and the actor goes on.
//!
//! Versions. [`Hello::version`] is checked at join: a worker of another
//! [`PROTOCOL_VERSION`] is refused with a message naming both versions.
//!
//! Idempotency. Every report and defer is keyed by (ticket id, attempt);
//! the queue applies one only while that attempt is the ticket's running
//! one, so a resent report applies once and a report of a superseded
//! attempt is refused and logged, never applied.

use ractor::message::{BoxedDowncastErr, SerializedMessage};
use serde::{Deserialize, Serialize};
use weir_core::queue::TicketId;

use crate::msg::work::{DeferCause, Grant, Report};

/// The version of this protocol; a worker must speak the engine's.
pub const PROTOCOL_VERSION: u32 = 1;

/// The ractor_cluster variant tag of every weir message.
pub const WIRE_TAG: &str = "weir";

/// The process group of engine gateways.
pub const ENGINE_GROUP: &str = "weir.engine";

/// The process group of worker links.
pub const WORKERS_GROUP: &str = "weir.workers";

/// The largest cluster frame weir sends or accepts: a grant carries its
/// upstreams' outputs (each at most 1 MiB) and a report its output.
pub const FRAME_BYTES_MAX: u64 = 64 << 20;

/// The registered name of a worker's link.
pub fn link_name(worker_id: &str) -> String {
    format!("weir.worker.{worker_id}")
}

/// A pool a worker serves, and its slots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolOffer {
    /// The pool's name.
    pub pool: String,
    /// Its slots in this worker.
    pub slots: u32,
}

/// A worker's join.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The protocol the worker speaks.
    pub version: u32,
    /// Its id: its name and a token of this process's start, so a restarted
    /// worker is a new one and a reconnecting one is the same.
    pub worker_id: String,
    /// Its name (`--name`, else host and pid).
    pub name: String,
    /// Its host name.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its weir version.
    pub weir_version: String,
    /// The pools it serves.
    pub pools: Vec<PoolOffer>,
    /// The attempts it runs now or has unacknowledged reports for, by pool:
    /// on a rejoin, a grant the engine handed out and the worker never got
    /// is pending again, no attempt spent.
    #[serde(default)]
    pub held: Vec<(String, Vec<TicketId>)>,
}

/// The engine's answer to a join.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// The id the worker joined as.
    pub worker_id: String,
    /// Whether the engine knew the worker (it reconnected within its lease):
    /// its attempts go on. Otherwise its running attempts were requeued by
    /// the engine and it must drop them.
    pub resumed: bool,
    /// A worker silent for this long is lost: its attempts are requeued.
    pub lease_ms: u64,
    /// How often the worker says it is alive.
    pub heartbeat_ms: u64,
    /// The folder of the engine's definitions, which command working
    /// directories are relative to.
    #[serde(default)]
    pub root: Option<String>,
    /// The engine's WEIR_DATA folder: commands of a worker on the engine's
    /// machine (no `--root`) share it with the engine's own.
    #[serde(default)]
    pub work: Option<String>,
    /// The engine's artifact folder, when its artifacts are kept in a
    /// folder: a worker on the engine's machine without an `--artifacts`
    /// URL of its own reads and writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<String>,
    /// A replicated engine's leader term (0: not replicated): a worker
    /// refuses a welcome of a term older than one it joined.
    #[serde(default)]
    pub term: u64,
}

/// One event of an attempt's log, streamed from a worker to the engine,
/// which keeps it as it keeps local attempts' logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogEvent {
    /// The attempt's command started.
    Start,
    /// Output.
    Chunk {
        /// 0 stdout, 1 stderr.
        stream: u8,
        /// When it was read, ms since the epoch (the worker's clock).
        at_ms: u64,
        /// The bytes, any cut of the output.
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
    },
    /// A stream ended.
    Eof {
        /// 0 stdout, 1 stderr.
        stream: u8,
        /// When.
        at_ms: u64,
    },
    /// The attempt ended.
    End {
        /// `succeeded`, `failed`, `timed_out` or `cancelled`.
        outcome: String,
        /// The exit code, when the command exited.
        exit_code: Option<i32>,
        /// The signal that killed it.
        signal: Option<i32>,
        /// Why it failed.
        error: Option<String>,
    },
}

/// A log event of one attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogFrame {
    /// The ticket's key (a run id for graph nodes).
    pub key: String,
    /// The attempt.
    pub attempt: u32,
    /// What happened.
    pub event: LogEvent,
}

/// What a worker tells the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToEngine {
    /// Join (or rejoin) the engine.
    Join(Hello),
    /// Alive, with the attempts it runs.
    Heartbeat {
        /// The worker.
        worker_id: String,
        /// Running attempts by pool: (ticket, attempt).
        running: Vec<(String, Vec<(TicketId, u32)>)>,
    },
    /// A pool grants credit (free slots).
    Credit {
        /// The worker.
        worker_id: String,
        /// The pool.
        pool: String,
        /// Slots.
        slots: u32,
    },
    /// A pool takes credit back (it is stopping).
    Revoke {
        /// The worker.
        worker_id: String,
        /// The pool.
        pool: String,
        /// Slots.
        slots: u32,
    },
    /// An attempt ended.
    Report {
        /// The worker.
        worker_id: String,
        /// The pool.
        pool: String,
        /// The outcome; its output inline.
        report: Report,
    },
    /// A ticket given back without running.
    Defer {
        /// The worker.
        worker_id: String,
        /// The pool.
        pool: String,
        /// The ticket.
        id: TicketId,
        /// The attempt it was granted as.
        attempt: u32,
        /// When it may run.
        until_ms: u64,
        /// Why it was given back (absent from an older worker: a breaker).
        #[serde(default)]
        cause: DeferCause,
    },
    /// An attempt's task has been running a while (a crash now costs it).
    Started {
        /// The worker.
        worker_id: String,
        /// The pool.
        pool: String,
        /// The ticket.
        id: TicketId,
        /// The attempt.
        attempt: u32,
    },
    /// A pool registers afresh (after a welcome): the tickets it runs or
    /// has unacknowledged reports for. A grant the engine handed out that
    /// is not among them never arrived and is pending again, no attempt
    /// spent.
    Holding {
        /// The worker.
        worker_id: String,
        /// The pool.
        pool: String,
        /// The tickets.
        held: Vec<TicketId>,
    },
    /// Log output of an attempt.
    Log {
        /// The worker.
        worker_id: String,
        /// The events, in order.
        frames: Vec<LogFrame>,
    },
    /// The worker is leaving: nothing of it runs any more.
    Leave {
        /// The worker.
        worker_id: String,
    },
    /// Several messages of one worker, in order (what it had to say while
    /// its link was busy: one frame instead of many).
    Batch {
        /// The worker.
        worker_id: String,
        /// The messages, none of them a join or a batch.
        messages: Vec<ToEngine>,
    },
}

impl ToEngine {
    /// The worker the message is from.
    pub fn worker_id(&self) -> &str {
        match self {
            ToEngine::Join(h) => &h.worker_id,
            ToEngine::Heartbeat { worker_id, .. }
            | ToEngine::Credit { worker_id, .. }
            | ToEngine::Revoke { worker_id, .. }
            | ToEngine::Report { worker_id, .. }
            | ToEngine::Defer { worker_id, .. }
            | ToEngine::Holding { worker_id, .. }
            | ToEngine::Started { worker_id, .. }
            | ToEngine::Log { worker_id, .. }
            | ToEngine::Leave { worker_id }
            | ToEngine::Batch { worker_id, .. } => worker_id,
        }
    }
}

/// What the engine tells a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToWorker {
    /// The join is accepted.
    Welcome(Welcome),
    /// The join is refused; the worker stops.
    Refused {
        /// Why, in words.
        reason: String,
    },
    /// Run this ticket in this pool.
    Run {
        /// The pool.
        pool: String,
        /// The ticket, its upstreams' outputs inline.
        grant: Grant,
    },
    /// Cancel the running attempt of a ticket.
    Cancel {
        /// The pool.
        pool: String,
        /// The ticket.
        id: TicketId,
    },
    /// These reports and defers are durable: forget them.
    Acked {
        /// The pool.
        pool: String,
        /// (ticket, attempt).
        ids: Vec<(TicketId, u32)>,
    },
    /// Several messages, in order (none a batch).
    Batch(Vec<ToWorker>),
    /// The engine declared this worker lost (it was silent past its lease,
    /// or the engine does not know it): its attempts were requeued. It
    /// drops them and joins again.
    Lost {
        /// Why.
        reason: String,
    },
    /// The engine recorded this worker's leave: it may exit. (A leave is a
    /// cast; a worker that exited right after sending it could cut its
    /// session before the frame went out, and be recorded lost.)
    Farewell,
}

/// Encodes a wire message as one cast.
pub(crate) fn encode<T: Serialize>(
    what: &str,
    msg: &T,
) -> Result<SerializedMessage, BoxedDowncastErr> {
    match rmp_serde::to_vec_named(msg) {
        Ok(args) => Ok(SerializedMessage::Cast {
            variant: WIRE_TAG.to_string(),
            args,
            metadata: None,
        }),
        Err(e) => {
            tracing::error!(what, error = %e, "cluster message not encoded");
            Err(BoxedDowncastErr)
        }
    }
}

/// Decodes one cast; anything else is refused and logged.
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(
    what: &str,
    m: SerializedMessage,
) -> Result<T, BoxedDowncastErr> {
    match m {
        SerializedMessage::Cast { variant, args, .. } if variant == WIRE_TAG => {
            rmp_serde::from_slice(&args).map_err(|e| {
                tracing::warn!(what, bytes = args.len(), error = %e, "cluster message refused: it does not decode");
                BoxedDowncastErr
            })
        }
        SerializedMessage::Cast { variant, .. } | SerializedMessage::Call { variant, .. } => {
            tracing::warn!(what, variant = %variant, "cluster message refused: not a weir message");
            Err(BoxedDowncastErr)
        }
        SerializedMessage::CallReply(..) => Err(BoxedDowncastErr),
    }
}

/// Implements `ractor::Message` for an actor's message enum whose variant
/// `Wire` carries the wire type: that variant crosses processes, encoded by
/// [`encode`]; every other variant is local (serializing one is refused).
macro_rules! wire_message {
    ($msg:ident, $wire:ty, $what:literal) => {
        impl ractor::Message for $msg {
            fn serializable() -> bool {
                true
            }

            fn serialize(
                self,
            ) -> Result<ractor::message::SerializedMessage, ractor::message::BoxedDowncastErr> {
                match self {
                    $msg::Wire(m) => $crate::protocol::encode($what, &m),
                    _ => Err(ractor::message::BoxedDowncastErr),
                }
            }

            fn deserialize(
                m: ractor::message::SerializedMessage,
            ) -> Result<Self, ractor::message::BoxedDowncastErr> {
                $crate::protocol::decode::<$wire>($what, m).map($msg::Wire)
            }
        }
    };
}
pub(crate) use wire_message;

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            worker_id: "w1.abc".into(),
            name: "w1".into(),
            host: "h".into(),
            pid: 7,
            weir_version: "0.1.0".into(),
            pools: vec![PoolOffer {
                pool: "default".into(),
                slots: 4,
            }],
            held: vec![("default".into(), vec![3, 4])],
        }
    }

    #[test]
    fn wire_messages_round_trip() {
        let bytes = encode("t", &ToEngine::Join(hello())).unwrap();
        match decode::<ToEngine>("t", bytes).unwrap() {
            ToEngine::Join(h) => assert_eq!(h, hello()),
            other => panic!("not a join: {other:?}"),
        }
        let bytes = encode(
            "t",
            &ToWorker::Lost {
                reason: "silent".into(),
            },
        )
        .unwrap();
        match decode::<ToWorker>("t", bytes).unwrap() {
            ToWorker::Lost { reason } => assert_eq!(reason, "silent"),
            other => panic!("not lost: {other:?}"),
        }
        // A unit variant inside a batch: the farewell a leaving worker
        // waits for.
        let bytes = encode("t", &ToWorker::Batch(vec![ToWorker::Farewell])).unwrap();
        match decode::<ToWorker>("t", bytes).unwrap() {
            ToWorker::Batch(m) => assert!(matches!(m.as_slice(), [ToWorker::Farewell]), "{m:?}"),
            other => panic!("not a batch: {other:?}"),
        }
    }

    #[test]
    fn frames_that_do_not_decode_are_refused_not_panicked_on() {
        let cases: Vec<SerializedMessage> = vec![
            SerializedMessage::Cast {
                variant: WIRE_TAG.into(),
                args: vec![0xc1, 0xff, 0x00],
                metadata: None,
            },
            SerializedMessage::Cast {
                variant: WIRE_TAG.into(),
                args: Vec::new(),
                metadata: None,
            },
            SerializedMessage::Cast {
                variant: "Other".into(),
                args: rmp_serde::to_vec_named(&ToEngine::Leave {
                    worker_id: "x".into(),
                })
                .unwrap(),
                metadata: None,
            },
            SerializedMessage::CallReply(1, vec![1, 2]),
        ];
        for (i, c) in cases.into_iter().enumerate() {
            assert!(decode::<ToEngine>("t", c).is_err(), "#{i}");
        }
        // A message for a worker is not one for the engine.
        let to_worker = encode("t", &ToWorker::Refused { reason: "r".into() }).unwrap();
        assert!(decode::<ToEngine>("t", to_worker).is_err());
    }
}
