//! Arbitrary bytes at QP 1 through the C ABI's connection manager: its state machine takes
//! each MAD as its thread does, and answers requests as a program would
//! ([`mlx5_capi::cm::qp1_input`]); any answer is right, a panic or a hang is a finding.

/// The input as MADs from a peer, each led by a control byte.
pub fn cm_qp1(data: &[u8]) {
    mlx5_capi::cm::qp1_input(data);
}
