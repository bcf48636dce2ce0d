/*
 * qtest.c — the C side of tests/t_quant.sh: drives gen/ir/quant.c (linked with the
 * compiler's util.c and the GGUF reader) and writes what it made for numpy to check.
 *
 *   qtest cases DIR        every format x shapes: seeded input DIR/N.w, packed bytes N.q,
 *                          quant_pack's deq N.deq and quant_unpack's N.unp, one line
 *                          "N format n k" per case in DIR/cases.txt (tests/quant/ref.py
 *                          checks them against an independent decoder of the spec)
 *   qtest ggml FILE DIR    FILE a GGUF that ref.py wrote with random valid blocks, DIR its
 *                          tensors' raw bytes (NAME.raw): gguf.c's dequantization and
 *                          quant_unpack(quant_from_ggml(raw)) must agree bit for bit;
 *                          writes the panels to DIR/NAME.panels for ref.py
 *   qtest error            quantization error of seeded gaussian rows per format against
 *                          the bounds below (and the time it takes)
 *   qtest edges            the size table, and edge rows: zero, constant, outlier, huge and
 *                          non-finite values
 *   qtest bench FORMAT     error and time at several scales (not a test: for the docs)
 *
 * Prints "PASS quant/<check>" or "FAIL quant/<check>: why" lines (tests/run.sh counts them).
 */
#include "kiln.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* util.c wants the table of embedded files the build generates; none is used here. */
const struct KilnEmbedded {
  const char *name;
  const unsigned char *text;
  size_t len;
} kiln_embedded[] = {{NULL, NULL, 0}};

static int failures;

static void result(bool ok, const char *name, const char *why) {
  if (ok) printf("PASS quant/%s\n", name);
  else printf("FAIL quant/%s: %s\n", name, why), failures++;
}

/* ---- seeded data: splitmix64 and Box-Muller (in double, then rounded once) ---- */

static uint64_t rng_state;
static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double rng_unit(void) { return ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0; }
static float rng_gauss(void) { return (float)(sqrt(-2.0 * log(rng_unit())) * cos(6.283185307179586 * rng_unit())); }

/* A row whose values fall exactly halfway between two levels of format f (powers of two
 * make its scales exact), so rounding ties are tested, not just left to chance. */
static void tie_row(WFormat f, float *x, int64_t k, float u) {
  for (int64_t i = 0; i < k; i++) {
    int m = (int)((i * 37) % 1000);
    switch (f) {
    case WF_F16:                                    /* normal ties, then subnormal ones */
      x[i] = i % 2 ? ldexpf(1.0f + (float)(2 * (m % 512) + 1) / 2048.0f, m % 30 - 14) : ldexpf((float)(2 * (m % 600) + 1), -25);
      break;
    case WF_BF16: x[i] = ldexpf(1.0f + (float)(2 * (m % 128) + 1) / 256.0f, m % 40 - 20); break;
    case WF_I8: case WF_Q8_0: x[i] = i % 32 ? u * ((float)(m % 254 - 127) + 0.5f) : 127.0f * u; break;
    case WF_Q4_0: x[i] = i % 32 ? u * ((float)(m % 15 - 8) + 0.5f) : 8.0f * u; break;
    case WF_G8: x[i] = i % 64 == 0 ? 0.0f : i % 64 == 1 ? 255.0f * u : u * ((float)(m % 255) + 0.5f); break;
    case WF_G4: x[i] = i % 64 == 0 ? 0.0f : i % 64 == 1 ? 15.0f * u : u * ((float)(m % 15) + 0.5f); break;
    default: x[i] = u * ((float)(m % 64 - 32) + 0.5f); break;
    }
  }
}

/* Row r of a test matrix for format f: mostly gaussian at scales 2^-6..2^6, some with a
 * mean (so affine formats need their bias), and rows of edge cases: zero, constant, an
 * outlier, rounding ties. */
static void fill_row(WFormat f, float *x, int64_t k, int64_t r) {
  float scale = ldexpf(1.0f, (int)(r % 13) - 6), mean = r % 3 == 1 ? 3.0f * scale : 0.0f;
  for (int64_t i = 0; i < k; i++) x[i] = mean + scale * rng_gauss();
  switch (r % 7) {
  case 2: case 4: tie_row(f, x, k, ldexpf(1.0f, (int)(r % 5) - 4)); break;
  case 3: for (int64_t i = 0; i < k; i++) x[i] = 0.0f; break;
  case 5: for (int64_t i = 0; i < k; i++) x[i] = -1.75f * scale; break;
  case 6: x[(r * 37) % k] = 1000.0f * scale; break;
  default: break;
  }
}

static bool write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(p, 1, n, f) == n;
  if (f && fclose(f) != 0) ok = false;
  if (!ok) fprintf(stderr, "qtest: cannot write %s\n", path);
  return ok;
}

static unsigned char *read_file(const char *path, size_t *n) {
  char err[512];
  unsigned char *p = kiln_read_bounded(path, (size_t)1 << 30, n, err, sizeof err);
  if (!p) fprintf(stderr, "qtest: %s\n", err);
  return p;
}

static bool same_bits(const float *a, const float *b, int64_t n, int64_t *at) {
  for (int64_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return *at = i, false;
  return true;
}

/* ---- qtest cases ---- */

static int cases(const char *dir) {
  static const int64_t ns[] = {1, 31, 32, 33, 70};
  static const int64_t ks[WF__COUNT][4] = {
      [WF_F32] = {1, 33, 256}, [WF_F16] = {1, 33, 256},      [WF_BF16] = {1, 33, 256}, [WF_I8] = {1, 33, 512},
      [WF_Q8_0] = {32, 96, 256, 512}, [WF_Q4_0] = {32, 96, 256, 512}, [WF_Q4_K] = {256, 512},
      [WF_Q6_K] = {256, 512}, [WF_G8] = {64, 256, 512}, [WF_G4] = {64, 256, 512},
  };
  FILE *list = fopen(kiln_fmt("%s/cases.txt", dir), "w");
  if (!list) return fprintf(stderr, "qtest: cannot write %s/cases.txt\n", dir), 2;
  int id = 0;
  for (int f = 0; f < WF__COUNT; f++) {
    const char *name = wformat_info((WFormat)f)->name;
    bool size_ok = true, twice_ok = true, alias_ok = true, deq_ok = true, chunk_ok = true;
    for (int ni = 0; ni < 5; ni++)
      for (int ki = 0; ki < 4 && ks[f][ki]; ki++, id++) {
        int64_t n = ns[ni], k = ks[f][ki], bytes = wformat_bytes((WFormat)f, n, k);
        rng_state = (uint64_t)(1000 * f + 10 * ni + ki);
        float *w = kiln_alloc(sizeof(float) * (size_t)(n * k)), *deq = kiln_alloc(sizeof(float) * (size_t)(n * k));
        float *unp = kiln_alloc(sizeof(float) * (size_t)(n * k)), *alias = kiln_alloc(sizeof(float) * (size_t)(n * k));
        for (int64_t r = 0; r < n; r++) fill_row((WFormat)f, w + r * k, k, r);
        unsigned char *q = quant_pack((WFormat)f, w, n, k, deq);
        quant_unpack((WFormat)f, q, n, k, unp);
        /* The same input again, and once more with deq aliasing the input. */
        unsigned char *q2 = quant_pack((WFormat)f, w, n, k, NULL);
        memcpy(alias, w, sizeof(float) * (size_t)(n * k));
        unsigned char *q3 = quant_pack((WFormat)f, alias, n, k, alias);
        int64_t at;
        int64_t expect = f == WF_F32 ? 4 * n * k : (n + 31) / 32 * wformat_panel_bytes((WFormat)f, k);
        if (bytes != expect) size_ok = false;
        if (memcmp(q, q2, (size_t)bytes) != 0) twice_ok = false;
        if (memcmp(q, q3, (size_t)bytes) != 0 || !same_bits(alias, deq, n * k, &at)) alias_ok = false;
        if (!same_bits(deq, unp, n * k, &at)) deq_ok = false;
        /* Whole panels are independent: rows [0, 32) and [32, n) packed apart, concatenated,
         * are the same bytes (a build may stream a tensor a few panels at a time). */
        if (n > 32 && f != WF_F32) {
          int64_t head = wformat_bytes((WFormat)f, 32, k);
          unsigned char *a = quant_pack((WFormat)f, w, 32, k, NULL), *b = quant_pack((WFormat)f, w + 32 * k, n - 32, k, NULL);
          if (memcmp(a, q, (size_t)head) != 0 || memcmp(b, q + head, (size_t)(bytes - head)) != 0) chunk_ok = false;
        }
        fprintf(list, "%d %s %lld %lld\n", id, name, (long long)n, (long long)k);
        if (!write_file(kiln_fmt("%s/%d.w", dir, id), w, sizeof(float) * (size_t)(n * k)) ||
            !write_file(kiln_fmt("%s/%d.q", dir, id), q, (size_t)bytes) ||
            !write_file(kiln_fmt("%s/%d.deq", dir, id), deq, sizeof(float) * (size_t)(n * k)) ||
            !write_file(kiln_fmt("%s/%d.unp", dir, id), unp, sizeof(float) * (size_t)(n * k)))
          return 2;
      }
    result(size_ok, kiln_fmt("%s/sizes", name), "wformat_bytes is not panels x panel bytes");
    result(twice_ok, kiln_fmt("%s/same-bytes-twice", name), "two packs of the same input differ");
    result(alias_ok, kiln_fmt("%s/deq-aliasing-w", name), "deq == w gives other bytes or values");
    result(deq_ok, kiln_fmt("%s/deq-is-unpack", name), "quant_pack's deq differs from quant_unpack");
    if (f != WF_F32)
      result(chunk_ok, kiln_fmt("%s/panels-pack-apart", name), "rows 0-31 and 32.. packed apart are other bytes");
  }
  fclose(list);
  return failures ? 1 : 0;
}

/* ---- qtest ggml ---- */

static int ggml(const char *gguf, const char *dir) {
  char err[1024];
  SafeFile *sf = gguf_load(gguf, err, sizeof err);
  if (!sf) return fprintf(stderr, "qtest: %s\n", err), 2;
  for (int t = 0; t < sf->ntensors; t++) {
    const SafeTensor *st = &sf->tensors[t];
    char fmt[16];
    long long n, k;
    WFormat f;
    if (sscanf(st->name, "%15[^.].%lldx%lld", fmt, &n, &k) != 3 || !wformat_parse(fmt, &f))
      return fprintf(stderr, "qtest: tensor name %s is not FORMAT.NxK\n", st->name), 2;
    size_t rawn;
    unsigned char *raw = read_file(kiln_fmt("%s/%s.raw", dir, st->name), &rawn);
    if (!raw || !st->loads) return 2;
    float *x = kiln_alloc(sizeof(float) * (size_t)(n * k));
    gguf_to_f32(st->ggml_type, st->bytes, n * k, x);
    unsigned char *panels = quant_from_ggml(f, raw, n, k);
    float *y = kiln_alloc(sizeof(float) * (size_t)(n * k));
    quant_unpack(f, panels, n, k, y);
    int64_t at = 0;
    bool ok = same_bits(y, x, n * k, &at);
    result(ok, kiln_fmt("ggml/%s", st->name),
           kiln_fmt("element %lld: quant_unpack(quant_from_ggml) %.9g, gguf.c %.9g", (long long)at, y[at], x[at]));
    if (!write_file(kiln_fmt("%s/%s.panels", dir, st->name), panels, (size_t)wformat_bytes(f, n, k))) return 2;
  }
  return failures ? 1 : 0;
}

/* ---- qtest error ---- */

/* RMS(error) / RMS(x) on seeded N(0, 1) rows: the bound each format must stay under
 * (about 1.5x what was measured; docs/quantization.md lists the measurements). */
static const double bounds[WF__COUNT] = {
    [WF_F32] = 0.0,     [WF_F16] = 3.1e-4, [WF_BF16] = 2.5e-3, [WF_I8] = 0.013,   [WF_Q8_0] = 8.0e-3,
    [WF_Q4_0] = 0.129,  [WF_Q4_K] = 0.105, [WF_Q6_K] = 0.026,  [WF_G8] = 7.9e-3,  [WF_G4] = 0.134,
};

static double rel_rms(const float *x, const float *y, int64_t n) {
  double e = 0, s = 0;
  for (int64_t i = 0; i < n; i++) {
    e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
    s += (double)x[i] * x[i];
  }
  return sqrt(e / s);
}

/* CPU time, not wall time: the machine running the tests is shared. */
static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Gaussian rows of standard deviation sigma: the error, checked against the format's
 * bound under `check` (a name), else only printed; timing printed for the docs. */
static double gaussian(WFormat f, float sigma, const char *check) {
  const char *name = wformat_info(f)->name;
  enum { N = 64, K = 4096 };
  float *w = kiln_alloc(sizeof(float) * N * K), *y = kiln_alloc(sizeof(float) * N * K);
  rng_state = 42;
  for (int i = 0; i < N * K; i++) w[i] = sigma * rng_gauss();
  double t = seconds();
  quant_pack(f, w, N, K, y);
  t = seconds() - t;
  double e = rel_rms(w, y, N * K);
  printf("measured %s (sigma %g): rms error / rms x = %.4g (bound %.3g), %.1f ns per weight\n", name, sigma, e,
         bounds[f], 1e9 * t / (N * K));
  if (check) result(e <= bounds[f], kiln_fmt("%s/%s", name, check), kiln_fmt("%.4g > bound %.3g", e, bounds[f]));
  return e;
}

/* One row of k values through f; *y the values, returns false (with why) on a NaN/inf. */
static bool one_row(WFormat f, const float *x, int64_t k, float *y, const char **why) {
  quant_pack(f, x, 1, k, y);
  for (int64_t i = 0; i < k; i++)
    if (!isfinite(y[i])) return *why = kiln_fmt("value %lld is %g", (long long)i, y[i]), false;
  return true;
}

/* Zero rows decode to +0; constant rows to within 2^-8 of the constant; a row with one
 * outlier 1000x the rest keeps the outlier within 1/16 and stays finite; values far past
 * the f16 range and NaN/inf inputs give finite values (quantized formats). */
static void edges(WFormat f) {
  const char *name = wformat_info(f)->name;
  enum { K = 512 };
  float x[K], y[K];
  const char *why = "";
  bool ok = true;
  for (int i = 0; i < K; i++) x[i] = 0.0f;
  if (one_row(f, x, K, y, &why))
    for (int i = 0; i < K && ok; i++)
      if (memcmp(&y[i], &x[i], sizeof(float))) ok = false, why = kiln_fmt("value %d is %g, not +0", i, y[i]);
  result(ok && !why[0], kiln_fmt("%s/zero-row", name), why);

  static const float consts[] = {1.0f, -1.0f, 0.3f, -7.25f, 1e-3f, 123.456f};
  ok = true, why = "";
  for (size_t c = 0; c < sizeof consts / sizeof consts[0] && ok; c++) {
    for (int i = 0; i < K; i++) x[i] = consts[c];
    if (!(ok = one_row(f, x, K, y, &why))) break;
    for (int i = 0; i < K && ok; i++)
      if (fabsf(y[i] - consts[c]) > fabsf(consts[c]) / 256.0f)
        ok = false, why = kiln_fmt("constant %g: value %d is %.9g", consts[c], i, y[i]);
  }
  result(ok, kiln_fmt("%s/constant-rows", name), why);

  rng_state = 7;
  for (int i = 0; i < K; i++) x[i] = rng_gauss();
  x[300] = 1000.0f;
  ok = one_row(f, x, K, y, &why);
  if (ok && fabsf(y[300] - 1000.0f) > 1000.0f / 16.0f) ok = false, why = kiln_fmt("the outlier became %g", y[300]);
  result(ok, kiln_fmt("%s/outlier", name), why);

  if (f == WF_F32 || f == WF_F16 || f == WF_BF16) return;   /* these keep inf and NaN by design */
  for (int i = 0; i < K; i++) x[i] = (i % 3 ? 1.0f : -1.0f) * ldexpf(1.0f, i % 120) * (1.0f + (float)i / K);
  x[5] = INFINITY, x[77] = -INFINITY, x[200] = NAN, x[201] = 3e38f, x[202] = -3e38f;
  ok = one_row(f, x, K, y, &why);
  result(ok, kiln_fmt("%s/huge-and-nonfinite", name), why);
}

/* The sizes in the spec's table, and the names. */
static void table(void) {
  static const int64_t block_bytes[WF__COUNT] = {
      [WF_F32] = 0, [WF_F16] = 64, [WF_BF16] = 64, [WF_I8] = 0, [WF_Q8_0] = 1088, [WF_Q4_0] = 576,
      [WF_Q4_K] = 4608, [WF_Q6_K] = 6720, [WF_G8] = 2176, [WF_G4] = 1152};
  bool ok = true;
  for (int f = 0; f < WF__COUNT; f++) {
    const WFormatInfo *i = wformat_info((WFormat)f);
    WFormat back;
    char upper[16];
    size_t l = strlen(i->name);
    for (size_t c = 0; c <= l; c++) upper[c] = (char)(i->name[c] >= 'a' && i->name[c] <= 'z' ? i->name[c] - 32 : i->name[c]);
    if (!wformat_parse(i->name, &back) || back != (WFormat)f || !wformat_parse(upper, &back) || back != (WFormat)f) ok = false;
    if (block_bytes[f] && wformat_panel_bytes((WFormat)f, 4 * 256 * 3) != 4 * 256 * 3 / i->block * block_bytes[f]) ok = false;
  }
  WFormat dummy;
  if (wformat_parse("q4", &dummy) || wformat_parse("q4_k ", &dummy) || wformat_parse("", &dummy)) ok = false;
  if (wformat_panel_bytes(WF_I8, 100) != 128 + 3200 || wformat_bytes(WF_Q4_K, 33, 512) != 2 * 2 * 4608) ok = false;
  if (wformat_bytes(WF_F32, 33, 5) != 660) ok = false;
  result(ok, "table", "names, block sizes or byte counts differ from the spec's table");
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "cases") == 0) return cases(argv[2]);
  if (argc == 4 && strcmp(argv[1], "ggml") == 0) return ggml(argv[2], argv[3]);
  if (argc == 2 && strcmp(argv[1], "error") == 0) {
    double err[WF__COUNT];
    for (int f = 0; f < WF__COUNT; f++) {
      err[f] = gaussian((WFormat)f, 1.0f, "gaussian-error");
      gaussian((WFormat)f, 1.0f / 1024, "gaussian-error-small");   /* f16 scales near their subnormals */
    }
    /* The searched K-quants against the fixed rules at the same bits per weight. */
    result(err[WF_Q4_K] < err[WF_Q4_0] && err[WF_Q4_K] < err[WF_G4], "q4_k-beats-q4_0-and-g4",
           kiln_fmt("q4_k %.4g, q4_0 %.4g, g4 %.4g", err[WF_Q4_K], err[WF_Q4_0], err[WF_G4]));
    return failures ? 1 : 0;
  }
  if (argc == 2 && strcmp(argv[1], "edges") == 0) {
    table();
    for (int f = 0; f < WF__COUNT; f++) edges((WFormat)f);
    return failures ? 1 : 0;
  }
  if (argc == 3 && strcmp(argv[1], "bench") == 0) {   /* speed and error of one format, not a test */
    WFormat f;
    if (!wformat_parse(argv[2], &f)) return 2;
    for (int e = 0; e >= -16; e -= 4) gaussian(f, ldexpf(1.0f, e), NULL);
    return 0;
  }
  fprintf(stderr, "usage: qtest cases DIR | ggml FILE DIR | error | edges | bench FORMAT\n");
  return 2;
}
