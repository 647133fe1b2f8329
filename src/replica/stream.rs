//! The append stream: a leader's appends to one peer (heartbeats included)
//! over one connection of their own, taken over from HTTP.
//!
//! Why: an append over HTTP cost the leader about 300 µs more than the
//! peer took to serve it (median, `bench replicated --quick` on this
//! machine's two cores, the members' "call answered" against "append
//! served"), where a loopback round trip is 15 µs: reqwest hands each
//! request to its connection's task and the answer back, and the peer's
//! router, middleware and body collection run per request. A commit waits
//! for one such round trip. On the stream the leader's replication task
//! writes a frame and reads the answer itself, and the peer's task reads
//! and answers in a loop.
//!
//! How it opens: `GET /raft/stream` with `Upgrade: weir-raft-append/1`,
//! through everything an HTTP request goes through (TLS when the group
//! has it, the cookie checked on the head before anything else), answered
//! `101 Switching Protocols`. A peer that does not offer it (an older
//! version, in a rolling upgrade) answers otherwise, and the leader sends
//! its appends over HTTP and asks again after [`STREAM_RETRY_AFTER`].
//!
//! Frames, both ways: a length (u32, big-endian, of the payload), a kind
//! ([`REQUEST`], [`ANSWER`], [`REFUSED`]) and the payload: an append request
//! or its answer in MessagePack, as over HTTP, or why it was refused, in
//! text (where HTTP answered 400 or 507). A request larger than the
//! append's body limit closes the stream before any of it is read. One
//! exchange at a time: openraft's replication task sends an append and
//! waits for its answer before the next. A frame not whole within its
//! time, or a connection that fails, drops the stream: the next append
//! opens another.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The protocol named in the `Upgrade` header.
pub(super) const STREAM_PROTOCOL: &str = "weir-raft-append/1";
/// An append request (leader → peer).
pub(super) const REQUEST: u8 = 1;
/// An append's answer (peer → leader): what `/raft/append` answers 200.
pub(super) const ANSWER: u8 = 2;
/// An append refused (peer → leader): why, in text.
pub(super) const REFUSED: u8 = 3;
/// A peer that did not offer the stream, or whose streams opened and
/// did not answer [`STREAM_FAILURES_MAX`] times in a row, is sent appends
/// over HTTP for this long; then a stream is tried again.
pub(super) const STREAM_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Streams in a row that open and fail before any answer, before appends
/// go over HTTP for [`STREAM_RETRY_AFTER`].
pub(super) const STREAM_FAILURES_MAX: u32 = 3;
/// A peer closes a stream that brings no frame within this (a leader's
/// heartbeats come every few tens of ms, none while it sends a snapshot),
/// and gives up on an answer it cannot write within it (a leader that
/// does not read). A leader opens another stream rather than use one idle
/// for half of it.
pub(super) const STREAM_IDLE_MAX: Duration = Duration::from_secs(10);
/// The largest answer a leader reads: an answer is small (a vote and a
/// log id, or a refusal's text).
const ANSWER_BYTES_MAX: u64 = 64 << 10;
/// A frame's payload is read into a buffer that grows as its bytes come,
/// from this: a declared length alone holds no memory.
const READ_CHUNK_BYTES: u64 = 64 << 10;

/// A frame read: its kind and payload.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Frame {
    pub(super) kind: u8,
    pub(super) payload: Vec<u8>,
}

/// Why a frame could not be read.
#[derive(Debug)]
pub(super) enum FrameError {
    /// The connection failed or closed, mid-frame or between frames.
    Io(std::io::Error),
    /// A frame declared more than the limit: nothing of it was read.
    TooLarge { bytes: u64, limit: u64 },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "the append stream failed: {e}"),
            FrameError::TooLarge { bytes, limit } => write!(
                f,
                "a frame of {bytes} bytes on the append stream: the limit is {limit}"
            ),
        }
    }
}

/// Writes one frame in one write.
pub(super) async fn write_frame<W: AsyncWrite + Unpin>(
    io: &mut W,
    kind: u8,
    payload: &[u8],
) -> std::io::Result<()> {
    let len = u32::try_from(payload.len()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("a frame of {} bytes is over 4 GiB", payload.len()),
        )
    })?;
    let mut buf = Vec::with_capacity(payload.len() + 5);
    buf.extend_from_slice(&len.to_be_bytes());
    buf.push(kind);
    buf.extend_from_slice(payload);
    io.write_all(&buf).await?;
    io.flush().await
}

/// Reads one frame of at most `limit` bytes of payload; a larger one is
/// refused on its length alone.
pub(super) async fn read_frame<R: AsyncRead + Unpin>(
    io: &mut R,
    limit: u64,
) -> Result<Frame, FrameError> {
    let mut head = [0u8; 5];
    io.read_exact(&mut head).await.map_err(FrameError::Io)?;
    let len = u64::from(u32::from_be_bytes([head[0], head[1], head[2], head[3]]));
    if len > limit {
        return Err(FrameError::TooLarge { bytes: len, limit });
    }
    let mut payload = Vec::with_capacity(len.min(READ_CHUNK_BYTES) as usize);
    let read = (&mut *io)
        .take(len)
        .read_to_end(&mut payload)
        .await
        .map_err(FrameError::Io)?;
    if read as u64 != len {
        return Err(FrameError::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("a frame cut at {read} of its {len} bytes"),
        )));
    }
    Ok(Frame {
        kind: head[4],
        payload,
    })
}

/// A leader's end of one stream: an exchange is a request frame written
/// and its answer read, in the caller's task.
pub(super) struct AppendStream {
    io: Box<dyn Io>,
    /// When its last exchange ended (or it opened).
    used_at: std::time::Instant,
    /// An exchange began and did not end: its future was dropped (an
    /// append cancelled by openraft) between the request and its answer.
    /// The answer may still come, and would be read as the next request's:
    /// such a stream is never used again.
    cut: bool,
}

/// The stream's connection: an upgraded HTTP connection (TLS or not).
pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// An exchange's outcome: the answer's bytes (MessagePack), or why the
/// peer refused the request (the stream goes on either way).
pub(super) enum Answered {
    Answer(Vec<u8>),
    Refused(String),
}

impl AppendStream {
    pub(super) fn new(io: impl Io + 'static) -> AppendStream {
        AppendStream {
            io: Box::new(io),
            used_at: std::time::Instant::now(),
            cut: false,
        }
    }

    /// How long since its last exchange ended (or it opened).
    pub(super) fn idle_for(&self) -> Duration {
        self.used_at.elapsed()
    }

    /// Whether an exchange was cut: the stream is out of step.
    pub(super) fn is_cut(&self) -> bool {
        self.cut
    }

    /// Sends `request` (MessagePack) and reads its answer. An error leaves
    /// the stream out of step: the caller drops it.
    pub(super) async fn exchange(&mut self, request: &[u8]) -> Result<Answered, String> {
        if self.cut {
            return Err("an earlier exchange on the append stream was cut".into());
        }
        self.cut = true;
        let answered = self.exchange_inner(request).await;
        // Whole: the next exchange reads its own answer.
        self.cut = answered.is_err();
        self.used_at = std::time::Instant::now();
        answered
    }

    async fn exchange_inner(&mut self, request: &[u8]) -> Result<Answered, String> {
        write_frame(&mut self.io, REQUEST, request)
            .await
            .map_err(|e| format!("the append stream failed: {e}"))?;
        let frame = read_frame(&mut self.io, ANSWER_BYTES_MAX)
            .await
            .map_err(|e| e.to_string())?;
        match frame.kind {
            ANSWER => Ok(Answered::Answer(frame.payload)),
            REFUSED => Ok(Answered::Refused(
                String::from_utf8_lossy(&frame.payload).into_owned(),
            )),
            kind => Err(format!(
                "a frame of unknown kind {kind} on the append stream"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_go_through_whole_and_in_order() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        write_frame(&mut a, REQUEST, b"first").await.unwrap();
        write_frame(&mut a, ANSWER, b"").await.unwrap();
        let big = vec![7u8; 40_000];
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..3 {
                got.push(read_frame(&mut b, 64 << 10).await.unwrap());
            }
            got
        });
        write_frame(&mut a, REFUSED, &big).await.unwrap();
        let got = reader.await.unwrap();
        assert_eq!(
            got[0],
            Frame {
                kind: REQUEST,
                payload: b"first".to_vec()
            }
        );
        assert_eq!(got[1].kind, ANSWER);
        assert!(got[1].payload.is_empty());
        assert_eq!(got[2].payload, big);
    }

    #[tokio::test]
    async fn a_frame_over_the_limit_is_refused_on_its_length() {
        let (mut a, mut b) = tokio::io::duplex(64);
        // Declares 1 GiB and sends none of it: the reader must not wait
        // for it, nor allocate it.
        a.write_all(&(1u32 << 30).to_be_bytes()).await.unwrap();
        a.write_all(&[REQUEST]).await.unwrap();
        match read_frame(&mut b, 1 << 20).await {
            Err(FrameError::TooLarge { bytes, limit }) => {
                assert_eq!((bytes, limit), (1 << 30, 1 << 20))
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_frame_cut_short_is_an_error() {
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&10u32.to_be_bytes()).await.unwrap();
        a.write_all(&[REQUEST, 1, 2]).await.unwrap();
        drop(a);
        assert!(matches!(
            read_frame(&mut b, 1 << 20).await,
            Err(FrameError::Io(_))
        ));
    }

    #[tokio::test]
    async fn an_exchange_reads_the_answer_or_the_refusal() {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let mut stream = AppendStream::new(a);
        let peer = tokio::spawn(async move {
            let req = read_frame(&mut b, 1 << 20).await.unwrap();
            assert_eq!(req.kind, REQUEST);
            write_frame(&mut b, ANSWER, &req.payload).await.unwrap();
            read_frame(&mut b, 1 << 20).await.unwrap();
            write_frame(&mut b, REFUSED, b"no room").await.unwrap();
            read_frame(&mut b, 1 << 20).await.unwrap();
            write_frame(&mut b, 9, b"").await.unwrap();
        });
        match stream.exchange(b"req").await.unwrap() {
            Answered::Answer(bytes) => assert_eq!(bytes, b"req"),
            Answered::Refused(why) => panic!("{why}"),
        }
        match stream.exchange(b"req").await.unwrap() {
            Answered::Refused(why) => assert_eq!(why, "no room"),
            Answered::Answer(_) => panic!("answered"),
        }
        assert!(stream.exchange(b"req").await.is_err(), "unknown kind");
        assert!(stream.is_cut());
        peer.await.unwrap();
    }

    #[tokio::test]
    async fn an_exchange_dropped_before_its_answer_cuts_the_stream() {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let mut stream = AppendStream::new(a);
        {
            // The request goes out; the answer never comes before the
            // exchange's future is dropped (openraft gave up on it).
            let exchange = stream.exchange(b"first");
            let _ = tokio::time::timeout(std::time::Duration::from_millis(20), exchange).await;
        }
        assert!(stream.is_cut());
        // The late answer is there to read; the stream must not take it as
        // the next request's.
        let req = read_frame(&mut b, 1 << 20).await.unwrap();
        write_frame(&mut b, ANSWER, &req.payload).await.unwrap();
        assert!(stream.exchange(b"second").await.is_err());
    }
}
