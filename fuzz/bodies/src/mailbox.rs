//! Arbitrary bytes as firmware command mailboxes: through a VFIO context (every command
//! reaches the firmware) and a DEVX kernel context (the kernel's gate first), as general
//! commands and as object creates (each object made is queried, modified with the input's
//! own bytes, and destroyed). The answer is the output, EREMOTEIO with a status, or EINVAL;
//! never a panic.
//!
//! An input is a sequence of records, so that one input can build the state a command needs
//! (a PD, an EQ, a CQ before a QP): `[how: u8][out_len: u16 LE][in_len: u16 LE][in_len
//! bytes]`, the last record taking what is left. `how` bit 0 picks the kernel context, bit 1
//! an object create.
use std::cell::RefCell;

use mlx5_dv::errno::{EINVAL, EREMOTEIO};
use mlx5_dv::prelude::*;
use mlx5_dv::{ContextAttr, ContextHandle, Error};
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

/// A command's failure is EREMOTEIO with a bad status, or EINVAL from a gate.
fn check_err(e: &Error) {
    if e.errno() == EREMOTEIO {
        assert!(e.cmd_status().is_some_and(|c| c.status != 0), "EREMOTEIO carries its status: {e}");
    } else {
        assert_eq!(e.errno(), EINVAL, "{e}");
    }
}

fn check_out(out: &[u8], out_len: usize) {
    assert_eq!(out.len(), out_len);
    assert_eq!(out[0], 0, "a successful command has status OK");
}

fn one(h: &mut Host, how: u8, out_len: usize, input: &[u8]) {
    let ctx = if how & 1 == 0 { h.vfio } else { h.devx };
    if how & 2 == 0 {
        match h.sim.devx_general_cmd(ctx, input, out_len) {
            Ok(out) => check_out(&out, out_len),
            Err(e) => check_err(&e),
        }
        return;
    }
    match h.sim.devx_obj_create(ctx, input, out_len) {
        Ok(obj) => {
            check_out(&obj.out, out_len);
            for modify in [false, true] {
                let r = if modify {
                    h.sim.devx_obj_modify(obj.handle, input, out_len)
                } else {
                    h.sim.devx_obj_query(obj.handle, input, out_len)
                };
                match r {
                    Ok(out) => check_out(&out, out_len),
                    Err(e) => check_err(&e),
                }
            }
            // A destroy may be refused while other objects use it (a CQ under a QP).
            let _ = h.sim.devx_obj_destroy(obj.handle);
        }
        Err(e) => check_err(&e),
    }
}

/// Run `data`, a sequence of records, on the simulator.
pub fn mailbox(data: &[u8]) {
    HOST.with(|h| {
        let mut h = h.borrow_mut();
        // Objects pile up; start over now and then.
        h.runs += 1;
        if h.runs > 2_000 {
            *h = fresh();
        }
        let mut rest = data;
        while let Some((&[how, o0, o1, i0, i1], tail)) = rest.split_first_chunk::<5>() {
            // Up to a capability page's output and a little more.
            let out_len = usize::from(u16::from_le_bytes([o0, o1])) % 4400;
            let in_len = usize::from(u16::from_le_bytes([i0, i1])).min(tail.len());
            let (input, next) = tail.split_at(if next_is_last(tail, in_len) { tail.len() } else { in_len });
            one(&mut h, how, out_len, input);
            rest = next;
        }
    });
}

/// The last record takes what is left: a length that leaves no room for another header.
fn next_is_last(tail: &[u8], in_len: usize) -> bool {
    tail.len() - in_len < 5
}
