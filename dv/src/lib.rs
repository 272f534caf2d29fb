//! # mlx5-dv: the mlx5 direct-verbs API as Rust traits
//!
//! One object-safe trait, [`Backend`], stands for libibverbs + libmlx5 as an application sees
//! them. It is made of families, each a supertrait in its own module beside its types:
//!
//! * [`Contexts`] ([`api::context`]) — `ibv_get_device_list`, `mlx5dv_open_device` (kernel
//!   context with or without `MLX5DV_CONTEXT_FLAGS_DEVX`), `ibv_open_device` (also VFIO
//!   contexts), `ibv_close_device`, `mlx5dv_query_device` with the signature and crypto caps,
//!   `ibv_alloc_pd` / `ibv_dealloc_pd`, `ibv_get_async_event`;
//! * [`Memory`] ([`api::memory`]) — page-aligned buffers the backend owns, `ibv_reg_mr`,
//!   `ibv_dereg_mr`, dma-buf exports, `ibv_reg_dmabuf_mr`, `mlx5dv_reg_dmabuf_mr`,
//!   `mlx5dv_get_data_direct_sysfs_path`;
//! * [`Mkeys`] ([`api::mkey`]) — `mlx5dv_create_mkey`, `mlx5dv_destroy_mkey`,
//!   `mlx5dv_mkey_check`;
//! * [`Queues`] ([`api::queue`], [`api::wr`], [`api::signature`]) — CQs, RC QPs and their state
//!   changes, one `ibv_wr_start … ibv_wr_complete` chain per post (RDMA write/read, send,
//!   invalidation, mkey configure with its setters including `mlx5dv_wr_set_mkey_sig_block`),
//!   receives, polling, `mlx5dv_qp_cancel_posted_send_wrs`;
//! * [`Crypto`] ([`api::crypto`]) — `mlx5dv_crypto_login` / `_query_state` / `_logout`,
//!   `mlx5dv_crypto_login_create` / `_query` / `_destroy`, `mlx5dv_dek_create` / `_query` /
//!   `_destroy`; the `mlx5dv_wr_set_mkey_crypto` setter is a [`WrOp`].
//!
//! * [`Devx`] ([`api::devx`]) — `mlx5dv_devx_general_cmd`, `mlx5dv_devx_obj_create` /
//!   `_query` / `_modify` / `_destroy`, `mlx5dv_devx_query_eqn`, UARs and their doorbells,
//!   umems, and on VFIO contexts `mlx5dv_devx_alloc_msi_vector` / `_free_msi_vector` and
//!   `mlx5dv_devx_create_eq` / `_destroy_eq`;
//! * [`Srqs`] ([`api::srq`]) — `ibv_create_srq`, `ibv_modify_srq`, `ibv_query_srq`,
//!   `ibv_destroy_srq`, `ibv_post_srq_recv` (a QP takes an SRQ through `QpInitAttr::srq`).
//!
//! Around the trait:
//!
//! * [`Caps`] — what the device, kernel and libraries can do; the harness gates cases on it;
//! * [`Call`] / [`Reply`] — the API as data, one variant per method, and [`Layer`] /
//!   [`Wrapped`], the one wrapper point;
//! * [`HandleTable`] — checked handles (stale or foreign → EINVAL, in use → EBUSY);
//! * [`SimControl`] and [`FaultRule`] — what only a simulator offers;
//! * [`profile`] — the device-profile schema; [`prm`] — PRM layouts as field tables.
//!
//! Attributes mirror the C structs field by field with the C numeric values, so a reader of
//! the man pages recognises them; errors carry the Linux errno the C call returns.
//!
//! ## Example
//!
//! ```
//! use mlx5_dv::{Backend, MkeyInitAttr, MkeyInitFlags, Result};
//!
//! fn make_indirect_mkey(b: &mut dyn Backend, dev: &str) -> Result<u16> {
//!     let ctx = b.open_device(dev, Some(&mlx5_dv::ContextAttr::devx()))?;
//!     let pd = b.alloc_pd(ctx)?;
//!     let mkey = b.create_mkey(&MkeyInitAttr {
//!         pd,
//!         create_flags: MkeyInitFlags::INDIRECT,
//!         max_entries: 5,
//!     })?;
//!     b.destroy_mkey(&mkey)?;
//!     b.dealloc_pd(pd)?;
//!     b.close_device(ctx)?;
//!     Ok(mkey.max_entries) // 8: rounded up to a multiple of 4
//! }
//! ```
#![deny(missing_docs)]

pub mod api;
mod backend;
mod call;
mod caps;
pub mod errno;
mod error;
mod handle;
mod layer;
pub mod net_fault;
pub mod prm;
pub mod probe;
pub mod profile;
mod sim_control;

pub use api::context::*;
pub use api::crypto::*;
pub use api::devx::*;
pub use api::memory::*;
pub use api::mkey::*;
pub use api::odp::*;
pub use api::queue::cq_attr::*;
pub use api::queue::flow::*;
pub use api::queue::qp_attr::*;
pub use api::queue::*;
pub use api::signature::*;
pub use api::srq::*;
pub use api::steering::*;
pub use api::wq::*;
pub use api::wr::*;
pub use api::xrc::*;
pub use backend::{Backend, BackendInfo};
pub use call::{Call, Reply};
pub use caps::{Caps, DeviceCaps, KernelFacts, LibraryFacts, TM_CAP_RC, TmCaps};
pub use error::{CmdStatus, Error, ErrorKind, Op, Result};
pub use handle::{
    BackendId, BufHandle, ContextHandle, CqHandle, CryptoLoginHandle, DekHandle, DevxObjHandle, DmHandle, EqHandle,
    Handle, HandleTable, MkeyHandle, MrHandle, MsiVectorHandle, MwHandle, PdHandle, QpHandle, RwqIndTableHandle,
    SrqHandle, UarHandle, UmemHandle, WqHandle, XrcdHandle, adopting,
};
pub use layer::{Layer, Wrapped};
pub use net_fault::{NetAction, NetFault};
pub use sim_control::{CommandRecord, ControlAction, FaultRule, SimControl, TransportCounters, WqeRecord};

/// The traits a program calls methods through: `use mlx5_dv::prelude::*;`.
pub mod prelude {
    pub use crate::{Backend, Contexts, Crypto, Devx, Layer, Memory, Mkeys, Queues, SimControl, Srqs, Steering};
}
