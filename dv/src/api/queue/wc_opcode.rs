/// `IBV_WC_SEND`.
pub const SEND: u32 = 0;
/// `IBV_WC_RDMA_WRITE`.
pub const RDMA_WRITE: u32 = 1;
/// `IBV_WC_RDMA_READ`.
pub const RDMA_READ: u32 = 2;
/// `IBV_WC_COMP_SWAP`.
pub const COMP_SWAP: u32 = 3;
/// `IBV_WC_FETCH_ADD`.
pub const FETCH_ADD: u32 = 4;
/// `IBV_WC_BIND_MW`.
pub const BIND_MW: u32 = 5;
/// `IBV_WC_LOCAL_INV`.
pub const LOCAL_INV: u32 = 6;
/// `IBV_WC_RECV`.
pub const RECV: u32 = 1 << 7;
/// `IBV_WC_RECV_RDMA_WITH_IMM`.
pub const RECV_RDMA_WITH_IMM: u32 = (1 << 7) + 1;
/// `IBV_WC_TM_ADD`.
pub const TM_ADD: u32 = (1 << 7) + 2;
/// `IBV_WC_TM_DEL`.
pub const TM_DEL: u32 = (1 << 7) + 3;
/// `IBV_WC_TM_SYNC`.
pub const TM_SYNC: u32 = (1 << 7) + 4;
/// `IBV_WC_TM_RECV`.
pub const TM_RECV: u32 = (1 << 7) + 5;
/// `IBV_WC_TM_NO_TAG`.
pub const TM_NO_TAG: u32 = (1 << 7) + 6;
/// `IBV_WC_DRIVER1`, alias `MLX5DV_WC_UMR`.
pub const DRIVER1: u32 = 135;
/// `IBV_WC_DRIVER2`, alias `MLX5DV_WC_RAW_WQE`.
pub const DRIVER2: u32 = 136;
/// `IBV_WC_DRIVER3`, alias `MLX5DV_WC_MEMCPY`.
pub const DRIVER3: u32 = 137;
