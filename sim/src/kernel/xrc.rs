//! XRC in the kernel (uverbs' `ib_uverbs_open_xrcd` and `ib_uverbs_close_xrcd`, the core's
//! shared target QPs, mlx5_ib's ALLOC_XRCD): a domain opened through a file is kept by its
//! inode, per device, so every opening of that file reaches the same one; a domain lives
//! while an opening, an XRC SRQ or a target QP holds it. A target QP lives while a handle
//! (the creator's or one from `ibv_open_qp`) holds it.

use std::collections::BTreeMap;

use mlx5_dv::errno::{EAGAIN, EBADF, EINVAL};
use mlx5_dv::prm::{self, mbox_out};
use mlx5_dv::{Error, Op, Result};

use super::{Kernel, cmd_error, internal, kernel_cmd};
use crate::device::Device;
use crate::device::firmware::xrc as fw;

/// A file's identity: its device and inode numbers.
type Inode = (u64, u64);

/// The kernel's XRC state.
#[derive(Debug, Clone, Default)]
pub(super) struct KernelXrc {
    /// Each domain's holders (openings, XRC SRQs, target QPs), by device and number.
    domains: BTreeMap<(usize, u32), (u32, Option<Inode>)>,
    /// The domain of each inode, per device (`xrcd_table_search`).
    inodes: BTreeMap<(usize, Inode), u32>,
    /// Each target QP's domain and the handles on it, by device and QP number.
    targets: BTreeMap<(usize, u32), (u32, u32)>,
}

/// The inode behind an open file descriptor; EBADF for one that is not open (`fdget`).
fn inode_of(fd: i32) -> Result<Inode> {
    // SAFETY: fstat writes into the zeroed struct; a bad fd makes it fail.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if fd < 0 || unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(Error::new(Op::OpenXrcd, EBADF, format!("fd {fd} is not an open file")));
    }
    Ok((st.st_dev, st.st_ino))
}

impl Kernel {
    /// `ib_uverbs_open_xrcd`: fd -1 makes a domain of this opening alone; a file's inode
    /// finds its domain, which must not exist with `O_EXCL` (EINVAL), or is made with
    /// `O_CREAT` (without it, EAGAIN). A new domain takes ALLOC_XRCD.
    pub fn open_xrcd(&mut self, devices: &mut [Device], dev: usize, fd: i32, oflags: i32) -> Result<u32> {
        let op = Op::OpenXrcd;
        let inode = if fd == -1 { None } else { Some(inode_of(fd)?) };
        let found = inode.and_then(|i| self.xrc.inodes.get(&(dev, i)).copied());
        if inode.is_some() && found.is_none() && oflags & mlx5_dv::xrcd_oflags::O_CREAT == 0 {
            return Err(Error::new(op, EAGAIN, "the file has no XRC domain and O_CREAT is not set"));
        }
        if found.is_some() && oflags & mlx5_dv::xrcd_oflags::O_EXCL != 0 {
            return Err(Error::new(op, EINVAL, "the file has an XRC domain and O_EXCL is set"));
        }
        let n = match found {
            Some(n) => n,
            None => {
                let d = devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
                let input = prm::new_input(16, fw::ALLOC_XRCD, 0, 0);
                let mut out = [0u8; mbox_out::SIZE];
                kernel_cmd(d, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "ALLOC_XRCD"))?;
                let n = fw::xrcd_field().get(&out).map_err(|e| internal(op, e))? as u32;
                self.xrc.domains.insert((dev, n), (0, inode));
                if let Some(i) = inode {
                    self.xrc.inodes.insert((dev, i), n);
                }
                n
            }
        };
        self.xrcd_hold(dev, n);
        Ok(n)
    }

    /// One more holder of domain `n`.
    pub(super) fn xrcd_hold(&mut self, dev: usize, n: u32) {
        if let Some(d) = self.xrc.domains.get_mut(&(dev, n)) {
            d.0 += 1;
        }
    }

    /// One holder less of domain `n`: the last one frees it (DEALLOC_XRCD; its inode
    /// forgets it).
    pub fn xrcd_release(&mut self, devices: &mut [Device], dev: usize, n: u32) {
        let Some(d) = self.xrc.domains.get_mut(&(dev, n)) else { return };
        d.0 = d.0.saturating_sub(1);
        if d.0 > 0 {
            return;
        }
        if let Some((_, Some(i))) = self.xrc.domains.remove(&(dev, n)) {
            self.xrc.inodes.remove(&(dev, i));
        }
        if let Some(d) = devices.get_mut(dev) {
            let mut input = prm::new_input(16, fw::DEALLOC_XRCD, 0, 0);
            if fw::xrcd_field().set(&mut input, u64::from(n)).is_ok() {
                let mut out = [0u8; mbox_out::SIZE];
                let _ = kernel_cmd(d, &input, &mut out);
            }
        }
    }

    /// A target QP was made in domain `n`: its creator's handle holds it, and it the domain.
    pub fn xrc_target_made(&mut self, dev: usize, qpn: u32, n: u32) {
        self.xrc.targets.insert((dev, qpn), (n, 1));
        self.xrcd_hold(dev, n);
    }

    /// `ib_open_qp`: one more handle on target QP `qpn` of domain `n`; EINVAL for a QP
    /// that is not a target QP of that domain.
    pub fn open_target(&mut self, dev: usize, n: u32, qpn: u32) -> Result<()> {
        match self.xrc.targets.get_mut(&(dev, qpn)) {
            Some(t) if t.0 == n => {
                t.1 += 1;
                Ok(())
            }
            _ => Err(Error::new(Op::OpenQp, EINVAL, format!("no XRC target QP 0x{qpn:x} in this domain"))),
        }
    }

    /// A handle on a target QP closes (`__ib_destroy_shared_qp`): the last destroys the QP
    /// and lets its domain go.
    pub fn close_target(&mut self, devices: &mut [Device], dev: usize, qpn: u32) {
        let Some(t) = self.xrc.targets.get_mut(&(dev, qpn)) else { return };
        t.1 = t.1.saturating_sub(1);
        if t.1 > 0 {
            return;
        }
        let n = t.0;
        self.xrc.targets.remove(&(dev, qpn));
        self.destroy_qp(devices, dev, qpn);
        self.xrcd_release(devices, dev, n);
    }
}
