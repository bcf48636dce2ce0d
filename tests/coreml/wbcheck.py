"""wbcheck.py — structure checks of a .mlpackage's Manifest.json and weight.bin.

usage: wbcheck.py PKG.mlpackage [DECODED.txt]
  prints one problem per line and exits 1 if there is any; exits 0 silently
  otherwise. DECODED.txt (protoc --decode output of model.mlmodel) adds the
  cross-check that the blob offsets the model references are exactly the blobs
  in the file.

Independent of the emitter and of milrun (a second, Python reading of the
MILBlob v2 layout in shared/reference/coreml-format.md section 5). The model must
reference every blob and name no other offset; a blob may be referenced more than
once (a weight shared by the functions of a model with entry points):
  header: count, version 2, reserved bytes zero;
  per blob, walking the chain from offset 64: metadata at a 64-aligned offset,
  sentinel 0xDEADBEEF, a known dtype code (Kiln writes 1 = fp16, 2 = fp32, and for
  compressed weights 3 = uint8, 4 = int8, 8 = int4, 11 = uint4), size > 0 and a
  multiple of the element width, data offset = metadata + 64 (Apple's writer),
  64-aligned and inside the file, padding bits (only 4-bit types may have 4) and
  reserved fields zero,
  gap bytes before the metadata zero; no bytes after the last payload.
Manifest: fileFormatVersion "1.0.0"; every item has the four string keys and a
path that exists under Data/; the root item is the model; the weights item
(name "weights", author "com.apple.CoreML", path the weights directory) exists
exactly when weight.bin does.
"""
import json
import os
import re
import struct
import sys

KNOWN_CODES = set(range(1, 18))
KILN_CODES = {1, 2, 3, 4, 8, 11}
SUB_BYTE = {8, 9, 10, 11, 12, 13}
WIDTH = {1: 2, 2: 4, 3: 1, 4: 1, 5: 2, 6: 2, 7: 2, 14: 4, 15: 4}


def check_manifest(pkg):
    bad = []
    path = os.path.join(pkg, "Manifest.json")
    try:
        man = json.load(open(path))
    except (OSError, ValueError) as e:
        return [f"Manifest.json: {e}"]
    if man.get("fileFormatVersion") != "1.0.0":
        bad.append(f"fileFormatVersion {man.get('fileFormatVersion')!r}, want '1.0.0'")
    items = man.get("itemInfoEntries", {})
    root = man.get("rootModelIdentifier")
    if root not in items:
        bad.append(f"rootModelIdentifier {root!r} is not an item")
    elif items[root].get("path") != "com.apple.CoreML/model.mlmodel":
        bad.append(f"root item path {items[root].get('path')!r}")
    weights_items = []
    for ident, it in items.items():
        if not re.fullmatch(r"[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}", ident):
            bad.append(f"item identifier {ident!r} is not an upper-case UUID")
        for k in ("author", "description", "name", "path"):
            if not isinstance(it.get(k), str):
                bad.append(f"item {ident}: missing string key {k!r}")
        p = os.path.join(pkg, "Data", it.get("path", ""))
        if not os.path.exists(p):
            bad.append(f"item {ident}: path {it.get('path')!r} does not exist under Data/")
        if it.get("name") == "weights" and it.get("author") == "com.apple.CoreML":
            weights_items.append(it)
    has_bin = os.path.exists(os.path.join(pkg, "Data/com.apple.CoreML/weights/weight.bin"))
    if has_bin != (len(weights_items) == 1):
        bad.append(f"weight.bin {'present' if has_bin else 'absent'} but {len(weights_items)} weights items")
    for it in weights_items:
        if it.get("path") != "com.apple.CoreML/weights":
            bad.append(f"weights item path {it.get('path')!r}, want the directory com.apple.CoreML/weights")
    return bad


def check_weights(data):
    """Returns (problems, [(metadata offset, dtype code, size)])."""
    bad, blobs = [], []
    if len(data) < 64:
        return [f"weight.bin is {len(data)} bytes, shorter than its header"], blobs
    count, version = struct.unpack_from("<II", data, 0)
    if version != 2:
        bad.append(f"storage version {version}, want 2")
    if any(data[8:64]):
        bad.append("header reserved bytes are not zero")
    pos = 64
    for i in range(count):
        meta = (pos + 63) // 64 * 64
        if any(data[pos:meta]):
            bad.append(f"blob {i}: non-zero gap bytes before its metadata")
        if meta + 64 > len(data):
            bad.append(f"blob {i}: metadata at {meta} runs past the end ({len(data)} bytes)")
            return bad, blobs
        sentinel, code, size, off, padbits = struct.unpack_from("<IIQQQ", data, meta)
        where = f"blob {i} at {meta}"
        if sentinel != 0xDEADBEEF:
            bad.append(f"{where}: sentinel {sentinel:#x}")
        if code not in KNOWN_CODES:
            bad.append(f"{where}: unknown dtype code {code}")
        elif code not in KILN_CODES:
            bad.append(f"{where}: dtype code {code} (Kiln writes only fp16 = 1, fp32 = 2, uint8 = 3, int8 = 4, "
                       f"int4 = 8, uint4 = 11)")
        if size == 0 or (code in WIDTH and size % WIDTH[code]):
            bad.append(f"{where}: size {size} is empty or not whole elements")
        if off != meta + 64 or off % 64:
            bad.append(f"{where}: data offset {off}, want {meta + 64} (64-aligned, right after the metadata)")
        if off + size > len(data):
            bad.append(f"{where}: data [{off}, {off + size}) outside the file ({len(data)} bytes)")
        if padbits and (code not in SUB_BYTE or padbits >= 8):
            bad.append(f"{where}: padding_size_in_bits {padbits} for a whole-byte type")
        if any(data[meta + 32:meta + 64]):
            bad.append(f"{where}: reserved metadata fields are not zero")
        blobs.append((meta, code, size))
        pos = off + size
    if pos != len(data):
        bad.append(f"{len(data) - pos} bytes after the last of {count} blobs")
    return bad, blobs


def referenced_offsets(decoded):
    """Blob offsets named by BlobFileValue entries in protoc --decode text."""
    refs = re.findall(r'blobFileValue \{\s*fileName: "([^"]*)"\s*offset: (\d+)', decoded)
    return [(name, int(off)) for name, off in refs]


def check_package(pkg, decoded=None):
    bad = check_manifest(pkg)
    wpath = os.path.join(pkg, "Data/com.apple.CoreML/weights/weight.bin")
    blobs = []
    if os.path.exists(wpath):
        wb, blobs = check_weights(open(wpath, "rb").read())
        bad += wb
    if decoded is not None:
        refs = referenced_offsets(decoded)
        for name, _ in refs:
            if name != "@model_path/weights/weight.bin":
                bad.append(f"blob file name {name!r}")
        want = sorted({off for _, off in refs})   # several functions may share one blob
        have = sorted(m for m, _, _ in blobs)
        if want != have:
            bad.append(f"the model references blob offsets {want[:8]}... but weight.bin holds {have[:8]}... "
                       f"({len(want)} vs {len(have)})")
    return bad


def main():
    pkg = sys.argv[1]
    decoded = open(sys.argv[2]).read() if len(sys.argv) > 2 else None
    bad = check_package(pkg, decoded)
    for b in bad:
        print(b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
