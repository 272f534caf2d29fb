#!/usr/bin/env python3
"""Check that every relative link in README.md and docs/*.md names a file that exists, and
that a `#fragment` names a heading of the Markdown file it points at (GitHub's anchors).

    python3 docs/check_links.py [FILE.md ...]

Links inside fenced code blocks and inline code are not links. Exits 1 listing each broken
link as FILE:LINE: target.
"""

import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# [text](target) and [text](target "title"); images too. Reference definitions: [x]: target.
INLINE = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def slug(title):
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces → -."""
    text = re.sub(r"`([^`]*)`", r"\1", title)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def strip_code(lines, inline=True):
    """The lines with fenced blocks blanked and inline code removed (numbering kept)."""
    out, fence = [], None
    for line in lines:
        m = re.match(r"^\s*(```+|~~~+)", line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append("")
            continue
        if m:
            fence = m.group(1)
            out.append("")
            continue
        out.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "", line) if inline else line)
    return out


def anchors(path, cache={}):
    """The heading anchors of a Markdown file, with GitHub's -1, -2 … for repeats."""
    if path not in cache:
        seen, found = {}, set()
        with open(path, encoding="utf-8") as f:
            for line in strip_code(f.read().splitlines(), inline=False):
                m = HEADING.match(line)
                if not m:
                    continue
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def check(md):
    """Broken links of one file, as 'FILE:LINE: target (why)'."""
    bad = []
    with open(md, encoding="utf-8") as f:
        lines = strip_code(f.read().splitlines())
    for n, line in enumerate(lines, 1):
        targets = [m.group(1) for m in INLINE.finditer(line)]
        ref = REFDEF.match(line)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # http:, https:, mailto: …
            path, _, fragment = target.partition("#")
            dest = md if not path else os.path.normpath(os.path.join(os.path.dirname(md), path))
            rel = os.path.relpath(md, ROOT)
            inside = not rel.startswith("..")
            if not os.path.exists(dest):
                bad.append(f"{rel}:{n}: {target} (no such file)")
            elif inside and os.path.relpath(dest, ROOT).startswith(".."):
                bad.append(f"{rel}:{n}: {target} (outside the repository)")
            elif fragment and dest.endswith(".md") and fragment not in anchors(dest):
                bad.append(f"{rel}:{n}: {target} (no such heading)")
    return bad


def main():
    files = sys.argv[1:] or [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "*.md"))
    )
    bad = [b for md in files for b in check(os.path.abspath(md))]
    for b in bad:
        print(b)
    print(f"{len(files)} files: {len(bad)} broken links")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
