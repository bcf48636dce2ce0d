/*
 * fma_peak.c — what one core does with AVX-512 FMAs and nothing else: twelve independent
 * chains of vfmadd231ps on registers (no loads, no stores), the ceiling a matmul tile's
 * GFLOP/s is read against (docs/bench.md). x86-64 with AVX-512 only; not part of
 * `make bench`.
 *
 *   cc -O2 -o /tmp/fma_peak bench/fma_peak.c && /tmp/fma_peak
 *
 * Prints GFLOP/s (2 per lane and FMA, 16 lanes) for six rounds of 10^8 steps. Written in
 * assembly because a compiler given intrinsics is free to keep fewer chains or to spill.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <time.h>

enum { STEPS = 100000000, CHAINS = 12, LANES = 16, ROUNDS = 6 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
  for (int r = 0; r < ROUNDS; r++) {
    long n = STEPS;
    const double t0 = now();
    __asm__ volatile(
        "vxorps %%zmm0, %%zmm0, %%zmm0\n\t"
        "vmovaps %%zmm0, %%zmm1\n\t vmovaps %%zmm0, %%zmm2\n\t vmovaps %%zmm0, %%zmm3\n\t"
        "vmovaps %%zmm0, %%zmm4\n\t vmovaps %%zmm0, %%zmm5\n\t vmovaps %%zmm0, %%zmm6\n\t"
        "vmovaps %%zmm0, %%zmm7\n\t vmovaps %%zmm0, %%zmm8\n\t vmovaps %%zmm0, %%zmm9\n\t"
        "vmovaps %%zmm0, %%zmm10\n\t vmovaps %%zmm0, %%zmm11\n"
        "1:\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm0\n\t vfmadd231ps %%zmm30, %%zmm31, %%zmm1\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm2\n\t vfmadd231ps %%zmm30, %%zmm31, %%zmm3\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm4\n\t vfmadd231ps %%zmm30, %%zmm31, %%zmm5\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm6\n\t vfmadd231ps %%zmm30, %%zmm31, %%zmm7\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm8\n\t vfmadd231ps %%zmm30, %%zmm31, %%zmm9\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm10\n\t vfmadd231ps %%zmm30, %%zmm31, %%zmm11\n\t"
        "dec %0\n\t jnz 1b\n"
        : "+r"(n)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "cc");
    const double s = now() - t0;
    printf("%.1f GFLOP/s\n", (double)STEPS * CHAINS * LANES * 2 / s / 1e9);
  }
  return 0;
}
