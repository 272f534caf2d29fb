//! The names libibverbs gives its enums: `ibv_node_type_str`, `ibv_port_state_str`,
//! `ibv_event_type_str` and `ibv_wc_status_str`, as static C strings.

use std::ffi::{CStr, c_char, c_int};

fn static_str(s: &'static CStr) -> *const c_char {
    s.as_ptr()
}

/// `ibv_node_type_str`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    static_str(match node_type {
        1 => c"InfiniBand channel adapter",
        2 => c"InfiniBand switch",
        3 => c"InfiniBand router",
        4 => c"iWARP NIC",
        5 => c"usNIC",
        6 => c"usNIC UDP",
        7 => c"unspecified",
        _ => c"unknown",
    })
}

/// `ibv_port_state_str`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_port_state_str(port_state: c_int) -> *const c_char {
    static_str(match port_state {
        0 => c"no state change (NOP)",
        1 => c"down",
        2 => c"init",
        3 => c"armed",
        4 => c"active",
        5 => c"active defer",
        _ => c"unknown",
    })
}

/// `ibv_event_type_str`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    const NAMES: [&CStr; 20] = [
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ fatal",
    ];
    static_str(usize::try_from(event).ok().and_then(|i| NAMES.get(i)).copied().unwrap_or(c"unknown"))
}

/// `ibv_wc_status_str`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    const NAMES: [&CStr; 24] = [
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
        c"TM software rendezvous",
    ];
    static_str(usize::try_from(status).ok().and_then(|i| NAMES.get(i)).copied().unwrap_or(c"unknown"))
}
