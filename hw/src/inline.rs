//! The `static inline` helpers of `mlx5dv.h`, ported: they jump through the function
//! pointers of `struct mlx5dv_qp_ex`, or call the exported `_mlx5dv_*` function behind them.
//!
//! Where the C helper would call through a NULL pointer, these return EOPNOTSUPP instead.

use std::ffi::c_int;

use mlx5_dv::errno::EOPNOTSUPP;
use rdma_sys::ibv_sge;

use crate::Mlx5Lib;
use crate::sys::mlx5dv::*;

/// `mlx5dv_mkey_check`: `_mlx5dv_mkey_check(mkey, err, sizeof(*err))`.
///
/// # Safety
/// `mkey` must be a live mkey of `lib`'s provider and `err` valid for writes.
pub unsafe fn mkey_check(lib: &Mlx5Lib, mkey: *mut mlx5dv_mkey, err: *mut mlx5dv_mkey_err) -> c_int {
    match &lib.dv._mlx5dv_mkey_check {
        // SAFETY: the caller's guarantees are those of the C function.
        Ok(f) => unsafe { f(mkey, err, size_of::<mlx5dv_mkey_err>()) },
        Err(_) => EOPNOTSUPP,
    }
}

macro_rules! qp_ex_call {
    ($(#[$doc:meta])* $name:ident => $field:ident ( $($arg:ident : $ty:ty),* )) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `mqp` must be a live `mlx5dv_qp_ex` inside an open `ibv_wr_start` chain, and the
        /// pointer arguments valid as the C helper requires.
        pub unsafe fn $name(mqp: *mut mlx5dv_qp_ex, $($arg: $ty),*) -> Result<(), c_int> {
            // SAFETY: the caller guarantees `mqp` is live.
            match unsafe { (*mqp).$field } {
                // SAFETY: the provider installed this pointer for exactly this call.
                Some(f) => { unsafe { f(mqp, $($arg),*) }; Ok(()) }
                None => Err(EOPNOTSUPP),
            }
        }
    };
}

qp_ex_call!(
    /// `mlx5dv_wr_raw_wqe`.
    wr_raw_wqe => wr_raw_wqe(wqe: *const std::ffi::c_void)
);
qp_ex_call!(
    /// `mlx5dv_wr_memcpy`.
    wr_memcpy => wr_memcpy(dest_lkey: u32, dest_addr: u64, src_lkey: u32, src_addr: u64, length: usize)
);
qp_ex_call!(
    /// `mlx5dv_wr_mkey_configure`.
    wr_mkey_configure => wr_mkey_configure(mkey: *mut mlx5dv_mkey, num_setters: u8, attr: *mut mlx5dv_mkey_conf_attr)
);
qp_ex_call!(
    /// `mlx5dv_wr_set_mkey_access_flags`.
    wr_set_mkey_access_flags => wr_set_mkey_access_flags(access_flags: u32)
);
qp_ex_call!(
    /// `mlx5dv_wr_set_mkey_layout_list`.
    wr_set_mkey_layout_list => wr_set_mkey_layout_list(num_sges: u16, sge: *const ibv_sge)
);
qp_ex_call!(
    /// `mlx5dv_wr_set_mkey_layout_interleaved`.
    wr_set_mkey_layout_interleaved => wr_set_mkey_layout_interleaved(repeat_count: u32, num_interleaved: u16, data: *const mlx5dv_mr_interleaved)
);
qp_ex_call!(
    /// `mlx5dv_wr_set_mkey_sig_block`.
    wr_set_mkey_sig_block => wr_set_mkey_sig_block(attr: *const mlx5dv_sig_block_attr)
);
qp_ex_call!(
    /// `mlx5dv_wr_set_mkey_crypto`.
    wr_set_mkey_crypto => wr_set_mkey_crypto(attr: *const mlx5dv_crypto_attr)
);
qp_ex_call!(
    /// `mlx5dv_wr_mr_list`.
    wr_mr_list => wr_mr_list(mkey: *mut mlx5dv_mkey, access_flags: u32, num_sges: u16, sge: *mut ibv_sge)
);
qp_ex_call!(
    /// `mlx5dv_wr_mr_interleaved`.
    wr_mr_interleaved => wr_mr_interleaved(mkey: *mut mlx5dv_mkey, access_flags: u32, repeat_count: u32, num_interleaved: u16, data: *mut mlx5dv_mr_interleaved)
);
