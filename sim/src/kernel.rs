//! The kernel driver (mlx5_ib) between the provider and the firmware: which commands a context
//! may issue through DEVX, and how a failed command reaches user space.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP, EREMOTEIO};
use mlx5_dv::prm::{self, opcode, status};

use crate::firmware::Firmware;

/// The uid under which a DEVX command runs, as the kernel picks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevxUid {
    /// The context has a DEVX user context with this uid.
    Uid(u16),
    /// The context has none; only whitelisted commands pass, and only if the device has a
    /// whitelist uid.
    None {
        /// The device has a whitelist uid.
        whitelist: bool,
    },
}

/// Run a command on behalf of user space through DEVX (`mlx5dv_devx_general_cmd`,
/// `mlx5dv_devx_obj_create`/`destroy`). The kernel writes the uid into the mailbox.
///
/// Returns the errno of the ioctl: EREMOTEIO when the firmware answered with a bad status (the
/// output mailbox then holds it), EINVAL for a non-whitelisted command without a DEVX uid,
/// EOPNOTSUPP for a whitelisted one when the device has no whitelist uid.
pub fn devx_cmd(fw: &mut Firmware, uid: DevxUid, input: &mut [u8], out: &mut [u8]) -> Result<(), i32> {
    let op = prm::mbox_in::OPCODE.get(input).map_err(|_| EINVAL)? as u16;
    let uid = match uid {
        DevxUid::Uid(u) => u,
        DevxUid::None { whitelist: true } if op == opcode::QUERY_HCA_CAP => 0,
        DevxUid::None { whitelist: false } if op == opcode::QUERY_HCA_CAP => return Err(EOPNOTSUPP),
        DevxUid::None { .. } => return Err(EINVAL),
    };
    prm::mbox_in::UID.set(input, u64::from(uid)).map_err(|_| EINVAL)?;
    fw.exec(input, out);
    match prm::read_status(out).0 {
        status::OK => Ok(()),
        _ => Err(EREMOTEIO),
    }
}

/// Run a command the kernel issues itself (PD allocation, object destruction): a bad status
/// comes back as the mapped errno, not EREMOTEIO.
pub fn kernel_cmd(fw: &mut Firmware, input: &[u8], out: &mut [u8]) -> Result<(), i32> {
    fw.exec(input, out);
    match status::to_errno(prm::read_status(out).0) {
        0 => Ok(()),
        e => Err(e),
    }
}

/// `mlx5_get_cmd_status_err`: the provider replaces EREMOTEIO by the errno of the status in
/// the output mailbox and keeps any other errno.
pub fn cmd_status_err(err: i32, out: &[u8]) -> i32 {
    if err == EREMOTEIO { status::to_errno(prm::read_status(out).0) } else { err }
}
