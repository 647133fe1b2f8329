//! Capacity accounting of a pool: how many attempts may run at once.
//!
//! A pool holds `capacity` units; each running attempt holds one. Reserving
//! never takes the units in use past the capacity, releasing never takes
//! them below zero, and resizing never revokes a unit in use: after a
//! shrink, the units in use may stand above the new capacity until enough
//! attempts finish, and nothing new is reserved until then. Units are
//! conserved: `in_use` always equals the grants reserved and not released.

use serde::{Deserialize, Serialize};

/// A pool's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PoolUnits {
    capacity: u32,
    in_use: u32,
}

/// Why units could not be released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("release of {asked} units with only {in_use} in use")]
pub struct OverRelease {
    /// Units asked to release.
    pub asked: u32,
    /// Units in use.
    pub in_use: u32,
}

impl PoolUnits {
    /// A pool of `capacity` free units.
    pub fn new(capacity: u32) -> Self {
        PoolUnits {
            capacity,
            in_use: 0,
        }
    }

    /// Its capacity.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Units in use.
    pub fn in_use(&self) -> u32 {
        self.in_use
    }

    /// Units that may be reserved now.
    pub fn free(&self) -> u32 {
        self.capacity.saturating_sub(self.in_use)
    }

    /// Reserves up to `wanted` units; returns how many it took (0 when full).
    #[must_use]
    pub fn reserve(&mut self, wanted: u32) -> u32 {
        let took = wanted.min(self.free());
        self.in_use += took;
        took
    }

    /// Returns `n` units.
    pub fn release(&mut self, n: u32) -> Result<(), OverRelease> {
        if n > self.in_use {
            return Err(OverRelease {
                asked: n,
                in_use: self.in_use,
            });
        }
        self.in_use -= n;
        Ok(())
    }

    /// Sets the capacity. Units in use stay in use.
    pub fn resize(&mut self, capacity: u32) {
        self.capacity = capacity;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn shrink_keeps_units_in_use() {
        let mut p = PoolUnits::new(4);
        assert_eq!(p.reserve(3), 3);
        p.resize(1);
        assert_eq!(p.free(), 0);
        assert_eq!(p.reserve(1), 0);
        p.release(2).unwrap();
        assert_eq!(p.free(), 0);
        p.release(1).unwrap();
        assert_eq!(p.reserve(5), 1);
        assert_eq!(
            p.release(2),
            Err(OverRelease {
                asked: 2,
                in_use: 1
            })
        );
    }

    #[derive(Debug, Clone)]
    enum Step {
        Reserve(u32),
        Release(u32),
        Resize(u32),
    }

    proptest! {
        /// Units are conserved: in_use equals grants held, never below zero,
        /// never above capacity unless a shrink left them there.
        #[test]
        fn units_are_conserved(steps in prop::collection::vec(prop_oneof![
            (0u32..6).prop_map(Step::Reserve),
            (0u32..6).prop_map(Step::Release),
            (0u32..8).prop_map(Step::Resize),
        ], 0..200)) {
            let mut p = PoolUnits::new(4);
            let mut held: u32 = 0;
            for step in steps {
                let before = p;
                match step {
                    Step::Reserve(n) => {
                        let took = p.reserve(n);
                        held += took;
                        prop_assert!(took <= n);
                        prop_assert!(before.in_use() >= before.capacity() || p.in_use() <= p.capacity());
                    }
                    Step::Release(n) => {
                        if p.release(n).is_ok() { held -= n; } else { prop_assert_eq!(p, before); }
                    }
                    Step::Resize(c) => p.resize(c),
                }
                prop_assert_eq!(p.in_use(), held);
            }
        }
    }
}
