//! The device-profile schema: the caps and behaviours that differ between cards, firmware and
//! kernels, kept as TOML. The simulator reads profiles; the hw backend's capture writes them.
//!
//! A profile may name another with `extends = "NAME"`; its tables are then merged over the
//! named profile's, key by key. Which names exist is the reader's business: the parser asks a
//! [`Bases`] for the text of a named base. Unknown keys are errors, so a typo never goes
//! unnoticed.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

mod hca_cap;
mod sections;
pub use hca_cap::*;
pub use sections::*;

/// A simulated device, firmware and kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short name (`cx6dx`).
    pub name: String,
    /// One line saying what the profile imitates.
    pub summary: String,
    /// The device and what else the simulated host shows.
    pub device: DeviceSection,
    /// The kernel driver's features.
    pub kernel: KernelSection,
    /// The general HCA capability bits the provider reads.
    pub hca_cap: HcaCapSection,
    /// The crypto capability page (read only when `hca_cap.crypto` is set).
    #[serde(default)]
    pub crypto_cap: CryptoCapSection,
    /// Queue limits and completion details of the data path.
    #[serde(default)]
    pub datapath: DataPathSection,
    /// Signature facts that are not public.
    #[serde(default)]
    pub signature: SignatureSection,
    /// What the device's crypto store holds: credentials and import KEKs.
    #[serde(default)]
    pub crypto: CryptoSection,
    /// On-demand paging as `ibv_query_device_ex` reports it.
    #[serde(default)]
    pub odp: OdpSection,
}

/// `[signature]`: parameters NVIDIA does not publish. The defaults are the best public
/// evidence; hardware decides (see the README).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SignatureSection {
    /// The CRC64_XP10 polynomial (normal form), written as a hex string. Default:
    /// 0xAD93D23594C93659, the CRC-64 of Microsoft's Project Zipline (XP10) RTL, which is
    /// CRC-64/NVME.
    #[serde(with = "hex_u64")]
    pub crc64_poly: u64,
    /// CRC64_XP10 is reflected. Default: true (Zipline's engine shifts right).
    pub crc64_reflected: bool,
    /// CRC64_XP10 final XOR, as a hex string. Default: all ones (Zipline outputs the
    /// inverted register).
    #[serde(with = "hex_u64")]
    pub crc64_xorout: u64,
    /// CRC32/CRC32C/CRC64 PI is stored little-endian in memory. Default: true, from one
    /// public report of a CRC32C signature read back on an mlx5 device.
    pub crc_pi_little_endian: bool,
}

/// 64-bit values as `"0x…"` strings: TOML integers are signed 64-bit.
mod hex_u64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("0x{v:016X}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = String::deserialize(d)?;
        let digits = text.trim_start_matches("0x").trim_start_matches("0X").replace('_', "");
        u64::from_str_radix(&digits, 16)
            .map_err(|e| serde::de::Error::custom(format!("`{text}` is not a hex u64: {e}")))
    }
}

impl Default for SignatureSection {
    fn default() -> Self {
        SignatureSection {
            crc64_poly: 0xAD93_D235_94C9_3659,
            crc64_reflected: true,
            crc64_xorout: u64::MAX,
            crc_pi_little_endian: true,
        }
    }
}

/// `[datapath]`: limits the kernel reports and the vendor syndromes of error completions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataPathSection {
    /// Largest send WQE in bytes (`max_sq_desc_sz`).
    pub max_sq_desc_sz: u32,
    /// Largest receive WQE in bytes (`max_rq_desc_sz`).
    pub max_rq_desc_sz: u32,
    /// Most WRs per queue (`max_qp_wr`); also the kernel's `max_send_wqebb`, the most 64-byte
    /// send WQE basic blocks of a send queue.
    pub max_qp_wr: u32,
    /// log2 of the most CQ entries the kernel accepts (`log_max_cq_sz`). Default: 22, the
    /// `max_cqe` of 4194303 mlx5 devices report.
    pub log_max_cq_sz: u8,
    /// Bytes of memory the simulated host can give buffers, all buffers together. Default:
    /// 4 GiB.
    pub host_memory_limit: u64,
    /// The device reports `dma_mmo_sq` or `dma_mmo_qp` (the MEMCPY send op). Default: false.
    pub dma_mmo: bool,
    /// log2 of the longest DMA copy (`log_dma_mmo_max_size`); 0 leaves libmlx5's fallback,
    /// 2 GiB (`MLX5_DMA_MMO_MAX_SIZE`). Only read with `dma_mmo`. Not published per device:
    /// the default 0 is unverified, hardware decides.
    pub log_dma_mmo_max_size: u8,
    /// The kernel reports out-of-order data placement (`MLX5_IB_QUERY_DEV_RESP_FLAGS_OOO_DP`)
    /// for RC QPs. Default: false.
    pub ooo_dp: bool,
    /// The rdma-core release the simulated libmlx5 is (55 and later know
    /// `MLX5DV_QP_CREATE_OOO_DP`). Default: 64.
    pub rdma_core_release: u32,
    /// Largest message in bytes (the port's `max_msg_sz`; 1 GiB on mlx5). A longer WR
    /// completes with a local length error.
    #[serde(default = "default_max_msg_sz")]
    pub max_msg_sz: u32,
    /// log2 of the RDMA READs and atomics a QP may have outstanding as requester
    /// (`log_max_ra_res_qp`; `max_qp_init_rd_atom`, and the limit of `ibv_modify_qp`'s
    /// `max_rd_atomic`). Default: 4 (16), what ConnectX devices report.
    pub log_max_ra_res_qp: u8,
    /// log2 of the RDMA READs and atomics a QP may serve at once as responder
    /// (`log_max_ra_req_qp`; `max_qp_rd_atom`, and the limit of `max_dest_rd_atomic`).
    /// Default: 4 (16).
    pub log_max_ra_req_qp: u8,
    /// Entries of the P_Key table (`max_pkeys`; a `pkey_index` at or past it is EINVAL).
    /// Default: 128.
    pub pkey_table_len: u16,
    /// log2 of the WQEs an SRQ holds (`log_max_srq_sz`: `max_srq_wr` is one less, and
    /// libmlx5 refuses a `max_wr` past the power itself). Default: 15, as ConnectX reports.
    pub log_max_srq_sz: u8,
    /// log2 of the SRQs a device has (`log_max_srq`: `max_srq`). Default: 23.
    pub log_max_srq: u8,
    /// The device does the IB 8-byte atomics (compare-and-swap, fetch-and-add) in host
    /// endianness: `atomic_cap` IBV_ATOMIC_HCA, and libmlx5 enables atomics on its QPs.
    /// Default: true, as every ConnectX the profiles model.
    pub atomic: bool,
    /// The device has DC transport (HCA cap `dct`): `mlx5dv_create_qp` makes DCIs and DCTs.
    /// Default: true, as every ConnectX the profiles model (none has DCI streams).
    pub dc: bool,
    /// The port is Ethernet and the device takes raw packet QPs (`IBV_QPT_RAW_PACKET`) with
    /// the offloads mlx5_ib lets their creation ask for: `eth_net_offloads` with `scatter_fcs`
    /// and `vlan_cap` (SCATTER_FCS, CVLAN_STRIPPING), `end_pad` (PCI_WRITE_END_PADDING) and
    /// the stateless tunnel offloads (`MLX5DV_QP_CREATE_TUNNEL_OFFLOADS`). Default: true, as
    /// ConnectX-5 and later report them (unverified per device).
    pub raw_packet: bool,
    /// log2 of the receive WQs a device has (`log_max_rq`: `max_wq_type_rq`). Default: 23, as
    /// ConnectX reports (unverified per device).
    pub log_max_rq: u8,
    /// log2 of the most WRs a receive WQ takes (`log_max_wq_sz`: mlx5_ib refuses a larger
    /// `max_wr`). Default: 16 (unverified per device).
    pub log_max_wq_sz: u8,
    /// log2 of the RQ tables (indirection tables) a device has (`log_max_rqt`:
    /// `max_rwq_indirection_tables`). Default: 16 (unverified per device).
    pub log_max_rqt: u8,
    /// log2 of the largest RQ table (`log_max_rqt_size`: `max_rwq_indirection_table_size`,
    /// and the largest `log_ind_tbl_size` mlx5_ib takes). Default: 11 (unverified per device).
    pub log_max_rqt_size: u8,
    /// `wc.vendor_err` for each error syndrome. Not published by NVIDIA: the defaults are
    /// values seen in mlx5 error dumps, and hardware decides.
    pub vendor_err: VendorErrSection,
}

impl Default for DataPathSection {
    fn default() -> Self {
        DataPathSection {
            max_sq_desc_sz: 1024,
            max_rq_desc_sz: 512,
            max_qp_wr: 32768,
            log_max_cq_sz: 22,
            host_memory_limit: 4 << 30,
            dma_mmo: false,
            log_dma_mmo_max_size: 0,
            ooo_dp: false,
            rdma_core_release: 64,
            max_msg_sz: default_max_msg_sz(),
            log_max_ra_res_qp: 4,
            log_max_ra_req_qp: 4,
            pkey_table_len: 128,
            log_max_srq_sz: 15,
            log_max_srq: 23,
            atomic: true,
            dc: true,
            raw_packet: true,
            log_max_rq: 23,
            log_max_wq_sz: 16,
            log_max_rqt: 16,
            log_max_rqt_size: 11,
            vendor_err: VendorErrSection::default(),
        }
    }
}

impl DataPathSection {
    /// `ibv_device_attr_ex.rss_caps` as mlx5_ib fills them for a device with raw packet QPs
    /// (the IPv4, IPv6, TCP and UDP fields, the inner headers through the tunnel offloads;
    /// no IPsec): all zero without.
    pub fn rss_caps(&self) -> crate::RssCaps {
        use crate::rx_hash_fields as f;
        if !self.raw_packet {
            return crate::RssCaps::default();
        }
        crate::RssCaps {
            supported_qpts: 1 << crate::qp_type::RAW_PACKET,
            max_rwq_indirection_tables: 1 << self.log_max_rqt.min(31),
            max_rwq_indirection_table_size: 1 << self.log_max_rqt_size.min(31),
            rx_hash_fields_mask: f::SRC_IPV4
                | f::DST_IPV4
                | f::SRC_IPV6
                | f::DST_IPV6
                | f::SRC_PORT_TCP
                | f::DST_PORT_TCP
                | f::SRC_PORT_UDP
                | f::DST_PORT_UDP
                | f::INNER,
            rx_hash_function: crate::RX_HASH_FUNC_TOEPLITZ,
        }
    }

    /// `ibv_device_attr_ex.max_wq_type_rq`: 0 without raw packet QPs.
    pub fn max_wq_type_rq(&self) -> u32 {
        if self.raw_packet { 1 << self.log_max_rq.min(31) } else { 0 }
    }

    /// `mlx5dv_context.max_wr_memcpy_length`: 0 without the DMA engine, else
    /// `1 << log_dma_mmo_max_size`, or 2 GiB when that is 0 (`MLX5_DMA_MMO_MAX_SIZE`).
    pub fn dma_max_size(&self) -> u64 {
        match (self.dma_mmo, self.log_dma_mmo_max_size) {
            (false, _) => 0,
            (true, 0) => 1 << 31,
            (true, log) => 1u64.checked_shl(u32::from(log)).unwrap_or(0),
        }
    }
}

/// The mlx5 port's `max_msg_sz`: 1 GiB.
fn default_max_msg_sz() -> u32 {
    1 << 30
}

/// `[datapath.vendor_err]`: the vendor syndrome reported with each error CQE syndrome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VendorErrSection {
    /// With LOCAL_LENGTH_ERR.
    pub local_length: u8,
    /// With LOCAL_QP_OP_ERR.
    pub local_qp_op: u8,
    /// With LOCAL_PROT_ERR.
    pub local_protection: u8,
    /// With WR_FLUSH_ERR.
    pub flush: u8,
    /// With REMOTE_INVAL_REQ_ERR.
    pub remote_invalid_request: u8,
    /// With REMOTE_ACCESS_ERR.
    pub remote_access: u8,
    /// With REMOTE_OP_ERR.
    pub remote_operation: u8,
    /// With TRANSPORT_RETRY_EXC_ERR.
    pub transport_retry: u8,
    /// With RNR_RETRY_EXC_ERR.
    pub rnr_retry: u8,
}

impl Default for VendorErrSection {
    fn default() -> Self {
        VendorErrSection {
            local_length: 0x68,
            local_qp_op: 0x62,
            local_protection: 0x56,
            flush: 0xf9,
            remote_invalid_request: 0x8a,
            remote_access: 0x88,
            remote_operation: 0x89,
            transport_retry: 0x81,
            rnr_retry: 0x82,
        }
    }
}

/// `[device]`: names and identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSection {
    /// The mlx5 device name (`mlx5_0`).
    pub name: String,
    /// Firmware version string.
    pub fw_ver: String,
    /// Board id.
    pub board_id: String,
    /// PCI device id (`vendor_part_id`).
    pub vendor_part_id: u32,
    /// PCI name of a function bound to vfio-pci, if the host has one.
    #[serde(default)]
    pub vfio_pci_name: Option<String>,
    /// The sysfs path (without `/sys/`) of the data-direct device bonded with this device,
    /// if it has one: what `mlx5dv_get_data_direct_sysfs_path` answers, and what
    /// `MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT` needs.
    #[serde(default)]
    pub data_direct_sysfs_path: Option<String>,
    /// `ibv_context.num_comp_vectors` of a kernel context: the completion vectors
    /// `mlx5dv_devx_query_eqn` answers for (unverified default 8).
    #[serde(default = "default_comp_vectors")]
    pub num_comp_vectors: u16,
    /// The MSI-X vectors VFIO reports for the VFIO function, vector 0 being the driver's
    /// command EQ (unverified default 8).
    #[serde(default = "default_comp_vectors")]
    pub vfio_msix_vectors: u16,
    /// Devices of other providers on the host (rxe, siw).
    #[serde(default)]
    pub other_devices: Vec<String>,
    /// How many mlx5 devices of this kind the host has (`mlx5_0`, `mlx5_1`, …); two let a
    /// test model a client and a server cabled back to back.
    #[serde(default = "two")]
    pub count: u8,
    /// The first device's node GUID; device `i` has this plus `i`. A RoCE port's GID 0 is the
    /// link-local GID built from it. Default: an NVIDIA-OUI EUI-64.
    #[serde(default = "default_node_guid", with = "hex_u64")]
    pub node_guid: u64,
    /// The ports' link layer: RoCE (`ethernet`, routed by GID) or InfiniBand (routed by LID,
    /// device `i` having LID `i + 1`).
    #[serde(default)]
    pub link_layer: LinkLayer,
    /// `ibv_port_attr.active_mtu` (`enum ibv_mtu`, 5 = 4096 bytes).
    #[serde(default = "mtu_4096")]
    pub active_mtu: u32,
    /// `ibv_device_attr_ex.hca_core_clock`: the frequency of the device's free-running clock
    /// in kHz (the kernel's `device_frequency_khz` cap), which completion timestamps and
    /// `ibv_query_rt_values_ex` count in. Default 1000000, 1 GHz (unverified: each card
    /// reports its own).
    #[serde(default = "default_core_clock_khz")]
    pub hca_core_clock_khz: u64,
    /// `ibv_device_attr_ex.completion_timestamp_mask`: the bits of the clock a CQE carries.
    /// Default 0x7fffffffffffffff, the constant mlx5_ib reports.
    #[serde(default = "default_timestamp_mask", with = "hex_u64")]
    pub completion_timestamp_mask: u64,
    /// The device memory (MEMIC) the device has, in bytes: the DEVICE_MEMORY capability page's
    /// `max_memic_size` and `memic_bar_size`, and `ibv_device_attr_ex.max_dm_size`; 0 is a
    /// device without MEMIC. Default 131072, 128 KiB (unverified for any one card).
    #[serde(default = "default_max_dm_size")]
    pub max_dm_size: u32,
}

fn default_max_dm_size() -> u32 {
    128 * 1024
}

fn default_core_clock_khz() -> u64 {
    1_000_000
}

fn default_timestamp_mask() -> u64 {
    0x7fff_ffff_ffff_ffff
}

fn two() -> u8 {
    2
}

fn default_comp_vectors() -> u16 {
    8
}

fn default_node_guid() -> u64 {
    0x0e42_a1ff_fe00_1000
}

fn mtu_4096() -> u32 {
    5
}

/// A port's link layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkLayer {
    /// RoCE: paths name the responder by GID.
    #[default]
    Ethernet,
    /// InfiniBand: paths name the responder by LID.
    Infiniband,
}

/// `[kernel]`: what mlx5_ib grants and reports at context allocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSection {
    /// DEVX user contexts are available; without them a DEVX request fails with EINVAL.
    pub devx: bool,
    /// The device has a whitelist uid, so QUERY_HCA_CAP works on non-DEVX contexts.
    #[serde(default = "yes")]
    pub devx_whitelist_uid: bool,
    /// `MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_MKEY_UPDATE_TAG`.
    pub mkey_update_tag: bool,
    /// `MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS`.
    pub sqd2rts: bool,
}

fn yes() -> bool {
    true
}

/// Resolves a base profile's name (`extends = "NAME"`) to its TOML text.
pub type Bases<'a> = &'a dyn Fn(&str) -> Option<&'static str>;

/// No base profiles: `extends` is an error.
pub fn no_bases(_: &str) -> Option<&'static str> {
    None
}

/// A profile could not be found, read or understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileError {
    /// Where the profile came from: a name or a path.
    pub origin: String,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "profile {}: {}", self.origin, self.message)
    }
}

impl std::error::Error for ProfileError {}

impl Profile {
    /// Load a profile from a TOML file; `bases` resolves `extends`.
    pub fn from_file(path: &Path, bases: Bases) -> Result<Profile, ProfileError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ProfileError { origin: origin.clone(), message: e.to_string() })?;
        Self::from_toml_str(&text, &origin, bases)
    }

    /// Parse a profile from TOML text; `origin` names it in errors, `bases` resolves `extends`.
    pub fn from_toml_str(text: &str, origin: &str, bases: Bases) -> Result<Profile, ProfileError> {
        let value = merged_value(text, origin, bases, 0)?;
        let profile: Profile = value
            .try_into()
            .map_err(|e: toml::de::Error| ProfileError { origin: origin.to_string(), message: e.to_string() })?;
        profile.validate().map_err(|message| ProfileError { origin: origin.to_string(), message })?;
        Ok(profile)
    }

    /// The names of the host's mlx5 devices: `device.name`, then the same name with its
    /// trailing number counted up (`mlx5_0`, `mlx5_1`).
    pub fn device_names(&self) -> Vec<String> {
        let name = &self.device.name;
        let (stem, first) = split_device_name(name);
        (0..u64::from(self.device.count.max(1)))
            .map(|i| if i == 0 { name.clone() } else { format!("{stem}{}", first.saturating_add(i)) })
            .collect()
    }

    /// Write the profile as TOML, in the format [`Profile::from_toml_str`] reads.
    pub fn to_toml_string(&self) -> Result<String, ProfileError> {
        toml::to_string_pretty(self).map_err(|e| ProfileError { origin: self.name.clone(), message: e.to_string() })
    }

    fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() {
            return Err("name is empty".into());
        }
        if self.device.name.is_empty() {
            return Err("device.name is empty".into());
        }
        if !(1..=8).contains(&self.device.count) {
            return Err(format!("device.count = {} is outside 1..=8", self.device.count));
        }
        if self.hca_cap.log_max_mkey > 24 {
            return Err(format!(
                "hca_cap.log_max_mkey = {} exceeds 24 (mkey indexes are 24-bit)",
                self.hca_cap.log_max_mkey
            ));
        }
        for c in &self.crypto.credentials {
            if c.id > 0xff_ffff || c.credential.len() != CREDENTIAL_PLAINTEXT_LEN {
                return Err(format!("crypto.credentials id 0x{:x}: ids are 24-bit, credentials 40 bytes", c.id));
            }
        }
        for k in &self.crypto.import_keks {
            if k.id > 0xff_ffff || !matches!(k.key.len(), 16 | 32) {
                return Err(format!("crypto.import_keks id 0x{:x}: ids are 24-bit, keys 16 or 32 bytes", k.id));
            }
        }
        if self.hca_cap.log_max_klm_list_size > 63 || self.crypto_cap.log_max_num_deks > 31 {
            return Err("hca_cap.log_max_klm_list_size must fit 6 bits and crypto_cap.log_max_num_deks 5 bits".into());
        }
        let (_, first) = split_device_name(&self.device.name);
        let last = first.checked_add(u64::from(self.device.count.saturating_sub(1)));
        if last.is_none_or(|last| last > u64::from(u32::MAX)) {
            return Err(format!("device.name `{}` numbers its devices past 2^32", self.device.name));
        }
        let d = &self.datapath;
        let bounded = [
            ("hca_cap.log_max_mkey", u64::from(self.hca_cap.log_max_mkey), 4, 24, 1),
            ("datapath.max_sq_desc_sz", u64::from(d.max_sq_desc_sz), 64, 65536, 64),
            ("datapath.max_rq_desc_sz", u64::from(d.max_rq_desc_sz), 16, 65536, 16),
            ("datapath.max_qp_wr", u64::from(d.max_qp_wr), 1, 1 << 24, 1),
            ("datapath.log_max_cq_sz", u64::from(d.log_max_cq_sz), 1, 24, 1),
            ("datapath.log_max_srq_sz", u64::from(d.log_max_srq_sz), 1, 16, 1),
            ("datapath.log_max_srq", u64::from(d.log_max_srq), 1, 24, 1),
            ("datapath.host_memory_limit", d.host_memory_limit, 1 << 20, 64 << 30, 4096),
            ("datapath.rdma_core_release", u64::from(d.rdma_core_release), 17, 999, 1),
            ("datapath.max_msg_sz", u64::from(d.max_msg_sz), 1, u64::from(u32::MAX), 1),
            ("datapath.log_max_rq", u64::from(d.log_max_rq), 1, 24, 1),
            ("datapath.log_max_wq_sz", u64::from(d.log_max_wq_sz), 1, 24, 1),
            ("datapath.log_max_rqt", u64::from(d.log_max_rqt), 1, 24, 1),
            ("datapath.log_max_rqt_size", u64::from(d.log_max_rqt_size), 0, 16, 1),
            ("device.active_mtu", u64::from(self.device.active_mtu), 1, 5, 1),
        ];
        for (key, value, min, max, unit) in bounded {
            if !(min..=max).contains(&value) || value % unit != 0 {
                let unit = if unit > 1 { format!(", a multiple of {unit}") } else { String::new() };
                return Err(format!("{key} = {value} is outside {min}..={max}{unit}"));
            }
        }
        Ok(())
    }
}

/// A device name's stem and trailing number (`mlx5_` and 4); no number or an unreadable one
/// counts as 0.
fn split_device_name(name: &str) -> (&str, u64) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, num) = name.split_at(name.len() - digits);
    (stem, if num.is_empty() { 0 } else { num.parse().unwrap_or(u64::MAX) })
}

fn merged_value(text: &str, origin: &str, bases: Bases, depth: u32) -> Result<toml::Table, ProfileError> {
    let err = |message: String| ProfileError { origin: origin.to_string(), message };
    if depth > 4 {
        return Err(err("`extends` chain is longer than 4".into()));
    }
    let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| err(e.to_string()))?;
    let Some(base) = table.remove("extends") else {
        return Ok(table);
    };
    let base_name = base.as_str().ok_or_else(|| err("`extends` must be a profile name".into()))?;
    let base_text =
        bases(base_name).ok_or_else(|| err(format!("`extends` names `{base_name}`, which is not a known profile")))?;
    let mut merged = merged_value(base_text, base_name, bases, depth + 1)?;
    merge(&mut merged, table);
    Ok(merged)
}

fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}
