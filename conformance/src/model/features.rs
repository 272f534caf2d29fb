//! Which scenario families a model generates: as probes of a backend find them, or as given.

use super::{Model, NetMode, pairrig, srqrig, udrig};

impl Model {
    /// This model, with atomics and memory windows as the backend `b` shows them
    /// ([`pairrig::probe_remote`]); without them the state machine generates neither family.
    pub fn with_remote_features(self, b: &mut dyn mlx5_dv::Backend) -> Self {
        let (atomics, windows) = pairrig::probe_remote(b);
        let datagrams = udrig::probe_datagrams(b);
        let srqs = srqrig::probe_srq(b);
        Model { atomics, windows, datagrams, srqs, ..self }
    }

    /// This model, with the datagram and shared-receive scenarios as given.
    pub fn with_datagrams(self, datagrams: bool, srqs: bool) -> Self {
        Model { datagrams, srqs, ..self }
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
