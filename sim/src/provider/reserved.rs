//! `mlx5dv_reserved_qpn_alloc` / `_dealloc`, as libmlx5 does them: QP numbers come one at a
//! time from RESERVED_QPN general objects of `1 << log_reserved_qpn_granularity` numbers,
//! always from the newest object, so numbers go forward; an object is destroyed once all of
//! its numbers were handed out and given back.

use std::collections::HashMap;

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, obj_type, opcode};
use mlx5_dv::{ContextHandle, Error, Op, Result};

use super::crypto::{general_hdr, kernel_ctx, put};
use super::{Lower, Provider};

/// `sizeof(create_reserved_qpn_in)`: the general object header and 16 reserved bytes.
const CREATE_IN_SIZE: usize = 32;

/// One RESERVED_QPN object and which of its numbers are out.
#[derive(Debug, Clone)]
struct Block {
    first: u32,
    taken: Vec<bool>,
    next: usize,
}

/// Each context's blocks, oldest first.
#[derive(Debug, Clone, Default)]
pub(super) struct ReservedQpns {
    blocks: HashMap<ContextHandle, Vec<Block>>,
}

impl ReservedQpns {
    /// A closed context's blocks go (the kernel destroys its objects).
    pub(super) fn forget_context(&mut self, ctx: ContextHandle) {
        self.blocks.remove(&ctx);
    }
}

impl Provider {
    /// `mlx5dv_reserved_qpn_alloc`.
    pub(crate) fn reserved_qpn_alloc(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) -> Result<u32> {
        let op = Op::ReservedQpnAlloc;
        kernel_ctx(self, ctx, op)?;
        let caps = self.ctx(ctx, op)?.caps;
        if caps.general_obj_types & 1u64 << obj_type::RESERVED_QPN == 0 {
            return Err(Error::new(op, EOPNOTSUPP, "the device has no RESERVED_QPN general object"));
        }
        let log = caps.log_reserved_qpns_per_obj;
        let per = 1usize << log;
        let full = self.reserved.blocks.get(&ctx).and_then(|b| b.last()).is_none_or(|b| b.next >= per);
        if full {
            let mut input = [0u8; CREATE_IN_SIZE];
            general_hdr(op, &mut input, opcode::CREATE_GENERAL_OBJECT, obj_type::RESERVED_QPN, 0)?;
            put(op, &mut input, prm::general_obj_in::LOG_OBJ_RANGE, u64::from(log))?;
            let first = self.devx_create(low, ctx, &mut input, op)?;
            let block = Block { first, taken: vec![false; per], next: 0 };
            self.reserved.blocks.entry(ctx).or_default().push(block);
        }
        let b = self
            .reserved
            .blocks
            .get_mut(&ctx)
            .and_then(|v| v.last_mut())
            .ok_or_else(|| Error::new(op, EINVAL, "no reserved block"))?;
        let slot = b.next;
        if let Some(t) = b.taken.get_mut(slot) {
            *t = true;
        }
        b.next += 1;
        Ok(b.first + slot as u32)
    }

    /// `mlx5dv_reserved_qpn_dealloc`: EINVAL for a number no block of the context handed out.
    pub(crate) fn reserved_qpn_dealloc(&mut self, low: &mut Lower<'_>, ctx: ContextHandle, qpn: u32) -> Result<()> {
        let op = Op::ReservedQpnDealloc;
        kernel_ctx(self, ctx, op)?;
        let per = 1usize << self.ctx(ctx, op)?.caps.log_reserved_qpns_per_obj;
        let blocks = self.reserved.blocks.entry(ctx).or_default();
        let found = blocks.iter().position(|b| qpn >= b.first && ((qpn - b.first) as usize) < per);
        let Some(i) = found else {
            return Err(Error::new(op, EINVAL, format!("QP number 0x{qpn:x} is in no reserved block")));
        };
        let b = &mut blocks[i];
        let slot = (qpn - b.first) as usize;
        if !b.taken.get(slot).copied().unwrap_or(false) {
            return Err(Error::new(op, EINVAL, format!("QP number 0x{qpn:x} is not allocated")));
        }
        b.taken[slot] = false;
        if b.next >= per && b.taken.iter().all(|t| !t) {
            let first = b.first;
            blocks.remove(i);
            // libmlx5 asserts on a failed destroy; the number is given back either way.
            let _ = self.devx_destroy(low, ctx, obj_type::RESERVED_QPN, first, op);
        }
        Ok(())
    }
}
