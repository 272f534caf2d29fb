#!/usr/bin/env python3
"""Write prototypes.tsv: the C prototype and failure convention of every function the shim's
libraries export, read once from an rdma-core source tree (the release that introduced the
newest symbols of libibverbs.symbols, libmlx5.symbols and librdmacm.symbols, or later).

    prototypes.py RDMA_CORE_SOURCE_DIR > prototypes.tsv

gen.py reads the table at link time for the symbols the installed headers do not declare, and
for every symbol's convention; capi/tests/abi_stubs.py checks each stub against it. Columns:

    symbol  version  return  parameters  convention

`version` is empty for a symbol's default version, the node name for a compat one (whose
prototype is the COMPAT_SYMVER_FUNC of the old ABI). `parameters` are `; `-separated. The
conventions, each what the real call does when the device or kernel lacks the feature:

    null        NULL, errno set                  (every pointer return unless listed)
    errno       the errno value, positive        (the default for int: rdma-core's own rule)
    minus1      -1, errno set                    (the calls documented so, listed below)
    neg_errno   the errno value negated
    const:N     the value N, errno set           (ibv_rereg_mr's IBV_REREG_MR_ERR_CMD)
    zero        0                                (a value with no failure code: a GUID, a count)
    false       false                            (bool)
    void        nothing
    impl        a pure function with no failure: the shim must implement it, never stub it
    data        a variable, not a function
"""

import re
import sys
from pathlib import Path

import cproto

ABI = Path(__file__).resolve().parent

HEADERS = [
    "libibverbs/verbs.h",
    "libibverbs/driver.h",
    "libibverbs/cmd_ioctl.h",
    "libibverbs/cmd_write.h",
    "libibverbs/marshall.h",
    "providers/mlx5/mlx5dv.h",
    # mlx5dv_create_flow: the header makes it a macro; verbs.c declares the exported function.
    "providers/mlx5/verbs.c",
    "librdmacm/rdma_cma.h",
    "librdmacm/rsocket.h",
    "librdmacm/rdma_verbs.h",
]
COMPAT = ["libibverbs/compat-1_0.c", "providers/mlx5/mlx5.c"]

# The int-returning calls whose failure is not the errno value, with where rdma-core says so.
CONVENTIONS = {
    # man pages: "returns 0 on success, and -1 on error" / read(2) of the event fd.
    "ibv_get_async_event": "minus1",  # device.c
    "ibv_get_cq_event": "minus1",  # verbs.c
    "ibv_query_gid": "minus1",  # ibv_query_gid.3
    "ibv_query_pkey": "minus1",  # ibv_query_pkey.3
    "ibv_get_pkey_index": "minus1",  # ibv_get_pkey_index.3
    "ibv_query_gid_type": "minus1",  # verbs.c
    "ibv_read_sysfs_file": "minus1",  # sysfs.c
    "ibv_read_ibdev_sysfs_file": "minus1",  # sysfs.c
    "ibv_init_ah_from_wc": "minus1",  # verbs.c: -1 for a GRH of neither version
    "ibv_get_device_index": "minus1",  # ibv_get_device_index.3
    "ibv_cmd_poll_cq": "minus1",  # cmd.c
    "ibv_dm_export_dmabuf_fd": "minus1",  # ibv_dm_export_dmabuf_fd.3: an fd, or -1
    "ibv_export_buf_dmabuf_fd": "minus1",  # ibv_alloc_buf.3
    "mlx5dv_devx_uar_export_dmabuf_fd": "minus1",  # mlx5dv_devx_uar_export_dmabuf_fd.3
    "mlx5dv_vfio_get_events_fd": "minus1",  # an fd; -1 where there is none
    "mlx5dv_devx_get_event": "minus1",  # mlx5dv_devx_get_event.3 (ssize_t)
    "_ibv_query_gid_table": "neg_errno",  # cmd_device.c: -EOPNOTSUPP
    "ibv_resolve_eth_l2_from_gid": "neg_errno",  # verbs.c: -EINVAL, -EHOSTUNREACH
    "mlx5dv_qp_cancel_posted_send_wrs": "neg_errno",  # mlx5dv_qp_cancel_posted_send_wrs.3
    # verbs.c: the provider's rereg_mr failing is IBV_REREG_MR_ERR_CMD.
    "ibv_rereg_mr": "const:-4",
    # Values without a failure code.
    "ibv_get_device_guid": "zero",  # device.c: 0 when sysfs has no GUID
    "ibv_query_qp_data_in_order": "zero",  # verbs.c: 0 without the provider's op
    # Pure functions: no device, no failure; the shim implements them.
    "ibv_get_sysfs_path": "impl",
    "__ioctl_final_num_attrs": "impl",
    "ibv_wc_status_str": "impl",
    "ibv_event_type_str": "impl",
    "ibv_node_type_str": "impl",
    "ibv_port_state_str": "impl",
    "ibv_rate_to_mult": "impl",
    "mult_to_ibv_rate": "impl",
    "ibv_rate_to_mbps": "impl",
    "mbps_to_ibv_rate": "impl",
    "ibv_is_fork_initialized": "impl",
    "verbs_allow_disassociate_destroy": "data",
    # librdmacm: rdma_cma.h's "0 on success, -1 on error" (see rdmacm_convention); these not.
    "rdma_get_src_port": "zero",  # cma.c: 0 for an address family it does not know
    "rdma_get_dst_port": "zero",
    "rdma_event_str": "impl",
}

# librdmacm's calls and rsocket's all fail with -1 and errno (rdma_cma.h, rsocket.h).
RDMACM = "librdmacm.symbols"


def symbols():
    """(name, version, is_default) of both .symbols files."""
    out = []
    for f in ("libibverbs.symbols", "libmlx5.symbols", RDMACM):
        for line in (ABI / f).read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                default = "@@" in line
                name, ver = line.split("@@" if default else "@")
                out.append((name, ver, default))
    return out


def convention(name, ret):
    if name in CONVENTIONS:
        return CONVENTIONS[name]
    kind = cproto.abi_type(ret)
    if name in RDMACM_NAMES and kind not in ("void *", "void", "bool"):
        return "minus1"
    if kind == "void *":
        return "null"
    if kind == "void":
        return "void"
    if kind == "bool":
        return "false"
    return "errno"


RDMACM_NAMES = {l.split("@")[0] for l in (ABI / RDMACM).read_text().splitlines() if l and not l.startswith("#")}


def main():
    root = Path(sys.argv[1])
    decls, compat = {}, {}
    for h in HEADERS:
        for k, v in cproto.declarations((root / h).read_text()).items():
            decls.setdefault(k, v)
    for c in COMPAT:
        compat.update(cproto.compat_declarations((root / c).read_text()))
    rows, missing = [], []
    for name, ver, default in symbols():
        if name in CONVENTIONS and CONVENTIONS[name] == "data":
            if default:
                rows.append((name, "", "bool", "", "data"))
            continue
        if default:
            # verbs_register_driver_34: driver.h names it through IBVERBS_PABI_VERSION.
            d = decls.get(name) or decls.get(re.sub(r"_\d+$", "", name))
            key = ""
        else:
            d, key = compat.get((name, ver)), ver
        if d is None:
            missing.append(f"{name}@{ver}")
            continue
        ret, params = d
        rows.append((name, key, ret, "; ".join(params), convention(name, ret)))
    if missing:
        sys.exit(f"no prototype in {root} for: {' '.join(missing)}")
    print("# symbol\tversion\treturn\tparameters\tconvention  (capi/abi/prototypes.py writes this file)")
    for r in sorted(set(rows)):
        print("\t".join(r))


if __name__ == "__main__":
    main()
