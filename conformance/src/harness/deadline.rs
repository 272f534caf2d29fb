//! How long a case may wait for the device: the harness sets a deadline for the thread that
//! runs a case, and the cases' wait loops (`poll`) stop there.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How long one wait (for a completion, an event) lasts on the simulator, which completes
/// work at doorbell time: anything not there by then never comes.
pub const SIM_WAIT: Duration = Duration::from_millis(100);
/// How long one wait lasts on hardware (transport retries can take seconds).
pub const HW_WAIT: Duration = Duration::from_secs(10);

thread_local! {
    static LIMITS: Cell<Option<(Instant, Duration)>> = const { Cell::new(None) };
}

/// Set this thread's limits: the case's deadline, and how long one wait may last.
pub fn set(case_deadline: Instant, wait: Duration) {
    LIMITS.with(|l| l.set(Some((case_deadline, wait))));
}

/// When a wait starting now must give up: one wait's length from now, and never after the
/// case's deadline. Outside the harness, one [`SIM_WAIT`] from now.
pub fn wait_until() -> Instant {
    let now = Instant::now();
    match LIMITS.with(Cell::get) {
        Some((deadline, wait)) => deadline.min(now + wait),
        None => now + SIM_WAIT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_never_outlasts_the_case() {
        let start = Instant::now();
        assert!(wait_until() <= Instant::now() + SIM_WAIT);
        set(start + Duration::from_millis(5), HW_WAIT);
        assert!(wait_until() <= start + Duration::from_millis(5));
        set(start + Duration::from_secs(60), HW_WAIT);
        let w = wait_until();
        assert!(w > start + Duration::from_secs(9) && w <= Instant::now() + HW_WAIT);
    }
}
