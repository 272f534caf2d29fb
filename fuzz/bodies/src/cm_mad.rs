//! Arbitrary bytes as a MAD at QP 1: no CM message, or one that encodes back to itself
//! (the connection manager's decoder, `mlx5_sim::wire::cm`); never a panic.

use mlx5_sim::wire::cm::Mad;

/// The input as the MAD a UD SEND to QP 1 carries.
pub fn cm_mad(data: &[u8]) {
    let Some(m) = Mad::decode(data) else { return };
    let again = m.encode();
    assert_eq!(Mad::decode(&again), Some(m), "a decoded CM MAD encodes and decodes to itself");
}
