/*
 * fma_peak.c — what one core does with fused multiply-adds and nothing else: twelve
 * independent chains of vfmadd231ps on registers (no loads, no stores), the ceiling a
 * matmul tile's GFLOP/s is read against (docs/bench.md). The widest vectors the flags
 * allow: AVX-512 (16 lanes) or AVX2 + FMA (8 lanes); x86-64 only. `make bench`'s peer
 * benchmark compiles it with -march=native and reports each workload against it.
 *
 *   cc -O2 -march=native -o /tmp/fma_peak bench/fma_peak.c && /tmp/fma_peak
 *
 * Prints the vector width, then GFLOP/s (2 per lane and FMA) for six rounds of 10^8
 * steps. Written in assembly because a compiler given intrinsics is free to keep fewer
 * chains or to spill.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <time.h>

#if defined(__x86_64__) && defined(__AVX512F__)
#define FMA_REG "zmm"
enum { LANES = 16 };
#elif defined(__x86_64__) && defined(__FMA__)
#define FMA_REG "ymm"
enum { LANES = 8 };
#endif

enum { STEPS = 100000000, CHAINS = 12, ROUNDS = 6 };

#ifdef FMA_REG
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Chain k: register k += register 12 * register 13 (all fourteen zeroed first: operands the
 * caller left in 12 and 13 could be subnormal, which some cores multiply slowly). The xmm
 * form of vxorps zeroes the whole register and needs only AVX. */
#define FMA(k) "vfmadd231ps %%" FMA_REG "12, %%" FMA_REG "13, %%" FMA_REG #k "\n\t"
#define ZERO(k) "vxorps %%xmm" #k ", %%xmm" #k ", %%xmm" #k "\n\t"

int main(void) {
  printf("%s, %d lanes, %d chains\n", LANES == 16 ? "AVX-512" : "AVX2 + FMA", LANES, CHAINS);
  for (int r = 0; r < ROUNDS; r++) {
    long n = STEPS;
    const double t0 = now();
    __asm__ volatile(ZERO(0) ZERO(1) ZERO(2) ZERO(3) ZERO(4) ZERO(5) ZERO(6) ZERO(7) ZERO(8) ZERO(9) ZERO(10)
                     ZERO(11) ZERO(12) ZERO(13)
                     "1:\n\t"
                     FMA(0) FMA(1) FMA(2) FMA(3) FMA(4) FMA(5) FMA(6) FMA(7) FMA(8) FMA(9) FMA(10) FMA(11)
                     "dec %0\n\t jnz 1b\n\t"
                     "vzeroupper\n"
                     : "+r"(n)
                     :
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
                       "xmm11", "xmm12", "xmm13", "cc");
    const double s = now() - t0;
    printf("%.1f GFLOP/s\n", (double)STEPS * CHAINS * LANES * 2 / s / 1e9);
  }
  return 0;
}
#else
int main(void) {
  fputs("fma_peak: needs x86-64 with AVX2 + FMA or AVX-512 (build with -march=native)\n", stderr);
  return 2;
}
#endif
