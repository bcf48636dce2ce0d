#!/usr/bin/python3
"""msllint.py — rejects MSL constructs that clang's C++-for-OpenCL mode (and so our
metal_stdlib shim) accepts but Apple's Metal compiler would not, or would read
differently. The shim test is only as good as this list; each rule names why.

  msllint.py FILE.metal...      prints "file:line: lint: message" per problem,
                                exit 1 if there was any.

Rules (from tests/metal/../../shared reference "What it cannot catch"):
  swizzle      .s0 .s01 .lo .hi .even .odd are OpenCL swizzles; MSL has xyzw/rgba only
  veclit       (float4)(a, b, c, d) is an OpenCL vector literal; in MSL it is a comma
               expression cast to float4, i.e. float4(d): silently different
  double       MSL has no double (the compile already has fp64 off; belt and braces)
  opencl       OpenCL spellings (__global, get_global_id, barrier, CLK_*, convert_*,
               vload/vstore, as_float...) have no MSL meaning
  pointer      a pointer declared without an address space (device, constant,
               threadgroup, thread): clang keeps the generic address space on,
               Metal requires one
  recursion    MSL forbids recursion (direct recursion is checked)
  cxx17        MSL before 4.0 is C++14: no if constexpr, structured bindings,
               fold expressions, inline variables, template <auto>
  static       function-scope static variables do not exist in MSL
  include      only <metal_stdlib> (and other Metal headers) can be included
  builtins     in one kernel, the grid/threadgroup position built-ins share one
               type (uint, uint2 or uint3), as Metal requires
  namespace    metal::float4(...) and friends: the shim cannot check vector
               constructors spelled with the namespace
"""
import re
import sys

AS = r"\b(device|constant|threadgroup|thread)\b"
TYPES = r"(?:float|half|int|uint|short|ushort|char|uchar|bool|void|long|ulong)(?:[234])?"
POS_BUILTINS = ("thread_position_in_grid", "thread_position_in_threadgroup", "threadgroup_position_in_grid",
                "threads_per_threadgroup", "threadgroups_per_grid")


def strip(src):
    """Comments and string/char literals blanked, line structure kept."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    src = re.sub(r"/\*.*?\*/", blank, src, flags=re.S)
    src = re.sub(r"//[^\n]*", blank, src)
    src = re.sub(r'"(?:\\.|[^"\\\n])*"', blank, src)
    return re.sub(r"'(?:\\.|[^'\\\n])*'", blank, src)


def line_of(src, pos):
    return src.count("\n", 0, pos) + 1


def decl_start(src, pos):
    """Start of the declaration or expression around pos: after the last ( , ; { }."""
    i = pos
    while i > 0 and src[i - 1] not in "(,;{}":
        i -= 1
    return i


def functions(src):
    """(name, body start, body end, is_kernel) for each function definition."""
    out = []
    for m in re.finditer(r"\b(kernel\s+)?(?:static\s+)?(?:inline\s+)?[\w:<>]+\s+(\w+)\s*\(", src):
        name = m.group(2)
        if name in ("if", "for", "while", "switch", "return", "sizeof"):
            continue
        depth, i = 1, m.end()
        while i < len(src) and depth:
            depth += {"(": 1, ")": -1}.get(src[i], 0)
            i += 1
        j = i
        while j < len(src) and src[j] in " \t\n":
            j += 1
        if j >= len(src) or src[j] != "{":
            continue
        if src[:m.start()].count("{") != src[:m.start()].count("}"):
            continue  # not at file scope
        depth, k = 1, j + 1
        while k < len(src) and depth:
            depth += {"{": 1, "}": -1}.get(src[k], 0)
            k += 1
        out.append((name, m.start(), j + 1, k, bool(m.group(1)), src[m.end():i - 1]))
    return out


def lint(path):
    raw = open(path).read()
    src = strip(raw)
    probs = []

    def report(pos, msg):
        probs.append("%s:%d: lint: %s" % (path, line_of(src, pos), msg))

    for m in re.finditer(r"\.(s[0-9a-fA-F]+|lo|hi|even|odd)\b", src):
        report(m.start(), "OpenCL swizzle .%s (MSL has .xyzw/.rgba only)" % m.group(1))
    for m in re.finditer(r"\(\s*" + TYPES + r"\s*\)\s*\(", src):
        if re.match(r"\(\s*(?:float|half|int|uint|short|ushort|char|uchar|bool)[234]\s*\)", m.group(0)):
            report(m.start(), "OpenCL vector literal %s...: in MSL a comma expression, use the constructor" % m.group(0).strip())
    for m in re.finditer(r"\bdouble\b", src):
        report(m.start(), "double (MSL has none)")
    for m in re.finditer(r"\b(__global|__local|__constant|__private|__kernel|get_global_id|get_local_id|get_group_id|"
                         r"barrier|CLK_\w+|convert_\w+|vload\w*|vstore\w*|as_(?:float|int|uint)\w*|mad24|mul24)\b", src):
        report(m.start(), "OpenCL spelling %s" % m.group(1))
    for m in re.finditer(r"\bmetal::(float|half|int|uint|short|ushort|char|uchar)[234]\s*\(", src):
        report(m.start(), "vector constructor spelled with metal::, which the shim cannot check")
    for m in re.finditer(r"#\s*include\s*[<\"]([^>\"]+)[>\"]", raw):
        if not m.group(1).startswith("metal_"):
            report(m.start(), "#include %s (only Metal's own headers)" % m.group(1))
    for m in re.finditer(r"\bif\s+constexpr\b|\bauto\s*&?\s*\[|\btemplate\s*<\s*auto\b|\binline\s+(?:constexpr\s+)?"
                         r"(?:const\s+)?\w+\s+\w+\s*=|\.\.\.\s*[-+*/&|]\s*\.\.\.", src):
        report(m.start(), "C++17 construct '%s' (MSL is C++14)" % " ".join(m.group(0).split()))
    # pointers without an address space: a '*' after a type name in a declaration or cast
    for m in re.finditer(r"\b" + TYPES + r"\s*(?:const\s*)?\*", src):
        start = decl_start(src, m.start())
        if not re.search(AS, src[start:m.end()]):
            report(m.start(), "pointer without an address space: '%s'" % " ".join(src[start:m.end()].split()))
    for name, fstart, bstart, bend, is_kernel, params in functions(src):
        body = src[bstart:bend]
        if re.search(r"\b%s\s*\(" % re.escape(name), body):
            report(bstart, "function %s calls itself (MSL forbids recursion)" % name)
        for m in re.finditer(r"\bstatic\b", body):
            report(bstart + m.start(), "static variable inside function %s" % name)
        if is_kernel:
            types = set()
            for p in params.split(","):
                a = re.search(r"\[\[\s*(\w+)\s*\]\]", p)
                if a and a.group(1) in POS_BUILTINS:
                    types.add(" ".join(p[:a.start()].split()[:-1]))
            if len(types) > 1:
                report(fstart, "kernel %s mixes position built-in types %s" % (name, sorted(types)))
    return probs


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: msllint.py FILE.metal...\n")
        sys.exit(2)
    probs = []
    for p in sys.argv[1:]:
        probs += lint(p)
    for p in probs:
        print(p)
    sys.exit(1 if probs else 0)


if __name__ == "__main__":
    main()
