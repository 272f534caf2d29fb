//! Software steering (`mlx5dv_dr_*`): domains of the NIC's receive and transmit flow tables,
//! their tables, matchers and rules, and the actions rules apply to matching packets.
//!
//! A domain's level-0 table is the root table the firmware keeps (its rules go in as
//! `mlx5dv_create_flow` rules do); tables of a higher level are the library's own, which it
//! writes into device memory where the device supports software-owned steering.

use serde::{Deserialize, Serialize};

use crate::api::queue::Qp;
use crate::error::Result;
use crate::handle::{ContextHandle, DevxObjHandle};

/// `enum mlx5dv_dr_domain_type`.
pub mod dr_domain_type {
    /// `MLX5DV_DR_DOMAIN_TYPE_NIC_RX`: packets the port receives.
    pub const NIC_RX: u32 = 0;
    /// `MLX5DV_DR_DOMAIN_TYPE_NIC_TX`: packets the function sends.
    pub const NIC_TX: u32 = 1;
    /// `MLX5DV_DR_DOMAIN_TYPE_FDB`: the eswitch's forwarding database.
    pub const FDB: u32 = 2;
}

/// `MLX5DV_DR_DOMAIN_SYNC_FLAGS_*`.
pub mod dr_sync_flags {
    /// `_SW`: the library's queued writes reached the device.
    pub const SW: u32 = 1 << 0;
    /// `_HW`: the device's steering caches hold them.
    pub const HW: u32 = 1 << 1;
    /// `_MEM`: freed steering memory is reclaimed.
    pub const MEM: u32 = 1 << 2;
}

/// `MLX5DV_DR_MATCHER_LAYOUT_*` (`struct mlx5dv_dr_matcher_layout.flags`).
pub mod dr_layout_flags {
    /// `_RESIZABLE`: the matcher's table may grow again.
    pub const RESIZABLE: u32 = 1 << 0;
    /// `_NUM_RULE`: `log_num_of_rules_hint` is set.
    pub const NUM_RULE: u32 = 1 << 1;
}

/// `MLX5DV_DR_ACTION_FLAGS_ROOT_LEVEL`: an action made for the root table.
pub const DR_ACTION_FLAGS_ROOT_LEVEL: u32 = 1 << 0;

/// `enum mlx5dv_flow_action_packet_reformat_type`.
pub mod reformat_type {
    /// `L2_TUNNEL_TO_L2`: strip an L2 tunnel's outer headers (decapsulation).
    pub const L2_TUNNEL_TO_L2: u32 = 0;
    /// `L2_TO_L2_TUNNEL`: put the given outer headers in front (encapsulation).
    pub const L2_TO_L2_TUNNEL: u32 = 1;
    /// `L3_TUNNEL_TO_L2`.
    pub const L3_TUNNEL_TO_L2: u32 = 2;
    /// `L2_TO_L3_TUNNEL`.
    pub const L2_TO_L3_TUNNEL: u32 = 3;
}

macro_rules! dr_handle {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub struct $name {
            /// The backend's identifier of the object.
            pub handle: u64,
        }
    };
}

dr_handle!(
    /// A `struct mlx5dv_dr_domain`.
    DrDomain
);
dr_handle!(
    /// A `struct mlx5dv_dr_table`.
    DrTable
);
dr_handle!(
    /// A `struct mlx5dv_dr_matcher`.
    DrMatcher
);
dr_handle!(
    /// A `struct mlx5dv_dr_action`.
    DrAction
);
dr_handle!(
    /// A `struct mlx5dv_dr_rule`.
    DrRule
);
dr_handle!(
    /// A `struct ibv_flow_action` of `mlx5dv_create_flow_action_packet_reformat`, for
    /// `mlx5dv_create_flow`'s `MLX5DV_FLOW_ACTION_IBV_FLOW_ACTION`.
    FlowAction
);

/// One `struct mlx5dv_dr_action_dest_attr` of a destination array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DrDest {
    /// `MLX5DV_DR_ACTION_DEST`: a QP, TIR or table action.
    Dest(DrAction),
    /// `MLX5DV_DR_ACTION_DEST_REFORMAT`: a reformat, then a destination.
    DestReformat {
        /// The packet reformat action.
        reformat: DrAction,
        /// The destination after it.
        dest: DrAction,
    },
}

/// What `mlx5dv_dr_action_create_*` makes, with the call's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DrActionAttr {
    /// `_create_drop`.
    Drop,
    /// `_create_default_miss`: the table type's default (RX: no delivery, TX: the wire).
    DefaultMiss,
    /// `_create_dest_ibv_qp`.
    DestQp(Qp),
    /// `_create_dest_devx_tir`.
    DestTir(DevxObjHandle),
    /// `_create_dest_table`.
    DestTable(DrTable),
    /// `_create_flow_counter`: the DEVX flow counter object and the counter's offset in it.
    FlowCounter {
        /// The DEVX object (ALLOC_FLOW_COUNTER).
        counter: DevxObjHandle,
        /// The counter within a bulk.
        offset: u32,
    },
    /// `_create_tag`.
    Tag(u32),
    /// `_create_modify_header`: `actions` is the PRM actions' bytes (8 per action).
    ModifyHeader {
        /// The domain.
        domain: DrDomain,
        /// [`DR_ACTION_FLAGS_ROOT_LEVEL`] or 0.
        flags: u32,
        /// The `set_action_in` / `add_action_in` / `copy_action_in` structures, big-endian.
        actions: Vec<u8>,
    },
    /// `_create_push_vlan`: the 4 bytes pushed (TPID, then TCI), as the big-endian word.
    PushVlan {
        /// The domain.
        domain: DrDomain,
        /// TPID in the high half, TCI in the low half.
        vlan_hdr: u32,
    },
    /// `_create_pop_vlan`.
    PopVlan,
    /// `_create_packet_reformat`.
    PacketReformat {
        /// The domain.
        domain: DrDomain,
        /// [`DR_ACTION_FLAGS_ROOT_LEVEL`] or 0.
        flags: u32,
        /// [`reformat_type`].
        reformat_type: u32,
        /// The headers an encapsulation puts in front.
        data: Vec<u8>,
    },
    /// `_create_dest_array`.
    DestArray {
        /// The domain.
        domain: DrDomain,
        /// Where copies go.
        dests: Vec<DrDest>,
    },
    /// `_create_flow_sampler`.
    FlowSampler {
        /// One packet in `sample_ratio` gets the sample actions.
        sample_ratio: u32,
        /// Where every packet goes next.
        default_next_table: DrTable,
        /// The actions of a sampled copy.
        sample_actions: Vec<DrAction>,
        /// `action`: a register write for the sampled copy (0: none).
        action: u64,
    },
    /// `_create_dest_vport`.
    DestVport {
        /// The domain (FDB).
        domain: DrDomain,
        /// The vport.
        vport: u32,
    },
    /// `_create_dest_ib_port`.
    DestIbPort {
        /// The domain (FDB).
        domain: DrDomain,
        /// The port.
        port: u32,
    },
}

/// An object of the family, for [`Steering::dr_destroy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DrObject {
    /// `mlx5dv_dr_domain_destroy` (EBUSY while tables or actions hold it).
    Domain(DrDomain),
    /// `mlx5dv_dr_table_destroy` (EBUSY while matchers or actions hold it).
    Table(DrTable),
    /// `mlx5dv_dr_matcher_destroy` (EBUSY while rules hold it).
    Matcher(DrMatcher),
    /// `mlx5dv_dr_action_destroy` (EBUSY while rules or other actions hold it).
    Action(DrAction),
    /// `mlx5dv_dr_rule_destroy`.
    Rule(DrRule),
}

/// The `mlx5dv_dr_*` family.
pub trait Steering {
    /// `mlx5dv_dr_domain_create`: EINVAL for an unknown type, EOPNOTSUPP on a port that is
    /// not Ethernet. A domain of a device without software-owned steering takes root tables
    /// only.
    fn dr_domain_create(&mut self, ctx: ContextHandle, domain_type: u32) -> Result<DrDomain>;

    /// `mlx5dv_dr_domain_sync`: EOPNOTSUPP without software steering or for unknown flags.
    fn dr_domain_sync(&mut self, domain: &DrDomain, flags: u32) -> Result<()>;

    /// `mlx5dv_dr_domain_allow_duplicate_rules` (a void call; errors only for a bad handle).
    fn dr_domain_allow_duplicate_rules(&mut self, domain: &DrDomain, allow: bool) -> Result<()>;

    /// `mlx5dv_dump_dr_domain`: the domain's tables, matchers and rules as text lines.
    fn dr_domain_dump(&mut self, domain: &DrDomain) -> Result<String>;

    /// `mlx5dv_dr_table_create`: level 0 is the root table; a higher level needs software
    /// steering (EOPNOTSUPP).
    fn dr_table_create(&mut self, domain: &DrDomain, level: u32) -> Result<DrTable>;

    /// `mlx5dv_dr_matcher_create`: `mask` is the leading bytes of an `fte_match_param`.
    fn dr_matcher_create(&mut self, table: &DrTable, priority: u16, criteria: u8, mask: &[u8]) -> Result<DrMatcher>;

    /// `mlx5dv_dr_matcher_set_layout`: ENOTSUP (EOPNOTSUPP) on a root table's matcher.
    fn dr_matcher_set_layout(&mut self, matcher: &DrMatcher, flags: u32, log_num_of_rules: u32) -> Result<()>;

    /// `mlx5dv_dr_action_create_*`.
    fn dr_action_create(&mut self, attr: &DrActionAttr) -> Result<DrAction>;

    /// `mlx5dv_dr_rule_create`: the matcher's rule matching `value`, applying `actions`.
    fn dr_rule_create(&mut self, matcher: &DrMatcher, value: &[u8], actions: &[DrAction]) -> Result<DrRule>;

    /// `mlx5dv_dr_*_destroy`.
    fn dr_destroy(&mut self, obj: DrObject) -> Result<()>;

    /// `mlx5dv_create_flow_action_packet_reformat` on the context, for flow table type
    /// `ft_type` (`MLX5DV_FLOW_TABLE_TYPE_NIC_RX` 0, `_NIC_TX` 1).
    fn create_flow_action_packet_reformat(
        &mut self,
        ctx: ContextHandle,
        reformat_type: u32,
        ft_type: u32,
        data: &[u8],
    ) -> Result<FlowAction>;

    /// `ibv_destroy_flow_action`: EBUSY while flows use it.
    fn destroy_flow_action(&mut self, action: &FlowAction) -> Result<()>;
}
