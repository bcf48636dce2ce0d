/*
 * half_test.c — checks emu.c's __gnu_h2f_ieee / __gnu_f2h_ieee (which clang calls
 * for MSL `half` arithmetic, and libgcc lacks) against the compiler's _Float16:
 * every one of the 65536 halves to float, and float to half for every half's
 * neighbourhood (the value, its midpoints to the next half, one ulp either side)
 * plus a million pseudo-random floats. Prints PASS/FAIL lines.
 */
#include "emu.h"

#include <stdio.h>
#include <string.h>

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float fl(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint16_t hbits(_Float16 h) { uint16_t u; memcpy(&u, &h, 2); return u; }

/* True when our f2h agrees with _Float16 for f (NaNs: both NaN). */
static int same_f2h(float f) {
  uint16_t a = __gnu_f2h_ieee(f), b = hbits((_Float16)f);
  if ((b & 0x7c00u) == 0x7c00u && (b & 0x3ffu)) return (a & 0x7c00u) == 0x7c00u && (a & 0x3ffu);
  return a == b;
}

int main(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    _Float16 hv;
    uint16_t hb = (uint16_t)h;
    memcpy(&hv, &hb, 2);
    float want = (float)hv, got = __gnu_h2f_ieee(hb);
    if (bits(want) != bits(got) && !(want != want && got != got)) bad++;
  }
  printf("%s half_h2f_exhaustive%s\n", bad ? "FAIL" : "PASS", bad ? ": mismatches" : "");
  int bad2 = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    uint16_t hb = (uint16_t)h;
    float f = __gnu_h2f_ieee(hb);
    uint32_t u = bits(f);
    float probes[] = {f, fl(u + 1), fl(u - 1), fl(u + 4096), fl(u + 4095), fl(u + 4097), fl(u - 4096)};
    for (int i = 0; i < 7; i++) bad2 += !same_f2h(probes[i]);
  }
  uint64_t r = 88172645463325252ull;
  for (int i = 0; i < 1000000; i++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    bad2 += !same_f2h(fl((uint32_t)r));
  }
  printf("%s half_f2h_rounding%s\n", bad2 ? "FAIL" : "PASS", bad2 ? ": mismatches" : "");
  return bad || bad2;
}

/* emu.c calls this for kernels; this test runs none. */
void kiln_emu_launch(int k, void *const *b) {
  (void)k;
  (void)b;
}
