//! The suite can fail: each mutant backend deviates from the spec in one way, and the named
//! case must catch it.

use mlx5_conformance::{Outcome, Target, run_target, suite};
use mlx5_dv::errno::{EINVAL, EREMOTEIO};
use mlx5_dv::*;
use mlx5_sim::{Profile, Simulator};
use rstest::rstest;

#[derive(Debug, Clone, Copy)]
enum Mutation {
    RoundToPowerOfTwo,
    SaturateInsteadOfWrap,
    ZeroFlagsEinval,
    AcceptUnknownCompMask,
    TagByteSet,
    UpdateTagAlwaysAccepted,
    MkeyCheckOkOnPlainMkey,
    DeallocPdIgnoresMkeys,
    LeakEremoteio,
    DropCrc32Cap,
    ExplicitDevxFallsBack,
    EchoEveryCompMaskBit,
}

struct Mutant {
    inner: Simulator,
    m: Mutation,
}

impl Backend for Mutant {
    fn info(&self) -> BackendInfo {
        self.inner.info()
    }
    fn kernel_facts(&self) -> KernelFacts {
        self.inner.kernel_facts()
    }
    fn device_list(&mut self) -> Result<Vec<DeviceDesc>> {
        self.inner.device_list()
    }
    fn open_device(&mut self, device: &str, attr: Option<&ContextAttr>) -> Result<ContextHandle> {
        match (self.m, attr) {
            (Mutation::AcceptUnknownCompMask, Some(a)) => {
                let a = ContextAttr { comp_mask: 0, ..*a };
                self.inner.open_device(device, Some(&a))
            }
            (Mutation::ExplicitDevxFallsBack, Some(a)) if a.flags == ContextFlags::DEVX => {
                self.inner.open_device(device, None)
            }
            _ => self.inner.open_device(device, attr),
        }
    }
    fn open_ibv_device(&mut self, device: &str) -> Result<ContextHandle> {
        self.inner.open_ibv_device(device)
    }
    fn close_device(&mut self, ctx: ContextHandle) -> Result<()> {
        self.inner.close_device(ctx)
    }
    fn query_device(&mut self, ctx: ContextHandle, comp_mask: u64) -> Result<DvContext> {
        let mut r = self.inner.query_device(ctx, comp_mask)?;
        match self.m {
            Mutation::DropCrc32Cap => r.sig_caps.crc_type &= !sig_cap::CRC32,
            Mutation::EchoEveryCompMaskBit => {
                r.comp_mask = MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD
            }
            _ => {}
        }
        Ok(r)
    }
    fn alloc_pd(&mut self, ctx: ContextHandle) -> Result<PdHandle> {
        self.inner.alloc_pd(ctx)
    }
    fn dealloc_pd(&mut self, pd: PdHandle) -> Result<()> {
        let r = self.inner.dealloc_pd(pd);
        match (self.m, &r) {
            (Mutation::DeallocPdIgnoresMkeys, Err(e)) if e.errno() == errno::EBUSY => Ok(()),
            _ => r,
        }
    }
    fn create_mkey(&mut self, attr: &MkeyInitAttr) -> Result<Mkey> {
        let mut a = *attr;
        if let Mutation::UpdateTagAlwaysAccepted = self.m {
            a.create_flags.remove(MkeyInitFlags::UPDATE_TAG);
        }
        if a.create_flags.is_empty() && matches!(self.m, Mutation::ZeroFlagsEinval) {
            return Err(Error::new(Op::CreateMkey, EINVAL, "mutant"));
        }
        let r = self.inner.create_mkey(&a);
        let mut m = match (self.m, r) {
            (Mutation::LeakEremoteio, Err(e)) if e.cmd_status().is_some() => {
                return Err(Error::new(Op::CreateMkey, EREMOTEIO, "mutant"));
            }
            (_, r) => r?,
        };
        match self.m {
            Mutation::RoundToPowerOfTwo => m.max_entries = attr.max_entries.checked_next_power_of_two().unwrap_or(0),
            Mutation::SaturateInsteadOfWrap if attr.max_entries > 65532 => m.max_entries = 65532,
            Mutation::TagByteSet => {
                m.lkey |= 1;
                m.rkey |= 1;
            }
            _ => {}
        }
        Ok(m)
    }
    fn destroy_mkey(&mut self, mkey: &Mkey) -> Result<()> {
        self.inner.destroy_mkey(mkey)
    }
    fn mkey_check(&mut self, mkey: &Mkey) -> Result<MkeyErr> {
        let r = self.inner.mkey_check(mkey);
        match (self.m, &r) {
            (Mutation::MkeyCheckOkOnPlainMkey, Err(e)) if e.errno() == EINVAL => Ok(MkeyErr::NONE),
            _ => r,
        }
    }
    fn sim_control(&mut self) -> Option<&mut dyn SimControl> {
        self.inner.sim_control()
    }
}

#[rstest]
#[case(Mutation::RoundToPowerOfTwo, "cx6dx", "mkey.max_entries_rounding")]
#[case(Mutation::SaturateInsteadOfWrap, "cx6dx", "mkey.max_entries_rounding")]
#[case(Mutation::ZeroFlagsEinval, "cx6dx", "mkey.zero_create_flags")]
#[case(Mutation::AcceptUnknownCompMask, "cx6dx", "context.unknown_comp_mask")]
#[case(Mutation::TagByteSet, "cx6dx", "mkey.keys_are_index_shifted")]
#[case(Mutation::TagByteSet, "cx6dx", "mkey.keys_match_mailbox_index")]
#[case(Mutation::UpdateTagAlwaysAccepted, "cx6dx-no-update-tag", "mkey.update_tag_follows_kernel")]
#[case(Mutation::UpdateTagAlwaysAccepted, "cx6dx-no-update-tag", "mkey.every_flag_combination")]
#[case(Mutation::MkeyCheckOkOnPlainMkey, "cx6dx", "mkey_check.non_signature_mkey")]
#[case(Mutation::DeallocPdIgnoresMkeys, "cx6dx", "misuse.dealloc_pd_with_live_mkey")]
#[case(Mutation::LeakEremoteio, "cx6dx", "mkey.create_status_maps_to_errno")]
#[case(Mutation::DropCrc32Cap, "cx5", "caps.signature_caps_values")]
#[case(Mutation::ExplicitDevxFallsBack, "cx6dx-no-devx", "context.explicit_devx_follows_kernel")]
#[case(Mutation::EchoEveryCompMaskBit, "cx6dx", "caps.comp_mask_echo")]
fn the_suite_catches_the_mutant(#[case] m: Mutation, #[case] profile: &str, #[case] catcher: &str) {
    let p = Profile::builtin(profile).unwrap();
    let target = Target::new(
        "mutant",
        Some(profile.to_string()),
        Box::new(move || {
            let inner = Simulator::new(p.clone()).map_err(|e| e.to_string())?;
            Ok(Box::new(Mutant { inner, m }) as Box<dyn Backend>)
        }),
    );
    let report = run_target(&target, &suite());
    let case = report.cases.iter().find(|c| c.name == catcher).expect("the catcher exists");
    assert_eq!(case.outcome, Outcome::Fail, "{m:?} was not caught by {catcher}: {}", case.detail);
    assert!(case.expected.is_some() && case.actual.is_some(), "a failure names expected and actual");
}

#[test]
fn the_unmutated_simulator_passes_every_case_it_runs() {
    for name in Profile::builtin_names() {
        let report = run_target(&Target::sim(Profile::builtin(name).unwrap()), &suite());
        let failed: Vec<_> =
            report.cases.iter().filter(|c| c.outcome == Outcome::Fail).map(|c| (&c.name, &c.detail)).collect();
        assert!(failed.is_empty(), "{name}: {failed:?}");
        assert!(report.summary.passed > 0);
        for c in report.cases.iter().filter(|c| c.outcome == Outcome::Skip) {
            assert!(!c.detail.is_empty(), "{name}: {} skipped without a reason", c.name);
        }
    }
}
