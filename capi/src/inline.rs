//! Inline data: the bytes of a send's payload copied at post time, for `IBV_SEND_INLINE` on
//! `ibv_post_send` (`set_data_inl_seg`) and `ibv_wr_set_inline_data(_list)`.

use std::ffi::{c_int, c_void};

use mlx5_dv::WrOp;
use rdma_sys::ibv_send_wr;

/// The bytes of `bufs` (address, length) back to back; ENOMEM, with nothing read, once their
/// total exceeds `max_inline` (as libmlx5 checks before each copy).
///
/// # Safety
///
/// Each buffer is readable for its length.
pub(crate) unsafe fn gather(
    bufs: impl Iterator<Item = (*const c_void, usize)> + Clone,
    max_inline: u32,
) -> Result<Vec<u8>, c_int> {
    let total = bufs.clone().try_fold(0u64, |t, (_, n)| t.checked_add(n as u64)).ok_or(libc::ENOMEM)?;
    if total > u64::from(max_inline) {
        return Err(libc::ENOMEM);
    }
    let mut out = Vec::with_capacity(total as usize);
    for (addr, n) in bufs.filter(|(_, n)| *n > 0) {
        if addr.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: the caller's contract.
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), n) });
    }
    Ok(out)
}

/// The inline data of a legacy WR sent with `IBV_SEND_INLINE` and at least one SGE (its
/// SGEs' bytes, lkeys ignored), or `None` for any other WR.
pub(crate) fn legacy(wr: &ibv_send_wr, max_inline: u32) -> Result<Option<WrOp>, c_int> {
    const IBV_SEND_INLINE: u32 = 1 << 3;
    if wr.send_flags & IBV_SEND_INLINE == 0 || wr.num_sge <= 0 || wr.sg_list.is_null() {
        return Ok(None);
    }
    let n = usize::try_from(wr.num_sge).unwrap_or(0);
    // SAFETY: the caller's array of num_sge SGEs.
    let sges = unsafe { std::slice::from_raw_parts(wr.sg_list, n) };
    let bufs = sges.iter().map(|s| (s.addr as usize as *const c_void, s.length as usize));
    // SAFETY: an inline SGE names the program's own readable bytes.
    unsafe { gather(bufs, max_inline) }.map(|b| Some(WrOp::InlineData(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_bytes_are_copied_in_order_and_limited_before_reading() {
        let (a, b) = (*b"abc", *b"defg");
        let bufs = [(a.as_ptr().cast::<c_void>(), 3), (std::ptr::null(), 0), (b.as_ptr().cast(), 4)];
        // SAFETY: the arrays above; a NULL of no bytes is never read.
        assert_eq!(unsafe { gather(bufs.iter().copied(), 7) }, Ok(b"abcdefg".to_vec()));
        // SAFETY: nothing is read once the total is over.
        assert_eq!(unsafe { gather([(std::ptr::null(), 8)].into_iter(), 7) }, Err(libc::ENOMEM));
        // SAFETY: as above.
        assert_eq!(
            unsafe { gather([(std::ptr::null(), usize::MAX), (std::ptr::null(), 2)].into_iter(), 7) },
            Err(libc::ENOMEM)
        );
        // SAFETY: a NULL with bytes is refused, not read.
        assert_eq!(unsafe { gather([(std::ptr::null(), 2)].into_iter(), 7) }, Err(libc::EFAULT));
    }
}
