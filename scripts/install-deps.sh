#!/bin/sh
# Installs what Kiln needs on Debian 12, via apt, only when something is missing.
# Build: Lua 5.4 headers, protobuf-c (library + protoc-c), gcc/clang.
# Tests: numpy and PyTorch from Debian (used through /usr/bin/python3), protobuf-compiler
# (protoc --decode of emitted CoreML models).
# With --bench (scripts/bench.sh, never `make test`): the peer benchmark's extras too:
# OpenBLAS (a peer, and PyTorch's BLAS once installed) and Node.js + npm (for
# onnxruntime-node, which bench/peerbench installs itself under .cache/bench); python3-onnx,
# which the benchmark's ONNX export also uses, is a test dependency now. A node already on the PATH, e.g. from another source, is kept.
set -eu
need=""
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# libclang-rt-14-dev: clang's sanitizer and libFuzzer runtimes (t_compile builds with clang
# -fsanitize=address,undefined); clang only recommends it, and we install without recommends.
# python3-onnx and libonnx-testdata: t_onnx (torch.onnx.export's writer, ONNX's node tests).
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross (only recommended by the compiler, so not
# installed without recommends) and qemu-user: t_isa runs the generated C's NEON path under qemu.
# unicode-data: t_tok regenerates the tokenizers' Unicode tables from it and compares.
for p in liblua5.4-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler pkg-config \
         gcc clang libclang-rt-14-dev make python3-numpy python3-torch python3-onnx libonnx-testdata \
         gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user unicode-data; do
  have "$p" || need="$need $p"
done
if [ "${1:-}" = "--bench" ]; then
  for p in libopenblas-dev; do
    have "$p" || need="$need $p"
  done
  command -v node >/dev/null 2>&1 || need="$need nodejs"
  command -v npm >/dev/null 2>&1 || need="$need npm"
fi
[ -z "$need" ] && exit 0
echo "install-deps: installing:$need" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq --no-install-recommends $need >&2
