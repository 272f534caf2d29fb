//! # mlx5-dv: the mlx5 direct-verbs API as a Rust trait
//!
//! One object-safe trait, [`Backend`], stands for libmlx5 as an application sees it. Two
//! backends implement it: the simulator (`mlx5-sim`) and the real rdma-core stack
//! (`mlx5-hw`). The conformance suite is written once against `&mut dyn Backend`.
//!
//! Attributes mirror the C structs field by field with the C numeric values, so a reader of
//! the man pages recognises them; errors carry the Linux errno the C call returns.
//!
//! ## The surface
//!
//! Implemented now:
//!
//! * devices and contexts — `ibv_get_device_list`, `mlx5dv_open_device` (kernel context with
//!   or without `MLX5DV_CONTEXT_FLAGS_DEVX`), `ibv_open_device` (also VFIO contexts),
//!   `ibv_close_device`;
//! * capabilities — `mlx5dv_query_device` with the signature and crypto caps;
//! * protection domains — `ibv_alloc_pd`, `ibv_dealloc_pd`;
//! * mkeys — `mlx5dv_create_mkey`, `mlx5dv_destroy_mkey`, `mlx5dv_mkey_check`.
//!
//! The trait grows, without reshaping, by these families (each arrives with its sim and hw
//! implementations and its conformance cases):
//!
//! * memory owned by the backend (page-aligned buffers read and written through the trait),
//!   `ibv_reg_mr`, and dma-buf MRs (`mlx5dv_reg_dmabuf_mr`);
//! * CQs, RC QPs and their state changes, posting work requests as one
//!   `ibv_wr_start … ibv_wr_complete` chain (a Rust enum of RDMA write/read, send, send with
//!   invalidate, local invalidate, mkey configure with its ordered setters), polling
//!   completions with `ibv_wc_status`, opcode, `vendor_err` and `byte_len`;
//! * signature attributes (`mlx5dv_wr_set_mkey_sig_block`) and signature errors;
//! * crypto: login, DEKs, `mlx5dv_wr_set_mkey_crypto`;
//! * DEVX: raw commands, MSI vectors, `mlx5dv_devx_create_eq` / `destroy_eq`, async events.
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

mod backend;
pub mod errno;
mod error;
mod handle;
pub mod prm;
mod types;
mod verbs;

pub use backend::{Backend, BackendInfo, CommandRecord, FaultRule, KernelFacts, SimControl, WqeRecord};
pub use error::{CmdStatus, Error, ErrorKind, Op, Result};
pub use handle::{BackendId, BufHandle, ContextHandle, CqHandle, MkeyHandle, MrHandle, PdHandle, QpHandle};
pub use types::*;
pub use verbs::*;
