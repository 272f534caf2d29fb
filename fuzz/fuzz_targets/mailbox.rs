//! Arbitrary bytes as firmware command mailboxes: through a VFIO context (every command
//! reaches the firmware) and a DEVX kernel context (the kernel's gate first). The answer is
//! the output, EREMOTEIO with a status, or EINVAL; never a panic.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use mlx5_dv::errno::{EINVAL, EREMOTEIO};
use mlx5_dv::prelude::*;
use mlx5_dv::{ContextAttr, ContextHandle};
use mlx5_sim::Simulator;

struct Host {
    sim: Simulator,
    vfio: ContextHandle,
    devx: ContextHandle,
    runs: u32,
}

fn fresh() -> Host {
    let mut sim = Simulator::with_profile("cx6dx").expect("the shipped profile");
    let vfio = sim.open_ibv_device("0000:08:00.0").expect("the VFIO function");
    let devx = sim.open_device("mlx5_0", Some(&ContextAttr::devx())).expect("a DEVX context");
    Host { sim, vfio, devx, runs: 0 }
}

thread_local! {
    static HOST: RefCell<Host> = RefCell::new(fresh());
}

fuzz_target!(|data: &[u8]| {
    let Some((&[a, b, which], input)) = data.split_first_chunk::<3>() else { return };
    // Up to a capability page's output and a little more.
    let out_len = usize::from(u16::from_le_bytes([a, b])) % 4400;
    HOST.with(|h| {
        let mut h = h.borrow_mut();
        // Objects pile up from created commands; start over now and then.
        h.runs += 1;
        if h.runs > 20_000 {
            *h = fresh();
        }
        let ctx = if which & 1 == 0 { h.vfio } else { h.devx };
        match h.sim.devx_general_cmd(ctx, input, out_len) {
            Ok(out) => {
                assert_eq!(out.len(), out_len);
                assert_eq!(out[0], 0, "a successful command has status OK");
            }
            Err(e) if e.errno() == EREMOTEIO => {
                assert!(e.cmd_status().is_some_and(|c| c.status != 0), "EREMOTEIO carries its status: {e}");
            }
            Err(e) => assert_eq!(e.errno(), EINVAL, "{e}"),
        }
    });
});
