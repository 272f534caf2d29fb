//! libmlx5's `mlx5dv_dr_*` looked up at run time (the committed bindings leave the family
//! out: its structures are opaque), and the objects the hw backend made with it.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};

use rdma_sys::{ibv_context, ibv_qp};

pub(crate) type P = *mut c_void;

/// The family's functions, typed as `mlx5dv.h` declares them.
pub(crate) struct DrFns {
    pub(crate) domain_create: unsafe extern "C" fn(*mut ibv_context, u32) -> P,
    pub(crate) domain_destroy: unsafe extern "C" fn(P) -> c_int,
    pub(crate) domain_sync: unsafe extern "C" fn(P, u32) -> c_int,
    pub(crate) allow_duplicate_rules: unsafe extern "C" fn(P, bool),
    pub(crate) dump_domain: unsafe extern "C" fn(*mut libc::FILE, P) -> c_int,
    pub(crate) table_create: unsafe extern "C" fn(P, u32) -> P,
    pub(crate) table_destroy: unsafe extern "C" fn(P) -> c_int,
    pub(crate) matcher_create: unsafe extern "C" fn(P, u16, u8, P) -> P,
    pub(crate) matcher_destroy: unsafe extern "C" fn(P) -> c_int,
    pub(crate) matcher_set_layout: unsafe extern "C" fn(P, *mut [u32; 2]) -> c_int,
    pub(crate) rule_create: unsafe extern "C" fn(P, P, usize, *mut P) -> P,
    pub(crate) rule_destroy: unsafe extern "C" fn(P) -> c_int,
    pub(crate) action_destroy: unsafe extern "C" fn(P) -> c_int,
    pub(crate) drop: unsafe extern "C" fn() -> P,
    pub(crate) default_miss: unsafe extern "C" fn() -> P,
    pub(crate) pop_vlan: unsafe extern "C" fn() -> P,
    pub(crate) tag: unsafe extern "C" fn(u32) -> P,
    pub(crate) dest_qp: unsafe extern "C" fn(*mut ibv_qp) -> P,
    pub(crate) dest_tir: unsafe extern "C" fn(P) -> P,
    pub(crate) dest_table: unsafe extern "C" fn(P) -> P,
    pub(crate) flow_counter: unsafe extern "C" fn(P, u32) -> P,
    pub(crate) modify_header: unsafe extern "C" fn(P, u32, usize, *mut u64) -> P,
    pub(crate) push_vlan: unsafe extern "C" fn(P, u32) -> P,
    pub(crate) packet_reformat: unsafe extern "C" fn(P, u32, u32, usize, P) -> P,
    pub(crate) dest_array: unsafe extern "C" fn(P, usize, *mut P) -> P,
    pub(crate) flow_sampler: unsafe extern "C" fn(*mut SamplerAttr) -> P,
    pub(crate) dest_vport: unsafe extern "C" fn(P, u32) -> P,
    pub(crate) dest_ib_port: unsafe extern "C" fn(P, u32) -> P,
    _lib: libloading::Library,
}

/// `struct mlx5dv_dr_flow_sampler_attr`.
#[repr(C)]
pub(crate) struct SamplerAttr {
    pub(crate) sample_ratio: u32,
    pub(crate) default_next_table: P,
    pub(crate) num_sample_actions: u32,
    pub(crate) sample_actions: *mut P,
    pub(crate) action: u64,
}

/// `struct mlx5dv_dr_action_dest_attr` and `struct mlx5dv_dr_action_dest_reformat`.
#[repr(C)]
pub(crate) struct DestAttr {
    pub(crate) ty: u32,
    pub(crate) ptr: P,
}
#[repr(C)]
pub(crate) struct DestReformat {
    pub(crate) reformat: P,
    pub(crate) dest: P,
}

impl DrFns {
    pub(crate) fn load() -> std::result::Result<Self, String> {
        // SAFETY: libmlx5 is loaded already by the backend; this takes another reference.
        let lib = unsafe { libloading::Library::new(crate::lib_mlx5::LIBMLX5) }.map_err(|e| e.to_string())?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is typed as mlx5dv.h declares it.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| format!("{}: {e}", $name))?
            };
        }
        Ok(DrFns {
            domain_create: sym!("mlx5dv_dr_domain_create"),
            domain_destroy: sym!("mlx5dv_dr_domain_destroy"),
            domain_sync: sym!("mlx5dv_dr_domain_sync"),
            allow_duplicate_rules: sym!("mlx5dv_dr_domain_allow_duplicate_rules"),
            dump_domain: sym!("mlx5dv_dump_dr_domain"),
            table_create: sym!("mlx5dv_dr_table_create"),
            table_destroy: sym!("mlx5dv_dr_table_destroy"),
            matcher_create: sym!("mlx5dv_dr_matcher_create"),
            matcher_destroy: sym!("mlx5dv_dr_matcher_destroy"),
            matcher_set_layout: sym!("mlx5dv_dr_matcher_set_layout"),
            rule_create: sym!("mlx5dv_dr_rule_create"),
            rule_destroy: sym!("mlx5dv_dr_rule_destroy"),
            action_destroy: sym!("mlx5dv_dr_action_destroy"),
            drop: sym!("mlx5dv_dr_action_create_drop"),
            default_miss: sym!("mlx5dv_dr_action_create_default_miss"),
            pop_vlan: sym!("mlx5dv_dr_action_create_pop_vlan"),
            tag: sym!("mlx5dv_dr_action_create_tag"),
            dest_qp: sym!("mlx5dv_dr_action_create_dest_ibv_qp"),
            dest_tir: sym!("mlx5dv_dr_action_create_dest_devx_tir"),
            dest_table: sym!("mlx5dv_dr_action_create_dest_table"),
            flow_counter: sym!("mlx5dv_dr_action_create_flow_counter"),
            modify_header: sym!("mlx5dv_dr_action_create_modify_header"),
            push_vlan: sym!("mlx5dv_dr_action_create_push_vlan"),
            packet_reformat: sym!("mlx5dv_dr_action_create_packet_reformat"),
            dest_array: sym!("mlx5dv_dr_action_create_dest_array"),
            flow_sampler: sym!("mlx5dv_dr_action_create_flow_sampler"),
            dest_vport: sym!("mlx5dv_dr_action_create_dest_vport"),
            dest_ib_port: sym!("mlx5dv_dr_action_create_dest_ib_port"),
            _lib: lib,
        })
    }
}

/// The family's objects this backend made: handle → the library's pointer.
#[derive(Default)]
pub(crate) struct HwDr {
    pub(crate) fns: Option<std::result::Result<DrFns, String>>,
    pub(crate) objs: BTreeMap<u64, P>,
    pub(crate) next: u64,
}

impl std::fmt::Debug for HwDr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HwDr").field("objects", &self.objs.len()).finish_non_exhaustive()
    }
}

/// `struct mlx5dv_flow_match_parameters` of `bytes`, 8-byte aligned.
pub(crate) fn params(bytes: &[u8]) -> Vec<u64> {
    let mut v = vec![0u64; 1 + bytes.len().div_ceil(8)];
    v[0] = bytes.len() as u64;
    // SAFETY: `v` has room for the size word and `bytes` after it.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().add(1).cast::<u8>(), bytes.len()) };
    v
}
