//! Fault injection at the storage edge, for tests: the store asks a
//! [`FaultInjector`] before each write, flush and fsync it makes, and a
//! failure the injector returns takes the same path as a failure of the
//! disk itself (the sled call, the flush or the fsync is not made; the
//! store fail-stops with an error naming what failed).
//!
//! Points, counted from the store's open:
//! - [`FaultPoint::Write`]: a write into sled (a journal commit, a record
//!   batch, a compare-and-put, a snapshot, a journal compaction, an expiry
//!   pass) or the write of a blob file;
//! - [`FaultPoint::Flush`]: sled's flush of its log (`durability` `flush`
//!   and `fsync`);
//! - [`FaultPoint::Fsync`]: the fdatasync that ends sled's flush
//!   (`durability = "fsync"`, asked before the flush: sled makes it, see
//!   `sync`), an fsync of a blob file or of a folder (blobs also in
//!   `flush`).
//!
//! Unset (the default) it costs one `Option` test per write. The
//! `WEIR_FAULT_INJECT` environment variable ([`ENV_FAULT_INJECT`], read by
//! `StoreSettings::with_env_overrides`, so by `weir run` and `weir serve`)
//! sets one, for the tests that run the `weir` binary:
//! `POINT:N:ERRNO`, e.g. `fsync:12:eio` fails the 12th fsync and every
//! later one with EIO (a device that failed once is not trusted again).

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The environment variable that sets a fault (`POINT:N:ERRNO`).
pub const ENV_FAULT_INJECT: &str = "WEIR_FAULT_INJECT";

/// Where the store asks the injector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultPoint {
    /// A write into sled, or of a blob file.
    Write,
    /// sled's flush.
    Flush,
    /// An fsync of a file or folder of the data directory.
    Fsync,
    /// The start of a snapshot's write (a failure fail-stops the store, as
    /// a failed write does; a test may also hold it there a while).
    Snapshot,
}

impl FaultPoint {
    /// Every point.
    pub const ALL: [FaultPoint; 4] = [
        FaultPoint::Write,
        FaultPoint::Flush,
        FaultPoint::Fsync,
        FaultPoint::Snapshot,
    ];

    /// Its name in `WEIR_FAULT_INJECT`.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultPoint::Write => "write",
            FaultPoint::Flush => "flush",
            FaultPoint::Fsync => "fsync",
            FaultPoint::Snapshot => "snapshot",
        }
    }
}

impl fmt::Display for FaultPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultErrno {
    /// EIO: the device failed.
    Eio,
    /// ENOSPC: no space left on the device.
    Enospc,
}

impl FaultErrno {
    /// Its raw OS error number.
    pub fn raw(self) -> i32 {
        match self {
            FaultErrno::Eio => libc::EIO,
            FaultErrno::Enospc => libc::ENOSPC,
        }
    }

    /// The text the OS gives the error (`Input/output error`, ...): what a
    /// message naming the failure holds.
    pub fn text(self) -> String {
        io::Error::from_raw_os_error(self.raw()).to_string()
    }
}

type CheckFn = dyn Fn(FaultPoint) -> io::Result<()> + Send + Sync;

/// What the store asks before each write, flush and fsync: `Ok` lets it
/// go on, an error is reported as the failure of that call.
#[derive(Clone)]
pub struct FaultInjector(Arc<CheckFn>);

impl FaultInjector {
    /// An injector that asks `f`.
    pub fn new(f: impl Fn(FaultPoint) -> io::Result<()> + Send + Sync + 'static) -> Self {
        FaultInjector(Arc::new(f))
    }

    /// Fails the `n`-th call at `point` (from 1, counted from the store's
    /// open) and every later one with `errno`.
    pub fn nth(point: FaultPoint, n: u64, errno: FaultErrno) -> Self {
        let seen = AtomicU64::new(0);
        FaultInjector::new(move |at| {
            if at != point {
                return Ok(());
            }
            let k = seen.fetch_add(1, Ordering::Relaxed) + 1;
            if k >= n {
                Err(io::Error::from_raw_os_error(errno.raw()))
            } else {
                Ok(())
            }
        })
    }

    /// Parses `POINT:N:ERRNO` (`write|flush|fsync|snapshot`, N from 1,
    /// `eio|enospc`), as in `WEIR_FAULT_INJECT`.
    pub fn parse(spec: &str) -> Result<FaultInjector, String> {
        let bad =
            |why: &str| format!("fault {spec:?}: {why} (write POINT:N:ERRNO, e.g. fsync:12:eio)");
        let mut parts = spec.trim().split(':');
        let (Some(point), Some(n), Some(errno), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("not three fields"));
        };
        let point = FaultPoint::ALL
            .into_iter()
            .find(|p| p.as_str() == point)
            .ok_or_else(|| bad("the point is not write, flush, fsync or snapshot"))?;
        let n: u64 = n
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| bad("N is not a whole number from 1"))?;
        let errno = match errno {
            "eio" => FaultErrno::Eio,
            "enospc" => FaultErrno::Enospc,
            _ => return Err(bad("the error is not eio or enospc")),
        };
        Ok(FaultInjector::nth(point, n, errno))
    }

    /// Asks whether the call at `point` may go on.
    pub fn check(&self, point: FaultPoint) -> io::Result<()> {
        (self.0)(point)
    }
}

impl fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FaultInjector(..)")
    }
}

impl PartialEq for FaultInjector {
    /// Two injectors are equal when they are the same injector.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_fails_from_the_nth_call_of_its_point_on() {
        let f = FaultInjector::nth(FaultPoint::Flush, 3, FaultErrno::Enospc);
        let mut got = Vec::new();
        for point in [
            FaultPoint::Flush,
            FaultPoint::Write,
            FaultPoint::Flush,
            FaultPoint::Fsync,
            FaultPoint::Flush,
            FaultPoint::Flush,
            FaultPoint::Write,
        ] {
            got.push(f.check(point).map_err(|e| e.raw_os_error()));
        }
        let e = Err(Some(libc::ENOSPC));
        assert_eq!(got, vec![Ok(()), Ok(()), Ok(()), Ok(()), e, e, Ok(())]);
    }

    #[test]
    fn specs_parse_or_say_why() {
        // Each row: spec, whether it parses.
        let cases = [
            ("fsync:12:eio", true),
            ("write:1:enospc", true),
            (" flush:3:eio ", true),
            ("fsync:0:eio", false),
            ("fsync:x:eio", false),
            ("sync:1:eio", false),
            ("fsync:1:eperm", false),
            ("fsync:1", false),
            ("fsync:1:eio:extra", false),
            ("", false),
        ];
        for (i, (spec, ok)) in cases.iter().enumerate() {
            let got = FaultInjector::parse(spec);
            assert_eq!(got.is_ok(), *ok, "#{i}: {spec:?}: got {got:?}");
            if let Err(why) = got {
                assert!(why.contains("POINT:N:ERRNO"), "#{i}: {why}");
            }
        }
        let f = FaultInjector::parse("write:2:eio").unwrap();
        assert!(f.check(FaultPoint::Write).is_ok());
        assert_eq!(
            f.check(FaultPoint::Write).unwrap_err().raw_os_error(),
            Some(libc::EIO)
        );
    }
}
