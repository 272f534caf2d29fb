//! PRM layouts as declarative field tables, with typed views and codecs over them.
//!
//! The PRM numbers bits from the most significant bit of byte 0: a structure is a run of
//! big-endian 32-bit dwords, and a field at bit offset `N` of width `W` ends at bit `N + W - 1`.
//! Each structure is one table of [`Field`]s; the simulator's firmware, its provider and the
//! conformance cases all read and write mailboxes, WQEs and CQEs through these tables.
//!
//! * Command mailboxes: [`mbox_in`], [`mbox_out`], [`general_obj_in`], [`general_obj_out`],
//!   the per-command tables ([`create_mkey`], [`create_psv`], ...), [`opcode`] and [`status`].
//! * Capability pages: [`cmd_hca_cap`], [`crypto_caps`]. The memory key context: [`mkc`].
//! * Send WQE segments, UMR segments, the signature BSF and SET_PSV: [`wqe`].
//! * Completion queue entries (good, error, signature error): [`cqe`].
//! * Event queues, EQEs, UARs and umems: [`eq`]; raw CQs and QPs: [`queues`].
//! * The crypto general objects (login, DEK): [`crypto`]; the crypto BSF: [`crypto_bsf`].
//! * Flow counters: [`flow_counter`]; flow match parameters: [`fte_match`]; TIRs: [`tir`].
//!
//! A layout declared here implements [`Layout`]: [`View::new`] / [`ViewMut::new`] check a
//! buffer's length once, and the view's accessors then read without error; each layout's
//! plain struct (`Mkc`, `CtrlSeg`, `Cqe64`, ...) has `encode`, `decode` and `to_bytes`.

mod caps;
mod cmd;
pub mod cqe;
pub mod crypto;
pub mod crypto_bsf;
pub mod eq;
mod field;
mod flow;
pub mod mkc;
pub mod queues;
mod view;
pub mod wqe;

pub use caps::{cmd_hca_cap, cmd_hca_cap_2, crypto_caps, odp_cap, pp, qos_cap};
pub use cmd::{
    create_mkey, create_psv, destroy_mkey, destroy_psv, general_obj_in, general_obj_out, mbox_in, mbox_out, new_input,
    obj_type, opcode, pd, query_hca_cap, read_status, status, write_header,
};
pub use field::{Field, FieldError};
pub use flow::{flow_counter, fte_match, tir};
pub use view::{Codec, Layout, View, ViewMut, decode_array, encode_array};

#[cfg(test)]
mod test_util;
#[cfg(test)]
mod tests;
