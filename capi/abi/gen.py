#!/usr/bin/env python3
"""Generate what links the shim's libraries: version scripts, the C stubs of every symbol the
Rust library does not define, and libmlx5's and librdmacm's forwarders.

    gen.py ARCHIVE OUTDIR

ARCHIVE is the Rust static library; its defined symbols (nm) are the implemented ones. Each
other symbol gets a stub with its C prototype (the installed headers' declaration, else
prototypes.tsv's, read from the rdma-core release that added it) lowered to ABI types, that
fails as the real call fails on a device without the feature, by the convention prototypes.tsv
gives it (NULL with errno EOPNOTSUPP, EOPNOTSUPP, -1 with errno, ...). A symbol without a
prototype or convention stops the build. stubs.tsv lists the stubs.
"""

import re
import subprocess
import sys
from pathlib import Path

ABI = Path(__file__).resolve().parent
sys.path.insert(0, str(ABI))
import cproto  # noqa: E402

HEADERS = [Path("/usr/include/infiniband/verbs.h"), Path("/usr/include/infiniband/mlx5dv.h"),
           Path("/usr/include/rdma/rdma_cma.h"), Path("/usr/include/rdma/rsocket.h"),
           Path("/usr/include/rdma/rdma_verbs.h")]
# The errno of a call the simulator does not model: what libibverbs' dummy ops and libmlx5
# give for a verb the device lacks.
ERRNO = "EOPNOTSUPP"


def symbols(name):
    """(symbol, version, is_default) of a .symbols file, in order."""
    out = []
    for line in (ABI / name).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "@@" in line:
            sym, ver = line.split("@@")
            out.append((sym, ver, True))
        else:
            sym, ver = line.split("@")
            out.append((sym, ver, False))
    return out


def defined_in(archive):
    text = subprocess.run(["nm", "--defined-only", archive], capture_output=True, text=True, check=True).stdout
    return {parts[2] for parts in (l.split() for l in text.splitlines()) if len(parts) == 3 and parts[1] in "TD"}


def table():
    """(symbol, version or "") -> (return, [parameters], convention) of prototypes.tsv."""
    rows = {}
    for line in (ABI / "prototypes.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, ver, ret, params, conv = line.split("\t")
        rows[(name, ver)] = (ret, [p for p in params.split("; ") if p], conv)
    return rows


def installed():
    """name -> (return, [parameters]) from the installed headers, where they exist."""
    found = {}
    for h in HEADERS:
        if h.exists():
            for k, v in cproto.declarations(h.read_text()).items():
                found.setdefault(k, v)
    return found


def prototype(sym, ver, default, rows, headers):
    """The return type, parameters and convention of a symbol's stub, or an error."""
    row = rows.get((sym, "" if default else ver))
    if row is None:
        raise SystemExit(f"gen.py: {sym}@{ver} has no row in capi/abi/prototypes.tsv (run prototypes.py)")
    ret, params, conv = row
    if default and sym in headers:
        # The installed release's own declaration, as programs built here were compiled.
        h_ret, h_params = headers[sym]
        if cproto.abi_type(h_ret) != cproto.abi_type(ret):
            raise SystemExit(f"gen.py: {sym} returns {h_ret} in the installed headers, {ret} in prototypes.tsv")
        ret, params = h_ret, h_params
    return ret, params, conv


def c_params(params):
    """The parameter list at ABI level: pointers as void *, enums as int, names kept."""
    out = []
    for i, p in enumerate(params):
        if p == "...":
            out.append("...")
            continue
        t = cproto.abi_type(cproto.param_type(p))
        if t is None:
            raise SystemExit(f"gen.py: no ABI type for the parameter '{p}'")
        out.append(f"{t}{'' if t.endswith('*') else ' '}{cproto.param_name(p, i)}")
    return ", ".join(out) or "void"


def stub(sym, c_name, ret, params, conv):
    """A stub that fails as the real call fails without the feature."""
    kind = cproto.abi_type(ret)
    if kind is None:
        raise SystemExit(f"gen.py: no ABI type for {sym}'s return type {ret}")
    if conv in ("impl", "data"):
        raise SystemExit(f"gen.py: {sym} has no failure to report ({conv}): the shim must define it")
    body = {
        "null": f"errno = {ERRNO}; return NULL;",
        "errno": f"errno = {ERRNO}; return {ERRNO};",
        "minus1": f"errno = {ERRNO}; return -1;",
        "neg_errno": f"errno = {ERRNO}; return -{ERRNO};",
        "zero": "return 0;",
        "false": "return false;",
        "void": "",
    }.get(conv)
    if conv.startswith("const:"):
        body = f"errno = {ERRNO}; return {int(conv[6:])};"
    if body is None:
        raise SystemExit(f"gen.py: {sym} has the unknown convention '{conv}'")
    want = {"null": "void *", "void": "void", "false": "bool"}.get(conv)
    if (want and kind != want) or (not want and kind in ("void *", "void", "bool")):
        raise SystemExit(f"gen.py: {sym} returns {ret}, which the convention '{conv}' cannot return")
    args = c_params(params)
    star = "" if kind.endswith("*") else " "
    return f"/* {ret} {sym}({', '.join(params)}) */\n{kind}{star}{c_name}({args})\n{{ {body} }}\n"


def version_script(entries, private=None):
    nodes = {}
    for sym, ver, default in entries:
        nodes.setdefault(ver, [])
        if default:
            nodes[ver].append(sym)
    out = []
    for ver, syms in nodes.items():
        body = "".join(f"\t\t{s};\n" for s in syms)
        out.append(f"{ver} {{\n\tglobal:\n{body}}};\n" if syms else f"{ver} {{ }};\n")
    tail = f"\tglobal:\n\t\t{private};\n" if private else ""
    out.append(f"MLX5SIM_PRIVATE {{\n{tail}\tlocal: *;\n}};\n")
    return "".join(out)


def main():
    archive, outdir = sys.argv[1], Path(sys.argv[2])
    outdir.mkdir(parents=True, exist_ok=True)
    have = defined_in(archive)
    rows, headers = table(), installed()
    verbs, mlx5 = symbols("libibverbs.symbols"), symbols("libmlx5.symbols")
    rdmacm = symbols("librdmacm.symbols")

    stubs = ["/* Generated by capi/abi/gen.py: the calls the simulator does not model. */\n",
             "#include <errno.h>\n#include <stddef.h>\n#include <stdbool.h>\n#include <stdint.h>\n",
             "#include <sys/types.h>\n\n"]
    listing = []
    seen = set()
    for sym, ver, default in verbs + mlx5 + rdmacm:
        ret, params, conv = prototype(sym, ver, default, rows, headers)
        if conv == "data":
            if sym not in have and sym not in seen:
                stubs.append(f"bool {sym};\n")
            seen.add(sym)
            continue
        if default:
            if sym not in have and sym not in seen:
                stubs.append(stub(sym, sym, ret, params, conv))
                listing.append(f"{sym}\t{ver}\t{conv}\n")
            seen.add(sym)
        else:
            alias = f"mlx5sim_compat_{sym}_{ver.replace('.', '_')}"
            stubs.append(stub(sym, alias, ret, params, conv))
            listing.append(f"{sym}\t{ver}\t{conv}\n")
            if (sym, ver) in {(s, v) for s, v, _ in verbs}:
                stubs.append(f'__asm__(".symver {alias}, {sym}@{ver}");\n')
    (outdir / "stubs.c").write_text("".join(stubs))
    (outdir / "stubs.tsv").write_text("".join(listing))

    (outdir / "libibverbs.map").write_text(version_script(verbs, "mlx5sim_*"))
    (outdir / "libmlx5.map").write_text(version_script(mlx5))
    (outdir / "librdmacm.map").write_text(version_script(rdmacm))

    # libibverbs exports each mlx5dv and rdma_cm function again as mlx5sim_<name>; libmlx5
    # and librdmacm jump there.
    defsyms = []
    for lib, entries, out in (("libmlx5", mlx5, "forward.S"), ("librdmacm", rdmacm, "forward_rdmacm.S")):
        (outdir / out).write_text(forwarders(lib, entries, defsyms))
    (outdir / "defsyms").write_text("\n".join(defsyms) + "\n")


def forwarders(lib, entries, defsyms):
    """The assembly of a library whose symbols jump into libibverbs' mlx5sim_ aliases (added
    to `defsyms`)."""
    fwd = [f"/* Generated by capi/abi/gen.py: {lib}'s symbols jump into libibverbs. */\n",
           "#if defined(__x86_64__)\n#define JUMP(t) jmp t@PLT\n#elif defined(__aarch64__)\n#define JUMP(t) b t\n",
           "#else\n#error unsupported architecture\n#endif\n.text\n"]
    for sym, ver, default in entries:
        local = sym if default else f"mlx5sim_compat_{sym}_{ver.replace('.', '_')}"
        target = f"mlx5sim_{local}"
        if default:
            defsyms.append(f"-Wl,--defsym={target}={sym}")
            fwd.append(f".globl {sym}\n.type {sym},%function\n{sym}:\n\tJUMP({target})\n")
        else:
            defsyms.append(f"-Wl,--defsym={target}={local}")
            fwd.append(f".globl {local}\n.type {local},%function\n{local}:\n\tJUMP({target})\n")
            fwd.append(f".symver {local}, {sym}@{ver}\n")
    fwd.append('.section .note.GNU-stack,"",%progbits\n')
    return "".join(fwd)

if __name__ == "__main__":
    main()
