"""C prototypes read from rdma-core's headers, and their ABI-level form.

Shared by gen.py (the installed headers, at link time) and prototypes.py (an rdma-core source
tree, once, into prototypes.tsv). The parser is textual: it reads the external function
declarations at file scope and skips inline functions, typedefs and macros.
"""

import re

# Integer and other scalar types as the ABI passes them; enums are int (ISO C: compatible with
# an integer type that holds every value; rdma-core's fit in unsigned int).
SCALARS = {
    "void": "void",
    "bool": "bool",
    "_Bool": "bool",
    "char": "char",
    "int": "int",
    "signed": "int",
    "signed int": "int",
    "unsigned": "unsigned int",
    "unsigned int": "unsigned int",
    "long": "long",
    "unsigned long": "unsigned long",
    "short": "short",
    "unsigned short": "unsigned short",
    "unsigned char": "unsigned char",
    "size_t": "size_t",
    "ssize_t": "ssize_t",
    "off_t": "long",
    "pid_t": "int",
    "socklen_t": "unsigned int",
    "nfds_t": "unsigned long",
    "int8_t": "int8_t",
    "int16_t": "int16_t",
    "int32_t": "int32_t",
    "int64_t": "int64_t",
    "uint8_t": "uint8_t",
    "uint16_t": "uint16_t",
    "uint32_t": "uint32_t",
    "uint64_t": "uint64_t",
    "__u8": "uint8_t",
    "__u16": "uint16_t",
    "__u32": "uint32_t",
    "__u64": "uint64_t",
    "__s32": "int32_t",
    "__be16": "uint16_t",
    "__be32": "uint32_t",
    "__be64": "uint64_t",
    "__aligned_u64": "uint64_t",
}

# Typedefs of function pointers that prototypes take.
POINTER_TYPEDEFS = {"ibv_driver_init_func", "ibv_driver_init_func_1_1"}

QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "extern", "struct", "union", "enum"}


def strip(text):
    """The text without comments, preprocessor lines and attributes, on one line per statement."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"\\\n", " ", text)
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
    text = text.replace('extern "C" {', " ")
    out, i = [], 0
    for m in re.finditer(r"__attribute__\s*\(\(", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 0, m.end() - 2
        while j < len(text):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        i = j
    out.append(text[i:])
    text = "".join(out)
    text = re.sub(r"\b(__attribute_const__|__attribute_const|__always_inline|__deprecated|_Noreturn)\b", " ", text)
    return text


def statements(text):
    """File-scope statements: what lies between `;`, `{…}` bodies and the text's ends."""
    cur, depth, out = [], 0, []
    for ch in text:
        if depth == 0:
            if ch == ";":
                out.append(("".join(cur), ";"))
                cur = []
            elif ch == "{":
                depth = 1
                out.append(("".join(cur), "{"))
                cur = []
            elif ch == "}":
                cur = []
            else:
                cur.append(ch)
        else:
            depth += {"{": 1, "}": -1}.get(ch, 0)
    return out


def split_params(params):
    """The parameters at the top nesting level."""
    out, depth, cur = [], 0, []
    for ch in params:
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        depth += {"(": 1, ")": -1}.get(ch, 0)
        cur.append(ch)
    last = "".join(cur).strip()
    if last:
        out.append(last)
    return [] if out == ["void"] else out


def norm(s):
    return re.sub(r"\s+", " ", s).replace(" *", "*").replace("*", " *").replace("* ", "*").strip()


def declarations(text):
    """name -> (return type, [parameters]) of the external functions declared or defined."""
    found = {}
    for stmt, end in statements(strip(text)):
        stmt = stmt.strip()
        m = re.match(r"^(?P<ret>[A-Za-z_][\w\s\*]*?)\s*\b(?P<name>[A-Za-z_]\w*)\s*\((?P<params>.*)\)\s*$", stmt, re.S)
        if not m:
            continue
        ret = norm(m.group("ret"))
        words = set(re.findall(r"\w+", ret))
        if words & {"static", "inline", "typedef", "return", "define", "if", "while", "for", "switch"}:
            continue
        if "(" in m.group("params") and not re.search(r"\(\s*\*", m.group("params")):
            continue
        ret = re.sub(r"\bextern\b\s*", "", ret).strip()
        found.setdefault(m.group("name"), (ret, [norm(p) for p in split_params(m.group("params"))]))
        del end
    return found


def compat_declarations(text):
    """(name, version) -> (return type, [parameters]) of COMPAT_SYMVER_FUNC definitions."""
    found = {}
    pat = re.compile(r"COMPAT_SYMVER_FUNC\(\s*(\w+)\s*,\s*\w+\s*,\s*\"([\w.]+)\"\s*,\s*([^,]+?)\s*,(.*?)\)\s*\{", re.S)
    for m in pat.finditer(strip(text)):
        found[(m.group(1), m.group(2))] = (norm(m.group(3)), [norm(p) for p in split_params(m.group(4))])
    return found


def abi_type(t):
    """A C type as the ABI passes it: any pointer is `void *`, an enum is int; None if unknown."""
    t = norm(t)
    if "*" in t or "(" in t or t.endswith("]"):
        return "void *"
    if re.match(r"^(const\s+)?enum\b", t):
        return "int"
    if re.match(r"^(const\s+)?(struct|union)\b", t):
        return None
    words = [w for w in t.split() if w not in QUALIFIERS]
    if len(words) == 1 and words[0] in POINTER_TYPEDEFS:
        return "void *"
    return SCALARS.get(" ".join(words))


def param_type(p):
    """The type of a parameter declaration (its name dropped)."""
    p = norm(p)
    if "(" in p:
        return p
    m = re.match(r"^(.*?[\s\*])(\w+)(\s*\[[^\]]*\])?$", p)
    if m and m.group(1).strip() and m.group(1).strip() not in QUALIFIERS:
        base = m.group(1).strip()
        if not re.fullmatch(r"(const\s+)?(unsigned|signed|long|short)", base):
            return base + (" *" if m.group(3) else "")
    return p


def param_name(p, i):
    """The name of a parameter, or argN where it has none."""
    p = norm(p)
    m = re.search(r"\(\s*\*\s*(\w+)\s*\)", p)
    if m:
        return m.group(1)
    if param_type(p) != p:
        m = re.search(r"(\w+)(\s*\[[^\]]*\])?$", p)
        if m:
            return m.group(1)
    return f"arg{i}"
