//! A device's free-running clock: what completion timestamps (the CQE's `timestamp` field)
//! and `ibv_query_rt_values_ex` (the clock `mlx5_read_clock` reads from the device) count,
//! in ticks of `hca_core_clock` kHz, masked to `completion_timestamp_mask`.
//!
//! Stepped (a simulator nobody made free-running) the clock is deterministic: it starts at
//! 0 and advances by one tick for every CQE the device writes (an overrun CQE included);
//! reading it does not move it. The same run gives the same timestamps. Free-running (the
//! device thread of the C ABI), it runs from the wall clock: the ticks counted so far plus
//! the monotonic time since, at `hca_core_clock` kHz.

use std::time::Instant;

/// One device's clock.
#[derive(Debug, Clone)]
pub struct DeviceClock {
    khz: u64,
    mask: u64,
    /// Ticks counted stepped, where the wall clock (if any) started from.
    base: u64,
    /// When the device went free-running.
    wall: Option<Instant>,
}

impl DeviceClock {
    /// A stepped clock at 0 of `khz` kHz whose readings keep the bits of `mask`.
    pub fn new(khz: u64, mask: u64) -> Self {
        DeviceClock { khz, mask, base: 0, wall: None }
    }

    /// From now on the clock runs from the wall clock, from where it stands.
    pub fn use_wall_clock(&mut self) {
        if self.wall.is_none() {
            self.wall = Some(Instant::now());
        }
    }

    /// The clock now, in ticks.
    pub fn now(&self) -> u64 {
        let run = self.wall.map_or(0, |t| {
            let ns = t.elapsed().as_nanos();
            u64::try_from(ns.saturating_mul(u128::from(self.khz)) / 1_000_000).unwrap_or(u64::MAX)
        });
        self.base.wrapping_add(run) & self.mask
    }

    /// A CQE is written: a stepped clock advances one tick. The clock then, for its
    /// timestamp.
    pub fn stamp(&mut self) -> u64 {
        if self.wall.is_none() {
            self.base = self.base.wrapping_add(1);
        }
        self.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stepped_clock_counts_cqes_and_reading_it_does_not_move_it() {
        let mut c = DeviceClock::new(1_000_000, 0x7fff_ffff_ffff_ffff);
        assert_eq!(c.now(), 0);
        assert_eq!(c.stamp(), 1);
        assert_eq!(c.now(), 1);
        assert_eq!(c.stamp(), 2);
    }

    #[test]
    fn the_mask_keeps_its_bits() {
        let mut c = DeviceClock::new(1_000_000, 1);
        assert_eq!(c.stamp(), 1);
        assert_eq!(c.stamp(), 0);
    }

    #[test]
    fn a_free_running_clock_goes_on_from_the_stepped_count() {
        let mut c = DeviceClock::new(1_000_000, u64::MAX);
        c.stamp();
        c.use_wall_clock();
        let a = c.now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = c.stamp();
        assert!(a >= 1 && b >= a + 1_000_000, "{a} {b}");
    }
}
