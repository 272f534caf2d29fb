//! Every struct the shim fills or reads, against the installed headers: a C program compiled
//! with `cc` prints each size and member offset, and each must equal the Rust binding's.
//! (The mlx5dv structs are checked by the hw backend's layout test.)

use std::mem::{offset_of, size_of};
use std::process::Command;

use rdma_sys::*;

/// `(C expression, our value)` for each size and member offset.
fn table() -> Vec<(String, u64)> {
    let mut rows = Vec::new();
    macro_rules! layout {
        ($t:ident { $($f:ident),* $(,)? }) => {
            rows.push((format!("sizeof(struct {})", stringify!($t)), size_of::<$t>() as u64));
            $(rows.push((
                format!("offsetof(struct {}, {})", stringify!($t), stringify!($f)),
                offset_of!($t, $f) as u64,
            ));)*
        };
    }
    layout!(ibv_device { node_type, transport_type, name, dev_name, dev_path, ibdev_path });
    layout!(ibv_context { device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat });
    layout!(ibv_context_ops { poll_cq, req_notify_cq, post_srq_recv, post_send, post_recv });
    layout!(verbs_context {
        query_port,
        advise_mr,
        alloc_null_mr,
        read_counters,
        create_counters,
        destroy_counters,
        reg_dm_mr,
        alloc_dm,
        free_dm,
        alloc_parent_domain,
        dealloc_td,
        alloc_td,
        modify_cq,
        post_srq_ops,
        create_wq,
        query_rt_values,
        create_cq_ex,
        query_device_ex,
        open_qp,
        create_qp_ex,
        get_srq_num,
        create_srq_ex,
        open_xrcd,
        sz,
        context,
    });
    layout!(ibv_device_attr {
        fw_ver,
        node_guid,
        sys_image_guid,
        max_mr_size,
        page_size_cap,
        vendor_id,
        vendor_part_id,
        hw_ver,
        max_qp,
        max_qp_wr,
        device_cap_flags,
        max_sge,
        max_sge_rd,
        max_cq,
        max_cqe,
        max_mr,
        max_pd,
        max_qp_rd_atom,
        max_res_rd_atom,
        max_qp_init_rd_atom,
        atomic_cap,
        max_mw,
        max_ah,
        max_srq,
        max_srq_wr,
        max_srq_sge,
        max_pkeys,
        local_ca_ack_delay,
        phys_port_cnt,
    });
    layout!(ibv_port_attr {
        state,
        max_mtu,
        active_mtu,
        gid_tbl_len,
        port_cap_flags,
        max_msg_sz,
        pkey_tbl_len,
        lid,
        sm_lid,
        lmc,
        max_vl_num,
        sm_sl,
        subnet_timeout,
        active_width,
        active_speed,
        phys_state,
        link_layer,
        flags,
        port_cap_flags2,
    });
    layout!(ibv_gid_entry { gid, gid_index, port_num, gid_type, ndev_ifindex });
    layout!(ibv_comp_channel { context, fd, refcnt });
    layout!(ibv_async_event { element, event_type });
    layout!(ibv_pd { context, handle });
    layout!(ibv_mr { context, pd, addr, length, handle, lkey, rkey });
    layout!(ibv_cq { context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed });
    layout!(ibv_qp {
        context,
        qp_context,
        pd,
        send_cq,
        recv_cq,
        srq,
        handle,
        qp_num,
        state,
        qp_type,
        events_completed
    });
    layout!(ibv_qp_ex {
        qp_base,
        comp_mask,
        wr_id,
        wr_flags,
        wr_atomic_cmp_swp,
        wr_atomic_fetch_add,
        wr_bind_mw,
        wr_local_inv,
        wr_rdma_read,
        wr_rdma_write,
        wr_rdma_write_imm,
        wr_send,
        wr_send_imm,
        wr_send_inv,
        wr_send_tso,
        wr_set_ud_addr,
        wr_set_xrc_srqn,
        wr_set_inline_data,
        wr_set_inline_data_list,
        wr_set_sge,
        wr_set_sge_list,
        wr_start,
        wr_complete,
        wr_abort,
    });
    layout!(ibv_wc { wr_id, status, opcode, vendor_err, byte_len, qp_num, src_qp, wc_flags, pkey_index, slid, sl });
    layout!(ibv_sge { addr, length, lkey });
    layout!(ibv_send_wr { wr_id, next, sg_list, num_sge, opcode, send_flags, wr });
    layout!(ibv_recv_wr { wr_id, next, sg_list, num_sge });
    layout!(ibv_qp_cap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data });
    layout!(ibv_qp_init_attr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all });
    layout!(ibv_qp_init_attr_ex {
        qp_context,
        send_cq,
        recv_cq,
        srq,
        cap,
        qp_type,
        sq_sig_all,
        comp_mask,
        pd,
        xrcd,
        create_flags,
        max_tso_header,
        rwq_ind_tbl,
        rx_hash_conf,
        source_qpn,
        send_ops_flags,
    });
    layout!(ibv_global_route { dgid, flow_label, sgid_index, hop_limit, traffic_class });
    layout!(ibv_ah_attr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num });
    layout!(ibv_qp_attr {
        qp_state,
        cur_qp_state,
        path_mtu,
        qkey,
        rq_psn,
        sq_psn,
        dest_qp_num,
        qp_access_flags,
        cap,
        ah_attr,
        pkey_index,
        max_rd_atomic,
        max_dest_rd_atomic,
        min_rnr_timer,
        port_num,
        timeout,
        retry_cnt,
        rnr_retry,
    });
    layout!(ibv_ah { context, pd, handle });
    rows.push(("offsetof(struct verbs_context, priv)".into(), offset_of!(verbs_context, priv_) as u64));
    // The send WR's union members the shim reads.
    rows.push((
        "offsetof(struct ibv_send_wr, imm_data)".into(),
        offset_of!(ibv_send_wr, imm_data_invalidated_rkey_union) as u64,
    ));
    rows.push(("offsetof(struct ibv_wc, imm_data)".into(), offset_of!(ibv_wc, imm_data_invalidated_rkey_union) as u64));
    rows
}

#[test]
fn the_structs_the_shim_fills_match_the_installed_headers() {
    let rows = table();
    let mut c =
        String::from("#include <infiniband/verbs.h>\n#include <stddef.h>\n#include <stdio.h>\nint main(void) {\n");
    for (expr, _) in &rows {
        c.push_str(&format!("    printf(\"%llu\\n\", (unsigned long long)({expr}));\n"));
    }
    c.push_str("    return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("mlx5-capi-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let (src, bin) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&src, c).expect("write the C program");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc).arg(&src).arg("-o").arg(&bin).output().expect("run the C compiler");
    assert!(out.status.success(), "{cc} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(&bin).output().expect("run the C program");
    let printed: Vec<u64> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| l.parse().expect("a number")).collect();
    assert_eq!(printed.len(), rows.len());
    let wrong: Vec<String> = rows
        .iter()
        .zip(&printed)
        .filter(|((_, ours), theirs)| ours != *theirs)
        .map(|((expr, ours), theirs)| format!("{expr}: C says {theirs}, we say {ours}"))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wrong.is_empty(), "{} mismatches:\n{}", wrong.len(), wrong.join("\n"));
}
