#!/usr/bin/python3
"""mslreflect.py — what Metal's pipeline reflection would tell a host, read from MSL text.

The Linux harness cannot ask a Metal device which argument of a kernel is
[[buffer(2)]] or [[thread_position_in_grid]]; this script reads the kernel
signatures from the .metal source instead and writes what the emulator needs:

  launch  MODEL.metal OUT.cl OUT.c
      OUT.cl  includes the .metal text unchanged and adds one launcher per kernel
              that passes every argument by its attribute (buffers from the
              bound array, built-ins from the current fiber), plus
              kiln_emu_launch(k, bufs) that switches on the kernel index;
      OUT.c   the table kiln_emu_kernels[] = {name, buffer count, signature}, so the
              harness can check each dispatch's bindings against the kernel.
  tgmem   OBJ.o KERNELS.c
      finds the threadgroup arrays clang made into function statics (local
      symbols _ZZ<kernel>E<name>), makes them global (objcopy) so the harness can
      poison them before every threadgroup, appends their table to KERNELS.c, and
      fails if a kernel's threadgroup memory exceeds 32 KiB (Apple's limit).

Exits 1 with "mslreflect: <problem>" when a signature is not something Kiln's
harness (or Metal) accepts: a parameter without an attribute, a duplicated
buffer index, an unknown built-in, a non-void kernel.
"""
import re
import subprocess
import sys

BUILTINS = {
    "thread_position_in_grid": "KILN_B_TPIG",
    "thread_position_in_threadgroup": "KILN_B_TPITG",
    "threadgroup_position_in_grid": "KILN_B_TGPIG",
    "threads_per_threadgroup": "KILN_B_TPTG",
    "threadgroups_per_grid": "KILN_B_TGPG",
    "thread_index_in_threadgroup": "KILN_B_TIITG",
    "thread_index_in_simdgroup": "KILN_B_TIISG",
    "simdgroup_index_in_threadgroup": "KILN_B_SIITG",
    "threads_per_simdgroup": "KILN_B_TPSG",
}
TG_LIMIT = 32 * 1024


def fail(msg):
    sys.stderr.write("mslreflect: %s\n" % msg)
    sys.exit(1)


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def split_params(s):
    """Splits a parameter list at top-level commas."""
    out, depth, cur = [], 0, ""
    for c in s:
        if c in "([<":
            depth += 1
        elif c in ")]>":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur.strip())
    return out


def kernels(src):
    """[(name, [param dicts])] in source order."""
    src = strip_comments(src)
    res = []
    for m in re.finditer(r"\bkernel\s+(\w+)\s+(\w+)\s*\(", src):
        ret, name = m.group(1), m.group(2)
        if ret != "void":
            fail("kernel %s returns %s; Metal kernels return void" % (name, ret))
        depth, i = 1, m.end()
        while depth:
            if i >= len(src):
                fail("kernel %s: unterminated parameter list" % name)
            depth += {"(": 1, ")": -1}.get(src[i], 0)
            i += 1
        params = []
        for p in split_params(src[m.end():i - 1]):
            a = re.search(r"\[\[\s*(\w+)\s*(?:\(\s*(\d+)\s*\))?\s*\]\]\s*$", p)
            if not a:
                fail("kernel %s: parameter '%s' has no attribute" % (name, p))
            decl = p[:a.start()].strip()
            pm = re.match(r"(.*?)(\w+)$", decl, re.S)
            if not pm:
                fail("kernel %s: cannot read parameter '%s'" % (name, p))
            ptype, pname = " ".join(pm.group(1).split()), pm.group(2)
            attr, idx = a.group(1), a.group(2)
            if attr == "buffer":
                if idx is None:
                    fail("kernel %s: [[buffer]] without an index" % name)
                if not re.match(r"^(device|constant)\b", ptype):
                    fail("kernel %s: buffer parameter %s must be device or constant (is '%s')" % (name, pname, ptype))
                ref = ptype.endswith("&")
                if not (ptype.endswith("*") or ref):
                    fail("kernel %s: buffer parameter %s is neither a pointer nor a reference" % (name, pname))
                elem = re.sub(r"^(device|constant)\s+", "", ptype.rstrip("*&").strip())
                const = ptype.startswith("constant") or bool(re.match(r"^const\b|.*\bconst$", elem))
                elem = re.sub(r"\bconst\b", "", elem).strip()
                params.append({"kind": "buffer", "index": int(idx), "type": ptype, "elem": elem,
                               "const": const, "ref": ref, "name": pname})
            elif attr in BUILTINS:
                params.append({"kind": "builtin", "which": BUILTINS[attr], "type": ptype, "name": pname})
            else:
                fail("kernel %s: unknown attribute [[%s]] on %s" % (name, attr, pname))
        idxs = [p["index"] for p in params if p["kind"] == "buffer"]
        if len(set(idxs)) != len(idxs):
            fail("kernel %s: duplicated buffer index in %s" % (name, idxs))
        if sorted(idxs) != list(range(len(idxs))):
            fail("kernel %s: buffer indices %s are not 0..%d" % (name, sorted(idxs), len(idxs) - 1))
        res.append((name, params))
    if not res:
        fail("no kernels found")
    return res


def cmd_launch(metal, out_cl, out_c):
    ks = kernels(open(metal).read())
    cl = ["// Generated by tests/metal/mslreflect.py from %s: launchers for the emulator." % metal.split("/")[-1],
          '#include "%s"' % metal.split("/")[-1], ""]
    for name, params in ks:
        args = []
        for p in params:
            if p["kind"] == "buffer":
                t = p["type"].rstrip("&").strip()
                if p["ref"]:
                    args.append("*(%s *)b[%d]" % (t, p["index"]))
                else:
                    args.append("(%s)b[%d]" % (t, p["index"]))
            else:
                args.append("kiln_builtin_t<%s>::get(%s)" % (p["type"], p["which"]))
        cl.append("static void kiln_launch_%s(void *const *b) {" % name)
        cl.append("  %s(%s);" % (name, ",\n      ".join(args)))
        cl.append("}")
    cl.append('extern "C" void kiln_emu_launch(int k, void *const *b) {')
    cl.append("  switch (k) {")
    for i, (name, _) in enumerate(ks):
        cl.append("  case %d: kiln_launch_%s(b); break;" % (i, name))
    cl.append("  }")
    cl.append("}")
    open(out_cl, "w").write("\n".join(cl) + "\n")
    c = ["/* Generated by tests/metal/mslreflect.py from %s. */" % metal.split("/")[-1],
         '#include "harness.h"', "", "const EmuKernelInfo kiln_emu_kernels[] = {"]
    for name, params in ks:
        bufs = sorted([p for p in params if p["kind"] == "buffer"], key=lambda p: p["index"])
        sig = ",".join("%s:%s" % (p["elem"].replace(" ", "_"), "r" if p["const"] else "w") for p in bufs)
        c.append('  {"%s", %d, "%s"},' % (name, len(bufs), sig))
    c.append("  {0, 0, 0}};")
    c.append("const int kiln_emu_nkernels = %d;" % len(ks))
    open(out_c, "w").write("\n".join(c) + "\n")


def demangle_owner(sym):
    """_ZZ<len><kernel>E<len><var>... -> (kernel, var), for the C-linkage kernels."""
    m = re.match(r"_ZZ(\d+)", sym)
    if not m:
        return None, None
    n = int(m.group(1))
    kname = sym[m.end():m.end() + n]
    rest = sym[m.end() + n:]
    vm = re.match(r"E(\d+)", rest)
    var = rest[vm.end():vm.end() + int(vm.group(1))] if vm else rest
    return kname, var


def cmd_tgmem(obj, kernels_c):
    out = subprocess.run(["readelf", "-sW", obj], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] == "OBJECT" and f[4] == "LOCAL" and f[7].startswith("_ZZ"):
            syms.append((f[7], int(f[2], 0)))
    src = open(kernels_c).read()
    names = re.findall(r'^\s*\{"(\w+)", \d+, "', src, re.M)
    per = {}
    rows = []
    for sym, size in syms:
        kname, var = demangle_owner(sym)
        if kname not in names:
            fail("static %s (%d bytes) is not threadgroup memory of a kernel" % (sym, size))
        per[kname] = per.get(kname, 0) + size
        rows.append((names.index(kname), sym, size, var))
    for k, total in sorted(per.items()):
        if total > TG_LIMIT:
            fail("kernel %s uses %d bytes of threadgroup memory (limit %d)" % (k, total, TG_LIMIT))
    if syms:
        args = ["objcopy"]
        for sym, _ in syms:
            args.append("--globalize-symbol=" + sym)
        subprocess.run(args + [obj], check=True)
    lines = ["", "/* Threadgroup memory per kernel (from %s). */" % obj.split("/")[-1]]
    for _, sym, _, _ in rows:
        lines.append("extern char %s[];" % sym)
    lines.append("const EmuTgSym kiln_emu_tgsyms[] = {")
    for k, sym, size, var in rows:
        lines.append('  {%d, %s, %d, "%s"},' % (k, sym, size, var))
    lines.append("  {-1, 0, 0, 0}};")
    open(kernels_c, "a").write("\n".join(lines) + "\n")
    for k, total in sorted(per.items()):
        print("tgmem %s %d" % (k, total))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "launch":
        cmd_launch(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 4 and sys.argv[1] == "tgmem":
        cmd_tgmem(sys.argv[2], sys.argv[3])
    else:
        fail("usage: mslreflect.py launch MODEL.metal OUT.cl OUT.c | tgmem OBJ.o KERNELS.c")


if __name__ == "__main__":
    main()
