"""rotate_blob.py — a checker test's broken package: one const's blob payload rotated.

usage: rotate_blob.py PKG.mlpackage CONST BYTES

Rotates the payload of the blob that const op CONST points at left by BYTES bytes, in
place: the package stays valid (same types, sizes, offsets) but that constant's values
move, so a comparison of the program's outputs with the C build's must then fail.
"""
import re
import struct
import subprocess
import sys

pkg, name, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
mm = pkg + "/Data/com.apple.CoreML/model.mlmodel"
text = subprocess.run(["protoc", "--decode=CoreML.Specification.Model", "--proto_path=gen/target",
                       "gen/target/coreml.proto"], stdin=open(mm, "rb"), capture_output=True, text=True).stdout
parts = text.split(f'values: "{name}"')
if len(parts) < 2:
    sys.exit(f"rotate_blob.py: no const {name}")
off = int(re.search(r"offset: (\d+)", parts[1]).group(1))
wb = pkg + "/Data/com.apple.CoreML/weights/weight.bin"
data = bytearray(open(wb, "rb").read())
size, start = struct.unpack_from("<QQ", data, off + 8)
data[start:start + size] = data[start + k:start + size] + data[start:start + k]
open(wb, "wb").write(data)
