#!/usr/bin/env python3
"""Check each crate's module tree: no two sibling modules reach into each other, and no
`mod.rs` (a module is `foo.rs` beside `foo/`).

    python3 docs/check_imports.py [--selftest]

A crate's tree is read from its roots (src/lib.rs, src/main.rs, each [[bin]] path) by their
`mod` declarations. Every `crate::…`, `super::…` and `self::…` path, in a `use` or inline, is
an edge between the two siblings under the deepest module both paths share: `crate::a::b`
naming `crate::c::d` is a → c at the top; `crate::a::b` naming `crate::a::c` is b → c inside
a. A path to an ancestor or a descendant is no edge, nor is a path in a `#[cfg(test)]`
module (a test may use what its module's users use). Exits 1 listing each cycle (with the
lines that make it) and each `mod.rs`, beyond the allow-lists below.
"""

import os
import re
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Cycles not broken yet, as (crate directory, the cycle's module paths in any order).
PENDING_CYCLES = set()
# `mod.rs` files not converted yet (crate-relative).
PENDING_MOD_RS = set()

TOKEN = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*|::|[{}();,*]|\S")


def strip(src):
    """The source with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif re.match(r'r#*"', src[i:i + 8]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            hashes = len(re.match(r"r(#*)", src[i:]).group(1))
            end = src.find('"' + "#" * hashes, i + 2 + hashes)
            end = n if end < 0 else end + 1 + hashes
            out.append(re.sub(r"[^\n]", " ", src[i:end]))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", src[i:j + 1]))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:])
            if m:  # a char literal; otherwise a lifetime
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def tokens(src):
    """(token, line) pairs of stripped source."""
    line, pos = 1, 0
    for m in TOKEN.finditer(src):
        line += src.count("\n", pos, m.start())
        pos = m.start()
        yield m.group(0), line


def use_tree(toks, i):
    """Expand the path at toks[i] (after a leading keyword and `::`) into the lists of
    segments it names; a brace group names each of its members. Returns (paths, next i)."""
    prefix = []
    while i < len(toks):
        t = toks[i][0]
        if t == "{":
            paths, i = [], i + 1
            while i < len(toks) and toks[i][0] != "}":
                sub, i = use_tree(toks, i)
                paths += [prefix + s for s in sub]
                if i < len(toks) and toks[i][0] == ",":
                    i += 1
            return paths or [prefix], i + 1
        if re.match(r"[A-Za-z_]", t):
            prefix.append(t)
            if i + 1 < len(toks) and toks[i + 1][0] == "::":
                i += 2
                continue
            if i + 2 < len(toks) and toks[i + 1][0] == "as":
                return [prefix], i + 3
            return [prefix], i + 1
        return [prefix], i
    return [prefix], i


def module_file(directory, name, own_dir):
    """The file of `mod name;` declared in a module whose children live in own_dir."""
    for cand in (os.path.join(own_dir, name + ".rs"), os.path.join(own_dir, name, "mod.rs")):
        if os.path.exists(cand):
            return cand
    return None


def scan_file(path, modpath, own_dir, refs, reexports, files, mod_rs):
    """Read one module file: record its child modules' files and its path references."""
    files.append(path)
    if os.path.basename(path) == "mod.rs":
        mod_rs.append(path)
    with open(path, encoding="utf-8") as f:
        toks = list(tokens(strip(f.read())))
    stack = [(list(modpath), own_dir, -1, False)]  # (module path, children's dir, brace depth, test)
    depth, i, pending_attr_path, pending_test = 0, 0, None, False
    while i < len(toks):
        t, line = toks[i]
        cur, cur_dir, _, in_test = stack[-1]
        if t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
            if len(stack) > 1 and stack[-1][2] == depth:
                stack.pop()
        elif t == "#" and i + 1 < len(toks) and toks[i + 1][0] == "[" and toks[i + 2][0] == "path":
            pending_attr_path = True  # the file is given by a string literal, blanked: skip it
        elif t == "#" and [x for x, _ in toks[i + 1 : i + 7]] == ["[", "cfg", "(", "test", ")", "]"]:
            pending_test = True
        elif t == "mod" and i + 2 < len(toks) and re.match(r"[A-Za-z_]", toks[i + 1][0]):
            name, after = toks[i + 1][0], toks[i + 2][0]
            if after == "{":
                stack.append((cur + [name], os.path.join(cur_dir, name), depth, in_test or pending_test))
                depth += 1
                pending_test = False
                i += 3
                continue
            if after == ";" and not pending_attr_path:
                child = module_file(path, name, cur_dir)
                if child:
                    sub = [] if pending_test else refs
                    scan_file(child, cur + [name], os.path.join(cur_dir, name), sub, reexports, files, mod_rs)
            pending_attr_path, pending_test = None, False
            i += 3
            continue
        elif t in ("fn", "struct", "enum", "use", "impl", "const", "static", "type", "trait"):
            pending_test = False  # a #[cfg(test)] item that is not a module
        if t == "use" and not cur and i + 2 < len(toks) and toks[i + 2][0] == "::" and toks[i + 1][0] not in (
            "crate",
            "super",
            "self",
        ):
            # The root's `use child::{A, B as C}`: `crate::A` and `crate::C` name items of child.
            paths, j = use_tree(toks, i + 1)
            k = i + 1
            names = []
            while k < j:
                if toks[k][0] == "as" and k + 1 < j:
                    names[-1] = toks[k + 1][0]
                    k += 2
                    continue
                if re.match(r"[A-Za-z_]", toks[k][0]) and (k + 1 >= j or toks[k + 1][0] != "::"):
                    names.append(toks[k][0])
                k += 1
            for name in names:
                reexports[name] = toks[i + 1][0]
            i = j
            continue
        elif t in ("crate", "super", "self") and i + 1 < len(toks) and toks[i + 1][0] == "::":
            if i > 0 and toks[i - 1][0] == "::":
                i += 1
                continue  # the middle of a path already read
            base = [] if t == "crate" else list(cur)
            j = i
            if t == "super":
                while j < len(toks) and toks[j][0] == "super" and toks[j + 1][0] == "::":
                    base = base[:-1]
                    j += 2
            else:
                j += 2
            paths, j = use_tree(toks, j)
            for p in paths:
                p = [s for s in p if s != "self"]
                target = base + [s for s in p if s != "super"]
                if not in_test:
                    refs.append((cur, target, path, line))
            i = j
            continue
        i += 1


def add_edge(edges, src, dst, path, line):
    """The sibling edge of a reference from module src to path dst, if any. The path's last
    segments may name an item rather than a module; they differ from src's segments only
    where a module could."""
    k = 0
    while k < len(src) and k < len(dst) and src[k] == dst[k]:
        k += 1
    if k >= len(src) or k >= len(dst) - 1:
        return  # an ancestor (or an item of one), the module itself, or a descendant
    parent = tuple(src[:k])
    edges.setdefault(parent, {}).setdefault(src[k], {}).setdefault(dst[k], []).append((path, line))


def roots(crate):
    """A crate's root files."""
    found = [os.path.join(crate, "src", f) for f in ("lib.rs", "main.rs")]
    with open(os.path.join(crate, "Cargo.toml"), "rb") as f:
        manifest = tomllib.load(f)
    found += [os.path.join(crate, b["path"]) for b in manifest.get("bin", []) if "path" in b]
    return [f for f in found if os.path.exists(f)]


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check_crate(crate, rel, pending_cycles, pending_mod_rs, seen=None):
    """Problems of one crate, as lines; `seen` collects the pending cycles met."""
    bad, edges, files, mod_rs = [], {}, [], []
    for root in roots(crate):
        refs, reexports = [], {}
        scan_file(root, [], os.path.dirname(root), refs, reexports, files, mod_rs)
        for src, dst, path, line in refs:
            # `crate::Item` re-exported from a child module is that module's item.
            if dst and dst[0] in reexports:
                dst = [reexports[dst[0]]] + dst
            add_edge(edges, src, dst, path, line)
    for parent, graph in sorted(edges.items()):
        for comp in cycles(graph):
            names = frozenset("::".join(parent + (m,)) for m in comp)
            if (rel, names) in pending_cycles:
                if seen is not None:
                    seen.add((rel, names))
                continue
            where = "::".join(parent) or "crate"
            bad.append(f"{rel}: cycle in {where}: {' <-> '.join(comp)}")
            for a in comp:
                for b in comp:
                    for path, line in graph.get(a, {}).get(b, [])[:3]:
                        bad.append(f"  {os.path.relpath(path, ROOT)}:{line}: {a} uses {b}")
    for path in sorted(set(mod_rs)):
        r = os.path.relpath(path, ROOT)
        if r not in pending_mod_rs:
            bad.append(f"{r}: a mod.rs (make it {os.path.dirname(r)}.rs)")
    return bad, len(set(files))


def crates():
    """The workspace's crate directories (members, and the fuzz bodies)."""
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        members = tomllib.load(f)["workspace"]["members"]
    return [m for m in members if os.path.isdir(os.path.join(ROOT, m, "src"))]


def selftest():
    """A synthetic crate with cycles (through `super::`, a brace group, a root re-export) and
    a mod.rs, and a crate without either (whose tests alone close a cycle): the checker must
    tell them apart."""
    bad_crate = {
        "Cargo.toml": '[package]\nname = "t"\n',
        "src/lib.rs": "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\npub use e::{E as Ee};\n// use crate::c::X; a comment is no edge\n",
        "src/d.rs": "pub fn f() -> crate::Ee { todo!() }\n",
        "src/e.rs": "pub struct E;\nfn g() { crate::d::f(); }\n",
        "src/a.rs": "mod inner;\n",
        "src/a/inner.rs": "use crate::{b::Y, c};\npub struct X;\n",
        "src/b/mod.rs": 'pub struct Y;\nfn f() -> super::a::inner::X { let _ = "crate::c::Z"; todo!() }\n',
        "src/c.rs": "pub struct Z;\nmod tests { use super::*; use crate::c::Z; }\n",
    }
    good_crate = {
        "Cargo.toml": '[package]\nname = "t"\n',
        "src/lib.rs": "mod a;\nmod b;\n",
        "src/a.rs": "use crate::b::Y;\nmod inner;\n",
        "src/a/inner.rs": "use super::super::b::Y;\nuse super::X;\npub struct X;\n",
        "src/b.rs": "pub struct Y;\n#[cfg(test)]\nmod tests {\n    use crate::a::inner::X;\n}\n#[cfg(test)]\nmod more;\n",
        "src/b/more.rs": "use crate::a::inner::X;\n",
    }
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, crate in (("bad", bad_crate), ("good", good_crate)):
            for f, text in crate.items():
                p = os.path.join(tmp, name, f)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "w") as fh:
                    fh.write(text)
        bad, n = check_crate(os.path.join(tmp, "bad"), "bad", set(), set())
        want = ["bad: cycle in crate: a <-> b", "bad: cycle in crate: d <-> e", "b/mod.rs: a mod.rs"]
        for w in want:
            if not any(w in b for b in bad):
                print(f"selftest: expected {w!r} in {bad}")
                ok = False
        if any("c" in b.split("cycle in crate: ")[-1].split(" <-> ") for b in bad if "cycle" in b):
            print(f"selftest: a comment, a string or a test module made an edge: {bad}")
            ok = False
        if n != 7:
            print(f"selftest: read {n} files of the bad crate, not 7")
            ok = False
        allowed, _ = check_crate(
            os.path.join(tmp, "bad"),
            "bad",
            {("bad", frozenset({"a", "b"})), ("bad", frozenset({"d", "e"}))},
            {os.path.relpath(os.path.join(tmp, "bad", "src", "b", "mod.rs"), ROOT)},
        )
        if allowed:
            print(f"selftest: the allow-lists did not allow: {allowed}")
            ok = False
        good, _ = check_crate(os.path.join(tmp, "good"), "good", set(), set())
        if good:
            print(f"selftest: a crate without a cycle failed: {good}")
            ok = False
    print("selftest:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main():
    if "--selftest" in sys.argv[1:]:
        return selftest()
    bad, files, seen = [], 0, set()
    for c in crates():
        b, n = check_crate(os.path.join(ROOT, c), c, PENDING_CYCLES, PENDING_MOD_RS, seen)
        bad += b
        files += n
    for b in bad:
        print(b)
    for crate, names in sorted(PENDING_CYCLES - seen, key=str):
        print(f"note: {crate}: the pending cycle {' <-> '.join(sorted(names))} is gone: drop it from PENDING_CYCLES")
    for path in sorted(p for p in PENDING_MOD_RS if not os.path.exists(os.path.join(ROOT, p))):
        print(f"note: {path} is gone: drop it from PENDING_MOD_RS")
    problems = sum(1 for b in bad if not b.startswith("  "))
    print(f"{files} module files: {problems} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
