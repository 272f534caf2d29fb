#!/usr/bin/env python3
"""The shim's exported calls against capi/abi/prototypes.tsv: every exported function has a
known failure convention, and every call the Rust library does not define (a generated stub)
fails by exactly that convention when called, through the library a program links.

    abi_stubs.py SHIM_DIR ARCHIVE

SHIM_DIR holds libibverbs.so.1, libmlx5.so.1 and librdmacm.so.1; ARCHIVE is the Rust static library they were
linked from (its defined symbols are the implemented calls). Prints one line per check and
exits 1 on any failure.
"""

import ctypes
import errno
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "capi/abi/prototypes.tsv"
KNOWN = {"null", "errno", "minus1", "neg_errno", "zero", "false", "void", "impl", "data"}
E = errno.EOPNOTSUPP


def table():
    rows = {}
    for line in TABLE.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, ver, ret, _params, conv = line.split("\t")
        rows[(name, ver)] = (ret, conv)
    return rows


def exports(lib):
    """(name, version, is_default, is_function) of a library's defined dynamic symbols."""
    out = subprocess.run(
        ["nm", "-D", "--defined-only", "--with-symbol-versions", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[1] == "A":
            continue
        full = parts[2]
        default = "@@" in full
        name, ver = full.split("@@" if default else "@", 1) if "@" in full else (full, "")
        syms.append((name, ver, default, parts[1] in "Tt"))
    return syms


def implemented(archive):
    out = subprocess.run(["nm", "--defined-only", str(archive)], capture_output=True, text=True, check=True).stdout
    return {p[2] for p in (l.split() for l in out.splitlines()) if len(p) == 3 and p[1] in "TD"}


def restype(ret):
    """The ctypes type a C return type comes back in (independent of gen.py's lowering)."""
    r = ret.replace("const ", "").strip()
    if "*" in r:
        return ctypes.c_void_p
    if r == "void":
        return None
    if r == "bool":
        return ctypes.c_bool
    if r in ("ssize_t", "long"):
        return ctypes.c_ssize_t
    if r in ("uint64_t", "__be64"):
        return ctypes.c_uint64
    if r in ("unsigned int", "uint32_t"):
        return ctypes.c_uint
    return ctypes.c_int


def expect(conv):
    """(return value, errno or None) the convention gives when the call fails."""
    if conv.startswith("const:"):
        return int(conv[6:]), E
    return {
        "null": (None, E),
        "errno": (E, None),
        "minus1": (-1, E),
        "neg_errno": (-E, None),
        "zero": (0, None),
        "false": (False, None),
        "void": (None, None),
    }[conv]


def sysfs_path(shim, env):
    """What ibv_get_sysfs_path returns in a process with `env` as SYSFS_PATH (None: unset)."""
    code = (
        "import ctypes,sys; f=ctypes.CDLL(sys.argv[1]).ibv_get_sysfs_path; f.restype=ctypes.c_char_p; "
        "print(f().decode(), f() == f())"
    )
    e = {k: v for k, v in os.environ.items() if k != "SYSFS_PATH"}
    if env is not None:
        e["SYSFS_PATH"] = env
    r = subprocess.run([sys.executable, "-c", code, str(shim / "libibverbs.so.1")], env=e, capture_output=True, text=True)
    return r.stdout.strip() or f"exit {r.returncode}: {r.stderr.strip()[-200:]}"


def main():
    shim, archive = Path(sys.argv[1]), Path(sys.argv[2])
    rows, have = table(), implemented(archive)
    libc = ctypes.CDLL(None)
    libc.dlvsym.restype = ctypes.c_void_p
    libc.dlvsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    failures, stubs = [], 0
    for lib in ("libibverbs.so.1", "libmlx5.so.1", "librdmacm.so.1"):
        handle = ctypes.CDLL(str(shim / lib), mode=os.RTLD_NOW | os.RTLD_LOCAL)._handle
        for name, ver, default, is_fn in exports(shim / lib):
            if name.startswith("mlx5sim_") or not ver:
                continue  # the shim's private forwarding targets
            row = rows.get((name, "" if default else ver))
            if row is None:
                failures.append(f"{name}@{ver}: exported, but prototypes.tsv has no convention for it")
                continue
            ret, conv = row
            if conv not in KNOWN and not conv.startswith("const:"):
                failures.append(f"{name}@{ver}: unknown convention '{conv}'")
                continue
            if (conv == "data") == is_fn:
                failures.append(f"{name}@{ver}: convention '{conv}' for a {'function' if is_fn else 'variable'}")
                continue
            if conv == "impl" and name not in have:
                failures.append(f"{name}@{ver}: a pure function the shim must implement, but it is a stub")
                continue
            stub = not default or name not in have
            if conv in ("impl", "data") or not stub:
                continue
            addr = libc.dlvsym(handle, name.encode(), ver.encode())
            if not addr:
                failures.append(f"{name}@{ver}: dlvsym found nothing")
                continue
            fn = ctypes.CFUNCTYPE(restype(ret), use_errno=True)(addr)
            ctypes.set_errno(0)
            got = fn()
            got_errno = ctypes.get_errno()
            want, want_errno = expect(conv)
            stubs += 1
            if got != want or (want_errno is not None and got_errno != want_errno):
                failures.append(
                    f"{name}@{ver} ({ret}, {conv}): returned {got!r} with errno {got_errno}, "
                    f"expected {want!r}" + (f" with errno {want_errno}" if want_errno is not None else "")
                )
    # sysfs.c: SYSFS_PATH without its trailing slashes, else /sys; the same answer each call.
    for env, want in ((None, "/sys True"), ("/tmp/mlx5sim-sysfs//", "/tmp/mlx5sim-sysfs True")):
        got = sysfs_path(shim, env)
        if got != want:
            failures.append(f"ibv_get_sysfs_path with SYSFS_PATH={env}: {got!r}, expected {want!r}")
    for f in failures:
        print(f"  FAIL  {f}")
    if failures:
        sys.exit(1)
    print(f"every exported call has a convention; {stubs} stubs fail by theirs; ibv_get_sysfs_path is /sys or SYSFS_PATH")


if __name__ == "__main__":
    main()
