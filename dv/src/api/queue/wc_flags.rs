/// `IBV_WC_WITH_IMM`.
pub const WITH_IMM: super::WcFlags = super::WcFlags::WITH_IMM;
/// `IBV_WC_WITH_INV`.
pub const WITH_INV: super::WcFlags = super::WcFlags::WITH_INV;
