/*
 * harness.c — runs a model's Metal dispatch table on the emulator and compares
 * its outputs with the C target's.
 *
 * Built once per model by tests/metal/mkemu.sh with
 *   -include <m>.h -include <m>_metal.h -DKH_MODEL=<m>_metal_model -DKH_RUN_V=<m>_run_v
 * and linked with the generated <m>.c, <m>_metal.c, the clang-compiled kernels
 * and the tables of tests/metal/mslreflect.py. It interprets the table exactly as
 * runtime/metal/kiln_metal.m does — regions, byte offsets, buffer indices, grid —
 * and checks what the Objective-C runtime cannot: that every binding matches the
 * kernel's reflected signature (count, element type, const for reads), stays in
 * its region, and does not alias a written binding. Each binding runs in its own
 * guarded copy (end against a PROT_NONE page, read-only ones write-protected), so
 * any access outside the bound bytes faults with the buffer's name.
 *
 *   harness WEIGHTS_FILE [--orders fwd,rev,rand] [--seed N] [--rtol R] [--atol A]
 *                        [--int-max K] [--quiet]
 *   harness --msl        prints the MSL text embedded in the table
 * Prints one line per order and output; exit 0 when all match, 1 on a mismatch,
 * 2 on a usage or table error, 3 when the emulator caught a fault.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "emu.h"
#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef KH_MODEL
#error "build with -DKH_MODEL=<m>_metal_model -DKH_RUN_V=<m>_run_v (tests/metal/mkemu.sh)"
#endif

static const KilnMtlModel *M = &KH_MODEL;
static const char *const region_names[] = {"weights", "arena", "input", "output"};

static _Noreturn void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "harness: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static uint64_t fnv1a64(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* The weights payload of a .weights file, checked against the model's table. */
static unsigned char *load_weights(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) bad("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (n < 64 || (uint64_t)n != 64 + M->weights_size) bad("%s: %ld bytes, expected 64 + %llu", path, n, (unsigned long long)M->weights_size);
  unsigned char *all = aligned_alloc(64, ((size_t)n + 63) / 64 * 64);
  if (!all || fread(all, 1, (size_t)n, f) != (size_t)n) bad("cannot read %s", path);
  fclose(f);
  if (memcmp(all, "KILNWGT1", 8) != 0) bad("%s: not a Kiln weights file", path);
  if (fnv1a64(all + 64, M->weights_size) != M->weights_checksum) bad("%s: checksum differs from the table's", path);
  return all + 64;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static int type_size(int t) { return t == KILN_MTL_U8 ? 1 : 4; }

/* Random inputs: f32 uniform in [-1, 1), i32 in [0, int_max), bool 0/1. */
static void fill_input(void *p, const KilnMtlIO *io, int int_max) {
  size_t n = io->size / (size_t)type_size(io->type);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = next();
    if (io->type == KILN_MTL_F32) ((float *)p)[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    else if (io->type == KILN_MTL_I32) ((int32_t *)p)[i] = (int32_t)(r % (uint64_t)int_max);
    else ((uint8_t *)p)[i] = (uint8_t)(r & 1);
  }
}

/* ---- checking the table against reflection ---- */

static int find_kernel(const char *name) {
  for (int i = 0; i < kiln_emu_nkernels; i++)
    if (strcmp(kiln_emu_kernels[i].name, name) == 0) return i;
  return -1;
}

/* The reflected "elem:r" of buffer index i of kernel k, into elem/acc. */
static void sig_of(const EmuKernelInfo *k, uint32_t i, char *elem, size_t n, char *acc) {
  const char *p = k->sig;
  for (uint32_t j = 0; j < i; j++) {
    p = strchr(p, ',');
    if (!p) bad("kernel %s: no reflected buffer %u", k->name, i);
    p++;
  }
  const char *colon = strchr(p, ':');
  size_t len = (size_t)(colon - p);
  if (len >= n) len = n - 1;
  memcpy(elem, p, len);
  elem[len] = 0;
  *acc = colon[1];
}

static uint64_t region_size(int region, uint32_t slot) {
  switch (region) {
  case KILN_MTL_WEIGHTS: return M->weights_size;
  case KILN_MTL_ARENA: return M->arena_size;
  case KILN_MTL_INPUT: if (slot >= M->ninputs) bad("input slot %u", slot); return M->inputs[slot].size;
  case KILN_MTL_OUTPUT: if (slot >= M->noutputs) bad("output slot %u", slot); return M->outputs[slot].size;
  }
  bad("bad region %d", region);
}

/* Every rule a dispatch must keep before it may run (exit 2 otherwise). */
static int check_dispatch(uint32_t di) {
  const KilnMtlDispatch *d = &M->dispatches[di];
  if (d->kernel >= M->nkernels) bad("dispatch %u: kernel %u of %u", di, d->kernel, M->nkernels);
  const char *name = M->kernels[d->kernel];
  int ki = find_kernel(name);
  if (ki < 0) bad("dispatch %u: kernel %s is not in the .metal file", di, name);
  const EmuKernelInfo *k = &kiln_emu_kernels[ki];
  if ((int)d->nbindings != k->nbufs) bad("dispatch %u (%s): %u bindings, the kernel has %d buffers", di, name, d->nbindings, k->nbufs);
  if (d->first_binding + d->nbindings > M->nbindings) bad("dispatch %u: bindings out of the table", di);
  uint64_t threads = (uint64_t)d->threads[0] * d->threads[1] * d->threads[2];
  if (threads == 0 || threads > 256) bad("dispatch %u (%s): %llu threads per threadgroup (1..256)", di, name, (unsigned long long)threads);
  bool seen[64] = {0};
  for (uint32_t j = 0; j < d->nbindings; j++) {
    const KilnMtlBinding *b = &M->bindings[d->first_binding + j];
    if (b->index >= 64 || seen[b->index]) bad("dispatch %u (%s): buffer index %u repeated or too large", di, name, b->index);
    seen[b->index] = true;
    char elem[32], acc;
    sig_of(k, b->index, elem, sizeof elem, &acc);
    const char *want = b->type == KILN_MTL_F32 ? "float" : b->type == KILN_MTL_I32 ? "int" : "uchar";
    if (strcmp(elem, want) != 0) bad("dispatch %u (%s): buffer(%u) is %s in the table, %s in the kernel", di, name, b->index, want, elem);
    if ((b->access == KILN_MTL_WRITE) != (acc == 'w'))
      bad("dispatch %u (%s): buffer(%u) access %d but the kernel declares it %s", di, name, b->index, b->access,
          acc == 'w' ? "writable" : "const");
    if (b->access == KILN_MTL_WRITE && (b->region == KILN_MTL_WEIGHTS || b->region == KILN_MTL_INPUT))
      bad("dispatch %u (%s): writes into the %s", di, name, region_names[b->region]);
    if (b->offset % 4 || b->offset + b->size > region_size(b->region, b->slot) || b->size == 0)
      bad("dispatch %u (%s): buffer(%u) %s+%llu size %llu is outside its region (%llu bytes)", di, name, b->index,
          region_names[b->region], (unsigned long long)b->offset, (unsigned long long)b->size,
          (unsigned long long)region_size(b->region, b->slot));
    for (uint32_t i = 0; i < j; i++) {
      const KilnMtlBinding *o = &M->bindings[d->first_binding + i];
      bool same = o->region == b->region && o->slot == b->slot;
      bool overlap = same && o->offset < b->offset + b->size && b->offset < o->offset + o->size;
      if (overlap && (o->access == KILN_MTL_WRITE || b->access == KILN_MTL_WRITE))
        bad("dispatch %u (%s): buffer(%u) and buffer(%u) overlap and one is written", di, name, o->index, b->index);
    }
  }
  return ki;
}

/* ---- running ---- */

typedef struct {
  unsigned char *weights, *arena;
  unsigned char **in, **out;
} Regions;

static unsigned char *region_base(const Regions *r, const KilnMtlBinding *b) {
  switch (b->region) {
  case KILN_MTL_WEIGHTS: return r->weights;
  case KILN_MTL_ARENA: return r->arena;
  case KILN_MTL_INPUT: return r->in[b->slot];
  default: return r->out[b->slot];
  }
}

static void run_dispatch(uint32_t di, int ki, const Regions *r, EmuOrder order, uint64_t seed) {
  const KilnMtlDispatch *d = &M->dispatches[di];
  void *bufs[64] = {0};
  const char *names[64];
  for (uint32_t j = 0; j < d->nbindings; j++) {
    const KilnMtlBinding *b = &M->bindings[d->first_binding + j];
    char *label = malloc(96);
    snprintf(label, 96, "buffer(%u)=%s[%u]+%llu", b->index, region_names[b->region], b->slot, (unsigned long long)b->offset);
    names[b->index] = label;
    void *p = emu_guarded_alloc(b->size, 0, label);
    memcpy(p, region_base(r, b) + b->offset, b->size);
    if (b->access == KILN_MTL_READ) {
      /* Write-protect the pages that hold only this buffer (its first page holds the canary too). */
      size_t pg = (size_t)sysconf(_SC_PAGESIZE);
      uintptr_t start = (uintptr_t)p & ~(uintptr_t)(pg - 1);
      mprotect((void *)start, ((uintptr_t)p + b->size - start + pg - 1) / pg * pg, PROT_READ);
    }
    bufs[b->index] = p;
  }
  EmuTgMem tg[16];
  int ntg = 0;
  for (const EmuTgSym *s = kiln_emu_tgsyms; s->kernel >= 0; s++)
    if (s->kernel == ki) {
      if (ntg == 16) bad("kernel %s: more than 16 threadgroup arrays", M->kernels[d->kernel]);
      tg[ntg++] = (EmuTgMem){s->ptr, s->size};
    }
  EmuDispatch ed = {.kernel = M->kernels[d->kernel], .kernel_index = ki, .bufs = bufs, .nbufs = (int)d->nbindings,
                    .order = order, .seed = seed + di, .tg = tg, .ntg = ntg};
  memcpy(ed.groups, d->groups, sizeof ed.groups);
  memcpy(ed.threads, d->threads, sizeof ed.threads);
  emu_run(&ed);
  for (uint32_t j = 0; j < d->nbindings; j++) {
    const KilnMtlBinding *b = &M->bindings[d->first_binding + j];
    void *p = bufs[b->index];
    if (b->access == KILN_MTL_WRITE) memcpy(region_base(r, b) + b->offset, p, b->size);
    else {
      size_t pg = (size_t)sysconf(_SC_PAGESIZE);
      uintptr_t start = (uintptr_t)p & ~(uintptr_t)(pg - 1);
      mprotect((void *)start, ((uintptr_t)p + b->size - start + pg - 1) / pg * pg, PROT_READ | PROT_WRITE);
    }
    emu_guarded_free(p);
    free((void *)names[b->index]);
  }
}

static const char *order_name(EmuOrder o) { return o == EMU_FORWARD ? "fwd" : o == EMU_REVERSE ? "rev" : "rand"; }

/* Compares got with ref for output i; prints one line; returns true when they match. */
static bool compare(uint32_t i, const void *got, const void *ref, EmuOrder o, double rtol, double atol, bool quiet) {
  const KilnMtlIO *io = &M->outputs[i];
  size_t n = io->size / (size_t)type_size(io->type);
  double max_abs = 0, max_ref = 0;
  size_t bad_at = n, nbad = 0;
  /* atol scales with the output's magnitude: a sum's rounding grows with its terms. */
  double scale = 1;
  if (io->type == KILN_MTL_F32)
    for (size_t k = 0; k < n; k++) {
      double r = fabs(((const float *)ref)[k]);
      if (!isnan(r) && !isinf(r) && r > scale) scale = r;
    }
  atol *= scale;
  for (size_t k = 0; k < n; k++) {
    double g, r;
    if (io->type == KILN_MTL_F32) g = ((const float *)got)[k], r = ((const float *)ref)[k];
    else if (io->type == KILN_MTL_I32) g = ((const int32_t *)got)[k], r = ((const int32_t *)ref)[k];
    else g = ((const uint8_t *)got)[k], r = ((const uint8_t *)ref)[k];
    bool ok;
    if (isnan(r) || isnan(g)) ok = isnan(r) && isnan(g);
    else if (io->type == KILN_MTL_F32) ok = fabs(g - r) <= atol + rtol * fabs(r) || g == r;
    else ok = g == r;
    if (!isnan(g) && !isnan(r) && fabs(g - r) > max_abs) max_abs = fabs(g - r);
    if (!isnan(r) && fabs(r) > max_ref) max_ref = fabs(r);
    if (!ok) {
      nbad++;
      if (bad_at == n) bad_at = k;
    }
  }
  if (nbad) {
    double g = io->type == KILN_MTL_F32 ? ((const float *)got)[bad_at] : io->type == KILN_MTL_I32 ? ((const int32_t *)got)[bad_at] : ((const uint8_t *)got)[bad_at];
    double r = io->type == KILN_MTL_F32 ? ((const float *)ref)[bad_at] : io->type == KILN_MTL_I32 ? ((const int32_t *)ref)[bad_at] : ((const uint8_t *)ref)[bad_at];
    printf("MISMATCH order=%s output=%s: %zu of %zu elements differ; first at %zu: metal %.9g, C %.9g (max |diff| %.3g)\n",
           order_name(o), io->name, nbad, n, bad_at, g, r, max_abs);
    return false;
  }
  if (!quiet)
    printf("match order=%s output=%s: %zu elements, max |diff| %.3g (max |ref| %.3g)\n", order_name(o), io->name, n,
           max_abs, max_ref);
  return true;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--msl") == 0) {   /* the embedded MSL text, to compare with the .metal file */
    for (const char *const *l = M->msl; *l; l++) fputs(*l, stdout);
    return 0;
  }
  if (argc < 2) bad("usage: harness WEIGHTS_FILE [--orders fwd,rev,rand] [--seed N] [--rtol R] [--atol A] [--int-max K]");
  const char *orders = "fwd,rev,rand";
  uint64_t seed = 1;
  /* The emulator runs the same libm as the C target; only summation order differs
   (measured <= 1e-5 x max(1, max|c|) on every model): this is tight enough that a
   lost partial sum or a wrong epsilon fails. Real GPUs need the looser fast-math
   expectation stated in docs/metal.md. */
  double rtol = 1e-5, atol = 2e-6;
  int int_max = 4;
  bool quiet = false;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--quiet") == 0) { quiet = true; continue; }
    if (i + 1 >= argc) bad("%s needs a value", argv[i]);
    if (strcmp(argv[i], "--orders") == 0) orders = argv[++i];
    else if (strcmp(argv[i], "--seed") == 0) seed = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--rtol") == 0) rtol = atof(argv[++i]);
    else if (strcmp(argv[i], "--atol") == 0) atol = atof(argv[++i]);
    else if (strcmp(argv[i], "--int-max") == 0) int_max = atoi(argv[++i]);
    else bad("unknown option %s", argv[i]);
  }
  rng ^= seed * 0x9E3779B97F4A7C15ull;
  unsigned char *weights = load_weights(argv[1]);
  int *kidx = malloc(sizeof(int) * (M->ndispatches + 1));
  for (uint32_t d = 0; d < M->ndispatches; d++) kidx[d] = check_dispatch(d);

  Regions r = {.weights = weights};
  r.in = calloc(M->ninputs + 1, sizeof(void *));
  r.out = calloc(M->noutputs + 1, sizeof(void *));
  unsigned char **ref = calloc(M->noutputs + 1, sizeof(void *));
  for (uint32_t i = 0; i < M->ninputs; i++) {
    r.in[i] = aligned_alloc(64, (M->inputs[i].size + 63) / 64 * 64);
    fill_input(r.in[i], &M->inputs[i], int_max);
  }
  for (uint32_t i = 0; i < M->noutputs; i++) {
    r.out[i] = aligned_alloc(64, (M->outputs[i].size + 63) / 64 * 64);
    ref[i] = aligned_alloc(64, (M->outputs[i].size + 63) / 64 * 64);
  }
  size_t arena_bytes = (M->arena_size + 63) / 64 * 64 + 64;
  r.arena = aligned_alloc(64, arena_bytes);

  /* The C target: the reference. */
  memset(r.arena, 0, arena_bytes);
  KH_RUN_V(weights, r.arena, (const void *const *)r.in, (void *const *)ref);

  bool all_ok = true;
  int norders = 0;
  for (const char *p = orders; *p;) {
    size_t len = strcspn(p, ",");
    EmuOrder o = strncmp(p, "fwd", len) == 0 ? EMU_FORWARD : strncmp(p, "rev", len) == 0 ? EMU_REVERSE
               : strncmp(p, "rand", len) == 0 ? EMU_RANDOM : (bad("unknown order %.*s", (int)len, p), EMU_FORWARD);
    memset(r.arena, 0xff, arena_bytes);                 /* NaN everywhere: reads of unwritten bytes show */
    for (uint32_t i = 0; i < M->noutputs; i++) memset(r.out[i], 0xff, M->outputs[i].size);
    for (uint32_t d = 0; d < M->ndispatches; d++) run_dispatch(d, kidx[d], &r, o, seed * 1000003u);
    for (uint32_t i = 0; i < M->noutputs; i++) all_ok &= compare(i, r.out[i], ref[i], o, rtol, atol, quiet);
    norders++;
    p += len;
    if (*p == ',') p++;
  }
  EmuStats s = emu_stats();
  printf("model %s: %u dispatches per inference, %d orders; %llu threadgroups, %llu threads, %llu barriers, %llu SIMD collectives\n",
         M->name, M->ndispatches, norders, (unsigned long long)s.threadgroups, (unsigned long long)s.threads,
         (unsigned long long)s.barriers, (unsigned long long)s.collectives);
  return all_ok ? 0 : 1;
}
