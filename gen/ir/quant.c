/*
 * quant.c — Kiln's stored weight formats (docs/quantization.md is the layout spec):
 * their sizes, the build-time quantizers (quant_pack), the re-laying of GGUF/ggml blocks
 * into Kiln's panels (quant_from_ggml) and the reference decoder (quant_unpack).
 *
 * A matrix W of n rows of k values is kept in panels of KILN_QPANEL rows; a panel is a
 * run of blocks along k, and inside a block every per-row number of the 32 rows (lanes)
 * sits side by side, so a kernel reads one block's scales for 32 outputs at once. f32 is
 * the exception: plain row-major, as the pipeline always stored it.
 *
 * Every quantizer works on one row at a time and writes only that row's lane, so rows
 * are independent and the order of float operations is fixed: the same input gives the
 * same bytes on every machine. quant_pack's dequantized values come from quant_unpack on
 * the bytes just written, so they are by construction what the decoder (and the kernels,
 * which evaluate the same float expressions) compute.
 *
 * Non-finite inputs: f16 and bf16 keep them (inf stays inf, NaN stays NaN); the integer
 * formats read NaN and +-inf as 0 (a quantizer needs finite statistics, and C's
 * float-to-int conversion of NaN is undefined). Scales and biases stored as f16 saturate
 * at +-65504 instead of becoming infinite.
 */
#include "kiln.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

/* Products and sums are rounded separately, as the spec's expressions say: no fused
 * multiply-add. gcc needs no pragma: ISO C mode (-std=c11) turns contraction off. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
/* Deterministic bytes need float arithmetic rounded to float at every step (SSE, NEON),
 * not x87's wider intermediates; rne() depends on it too. */
#if FLT_EVAL_METHOD != 0
#error "quant.c needs FLT_EVAL_METHOD 0 (float operations evaluated in float)"
#endif

enum { LANES = KILN_QPANEL, QK4K_SUB = 32, QK6K_SUB = 16 };

static const WFormatInfo infos[WF__COUNT] = {
    [WF_F32] = {"f32", 1, 0},       [WF_F16] = {"f16", 1, 1},       [WF_BF16] = {"bf16", 1, 30},
    [WF_I8] = {"i8", 0, -1},        [WF_Q8_0] = {"q8_0", 32, 8},    [WF_Q4_0] = {"q4_0", 32, 2},
    [WF_Q4_K] = {"q4_k", 256, 12},  [WF_Q6_K] = {"q6_k", 256, 14},  [WF_G8] = {"g8", 64, -1},
    [WF_G4] = {"g4", 64, -1},
};

/* Bytes of one block of 32 lanes (i8: the fixed part; its block is the whole row). */
static const int block_bytes[WF__COUNT] = {
    [WF_F32] = 128, [WF_F16] = 64, [WF_BF16] = 64, [WF_I8] = 128, [WF_Q8_0] = 1088, [WF_Q4_0] = 576,
    [WF_Q4_K] = 4608, [WF_Q6_K] = 6720, [WF_G8] = 2176, [WF_G4] = 1152,
};

/* ggml's block of the same format: elements, bytes (block_q8_0, block_q4_0, ...). */
static const int ggml_block_bytes[WF__COUNT] = {
    [WF_F32] = 4, [WF_F16] = 2, [WF_BF16] = 2, [WF_Q8_0] = 34, [WF_Q4_0] = 18, [WF_Q4_K] = 144, [WF_Q6_K] = 210,
};

const WFormatInfo *wformat_info(WFormat f) {
  if ((unsigned)f >= WF__COUNT) die("wformat_info: format %d out of range", (int)f);
  return &infos[f];
}

/* Contract: *out = the format named s, compared ASCII case-insensitively ("Q4_K" is q4_k). */
bool wformat_parse(const char *s, WFormat *out) {
  for (int f = 0; f < WF__COUNT; f++) {
    const char *a = infos[f].name, *b = s;
    while (*a && (*b == *a || (*b >= 'A' && *b <= 'Z' && *b - 'A' + 'a' == *a))) a++, b++;
    if (!*a && !*b) {
      *out = (WFormat)f;
      return true;
    }
  }
  return false;
}

/* k must be positive and a whole number of f's blocks: the callers check the user's
 * shapes first, so a bad k here is Kiln's bug. */
static void check_k(WFormat f, int64_t k) {
  const WFormatInfo *i = wformat_info(f);
  if (k <= 0 || (i->block && k % i->block))
    die("%s weights: a row of %lld values is not a whole number of blocks of %d", i->name, (long long)k, i->block);
}

int64_t wformat_panel_bytes(WFormat f, int64_t k) {
  check_k(f, k);
  if (f == WF_I8) return 128 + 32 * k;
  return k / infos[f].block * block_bytes[f];
}

/* f32 is row-major without padding (4nk); every other format ceil(n/32) panels. */
int64_t wformat_bytes(WFormat f, int64_t n, int64_t k) {
  if (n < 0) die("wformat_bytes: %lld rows", (long long)n);
  if (f == WF_F32) {
    check_k(f, k);
    return 4 * n * k;
  }
  return (n + LANES - 1) / LANES * wformat_panel_bytes(f, k);
}

/* ---- bytes ---- */

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static float rd_half(const unsigned char *p) { return kiln_f16_to_f32(rd16(p)); }
static float rd_f32(const unsigned char *p) {
  return kiln_f32_from_bits((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}
static void wr16(unsigned char *p, uint16_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}
static void wr_f32(unsigned char *p, float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(u >> 8 * i);
}

/* The nib(k, j) layout: value kk of a block's nibble area at base, lane j. */
static int rd_nib(const unsigned char *base, int64_t kk, int j) {
  return base[kk * 16 + j % 16] >> (j / 16 * 4) & 15;
}
/* Sets a nibble of a zeroed area (the other lane of the byte may already be there). */
static void wr_nib(unsigned char *base, int64_t kk, int j, int q) {
  base[kk * 16 + j % 16] |= (unsigned char)(q << (j / 16 * 4));
}

/* q6_k's high 2 bits of lane j for value kk: two little-endian u32 words after the 16
 * nibble bytes, lane j at bits 2*(j%16) of word j/16, i.e. byte 4*(j/16) + (j%16)/4. */
static int rd_hi2(const unsigned char *kbase, int j) {
  return kbase[16 + 4 * (j / 16) + j % 16 / 4] >> (2 * (j % 4)) & 3;
}
static void wr_hi2(unsigned char *kbase, int j, int hi) {
  kbase[16 + 4 * (j / 16) + j % 16 / 4] |= (unsigned char)(hi << (2 * (j % 4)));
}

/* q4_k's 12 bytes of 6-bit scales and mins, ggml's get_scale_min_k4 packing: sub-blocks
 * 0-3 in the low 6 bits of bytes 0-3 (scale) and 4-7 (min); 4-7 split, low 4 bits in
 * bytes 8-11 (scale low nibble, min high nibble), high 2 bits in the top of bytes 0-7. */
static void rd_scale_min(const unsigned char *q, int s, int *sc, int *m) {
  if (s < 4) {
    *sc = q[s] & 63;
    *m = q[s + 4] & 63;
  } else {
    *sc = (q[s + 4] & 15) | (q[s - 4] >> 6) << 4;
    *m = (q[s + 4] >> 4) | (q[s] >> 6) << 4;
  }
}
static void wr_scale_min(unsigned char *q, int s, int sc, int m) {
  if (s < 4) {
    q[s] |= (unsigned char)sc;
    q[s + 4] |= (unsigned char)m;
  } else {
    q[s + 4] |= (unsigned char)((sc & 15) | (m & 15) << 4);
    q[s - 4] |= (unsigned char)((sc >> 4) << 6);
    q[s] |= (unsigned char)((m >> 4) << 6);
  }
}

/* ---- rounding ---- */

/* v rounded half away from zero (C's roundf), then clamped to [lo, hi]; NaN gives lo.
 * Truncation by conversion and an exact fraction test, so no libm call per value. */
static int qround(float v, int lo, int hi) {
  if (!(v >= (float)lo - 1.0f)) return lo;
  if (v > (float)hi + 1.0f) return hi;
  int i = (int)v;
  float frac = v - (float)i;                  /* exact: |v| < 2^24 here */
  if (frac >= 0.5f) i++;
  else if (frac <= -0.5f) i--;
  return i < lo ? lo : i > hi ? hi : i;
}

/* A scale or bias as an f16: nearest even, saturated at the largest finite half. */
static uint16_t half_sat(float v) {
  uint16_t h = kiln_f32_to_f16(v);
  if ((h & 0x7c00) == 0x7c00) h = (uint16_t)((h & 0x8000) | 0x7bff);
  return h;
}

static float finite_or_zero(float v) { return v - v == 0.0f ? v : 0.0f; }

/* ---- quantizers, one row's lane j at a time ---- */

/* i8: s = amax/127 per row (f32), q = round(x/s) in [-127, 127]. */
static void pack_i8(const float *x, int64_t k, unsigned char *panel, int j) {
  float amax = 0.0f;
  for (int64_t i = 0; i < k; i++)
    if (amax < (x[i] < 0 ? -x[i] : x[i])) amax = x[i] < 0 ? -x[i] : x[i];
  float s = amax / 127.0f;
  wr_f32(panel + 4 * j, s);
  for (int64_t i = 0; i < k; i++)
    panel[128 + 32 * i + j] = (unsigned char)(int8_t)(s == 0.0f ? 0 : qround(x[i] / s, -127, 127));
}

/* q8_0: per 32, d = f16(amax/127), q = round(x/d) in [-127, 127] with the stored d. */
static void pack_q8_0(const float *x, unsigned char *b, int j) {
  float amax = 0.0f;
  for (int i = 0; i < 32; i++)
    if (amax < (x[i] < 0 ? -x[i] : x[i])) amax = x[i] < 0 ? -x[i] : x[i];
  uint16_t h = half_sat(amax / 127.0f);
  float d = kiln_f16_to_f32(h);
  wr16(b + 2 * j, h);
  for (int i = 0; i < 32; i++) b[64 + 32 * i + j] = (unsigned char)(int8_t)(d == 0.0f ? 0 : qround(x[i] / d, -127, 127));
}

/* q4_0: per 32, m = the value of largest magnitude (the first, on ties), d = f16(m/-8),
 * q = round(x/d) + 8 in [0, 15]: m itself lands exactly on q = 0. */
static void pack_q4_0(const float *x, unsigned char *b, int j) {
  float amax = 0.0f, m = 0.0f;
  for (int i = 0; i < 32; i++)
    if (amax < (x[i] < 0 ? -x[i] : x[i])) amax = x[i] < 0 ? -x[i] : x[i], m = x[i];
  uint16_t h = amax > 0 ? half_sat(m / -8.0f) : 0;       /* +0, not 0/-8 = -0: zeros decode to +0 */
  float d = kiln_f16_to_f32(h);
  wr16(b + 2 * j, h);
  for (int i = 0; i < 32; i++) wr_nib(b + 64, i, j, d == 0.0f ? 8 : qround(x[i] / d, -8, 7) + 8);
}

/* g8/g4 (affine, per 64): s = f16((max - min)/(2^bits - 1)), b = f16(min),
 * q = round((x - b)/s) in [0, 2^bits - 1]; s == 0 gives q = 0. */
static void pack_affine(const float *x, unsigned char *b, int j, int bits) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 64; i++) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
  }
  int qmax = (1 << bits) - 1;
  uint16_t sh = half_sat((hi - lo) / (float)qmax), bh = half_sat(lo);
  float s = kiln_f16_to_f32(sh), bias = kiln_f16_to_f32(bh);
  wr16(b + 2 * j, sh);
  wr16(b + 64 + 2 * j, bh);
  for (int i = 0; i < 64; i++) {
    int q = s == 0.0f ? 0 : qround((x[i] - bias) / s, 0, qmax);
    if (bits == 8) b[128 + 32 * i + j] = (unsigned char)q;
    else wr_nib(b + 128, i, j, q);
  }
}

/* ---- the K-quants: searched scales ----
 * Their searches round with rne (below) and multiply by inverse steps instead of dividing:
 * both are exact IEEE operations in a fixed order, so the bytes stay deterministic, and
 * they make q4_k and q6_k fast enough for billion-weight models (docs/quantization.md). */

/* v rounded to the nearest integer (ties to even) after clamping to [lo, hi] (NaN gives
 * lo): adding and removing 1.5 * 2^23 leaves the nearest integer of any |v| < 2^22. */
static float rne(float v, float lo, float hi) {
  v = v >= lo ? v : lo;
  v = v <= hi ? v : hi;
  return (v + 12582912.0f) - 12582912.0f;
}

/* The f16 super-block scale d ~ v / top under which v is at most top steps (v/d in
 * [-|top|, |top|]): f16(v / top), one ulp larger when rounding made it too small. Small
 * weights put d among the f16 subnormals, where rounding can cost a quarter of its
 * value; without the ulp the largest sub-block scale would then be clipped. */
static uint16_t half_covering(float v, float top) {
  uint16_t h = half_sat(v / top);
  float d = kiln_f16_to_f32(h), t = top < 0 ? -top : top;
  if (d == 0 && v != 0) return (uint16_t)((v < 0) != (top < 0) ? 0x8001 : 0x0001);  /* underflow: the least half */
  float r = d != 0 ? v / d : 0;
  if ((r > t || r < -t) && (h & 0x7fff) < 0x7bff) h++;  /* the next magnitude, same sign */
  return h;
}

/* q4_k, first step: the best affine fit x ~ a*q + c of one sub-block of 32, q in 0..15,
 * a >= 0, c <= 0 (ggml's mins are subtracted and non-negative). Candidate inverse steps
 * (15 + t)/(hi - lo), t = -1, -0.8, ..., +1, each round x to q and then solve least
 * squares for (a, c) with those q; the pair of least squared error wins (the plain
 * (hi - lo)/15 grid first, so ties keep it). make_qkx2_quants's idea, unweighted. */
static void fit_affine(const float *x, float *a_out, float *c_out) {
  float lo = 0.0f, hi = x[0], sx = 0.0f;
  for (int i = 0; i < QK4K_SUB; i++) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
    sx += x[i];
  }
  *a_out = 0.0f;
  *c_out = lo;
  if (!(hi > lo)) return;                               /* every value is lo (<= 0) */
  float best = -1.0f;
  for (int step = -1; step <= 10; step++) {
    float a, c, iscale = step < 0 ? 15.0f / (hi - lo) : (14.0f + 0.2f * (float)step) / (hi - lo);
    float q[QK4K_SUB], sq = 0, sqq = 0, sqx = 0, n = (float)QK4K_SUB;
    for (int i = 0; i < QK4K_SUB; i++) {
      q[i] = rne(iscale * (x[i] - lo), 0.0f, 15.0f);
      sq += q[i];
      sqq += q[i] * q[i];
      sqx += q[i] * x[i];
    }
    if (step < 0) {
      a = (hi - lo) / 15.0f;
      c = lo;
    } else {
      float det = n * sqq - sq * sq;                    /* exact: integers below 2^24 */
      if (det <= 0) continue;
      a = (n * sqx - sq * sx) / det;
      c = (sqq * sx - sq * sqx) / det;
      if (c > 0) {                                      /* the constraint binds: c = 0 */
        if (sqq == 0) continue;
        c = 0;
        a = sqx / sqq;
      }
      if (!(a > 0)) continue;
    }
    float err = 0;
    for (int i = 0; i < QK4K_SUB; i++) {
      float e = a * q[i] + c - x[i];
      err += e * e;
    }
    if (best < 0 || err < best) {
      best = err;
      *a_out = a;
      *c_out = c;
    }
  }
}

/* Squared error of a q4_k sub-block at 6-bit scale sc and min m, the values being the
 * spec's (d*sc)*q - dmin*m; q gets the quants. */
static float q4k_try(const float *x, float d, float dmin, int sc, int m, float *q) {
  const float D = d * (float)sc, M = dmin * (float)m, iD = D > 0 ? 1.0f / D : 0.0f;
  float err = 0;
  for (int i = 0; i < QK4K_SUB; i++) {
    q[i] = rne((x[i] + M) * iD, 0.0f, 15.0f);
    float e = D * q[i] - M - x[i];
    err += e * e;
  }
  return err;
}

/* Moves (sc, m) to the best of its 8 neighbours while that lowers the stored values'
 * squared error (at most 3 moves; the first of equals is kept); q gets the winner's quants. */
static void q4k_refine(const float *x, float d, float dmin, int *sc, int *m, float *q) {
  float best = q4k_try(x, d, dmin, *sc, *m, q), tq[QK4K_SUB];
  for (int round = 0; round < 3; round++) {
    int bs = *sc, bm = *m;
    for (int ds = -1; ds <= 1; ds++)
      for (int dm = -1; dm <= 1; dm++) {
        int s = *sc + ds, mm = *m + dm;
        if ((!ds && !dm) || s < 0 || s > 63 || mm < 0 || mm > 63) continue;
        float e = q4k_try(x, d, dmin, s, mm, tq);
        if (e < best) best = e, bs = s, bm = mm;
      }
    if (bs == *sc && bm == *m) break;
    *sc = bs;
    *m = bm;
  }
  q4k_try(x, d, dmin, *sc, *m, q);
}

/* q4_k super-block of 256 (8 sub-blocks of 32): fit each sub-block (fit_affine), then
 * d = f16(max a / 63), dmin = f16(max -c / 63), the 6-bit sc = round(a/d) and
 * m = round(-c/dmin) with the stored d and dmin, refined (q4k_refine), and x quantized
 * with exactly the stored (d*sc, dmin*m). */
static void pack_q4_k(const float *x, unsigned char *b, int j) {
  float a[8], c[8], amax = 0, mmax = 0;
  for (int s = 0; s < 8; s++) {
    fit_affine(x + QK4K_SUB * s, &a[s], &c[s]);
    if (a[s] > amax) amax = a[s];
    if (-c[s] > mmax) mmax = -c[s];
  }
  uint16_t dh = half_covering(amax, 63.0f), mh = half_covering(mmax, 63.0f);
  float d = kiln_f16_to_f32(dh), dmin = kiln_f16_to_f32(mh);
  wr16(b + 2 * j, dh);
  wr16(b + 64 + 2 * j, mh);
  for (int s = 0; s < 8; s++) {
    int sc = d > 0 ? qround(a[s] / d, 0, 63) : 0, m = dmin > 0 ? qround(-c[s] / dmin, 0, 63) : 0;
    float q[QK4K_SUB];
    q4k_refine(x + QK4K_SUB * s, d, dmin, &sc, &m, q);
    wr_scale_min(b + 128 + 12 * j, s, sc, m);
    for (int i = 0; i < QK4K_SUB; i++) wr_nib(b + 512, QK4K_SUB * s + i, j, (int)q[i]);
  }
}

/* q6_k, first step: the best symmetric fit x ~ a*q of a sub-block of 16, q in -32..31.
 * With mx the value of largest magnitude, candidate inverse steps -(32 + t)/mx,
 * t = -0.9 .. +0.9 by 0.1, round x to q, solve a = sum(qx)/sum(qq); least squared error
 * wins (make_qx_quants's idea, unweighted). Returns a (0 for an all-zero sub-block). */
static float fit_symmetric(const float *x) {
  float amax = 0, mx = 0;
  for (int i = 0; i < QK6K_SUB; i++)
    if (amax < (x[i] < 0 ? -x[i] : x[i])) amax = x[i] < 0 ? -x[i] : x[i], mx = x[i];
  if (amax == 0) return 0;
  float best = -1, best_a = mx / -32.0f;
  for (int t = -9; t <= 9; t++) {
    float iscale = -(32.0f + 0.1f * (float)t) / mx, sqq = 0, sqx = 0, q[QK6K_SUB];
    for (int i = 0; i < QK6K_SUB; i++) {
      q[i] = rne(iscale * x[i], -32.0f, 31.0f);
      sqq += q[i] * q[i];
      sqx += q[i] * x[i];
    }
    if (sqq == 0) continue;
    float a = sqx / sqq, err = 0;
    for (int i = 0; i < QK6K_SUB; i++) {
      float e = a * q[i] - x[i];
      err += e * e;
    }
    if (best < 0 || err < best) best = err, best_a = a;
  }
  return best_a;
}

/* Squared error of a q6_k sub-block at int8 scale sc, the values being the spec's
 * (d*sc)*(q - 32); q gets q - 32 (-32..31). */
static float q6k_try(const float *x, float d, int sc, float *q) {
  const float D = d * (float)sc, iD = D != 0 ? 1.0f / D : 0.0f;
  float err = 0;
  for (int i = 0; i < QK6K_SUB; i++) {
    q[i] = rne(x[i] * iD, -32.0f, 31.0f);
    float e = D * q[i] - x[i];
    err += e * e;
  }
  return err;
}

/* q6_k super-block of 256 (16 sub-blocks of 16): fit each (fit_symmetric); with A the
 * sub-block scale of largest magnitude, d = f16(A / -128) (A lands on -128, using the
 * int8's extra negative level), sc = round(a/d) in [-128, 127], each sc then moved by
 * +-1 while that lowers the stored values' squared error, and x quantized with the
 * stored d*sc. */
static void pack_q6_k(const float *x, unsigned char *b, int j) {
  float a[16], amax = 0, A = 0;
  for (int s = 0; s < 16; s++) {
    a[s] = fit_symmetric(x + QK6K_SUB * s);
    if (amax < (a[s] < 0 ? -a[s] : a[s])) amax = a[s] < 0 ? -a[s] : a[s], A = a[s];
  }
  uint16_t dh = amax > 0 ? half_covering(A, -128.0f) : 0;   /* +0, not -0 (as q4_0) */
  float d = kiln_f16_to_f32(dh);
  wr16(b + 2 * j, dh);
  for (int s = 0; s < 16; s++) {
    const float *xs = x + QK6K_SUB * s;
    int sc = d != 0 ? qround(a[s] / d, -128, 127) : 0;
    float q[QK6K_SUB], tq[QK6K_SUB], best = q6k_try(xs, d, sc, q);
    for (int dir = -1; dir <= 1; dir += 2)
      for (int moved = 1; moved && sc + dir >= -128 && sc + dir <= 127;) {
        float e = q6k_try(xs, d, sc + dir, tq);
        moved = e < best;
        if (moved) best = e, sc += dir;
      }
    q6k_try(xs, d, sc, q);
    b[64 + 16 * j + s] = (unsigned char)(int8_t)sc;
    for (int i = 0; i < QK6K_SUB; i++) {
      int v = (int)q[i] + 32;
      unsigned char *kb = b + 576 + 24 * (QK6K_SUB * s + i);
      wr_nib(kb, 0, j, v & 15);
      wr_hi2(kb, j, v >> 4);
    }
  }
}

/* One row x (k values) into lane j of its panel. */
static void pack_row(WFormat f, const float *x, int64_t k, unsigned char *panel, int j) {
  const int64_t B = infos[f].block, bb = block_bytes[f];
  switch (f) {
  case WF_F16: for (int64_t i = 0; i < k; i++) wr16(panel + 64 * i + 2 * j, kiln_f32_to_f16(x[i])); return;
  case WF_BF16: for (int64_t i = 0; i < k; i++) wr16(panel + 64 * i + 2 * j, kiln_f32_to_bf16(x[i])); return;
  case WF_I8: pack_i8(x, k, panel, j); return;
  default: break;
  }
  for (int64_t blk = 0; blk < k / B; blk++) {
    const float *xb = x + blk * B;
    unsigned char *b = panel + blk * bb;
    switch (f) {
    case WF_Q8_0: pack_q8_0(xb, b, j); break;
    case WF_Q4_0: pack_q4_0(xb, b, j); break;
    case WF_Q4_K: pack_q4_k(xb, b, j); break;
    case WF_Q6_K: pack_q6_k(xb, b, j); break;
    case WF_G8: pack_affine(xb, b, j, 8); break;
    case WF_G4: pack_affine(xb, b, j, 4); break;
    default: die("pack_row: format %d", (int)f);
    }
  }
}

/* Contract in kiln.h. Rows past n stay zero bytes (kiln_alloc zeroes). deq is written only
 * after every row of w has been read, so it may alias w. */
unsigned char *quant_pack(WFormat f, const float *w, int64_t n, int64_t k, float *deq) {
  int64_t bytes = wformat_bytes(f, n, k);
  return quant_pack_into(f, w, n, k, deq, kiln_alloc((size_t)(bytes ? bytes : 1)));
}

/* Contract in kiln.h. */
unsigned char *quant_pack_into(WFormat f, const float *w, int64_t n, int64_t k, float *deq, unsigned char *out) {
  int64_t pb = f == WF_F32 ? 0 : wformat_panel_bytes(f, k);
  float *row = malloc(sizeof(float) * (size_t)(k ? k : 1));
  if (!row) die("out of memory quantizing a row of %lld", (long long)k);
  bool keep_nonfinite = f == WF_F32 || f == WF_F16 || f == WF_BF16;
  for (int64_t r = 0; r < n; r++) {
    const float *x = w + r * k;
    if (f == WF_F32) {
      for (int64_t i = 0; i < k; i++) wr_f32(out + 4 * (r * k + i), x[i]);
      continue;
    }
    if (!keep_nonfinite) {
      for (int64_t i = 0; i < k; i++) row[i] = finite_or_zero(x[i]);
      x = row;
    }
    pack_row(f, x, k, out + r / LANES * pb, (int)(r % LANES));
  }
  free(row);
  if (deq) quant_unpack(f, out, n, k, deq);
  return out;
}

/* ---- the reference decoder ---- */

/* Lane j of one panel into y (k values), by the spec's float expressions. */
static void unpack_row(WFormat f, const unsigned char *panel, int64_t k, int j, float *y) {
  const int64_t B = infos[f].block, bb = block_bytes[f];
  switch (f) {
  case WF_F16: for (int64_t i = 0; i < k; i++) y[i] = rd_half(panel + 64 * i + 2 * j); return;
  case WF_BF16: for (int64_t i = 0; i < k; i++) y[i] = kiln_bf16_to_f32(rd16(panel + 64 * i + 2 * j)); return;
  case WF_I8: {
    const float s = rd_f32(panel + 4 * j);
    for (int64_t i = 0; i < k; i++) y[i] = s * (float)(int8_t)panel[128 + 32 * i + j];
    return;
  }
  default: break;
  }
  for (int64_t blk = 0; blk < k / B; blk++, y += B) {
    const unsigned char *b = panel + blk * bb;
    switch (f) {
    case WF_Q8_0: {
      const float d = rd_half(b + 2 * j);
      for (int i = 0; i < 32; i++) y[i] = d * (float)(int8_t)b[64 + 32 * i + j];
      break;
    }
    case WF_Q4_0: {
      const float d = rd_half(b + 2 * j);
      for (int i = 0; i < 32; i++) y[i] = d * (float)(rd_nib(b + 64, i, j) - 8);
      break;
    }
    case WF_Q4_K: {
      const float d = rd_half(b + 2 * j), dmin = rd_half(b + 64 + 2 * j);
      for (int s = 0; s < 8; s++) {
        int sc, m;
        rd_scale_min(b + 128 + 12 * j, s, &sc, &m);
        const float D = d * (float)sc, M = dmin * (float)m;
        for (int i = 32 * s; i < 32 * s + 32; i++) y[i] = D * (float)rd_nib(b + 512, i, j) - M;
      }
      break;
    }
    case WF_Q6_K: {
      const float d = rd_half(b + 2 * j);
      for (int i = 0; i < 256; i++) {
        const unsigned char *kb = b + 576 + 24 * i;
        const int q = rd_nib(kb, 0, j) | rd_hi2(kb, j) << 4;
        y[i] = d * (float)(int8_t)b[64 + 16 * j + i / 16] * (float)(q - 32);
      }
      break;
    }
    case WF_G8: case WF_G4: {
      const float s = rd_half(b + 2 * j), bias = rd_half(b + 64 + 2 * j);
      for (int i = 0; i < 64; i++) y[i] = s * (float)(f == WF_G8 ? b[128 + 32 * i + j] : rd_nib(b + 128, i, j)) + bias;
      break;
    }
    default: die("unpack_row: format %d", (int)f);
    }
  }
}

/* Contract in kiln.h: out gets n x k floats, row-major. */
void quant_unpack(WFormat f, const unsigned char *panels, int64_t n, int64_t k, float *out) {
  if (f == WF_F32) {
    check_k(f, k);
    for (int64_t i = 0; i < n * k; i++) out[i] = rd_f32(panels + 4 * i);
    return;
  }
  int64_t pb = wformat_panel_bytes(f, k);
  for (int64_t r = 0; r < n; r++) unpack_row(f, panels + r / LANES * pb, k, (int)(r % LANES), out + r * k);
}

/* ---- codes and terms (quant_split) ---- */

/* Lane j of one panel as its k codes q and its groups' terms a (and c, when the format
 * has an additive term), read from the same bits as unpack_row and combined by the same
 * float expressions: a[g] * q (+ c[g]) is unpack_row's value bit for bit. */
static void split_row(WFormat f, const unsigned char *panel, int64_t k, int j, int16_t *q, float *a, float *c) {
  const int64_t B = infos[f].block, bb = block_bytes[f];
  if (f == WF_I8) {
    a[0] = rd_f32(panel + 4 * j);
    for (int64_t i = 0; i < k; i++) q[i] = (int8_t)panel[128 + 32 * i + j];
    return;
  }
  for (int64_t blk = 0; blk < k / B; blk++, q += B) {
    const unsigned char *b = panel + blk * bb;
    switch (f) {
    case WF_Q8_0:
      a[blk] = rd_half(b + 2 * j);
      for (int i = 0; i < 32; i++) q[i] = (int8_t)b[64 + 32 * i + j];
      break;
    case WF_Q4_0:
      a[blk] = rd_half(b + 2 * j);
      for (int i = 0; i < 32; i++) q[i] = (int16_t)(rd_nib(b + 64, i, j) - 8);
      break;
    case WF_Q4_K: {                             /* (d sc) q - dmin m = a q + c, c = -(dmin m) */
      const float d = rd_half(b + 2 * j), dmin = rd_half(b + 64 + 2 * j);
      for (int s = 0; s < 8; s++) {
        int sc, m;
        rd_scale_min(b + 128 + 12 * j, s, &sc, &m);
        a[8 * blk + s] = d * (float)sc;
        c[8 * blk + s] = -(dmin * (float)m);
      }
      for (int i = 0; i < 256; i++) q[i] = (int16_t)rd_nib(b + 512, i, j);
      break;
    }
    case WF_Q6_K: {                             /* (d sc) (q - 32) */
      const float d = rd_half(b + 2 * j);
      for (int s = 0; s < 16; s++) a[16 * blk + s] = d * (float)(int8_t)b[64 + 16 * j + s];
      for (int i = 0; i < 256; i++) {
        const unsigned char *kb = b + 576 + 24 * i;
        q[i] = (int16_t)((rd_nib(kb, 0, j) | rd_hi2(kb, j) << 4) - 32);
      }
      break;
    }
    case WF_G8: case WF_G4:
      a[blk] = rd_half(b + 2 * j);
      c[blk] = rd_half(b + 64 + 2 * j);
      for (int i = 0; i < 64; i++) q[i] = (int16_t)(f == WF_G8 ? b[128 + 32 * i + j] : rd_nib(b + 128, i, j));
      break;
    default: die("split_row: format %d", (int)f);
    }
  }
}

/* Contract in kiln.h. */
bool quant_split(WFormat f, const unsigned char *panels, int64_t n, int64_t k, QuantSplit *out) {
  static const struct { int64_t group; int qmin, qmax; bool c; } forms[WF__COUNT] = {
      [WF_I8] = {0, -128, 127, false},   [WF_Q8_0] = {32, -128, 127, false}, [WF_Q4_0] = {32, -8, 7, false},
      [WF_Q4_K] = {32, 0, 15, true},     [WF_Q6_K] = {16, -32, 31, false},   [WF_G8] = {64, 0, 255, true},
      [WF_G4] = {64, 0, 15, true},
  };
  if (f == WF_F32 || f == WF_F16 || f == WF_BF16) return false;
  check_k(f, k);
  QuantSplit s = {.group = forms[f].group ? forms[f].group : k, .qmin = forms[f].qmin, .qmax = forms[f].qmax};
  int64_t groups = k / s.group, pb = wformat_panel_bytes(f, k);
  s.q = kiln_alloc(sizeof *s.q * (size_t)(n * k + 1));
  s.a = kiln_alloc(sizeof *s.a * (size_t)(n * groups + 1));
  s.c = forms[f].c ? kiln_alloc(sizeof *s.c * (size_t)(n * groups + 1)) : NULL;
  for (int64_t r = 0; r < n; r++)
    split_row(f, panels + r / LANES * pb, k, (int)(r % LANES), s.q + r * k, s.a + r * groups, s.c ? s.c + r * groups : NULL);
  *out = s;
  return true;
}

/* ---- ggml blocks into panels ---- */

/* One ggml row (k values in ggml's blocks) into lane j of its panel, bit for bit. */
static void relay_row(WFormat f, const unsigned char *raw, int64_t k, unsigned char *panel, int j) {
  const int64_t B = infos[f].block, bb = block_bytes[f], gb = ggml_block_bytes[f];
  for (int64_t blk = 0; blk < k / B; blk++) {
    const unsigned char *g = raw + blk * gb;
    unsigned char *b = panel + blk * bb;
    switch (f) {
    case WF_F16: case WF_BF16: memcpy(b + 2 * j, g, 2); break;
    case WF_Q8_0:                                 /* d; qs[32] */
      memcpy(b + 2 * j, g, 2);
      for (int i = 0; i < 32; i++) b[64 + 32 * i + j] = g[2 + i];
      break;
    case WF_Q4_0:                                 /* d; qs[16]: value i low nibble, i + 16 high */
      memcpy(b + 2 * j, g, 2);
      for (int i = 0; i < 32; i++) wr_nib(b + 64, i, j, i < 16 ? g[2 + i] & 15 : g[2 + i - 16] >> 4);
      break;
    case WF_Q4_K:                                 /* d, dmin; scales[12]; qs[128] */
      memcpy(b + 2 * j, g, 2);
      memcpy(b + 64 + 2 * j, g + 2, 2);
      memcpy(b + 128 + 12 * j, g + 4, 12);
      for (int i = 0; i < 256; i++) {           /* 64 values per 32 bytes: low nibbles, then high */
        const unsigned char qb = g[16 + 32 * (i / 64) + i % 32];
        wr_nib(b + 512, i, j, i % 64 < 32 ? qb & 15 : qb >> 4);
      }
      break;
    case WF_Q6_K:                                 /* ql[128]; qh[64]; scales[16]; d */
      memcpy(b + 2 * j, g + 208, 2);
      memcpy(b + 64 + 16 * j, g + 192, 16);
      for (int i = 0; i < 256; i++) {           /* halves of 128: quarters of 32 share ql/qh bytes */
        const int h = i / 128, quarter = i % 128 / 32, l = i % 32;
        const unsigned char lb = g[64 * h + l + (quarter & 1) * 32];
        unsigned char *kb = b + 576 + 24 * i;
        wr_nib(kb, 0, j, quarter < 2 ? lb & 15 : lb >> 4);
        wr_hi2(kb, j, g[128 + 32 * h + l] >> (2 * quarter) & 3);
      }
      break;
    default: die("relay_row: format %d", (int)f);
    }
  }
}

/* Contract in kiln.h. f32 rows are copied as they are (row-major); formats without a
 * ggml type (i8, g8, g4) are Kiln's bug to ask for. */
unsigned char *quant_from_ggml(WFormat f, const unsigned char *raw, int64_t n, int64_t k) {
  int64_t bytes = wformat_bytes(f, n, k);
  return quant_from_ggml_into(f, raw, n, k, kiln_alloc((size_t)(bytes ? bytes : 1)));
}

/* Contract in kiln.h. */
unsigned char *quant_from_ggml_into(WFormat f, const unsigned char *raw, int64_t n, int64_t k, unsigned char *out) {
  if (infos[f].ggml_type < 0) die("quant_from_ggml: %s has no ggml type", infos[f].name);
  int64_t bytes = wformat_bytes(f, n, k);
  if (f == WF_F32) return memcpy(out, raw, (size_t)bytes), out;
  int64_t pb = wformat_panel_bytes(f, k), row_bytes = k / infos[f].block * ggml_block_bytes[f];
  for (int64_t r = 0; r < n; r++) relay_row(f, raw + r * row_bytes, k, out + r / LANES * pb, (int)(r % LANES));
  return out;
}
