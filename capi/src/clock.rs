//! The device clock seen from the program: `mlx5dv_get_clock_info` (the kernel's clock-info
//! page, which libmlx5 copies) and the conversion of a completion timestamp to wall-clock
//! nanoseconds that `mlx5dv_ts_to_ns` and `ibv_wc_read_completion_wallclock_ns` do.
//!
//! The simulated kernel's page is always fresh: each read is a snapshot of the device clock
//! (`mlx5_sim::Simulator::device_clock`) and `CLOCK_REALTIME` taken together, with the
//! kernel's `mult`/`shift` for `hca_core_clock` kHz (`frac` 0) and mlx5's 41-bit cycle mask
//! (`CLOCKSOURCE_MASK(41)` of the kernel's mlx5 clock).

use std::ffi::c_int;

use mlx5_hw::sys::mlx5dv::mlx5dv_clock_info;
use rdma_sys::ibv_context;

use crate::state::{Shim, with};

/// `CLOCKSOURCE_MASK(41)`: the cycles mlx5's timecounter keeps.
const CYCLES_MASK: u64 = (1 << 41) - 1;

/// `mult` and `shift` turning cycles of a `khz` clock into nanoseconds
/// (`ns = cycles * mult >> shift`), the largest shift up to 31 whose product with a delta
/// of half the mask stays within 64 bits.
fn mult_shift(khz: u64) -> (u32, u32) {
    let khz = khz.max(1);
    let mut shift = 31;
    loop {
        // clocksource_khz2mult: rounded to the nearest.
        let mult = ((1_000_000u64 << shift) + khz / 2) / khz;
        if mult < 1 << 23 || shift == 0 {
            return (u32::try_from(mult).unwrap_or(u32::MAX), shift);
        }
        shift -= 1;
    }
}

/// The clock-info page now, for a device clock at `cycles` of `khz` kHz.
pub(crate) fn snapshot(cycles: u64, khz: u64) -> mlx5dv_clock_info {
    let (mult, shift) = mult_shift(khz);
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: an out-parameter of ours.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let nsec = (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64);
    mlx5dv_clock_info { nsec, last_cycles: cycles, frac: 0, mult, shift, mask: CYCLES_MASK }
}

/// The kernel's `overflow_period` for a `khz` clock: the nanoseconds within which the page
/// must be read again for a conversion to stay right (`max_clock_info_update_nsec`).
pub(crate) fn update_period_ns(khz: u64) -> u64 {
    let (mult, shift) = mult_shift(khz);
    let cycles = ((u64::MAX >> 1) / u64::from(mult.max(1))).min(CYCLES_MASK / 3);
    u64::try_from((u128::from(cycles) * u128::from(mult)) >> shift).unwrap_or(u64::MAX)
}

/// `mlx5dv_ts_to_ns` (mlx5dv.h's inline), in its wrapping arithmetic.
pub(crate) fn ts_to_ns(ci: &mlx5dv_clock_info, ts: u64) -> u64 {
    let mut delta = ts.wrapping_sub(ci.last_cycles) & ci.mask;
    let mut nsec = ci.nsec;
    if delta > ci.mask / 2 {
        delta = ci.last_cycles.wrapping_sub(ts) & ci.mask;
        nsec = nsec.wrapping_sub(delta.wrapping_mul(u64::from(ci.mult)).wrapping_sub(ci.frac) >> ci.shift);
    } else {
        nsec = nsec.wrapping_add(delta.wrapping_mul(u64::from(ci.mult)).wrapping_add(ci.frac) >> ci.shift);
    }
    nsec
}

impl Shim {
    /// The clock-info page of a kernel context: EOPNOTSUPP on a VFIO context (its provider
    /// has no `get_clock_info`), EINVAL for a context the shim does not know.
    pub(crate) fn clock_info(&self, ctx: *const ibv_context) -> Result<mlx5dv_clock_info, c_int> {
        let h = self.context(ctx)?.handle;
        let cycles = self.sim.simulator().device_clock(h).map_err(|e| e.errno())?;
        Ok(snapshot(cycles, self.sim.profile().device.hca_core_clock_khz))
    }
}

/// `mlx5dv_get_clock_info`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_get_clock_info(context: *mut ibv_context, clock_info: *mut mlx5dv_clock_info) -> c_int {
    if clock_info.is_null() {
        return libc::EINVAL;
    }
    match with(Err, |s| s.clock_info(context)) {
        Ok(ci) => {
            // SAFETY: the caller's struct.
            unsafe { clock_info.write(ci) };
            0
        }
        Err(e) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_1ghz_clock_converts_one_cycle_to_one_nanosecond() {
        let (mult, shift) = mult_shift(1_000_000);
        assert_eq!(u64::from(mult) >> shift, 1);
        let ci = snapshot(1_000, 1_000_000);
        assert_eq!(ts_to_ns(&ci, 1_500), ci.nsec + 500);
        assert_eq!(ts_to_ns(&ci, 400), ci.nsec - 600, "a timestamp before the snapshot");
    }

    #[test]
    fn a_156250_khz_clock_counts_6_4_ns_a_cycle() {
        let ci = snapshot(0, 156_250);
        // mult is rounded to an integer: within a nanosecond over a million cycles.
        assert!((ts_to_ns(&ci, 1_000_000) - ci.nsec).abs_diff(6_400_000) <= 1);
    }

    #[test]
    fn the_update_period_keeps_the_product_within_64_bits() {
        for khz in [156_250, 1_000_000, 1_250_000] {
            let (mult, _) = mult_shift(khz);
            assert!(u128::from(CYCLES_MASK / 2) * u128::from(mult) < 1 << 64);
            assert!(update_period_ns(khz) > 1_000_000_000, "{khz}: {}", update_period_ns(khz));
        }
    }
}
