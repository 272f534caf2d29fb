//! The suite on a simulator presented exactly as the hw backend presents itself: no simulator
//! control, and kernel facts only from the probes a hw backend runs when it opens. Everything
//! but the simulator-only cases must still run, or a qualification run on a real card would
//! look green while it skipped the cases that matter.

use mlx5_conformance::{Outcome, Target, run_target, suite};
use mlx5_dv::{Caps, KernelFacts, Layer, Wrapped, probe};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

/// What the hw backend can know: the caps `mlx5dv_query_device` and `ibv_query_device` report
/// and the probed kernel facts; never simulator control.
struct AsHardware {
    kernel: KernelFacts,
    dma_mmo: Option<bool>,
    ooo_dp: Option<bool>,
    raw_packet: Option<bool>,
}

impl Layer for AsHardware {
    fn caps(&self, inner: Caps) -> Caps {
        let mut caps = Caps::default();
        caps.device.sig = inner.device.sig;
        caps.device.crypto = inner.device.crypto;
        // ibv_query_device reports these on hardware too.
        caps.device.max_qp_wr = inner.device.max_qp_wr;
        caps.device.log_max_cq_sz = inner.device.log_max_cq_sz;
        caps.device.max_srq_wr = inner.device.max_srq_wr;
        // ibv_query_device_ex's max_dm_size.
        caps.device.max_dm_size = inner.device.max_dm_size;
        // ibv_query_device_ex's odp_caps and xrc_odp_caps.
        caps.device.odp = inner.device.odp;
        // ibv_query_device_ex's tm_caps (the hw backend reports them once it makes
        // tag-matching SRQs; until then its tm cases skip).
        caps.device.tm = inner.device.tm;
        // The hw backend reads general_obj_types through a DEVX context.
        caps.device.general_obj_types =
            if self.kernel.devx == Some(true) { inner.device.general_obj_types } else { None };
        caps.kernel = self.kernel;
        caps.device.dma_mmo = self.dma_mmo;
        caps.device.ooo_dp = self.ooo_dp;
        caps.device.raw_packet = self.raw_packet;
        caps.library = inner.library;
        caps
    }

    fn pass_sim_control(&self) -> bool {
        false
    }
}

fn probed(profile: &Profile) -> KernelFacts {
    let mut sim = Simulator::new(profile.clone()).expect("the profile builds");
    probe::kernel_facts(&mut sim, &profile.device.name)
}

fn probed_dma_mmo(profile: &Profile) -> (Option<bool>, Option<bool>, Option<bool>) {
    let mut sim = Simulator::new(profile.clone()).expect("the profile builds");
    let dev = &profile.device.name;
    (probe::dma_mmo(&mut sim, dev), probe::ooo_dp(&mut sim, dev), probe::raw_packet(&mut sim, dev))
}

#[test]
fn the_probes_find_what_each_profile_grants() {
    for name in Profile::builtin_names() {
        let p = Profile::builtin(name).unwrap();
        let k = probed(&p);
        assert_eq!(k.devx, Some(p.kernel.devx), "{name}: DEVX");
        let tag = if p.kernel.devx { Some(p.kernel.mkey_update_tag) } else { None };
        assert_eq!(k.mkey_update_tag, tag, "{name}: tag update (known only with DEVX)");
        assert_eq!(k.sqd2rts, Some(p.kernel.sqd2rts), "{name}: SQD->RTS");
    }
}

#[test]
fn a_hardware_like_backend_loses_only_the_simulator_only_cases() {
    for name in ["cx6dx", "cx7"] {
        let p = Profile::builtin(name).unwrap();
        let kernel = probed(&p);
        let (dma_mmo, ooo_dp, raw_packet) = probed_dma_mmo(&p);
        assert_eq!(dma_mmo, Some(p.datapath.dma_mmo), "{name}: the DMA-MMO probe");
        assert_eq!(ooo_dp, Some(p.datapath.ooo_dp), "{name}: the OOO_DP probe");
        let target = Target::new(
            "hw-like",
            Some(name.to_string()),
            Box::new(move || {
                let inner = Simulator::new(p.clone()).map_err(|e| e.to_string())?;
                Ok(Box::new(Wrapped::new(AsHardware { kernel, dma_mmo, ooo_dp, raw_packet }, inner))
                    as Box<dyn mlx5_dv::Backend>)
            }),
        );
        let report = run_target(&target, &suite());
        let failed: Vec<_> = report.cases.iter().filter(|c| c.outcome == Outcome::Fail).map(|c| &c.name).collect();
        assert!(failed.is_empty(), "{name}: {failed:?}");
        // What may still skip: the simulator-only cases (fault injection, command and WQE
        // logs) and cases for devices with the opposite caps. Never a kernel fact left unknown.
        let unknown: Vec<_> = report
            .cases
            .iter()
            .filter(|c| c.outcome == Outcome::Skip && c.detail.contains("cannot tell"))
            .map(|c| (&c.name, &c.detail))
            .collect();
        assert!(unknown.is_empty(), "{name}: skipped for want of a kernel fact: {unknown:#?}");
        // Presented as hardware, the suite loses the simulator-only cases and nothing else;
        // a successful crypto login also needs the device's secret credential, which only the
        // simulator's published test values let the suite know.
        let plain = run_target(&Target::sim(Profile::builtin(name).unwrap()), &suite());
        let lost: Vec<_> = report
            .cases
            .iter()
            .zip(&plain.cases)
            .filter(|(h, s)| h.outcome == Outcome::Skip && s.outcome != Outcome::Skip)
            .filter(|(h, _)| !h.detail.contains("needs simulator control"))
            .filter(|(h, _)| !h.detail.contains("credential and import KEK"))
            .map(|(h, _)| (&h.name, &h.detail))
            .collect();
        assert!(lost.is_empty(), "{name}: skipped only when presented as hardware: {lost:#?}");
        assert!(report.summary.passed >= 80, "{name}: {} cases ran", report.summary.passed);
    }
}
