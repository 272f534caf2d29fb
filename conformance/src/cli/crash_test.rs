//! Test only (cargo feature `crash-test`): `MLX5_CONFORMANCE_CRASH_TEST=abort|segv|hang` adds
//! the case `crash_test.<kind>` to the middle of the selected cases, to show that a run
//! survives a case that kills or hangs its process. Absent from normal builds.

use mlx5_conformance::Case;

#[cfg(feature = "crash-test")]
mod on {
    use mlx5_conformance::{Case, Check, Env};
    use mlx5_dv::Backend;

    fn abort(_: &mut dyn Backend, _: &Env) -> Check {
        std::process::abort()
    }

    fn segv(_: &mut dyn Backend, _: &Env) -> Check {
        // SAFETY: no memory-safety preconditions. std's handler (for stack overflows) would
        // return from a raised SIGSEGV, so restore the default action, which ends the process.
        unsafe {
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
            libc::raise(libc::SIGSEGV);
        }
        Ok(())
    }

    fn hang(_: &mut dyn Backend, _: &Env) -> Check {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }

    pub fn case() -> Option<Case> {
        let case = |name, run| Some(Case { name, covers: &[], needs: &[], run });
        match std::env::var("MLX5_CONFORMANCE_CRASH_TEST").ok()?.as_str() {
            "abort" => case("crash_test.abort", abort),
            "segv" => case("crash_test.segv", segv),
            "hang" => case("crash_test.hang", hang),
            _ => None,
        }
    }
}

/// The crashing case, when this is a crash-test build and the variable asks for one.
pub fn case() -> Option<Case> {
    #[cfg(feature = "crash-test")]
    return on::case();
    #[cfg(not(feature = "crash-test"))]
    None
}
