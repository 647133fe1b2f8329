//! The machine's own limits that the replicated figures stand beside,
//! measured in the same run: one durable append of a small value to a
//! file (a write and an fdatasync, what a member's Raft log pays per
//! append), one loopback TCP round trip, and the floor of one Raft commit
//! made of them.
//!
//! A commit of a group of three cannot be acknowledged before the leader
//! has made its entry durable, a follower has received it, made it
//! durable and answered: two fsyncs and one round trip between two
//! processes. [`RaftFloor::ms`] adds them up as if done one after the
//! other (the leader's fsync may overlap the follower's in a pipelined
//! log, so the true floor lies between one fsync plus a round trip and
//! this figure).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use super::report::BenchError;

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

/// The median of `samples` (sorted here), in ms; `None` when empty.
pub fn median_ms(samples: &mut [Duration]) -> Option<f64> {
    samples.sort_unstable();
    let mid = samples.get(samples.len() / 2)?;
    Some(mid.as_secs_f64() * 1e3)
}

/// The median round trip of 16 bytes over a loopback TCP connection
/// (`TCP_NODELAY`, an echoing thread on the other end), over `n` after
/// `warmup`, in ms.
pub fn loopback_rtt_ms(warmup: usize, n: usize) -> Result<f64, BenchError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(failed)?;
    let addr = listener.local_addr().map_err(failed)?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut buf = [0u8; 16];
        loop {
            match s.read_exact(&mut buf) {
                Ok(()) => s.write_all(&buf)?,
                // The client closed: done.
                Err(_) => return Ok(()),
            }
        }
    });
    let mut c = TcpStream::connect(addr).map_err(failed)?;
    c.set_nodelay(true).map_err(failed)?;
    let msg = [7u8; 16];
    let mut back = [0u8; 16];
    let mut samples = Vec::with_capacity(n);
    for i in 0..warmup + n {
        let t0 = Instant::now();
        c.write_all(&msg).map_err(failed)?;
        c.read_exact(&mut back).map_err(failed)?;
        if i >= warmup {
            samples.push(t0.elapsed());
        }
    }
    drop(c);
    echo.join()
        .map_err(|_| failed("the echo thread panicked"))?
        .map_err(failed)?;
    median_ms(&mut samples).ok_or_else(|| failed("no round-trip sample"))
}

/// Latencies of `appends` durable appends of one 60-byte value to a file
/// in `dir` (a write, then an fdatasync), after `warmup` unmeasured ones.
/// The file's blocks are allocated first, as weir's logs are (sled's
/// segments, the Raft log's): an append that grew the file would also
/// write its new size, 30 µs more per fdatasync on this machine's ext4.
pub fn append_latencies(
    dir: &Path,
    warmup: usize,
    appends: usize,
) -> Result<Vec<Duration>, BenchError> {
    use std::os::unix::fs::FileExt;
    std::fs::create_dir_all(dir).map_err(failed)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(dir.join("log"))
        .map_err(failed)?;
    let value = [7u8; 60];
    let total = ((warmup + appends) * value.len()) as u64;
    weir_actors::store::fallocate_range(&file, 0, total).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    let mut out = Vec::with_capacity(appends);
    for i in 0..warmup + appends {
        let started = Instant::now();
        file.write_all_at(&value, (i * value.len()) as u64)
            .map_err(failed)?;
        file.sync_data().map_err(failed)?;
        if i >= warmup {
            out.push(started.elapsed());
        }
    }
    Ok(out)
}

/// The median round trip between two threads that sleep while they wait
/// (a condition variable each way, no spinning), over `n` after `warmup`,
/// in ms: two wake-ups of a parked thread, what each hand-off of work
/// between threads costs when the other side was idle, as the commit's
/// blocking thread and sled's I/O thread are between the commits of a
/// chain.
pub fn thread_rtt_ms(warmup: usize, n: usize) -> Result<f64, BenchError> {
    use std::sync::{Arc, Condvar, Mutex};
    // Odd: asked; even: answered. u64::MAX: stop.
    let turn = Arc::new((Mutex::new(0u64), Condvar::new()));
    let echo = {
        let turn = turn.clone();
        std::thread::spawn(move || {
            let (m, cv) = &*turn;
            let mut t = m.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                while *t % 2 == 0 {
                    t = cv.wait(t).unwrap_or_else(|p| p.into_inner());
                }
                if *t == u64::MAX {
                    return;
                }
                *t += 1;
                cv.notify_all();
            }
        })
    };
    let (m, cv) = &*turn;
    let mut samples = Vec::with_capacity(n);
    for i in 0..warmup + n {
        // Time for the other side to fall asleep, as between two commits.
        std::thread::sleep(Duration::from_micros(200));
        let started = Instant::now();
        let mut t = m.lock().unwrap_or_else(|p| p.into_inner());
        *t += 1;
        cv.notify_all();
        while *t % 2 == 1 {
            t = cv.wait(t).unwrap_or_else(|p| p.into_inner());
        }
        drop(t);
        if i >= warmup {
            samples.push(started.elapsed());
        }
    }
    *m.lock().unwrap_or_else(|p| p.into_inner()) = u64::MAX;
    cv.notify_all();
    let _ = echo.join();
    median_ms(&mut samples).ok_or_else(|| failed("no round trip sample"))
}

/// What one Raft commit of a group of three cannot go below.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RaftFloor {
    /// One durable commit of a small value, ms (median).
    pub fsync_ms: f64,
    /// One loopback TCP round trip, ms (median).
    pub rtt_ms: f64,
}

impl RaftFloor {
    /// Measures both in a folder under `dir` (the file system the stores
    /// are on): the fsync as the members' logs pay it, one append of a
    /// 60-byte value to a file and an fdatasync (the median of 300 after
    /// 50), and 1,000 round trips.
    pub fn measure(dir: &Path) -> Result<RaftFloor, BenchError> {
        let mut commits = append_latencies(&dir.join("floor"), 50, 300)?;
        let _ = std::fs::remove_dir_all(dir.join("floor"));
        Ok(RaftFloor {
            fsync_ms: median_ms(&mut commits).ok_or_else(|| failed("no commit sample"))?,
            rtt_ms: loopback_rtt_ms(100, 1_000)?,
        })
    }

    /// The lower of two measures of the floor, figure by figure: the
    /// fsync's median moves with what the rest of the machine writes (a
    /// neighbour's writeback makes every fdatasync wait for the file
    /// system's journal), and a floor is what the machine can do.
    pub fn lower(&self, other: &RaftFloor) -> RaftFloor {
        RaftFloor {
            fsync_ms: self.fsync_ms.min(other.fsync_ms),
            rtt_ms: self.rtt_ms.min(other.rtt_ms),
        }
    }

    /// Two fsyncs (the leader's, a follower's) and one round trip, ms.
    pub fn ms(&self) -> f64 {
        2.0 * self.fsync_ms + self.rtt_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts_and_of_none() {
        let ms = |v: &[u64]| {
            let mut d: Vec<Duration> = v.iter().map(|m| Duration::from_millis(*m)).collect();
            median_ms(&mut d)
        };
        assert_eq!(ms(&[5, 1, 3]), Some(3.0));
        // The upper of the two middle samples.
        assert_eq!(ms(&[4, 1, 3, 2]), Some(3.0));
        assert_eq!(ms(&[]), None);
    }

    #[test]
    fn the_floor_is_two_fsyncs_and_a_round_trip() {
        let f = RaftFloor {
            fsync_ms: 0.25,
            rtt_ms: 0.05,
        };
        assert!((f.ms() - 0.55).abs() < 1e-12, "{}", f.ms());
        let g = RaftFloor {
            fsync_ms: 4.0,
            rtt_ms: 0.01,
        };
        assert_eq!(
            f.lower(&g),
            RaftFloor {
                fsync_ms: 0.25,
                rtt_ms: 0.01
            }
        );
    }

    /// Not a timing: the probes run and give positive figures.
    #[test]
    fn the_probes_measure_something() {
        let dir = std::env::temp_dir().join(format!("weir-floor-test-{}", std::process::id()));
        let f = RaftFloor::measure(&dir).expect("the probes run");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(f.fsync_ms > 0.0, "{f:?}");
        assert!(f.rtt_ms > 0.0, "{f:?}");
        assert!(thread_rtt_ms(10, 100).expect("the threads answer") > 0.0);
    }
}
