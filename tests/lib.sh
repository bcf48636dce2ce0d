# lib.sh — sourced by tests/t_*.sh of the correctness suites (t_ops, t_models, t_golden,
# t_determinism, t_compile). Sets the working directory to the repository root, KILN (the
# binary under test, default build/kiln), PY (Debian's python with numpy and torch) and,
# through kt_work NAME, a fresh scratch directory $WORK removed at exit unless KEEP=1.
# Every suite fails loudly, never skips, when the binary or a tool is missing.
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
KILN=${KILN:-$ROOT/build/kiln}
export KILN
PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the work tree

kt_work() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/kiln-$1.XXXXXX") || exit 2
  if [ -z "$KEEP" ]; then trap 'rm -rf "$WORK"' EXIT; else echo "work directory: $WORK"; fi
}

# kt_need_kiln SUITE: FAIL and exit when the binary under test is missing.
kt_need_kiln() {
  if [ ! -x "$KILN" ]; then
    echo "FAIL $1/kiln: no kiln binary at $KILN (build it first, or set KILN)"
    exit 1
  fi
}

# kt_models: every model script the whole-repository checks use, one per line.
kt_models() {
  ls models/*.lua tests/golden/*.lua tests/targets/*.lua 2>/dev/null
}
