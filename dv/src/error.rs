//! Errors: the Linux errno the real API returns, the operation that failed, and why.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::errno;

/// The API call that failed, named after its C function.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// `ibv_get_device_list` / `mlx5dv_get_vfio_device_list`.
    GetDeviceList,
    /// `mlx5dv_open_device`.
    OpenDevice,
    /// `ibv_open_device`.
    IbvOpenDevice,
    /// `ibv_close_device`.
    CloseDevice,
    /// `mlx5dv_query_device`.
    QueryDevice,
    /// `ibv_query_port` / `ibv_query_gid`.
    QueryPort,
    /// `ibv_alloc_pd`.
    AllocPd,
    /// `ibv_dealloc_pd`.
    DeallocPd,
    /// `mlx5dv_create_mkey`.
    CreateMkey,
    /// `mlx5dv_destroy_mkey`.
    DestroyMkey,
    /// `mlx5dv_mkey_check`.
    MkeyCheck,
    /// Allocating a backend-owned buffer.
    AllocBuf,
    /// Freeing a backend-owned buffer.
    FreeBuf,
    /// Writing into a backend-owned buffer.
    WriteBuf,
    /// Reading from a backend-owned buffer.
    ReadBuf,
    /// `ibv_reg_mr`.
    RegMr,
    /// `ibv_dereg_mr`.
    DeregMr,
    /// `ibv_advise_mr`.
    AdviseMr,
    /// `ibv_create_cq`.
    CreateCq,
    /// `mlx5dv_create_cq`.
    CreateDvCq,
    /// `ibv_destroy_cq`.
    DestroyCq,
    /// `ibv_resize_cq`.
    ResizeCq,
    /// `mlx5dv_modify_qp_udp_sport`.
    ModifyQpUdpSport,
    /// `mlx5dv_dci_stream_id_reset`.
    DciStreamIdReset,
    /// `mlx5dv_modify_qp_sched_elem`.
    ModifyQpSchedElem,
    /// `mlx5dv_map_ah_to_qp`.
    MapAhToQp,
    /// `ibv_poll_cq`.
    PollCq,
    /// `mlx5dv_create_qp` / `ibv_create_qp_ex`.
    CreateQp,
    /// `ibv_modify_qp`.
    ModifyQp,
    /// `ibv_query_qp`.
    QueryQp,
    /// `ibv_destroy_qp`.
    DestroyQp,
    /// `ibv_wr_start … ibv_wr_complete`.
    PostSend,
    /// `ibv_post_recv`.
    PostRecv,
    /// `ibv_post_send`.
    PostSendWr,
    /// `ibv_get_async_event`.
    GetAsyncEvent,
    /// `mlx5dv_qp_cancel_posted_send_wrs`.
    CancelPostedSendWrs,
    /// `ibv_create_srq`.
    CreateSrq,
    /// `ibv_modify_srq`.
    ModifySrq,
    /// `ibv_query_srq`.
    QuerySrq,
    /// `ibv_destroy_srq`.
    DestroySrq,
    /// `ibv_post_srq_recv`.
    PostSrqRecv,
    /// `ibv_post_srq_ops`.
    PostSrqOps,
    /// `ibv_open_xrcd`.
    OpenXrcd,
    /// `ibv_close_xrcd`.
    CloseXrcd,
    /// `ibv_open_qp`.
    OpenQp,
    /// `ibv_create_wq`.
    CreateWq,
    /// `ibv_modify_wq`.
    ModifyWq,
    /// `ibv_destroy_wq`.
    DestroyWq,
    /// `ibv_post_wq_recv`.
    PostWqRecv,
    /// `ibv_create_rwq_ind_table`.
    CreateRwqIndTable,
    /// `ibv_destroy_rwq_ind_table`.
    DestroyRwqIndTable,
    /// `mlx5dv_init_obj` (reading a queue's buffer).
    InitObj,
    /// `mlx5dv_crypto_login`.
    CryptoLogin,
    /// `mlx5dv_crypto_login_query_state`.
    CryptoLoginQueryState,
    /// `mlx5dv_crypto_logout`.
    CryptoLogout,
    /// `mlx5dv_crypto_login_create`.
    CryptoLoginCreate,
    /// `mlx5dv_crypto_login_query`.
    CryptoLoginQuery,
    /// `mlx5dv_crypto_login_destroy`.
    CryptoLoginDestroy,
    /// `mlx5dv_dek_create`.
    DekCreate,
    /// `mlx5dv_dek_query`.
    DekQuery,
    /// `mlx5dv_dek_destroy`.
    DekDestroy,
    /// Exporting host memory as a dma-buf (udmabuf on a real host).
    AllocDmabuf,
    /// Closing an exported dma-buf.
    FreeDmabuf,
    /// `ibv_reg_dmabuf_mr`.
    RegDmabufMr,
    /// `mlx5dv_reg_dmabuf_mr`.
    DvRegDmabufMr,
    /// `mlx5dv_get_data_direct_sysfs_path`.
    GetDataDirectSysfsPath,
    /// `mlx5dv_devx_general_cmd`.
    DevxGeneralCmd,
    /// `mlx5dv_devx_obj_create`.
    DevxObjCreate,
    /// `mlx5dv_devx_obj_query`.
    DevxObjQuery,
    /// `mlx5dv_devx_obj_modify`.
    DevxObjModify,
    /// `mlx5dv_devx_obj_destroy`.
    DevxObjDestroy,
    /// `mlx5dv_devx_query_eqn`.
    DevxQueryEqn,
    /// `mlx5dv_reserved_qpn_alloc`.
    ReservedQpnAlloc,
    /// `mlx5dv_reserved_qpn_dealloc`.
    ReservedQpnDealloc,
    /// `mlx5dv_pp_alloc`.
    PpAlloc,
    /// `mlx5dv_pp_free`.
    PpFree,
    /// `mlx5dv_alloc_var`.
    AllocVar,
    /// `mlx5dv_free_var`.
    FreeVar,
    /// `mlx5dv_query_qp_lag_port`.
    QueryQpLagPort,
    /// `mlx5dv_modify_qp_lag_port`.
    ModifyQpLagPort,
    /// `mlx5dv_devx_alloc_uar`.
    DevxAllocUar,
    /// `mlx5dv_devx_free_uar`.
    DevxFreeUar,
    /// `mmio_write (UAR)`.
    DevxUarWrite,
    /// `mlx5dv_devx_umem_reg`.
    DevxUmemReg,
    /// `mlx5dv_devx_umem_dereg`.
    DevxUmemDereg,
    /// `mlx5dv_devx_alloc_msi_vector`.
    DevxAllocMsiVector,
    /// `mlx5dv_devx_free_msi_vector`.
    DevxFreeMsiVector,
    /// `read (MSI eventfd)`.
    DevxMsiVectorRead,
    /// `mlx5dv_devx_create_eq`.
    DevxCreateEq,
    /// `mlx5dv_devx_destroy_eq`.
    DevxDestroyEq,
    /// Loading or probing a backend (library, device or profile).
    Backend,
    /// `ibv_rereg_mr`.
    ReregMr,
    /// `ibv_alloc_mw`.
    AllocMw,
    /// `ibv_dealloc_mw`.
    DeallocMw,
    /// `ibv_bind_mw`.
    BindMw,
    /// `ibv_alloc_dm` / `mlx5dv_alloc_dm`.
    AllocDm,
    /// `ibv_free_dm`.
    FreeDm,
    /// `ibv_memcpy_to_dm`.
    MemcpyToDm,
    /// `ibv_memcpy_from_dm`.
    MemcpyFromDm,
    /// `ibv_reg_dm_mr`.
    RegDmMr,
    /// `ibv_create_flow`.
    CreateFlow,
    /// `ibv_destroy_flow`.
    DestroyFlow,
    /// `mlx5dv_create_flow_matcher`.
    CreateFlowMatcher,
    /// `mlx5dv_dr_domain_create`.
    DrDomainCreate,
    /// `mlx5dv_dr_domain_sync`.
    DrDomainSync,
    /// `mlx5dv_dr_domain_allow_duplicate_rules`.
    DrDomainAllowDuplicateRules,
    /// `mlx5dv_dump_dr_domain`.
    DrDomainDump,
    /// `mlx5dv_dr_table_create`.
    DrTableCreate,
    /// `mlx5dv_dr_matcher_create`.
    DrMatcherCreate,
    /// `mlx5dv_dr_matcher_set_layout`.
    DrMatcherSetLayout,
    /// `mlx5dv_dr_action_create_*`.
    DrActionCreate,
    /// `mlx5dv_dr_rule_create`.
    DrRuleCreate,
    /// `mlx5dv_dr_*_destroy`.
    DrDestroy,
    /// `mlx5dv_create_flow_action_packet_reformat`.
    CreateFlowActionPacketReformat,
    /// `ibv_destroy_flow_action`.
    DestroyFlowAction,
    /// `mlx5dv_destroy_flow_matcher`.
    DestroyFlowMatcher,
    /// `mlx5dv_create_flow`.
    CreateMatcherFlow,
}

impl Op {
    /// The C function this operation stands for.
    pub fn c_name(self) -> &'static str {
        match self {
            Op::GetDeviceList => "ibv_get_device_list",
            Op::OpenDevice => "mlx5dv_open_device",
            Op::IbvOpenDevice => "ibv_open_device",
            Op::CloseDevice => "ibv_close_device",
            Op::QueryDevice => "mlx5dv_query_device",
            Op::QueryPort => "ibv_query_port",
            Op::AllocPd => "ibv_alloc_pd",
            Op::DeallocPd => "ibv_dealloc_pd",
            Op::CreateMkey => "mlx5dv_create_mkey",
            Op::DestroyMkey => "mlx5dv_destroy_mkey",
            Op::MkeyCheck => "mlx5dv_mkey_check",
            Op::AllocBuf => "alloc_buf",
            Op::FreeBuf => "free_buf",
            Op::WriteBuf => "write_buf",
            Op::ReadBuf => "read_buf",
            Op::RegMr => "ibv_reg_mr",
            Op::DeregMr => "ibv_dereg_mr",
            Op::AdviseMr => "ibv_advise_mr",
            Op::CreateCq => "ibv_create_cq",
            Op::CreateDvCq => "mlx5dv_create_cq",
            Op::DestroyCq => "ibv_destroy_cq",
            Op::ResizeCq => "ibv_resize_cq",
            Op::ModifyQpUdpSport => "mlx5dv_modify_qp_udp_sport",
            Op::DciStreamIdReset => "mlx5dv_dci_stream_id_reset",
            Op::ModifyQpSchedElem => "mlx5dv_modify_qp_sched_elem",
            Op::MapAhToQp => "mlx5dv_map_ah_to_qp",
            Op::PollCq => "ibv_poll_cq",
            Op::CreateQp => "mlx5dv_create_qp",
            Op::ModifyQp => "ibv_modify_qp",
            Op::QueryQp => "ibv_query_qp",
            Op::DestroyQp => "ibv_destroy_qp",
            Op::PostSend => "ibv_wr_complete",
            Op::PostRecv => "ibv_post_recv",
            Op::PostSendWr => "ibv_post_send",
            Op::GetAsyncEvent => "ibv_get_async_event",
            Op::CancelPostedSendWrs => "mlx5dv_qp_cancel_posted_send_wrs",
            Op::CreateSrq => "ibv_create_srq",
            Op::ModifySrq => "ibv_modify_srq",
            Op::QuerySrq => "ibv_query_srq",
            Op::DestroySrq => "ibv_destroy_srq",
            Op::PostSrqRecv => "ibv_post_srq_recv",
            Op::PostSrqOps => "ibv_post_srq_ops",
            Op::OpenXrcd => "ibv_open_xrcd",
            Op::CloseXrcd => "ibv_close_xrcd",
            Op::OpenQp => "ibv_open_qp",
            Op::CreateWq => "ibv_create_wq",
            Op::ModifyWq => "ibv_modify_wq",
            Op::DestroyWq => "ibv_destroy_wq",
            Op::PostWqRecv => "ibv_post_wq_recv",
            Op::CreateRwqIndTable => "ibv_create_rwq_ind_table",
            Op::DestroyRwqIndTable => "ibv_destroy_rwq_ind_table",
            Op::InitObj => "mlx5dv_init_obj",
            Op::CryptoLogin => "mlx5dv_crypto_login",
            Op::CryptoLoginQueryState => "mlx5dv_crypto_login_query_state",
            Op::CryptoLogout => "mlx5dv_crypto_logout",
            Op::CryptoLoginCreate => "mlx5dv_crypto_login_create",
            Op::CryptoLoginQuery => "mlx5dv_crypto_login_query",
            Op::CryptoLoginDestroy => "mlx5dv_crypto_login_destroy",
            Op::DekCreate => "mlx5dv_dek_create",
            Op::DekQuery => "mlx5dv_dek_query",
            Op::DekDestroy => "mlx5dv_dek_destroy",
            Op::AllocDmabuf => "alloc_dmabuf",
            Op::FreeDmabuf => "free_dmabuf",
            Op::RegDmabufMr => "ibv_reg_dmabuf_mr",
            Op::DvRegDmabufMr => "mlx5dv_reg_dmabuf_mr",
            Op::GetDataDirectSysfsPath => "mlx5dv_get_data_direct_sysfs_path",
            Op::DevxGeneralCmd => "mlx5dv_devx_general_cmd",
            Op::DevxObjCreate => "mlx5dv_devx_obj_create",
            Op::DevxObjQuery => "mlx5dv_devx_obj_query",
            Op::DevxObjModify => "mlx5dv_devx_obj_modify",
            Op::DevxObjDestroy => "mlx5dv_devx_obj_destroy",
            Op::DevxQueryEqn => "mlx5dv_devx_query_eqn",
            Op::ReservedQpnAlloc => "mlx5dv_reserved_qpn_alloc",
            Op::ReservedQpnDealloc => "mlx5dv_reserved_qpn_dealloc",
            Op::PpAlloc => "mlx5dv_pp_alloc",
            Op::PpFree => "mlx5dv_pp_free",
            Op::AllocVar => "mlx5dv_alloc_var",
            Op::FreeVar => "mlx5dv_free_var",
            Op::QueryQpLagPort => "mlx5dv_query_qp_lag_port",
            Op::ModifyQpLagPort => "mlx5dv_modify_qp_lag_port",
            Op::DevxAllocUar => "mlx5dv_devx_alloc_uar",
            Op::DevxFreeUar => "mlx5dv_devx_free_uar",
            Op::DevxUarWrite => "mmio_write (UAR)",
            Op::DevxUmemReg => "mlx5dv_devx_umem_reg",
            Op::DevxUmemDereg => "mlx5dv_devx_umem_dereg",
            Op::DevxAllocMsiVector => "mlx5dv_devx_alloc_msi_vector",
            Op::DevxFreeMsiVector => "mlx5dv_devx_free_msi_vector",
            Op::DevxMsiVectorRead => "read (MSI eventfd)",
            Op::DevxCreateEq => "mlx5dv_devx_create_eq",
            Op::DevxDestroyEq => "mlx5dv_devx_destroy_eq",
            Op::Backend => "backend",
            Op::ReregMr => "ibv_rereg_mr",
            Op::AllocMw => "ibv_alloc_mw",
            Op::DeallocMw => "ibv_dealloc_mw",
            Op::BindMw => "ibv_bind_mw",
            Op::AllocDm => "ibv_alloc_dm",
            Op::FreeDm => "ibv_free_dm",
            Op::MemcpyToDm => "ibv_memcpy_to_dm",
            Op::MemcpyFromDm => "ibv_memcpy_from_dm",
            Op::RegDmMr => "ibv_reg_dm_mr",
            Op::CreateFlow => "ibv_create_flow",
            Op::DestroyFlow => "ibv_destroy_flow",
            Op::CreateFlowMatcher => "mlx5dv_create_flow_matcher",
            Op::DrDomainCreate => "mlx5dv_dr_domain_create",
            Op::DrDomainSync => "mlx5dv_dr_domain_sync",
            Op::DrDomainAllowDuplicateRules => "mlx5dv_dr_domain_allow_duplicate_rules",
            Op::DrDomainDump => "mlx5dv_dump_dr_domain",
            Op::DrTableCreate => "mlx5dv_dr_table_create",
            Op::DrMatcherCreate => "mlx5dv_dr_matcher_create",
            Op::DrMatcherSetLayout => "mlx5dv_dr_matcher_set_layout",
            Op::DrActionCreate => "mlx5dv_dr_action_create",
            Op::DrRuleCreate => "mlx5dv_dr_rule_create",
            Op::DrDestroy => "mlx5dv_dr_destroy",
            Op::CreateFlowActionPacketReformat => "mlx5dv_create_flow_action_packet_reformat",
            Op::DestroyFlowAction => "ibv_destroy_flow_action",
            Op::DestroyFlowMatcher => "mlx5dv_destroy_flow_matcher",
            Op::CreateMatcherFlow => "mlx5dv_create_flow",
        }
    }
}

/// A portable classification of an [`Error`], derived from its errno.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorKind {
    /// EINVAL: an argument, handle or state is not acceptable.
    InvalidArgument,
    /// EOPNOTSUPP / EPROTONOSUPPORT: the device, kernel or context lacks the feature.
    NotSupported,
    /// ENOMEM: out of memory or out of a device resource.
    OutOfMemory,
    /// EBUSY: the object is still in use.
    Busy,
    /// EAGAIN: no resources right now.
    Again,
    /// EEXIST: the object already exists.
    AlreadyExists,
    /// ENOENT / ENODEV: no such object or device.
    NotFound,
    /// EIO / EREMOTEIO: the device reported a failure.
    DeviceError,
    /// EPERM: not permitted.
    PermissionDenied,
    /// Any other errno.
    Other,
}

impl ErrorKind {
    /// Classify an errno value.
    pub fn from_errno(e: i32) -> Self {
        match e {
            errno::EINVAL | errno::ERANGE | errno::EBADF | errno::EFAULT => ErrorKind::InvalidArgument,
            errno::EOPNOTSUPP | errno::EPROTONOSUPPORT => ErrorKind::NotSupported,
            errno::ENOMEM | errno::ENOSPC => ErrorKind::OutOfMemory,
            errno::EBUSY => ErrorKind::Busy,
            errno::EAGAIN => ErrorKind::Again,
            errno::EEXIST => ErrorKind::AlreadyExists,
            errno::ENOENT | errno::ENODEV => ErrorKind::NotFound,
            errno::EIO | errno::EREMOTEIO => ErrorKind::DeviceError,
            errno::EPERM => ErrorKind::PermissionDenied,
            _ => ErrorKind::Other,
        }
    }
}

/// The status and syndrome of a device command's output mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CmdStatus {
    /// `out.status`, byte 0 of the output mailbox.
    pub status: u8,
    /// `out.syndrome`, bytes 4..8 of the output mailbox (big-endian).
    pub syndrome: u32,
}

/// A failed API call: the errno the real API returns, the operation, and a human reason.
///
/// Tests compare [`Error::errno`] (or [`Error::kind`]), never the message text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Error {
    op: Op,
    errno: i32,
    reason: String,
    cmd: Option<CmdStatus>,
    /// The index of the work request a list post stopped at (`*bad_wr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bad_wr: Option<u32>,
}

impl Error {
    /// Make an error for `op` with `errno` and a reason that says what was wrong.
    pub fn new(op: Op, errno: i32, reason: impl Into<String>) -> Self {
        Error { op, errno, reason: reason.into(), cmd: None, bad_wr: None }
    }

    /// Attach the device command status that led to this error.
    pub fn with_cmd_status(mut self, cmd: CmdStatus) -> Self {
        self.cmd = Some(cmd);
        self
    }

    /// Name the work request of a list that failed: its index, what `*bad_wr` points to.
    pub fn with_bad_wr(mut self, index: u32) -> Self {
        self.bad_wr = Some(index);
        self
    }

    /// The index of the work request a list post stopped at, if the call posts lists.
    pub fn bad_wr(&self) -> Option<u32> {
        self.bad_wr
    }

    /// The Linux errno, as the C API reports it (positive).
    pub fn errno(&self) -> i32 {
        self.errno
    }

    /// The operation that failed.
    pub fn op(&self) -> Op {
        self.op
    }

    /// The portable classification of the errno.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_errno(self.errno)
    }

    /// The human-readable reason.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The device command status behind the error, where one was involved.
    pub fn cmd_status(&self) -> Option<CmdStatus> {
        self.cmd
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.op.c_name(), errno::display(self.errno), self.reason)?;
        if let Some(c) = self.cmd {
            write!(f, " (status 0x{:02x}, syndrome 0x{:08x})", c.status, c.syndrome)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// The result type of every [`crate::Backend`] method.
pub type Result<T, E = Error> = std::result::Result<T, E>;
