"""protocmp.py — checks Kiln's Core ML schema subset against Apple's text.

usage: protocmp.py OURS_DIR APPLE_DIR   (prints PASS/FAIL lines)

Every message, field (label, type, name, number) and enum value declared in
OURS_DIR/coreml.proto and coreml_mil.proto must appear identically in Apple's
files in APPLE_DIR (package-qualified names, nested messages included). A
wrong number would make protobuf parsers silently drop the field, so this is
the check that matters most for wire compatibility. A small tokenising parser,
enough for the proto3 subset these files use.
"""
import re
import sys


def parse(path):
    text = open(path).read()
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    toks = re.findall(r"map\s*<[^>]*>|[A-Za-z_][\w.]*|-?\d+|[{};=\[\]]", text)
    pkg = ""
    out = {}          # "pkg.Msg.field" -> (label, type, number); "pkg.Enum.VALUE" -> ("enum", "", n)
    stack = []        # (kind, name) of open blocks
    i = 0
    while i < len(toks):
        t = toks[i]
        if t == "package":
            pkg = toks[i + 1]
            i += 3
            continue
        if t in ("syntax", "option", "import"):
            while toks[i] != ";":
                i += 1
            i += 1
            continue
        if t in ("message", "enum", "oneof"):
            stack.append((t, toks[i + 1]))
            i += 3
            continue
        if t == "}":
            stack.pop()
            i += 1
            continue
        if t == ";":
            i += 1
            continue
        scope = ".".join([pkg] + [n for k, n in stack if k != "oneof"])
        inner = stack[-1][0] if stack else ""
        if inner == "enum":
            out[scope + "." + t] = ("enum", "", int(toks[i + 2]))
            i += 3
            continue
        label = ""
        if t == "repeated":
            label, i = "repeated", i + 1
        typ, name, num = toks[i], toks[i + 1], int(toks[i + 3])
        typ = re.sub(r"\s+", "", typ)
        if inner == "oneof":
            label = "oneof"
        out[scope + "." + name] = (label, typ.split(".")[-1] if not typ.startswith("map") else typ, num)
        i += 4
        while toks[i] != ";":
            i += 1
        i += 1
    return out


def main():
    ours_dir, apple_dir = sys.argv[1], sys.argv[2]
    apple = {}
    for f in ("Model.proto", "FeatureTypes.proto", "MIL.proto"):
        apple.update(parse(f"{apple_dir}/{f}"))
    ours = {}
    for f in ("coreml.proto", "coreml_mil.proto"):
        ours.update(parse(f"{ours_dir}/{f}"))
    bad = [k for k in sorted(ours) if apple.get(k) != ours[k]]
    for k in bad:
        print(f"FAIL schema {k}: ours {ours[k]}, Apple's {apple.get(k, 'absent')}")
    if not bad:
        print(f"PASS schema subset: {len(ours)} fields and enum values match Apple's numbers, types and labels")


main()
