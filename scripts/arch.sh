# arch.sh — sourced by scripts/demo.sh and scripts/llm_build.sh: ARCH, the documented flags
# for compiling generated C here (docs/output.md): AVX2 + FMA on an x86-64 CPU that has them
# (the portable -O2 alone would run the matrix products through libm's fmaf), NEON as is on
# ARM64.
ARCH=""
case "$(uname -m)" in
  x86_64|amd64)
    if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo 2>/dev/null; then ARCH="-march=x86-64-v3"; fi ;;
esac
