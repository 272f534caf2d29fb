//! Which scenario families a model generates: as probes of a backend find them, or as given.

use super::{Model, pairrig, rig, srqrig, ucrig, udrig, xrcrig};

impl Model {
    /// This model, with atomics and memory windows as the backend `b` shows them
    /// ([`pairrig::probe_remote`]), datagrams, SRQs, UC and XRC as their probes find them;
    /// without them the state machine generates none of those families.
    pub fn with_remote_features(self, b: &mut dyn mlx5_dv::Backend) -> Self {
        let (atomics, windows) = pairrig::probe_remote(b);
        let datagrams = udrig::probe_datagrams(b);
        let srqs = srqrig::probe_srq(b);
        let (uc, xrc) = (ucrig::probe_uc(b), xrcrig::probe_xrc(b));
        Model { atomics, windows, datagrams, srqs, uc, xrc, ..self }
    }

    /// This model, drawing CRC signature domains as the probe of `b` finds them
    /// ([`rig::probe_crc`]: the PI byte order, and whether CRC64_XP10 is CRC-64/NVME).
    pub fn with_probed_crc(self, b: &mut dyn mlx5_dv::Backend) -> Self {
        Model { crc: rig::probe_crc(b), ..self }
    }

    /// This model, with the CRC facts given (`None`: no CRC domains).
    pub fn with_crc(self, crc: Option<super::CrcFacts>) -> Self {
        Model { crc, ..self }
    }

    /// This model, with the datagram and shared-receive scenarios as given.
    pub fn with_datagrams(self, datagrams: bool, srqs: bool) -> Self {
        Model { datagrams, srqs, ..self }
    }

    /// This model, with the UC and XRC scenarios as given.
    pub fn with_uc_xrc(self, uc: bool, xrc: bool) -> Self {
        Model { uc, xrc, ..self }
    }

    /// This model, with atomics and windows as given.
    pub fn with_remote(self, atomics: bool, windows: bool) -> Self {
        Model { atomics, windows, ..self }
    }

    /// This model, with the state machine generating network scenarios as `mode` says.
    pub fn with_network(self, mode: NetMode) -> Self {
        Model { net_mode: mode, ..self }
    }
}

/// Whether the state machine's sequences hold network scenarios ([`super::Op::Net`]), on a backend
/// with simulator control.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NetMode {
    /// None (the default).
    #[default]
    Off,
    /// Network scenarios only.
    Only,
    /// Among the other ops. After its first network rule a simulator carries its devices'
    /// traffic on its fabric in memory for good, so the ops after it run there.
    Mixed,
}
