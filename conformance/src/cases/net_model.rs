//! Item 251: fault schedules on the network (drops, duplicates, reordering, delays and
//! corruption of RoCE v2 packets, a request lost for good, every answer lost, receives that
//! run out), each ended as the reference model predicts from the IBTA.

use mlx5_dv::{Backend, link_layer};

use super::ctl;
use super::recovery::device_index;
use crate::case::{Case, Check, Env, Need, Verdict, expect_ok};
use crate::model::{NetOp, schedules};

pub(super) const CASES: &[Case] = &[Case {
    name: "net.fault_schedules_end_as_the_model_predicts",
    covers: &[251],
    needs: &[Need::Mlx5Device, Need::SimControl],
    run,
}];

/// The schedules the case runs: enough to meet every kind of ending, few enough to stay quick.
const SCHEDULES: usize = 16;

fn run(b: &mut dyn Backend, env: &Env) -> Check {
    ctl(b)?;
    let name_a = env.dev()?.to_string();
    let name_s = env.peer_device.clone().unwrap_or_else(|| name_a.clone());
    let ctx = expect_ok("ibv_open_device", b.open_ibv_device(&name_a))?;
    let port = b.query_port(ctx, 1);
    let _ = b.close_device(ctx);
    if expect_ok("ibv_query_port", port)?.link_layer != link_layer::ETHERNET {
        return Err(Verdict::skip("network fault rules act on RoCE packets; this port is InfiniBand"));
    }
    let devs = (device_index(b, &name_a)?, device_index(b, &name_s)?);
    for (i, x) in schedules(SCHEDULES, 251).into_iter().enumerate() {
        let x = NetOp { dev: devs.0 as usize, peer: devs.1 as usize, ..x };
        let want = x
            .outcome()
            .ok_or_else(|| Verdict::fail(format!("schedule {i}: a schedule the model judges"), "an outcome", x))?;
        let got = crate::model::netrig::run_net(b, (&name_a, &name_s), devs, &x)
            .map_err(|e| Verdict::fail(format!("schedule {i}: the scenario runs"), "no error", e))?;
        if let Some(why) = want.differs(&got) {
            return Err(Verdict::fail(format!("schedule {i} {x:?}"), "the model's outcome", why));
        }
    }
    Ok(())
}
