/*
 * harness.c — runs a model's Metal dispatch table on the emulator: compares a plain
 * model's outputs with the C target's, or makes one call of an entry of a model
 * with state or entry points on files (the caller compares those).
 *
 * Built once per model by tests/metal/mkemu.sh with
 *   -include <m>.h -include <m>_metal.h -DKH_MODEL=<m>_metal_model [-DKH_RUN_V=<m>_run_v]
 * (KH_RUN_V for a plain model only) and linked with the generated <m>.c,
 * <m>_metal.c, the clang-compiled kernels and the tables of tests/metal/mslreflect.py.
 * It interprets the table exactly as runtime/metal/kiln_metal.m does — entries,
 * range checks and i64 inputs (the same kiln_mtl_check_i64, kiln_mtl_check_inputs
 * and kiln_mtl_load_input from kiln_metal.h), regions, byte offsets, buffer
 * indices, grid — and checks what the Objective-C runtime cannot: that every
 * binding matches the kernel's reflected signature (count, element type, const for
 * reads), stays in its region, and does not alias a written binding. Each binding
 * runs in its own guarded copy (end against a PROT_NONE page, read-only ones
 * write-protected), so any access outside the bound bytes faults with the buffer's
 * name.
 *
 *   harness WEIGHTS_FILE [--orders fwd,rev,rand] [--seed N] [--rtol R] [--atol A]
 *                        [--int-max K] [--quiet] [--save DIR]
 *       random inputs through every order, each output compared with the C target's
 *       (KH_RUN_V); one line per order and output. --save: the inputs as DIR/in<i>.bin
 *       and the last order's Metal outputs as DIR/out<i>.bin (raw, declaration order),
 *       for a comparison with the interpreter
 *   harness WEIGHTS_FILE --entry NAME --state-in FILE|- [--state-out FILE]
 *                        [--in FILE]... [--out FILE]... [--orders ...] [--seed N]
 *       one call of entry NAME: inputs from raw files (exactly their sizes, in the
 *       entry's order), the state block from FILE ("-": fresh, all zero). Every order
 *       starts from the same state, arena NaN-filled; their outputs and state blocks
 *       must be the same bytes; the outputs and the state after go to the files
 *   harness --msl        prints the MSL text embedded in the table
 * Exit 0 when all match, 1 on a mismatch, 2 on a usage or table error, 3 when the
 * emulator caught a fault, 6 when the call returned KILN_MTL_E_RANGE and the state,
 * arena, device buffers and outputs were verified untouched (its message printed),
 * 7 when it returned E_RANGE after touching something.
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
static const char *const region_names[] = {"weights", "arena", "input", "output", "state"};

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

/* The bytes of a region as entry e sees it. */
static uint64_t region_size(const KilnMtlEntry *e, int region, uint32_t slot) {
  switch (region) {
  case KILN_MTL_WEIGHTS: return M->weights_size;
  case KILN_MTL_ARENA: return M->arena_size;
  case KILN_MTL_STATE: if (!M->state_size) bad("a binding of the state block, which the model has not"); return M->state_size;
  case KILN_MTL_INPUT: if (slot >= e->ninputs) bad("input slot %u", slot); return kiln_mtl_device_size(&e->inputs[slot]);
  case KILN_MTL_OUTPUT: if (slot >= e->noutputs) bad("output slot %u", slot); return e->outputs[slot].size;
  }
  bad("bad region %d", region);
}

/* Every rule a dispatch of entry e must keep before it may run (exit 2 otherwise). */
static int check_dispatch(const KilnMtlEntry *e, uint32_t di) {
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
    if (b->region > KILN_MTL_STATE) bad("dispatch %u (%s): buffer(%u) in region %u", di, name, b->index, b->region);
    if (b->offset % 4 || b->offset + b->size > region_size(e, b->region, b->slot) || b->size == 0)
      bad("dispatch %u (%s): buffer(%u) %s+%llu size %llu is outside its region (%llu bytes)", di, name, b->index,
          region_names[b->region], (unsigned long long)b->offset, (unsigned long long)b->size,
          (unsigned long long)region_size(e, b->region, b->slot));
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

/* The device-side memory: what kiln_metal.m keeps in MTLBuffers (in, out: one
 * entry's input and output buffers). */
typedef struct {
  unsigned char *weights, *arena, *state;
  unsigned char **in, **out;
} Regions;

static unsigned char *region_base(const Regions *r, const KilnMtlBinding *b) {
  switch (b->region) {
  case KILN_MTL_WEIGHTS: return r->weights;
  case KILN_MTL_ARENA: return r->arena;
  case KILN_MTL_STATE: return r->state;
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


/* The order named by the first len bytes of p; a usage error for any other. */
static EmuOrder parse_order(const char *p, size_t len) {
  if (len == 3 && strncmp(p, "fwd", 3) == 0) return EMU_FORWARD;
  if (len == 3 && strncmp(p, "rev", 3) == 0) return EMU_REVERSE;
  if (len == 4 && strncmp(p, "rand", 4) == 0) return EMU_RANDOM;
  bad("unknown order %.*s", (int)len, p);
}

/* A 64-byte-aligned buffer of n bytes (at least 64) filled with `fill`. */
static unsigned char *region_alloc(uint64_t n, int fill) {
  size_t r = (size_t)(n + 63) / 64 * 64 + 64;
  unsigned char *p = aligned_alloc(64, r);
  if (!p) bad("out of memory");
  memset(p, fill, r);
  return p;
}

/* Why a call returned KILN_MTL_E_RANGE: an i64 input's element (check NULL) or a check. */
typedef struct {
  const KilnMtlCheck *check;
  int32_t at;                 /* the checked input's value */
  uint32_t input;             /* else: the i64 input, element and value */
  uint64_t element;
  int64_t value;
} RangeWhy;

/* Prints the one line of an E_RANGE call: what failed, and whether nothing was touched. */
static void print_range(const KilnMtlEntry *en, const RangeWhy *w, bool same) {
  if (w->check)
    printf("range: %s_%s: %s = %d is outside [0, %d] (%s); %s\n", M->name, en->name, en->inputs[w->check->input].name,
           (int)w->at, (int)w->check->max, w->check->what, same ? "nothing was touched" : "BUT BYTES CHANGED");
  else
    printf("range: %s_%s: i64 input %s[%llu] = %lld is outside the int32 range; %s\n", M->name, en->name,
           en->inputs[w->input].name, (unsigned long long)w->element, (long long)w->value,
           same ? "nothing was touched" : "BUT BYTES CHANGED");
}

/* One call of entry en as kiln_metal_call makes it: the i64 inputs' values and the
 * range checks on the caller's inputs (returning KILN_MTL_E_RANGE, why in *why, before
 * anything is touched), the inputs copied into the entry's device buffers (i64 ones
 * narrowed), its dispatches in order, the outputs copied out. */
static int call(const KilnMtlEntry *en, const int *kidx, const Regions *r, const void *const *inputs,
                void *const *outputs, EmuOrder o, uint64_t seed, RangeWhy *why) {
  *why = (RangeWhy){0};
  int rc = kiln_mtl_check_i64(en, inputs, &why->input, &why->element, &why->value);
  if (rc == KILN_MTL_OK) rc = kiln_mtl_check_inputs(en, inputs, &why->check, &why->at);
  if (rc != KILN_MTL_OK) return rc;
  for (uint32_t i = 0; i < en->ninputs; i++) kiln_mtl_load_input(&en->inputs[i], r->in[i], inputs[i]);
  for (uint32_t d = en->first_dispatch; d < en->first_dispatch + en->ndispatches; d++) run_dispatch(d, kidx[d], r, o, seed);
  for (uint32_t i = 0; i < en->noutputs; i++) memcpy(outputs[i], r->out[i], en->outputs[i].size);
  return KILN_MTL_OK;
}

/* Reads a whole raw file of exactly n bytes into a 64-aligned buffer. */
static unsigned char *read_exact(const char *path, uint64_t n, const char *what) {
  FILE *f = fopen(path, "rb");
  if (!f) bad("cannot open %s", path);
  unsigned char *p = region_alloc(n, 0);
  size_t got = fread(p, 1, (size_t)n + 1, f);
  fclose(f);
  if (got != n) bad("%s %s: %zu bytes, expected %llu", what, path, got, (unsigned long long)n);
  return p;
}

static void write_file(const char *path, const void *p, uint64_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, (size_t)n, f) != n || fclose(f) != 0) bad("cannot write %s", path);
}

typedef struct {
  const char *orders, *entry, *state_in, *state_out, *save;
  const char *in[64], *out[64];
  int nin, nout;
  uint64_t seed;
  double rtol, atol;
  int int_max;
  bool quiet;
} Opts;

/* Every dispatch of every entry checked against reflection; kidx[d] = its kernel. */
static int *check_table(void) {
  int *kidx = malloc(sizeof(int) * (M->ndispatches + 1));
  for (uint32_t d = 0; d < M->ndispatches; d++) kidx[d] = -1;
  for (uint32_t e = 0; e < kiln_mtl_nentries(M); e++) {
    KilnMtlEntry en = kiln_mtl_entry(M, e);
    if (en.first_dispatch + en.ndispatches > M->ndispatches) bad("entry %s: dispatches out of the table", en.name);
    for (uint32_t d = en.first_dispatch; d < en.first_dispatch + en.ndispatches; d++) {
      if (kidx[d] >= 0) bad("dispatch %u belongs to two entries", d);
      kidx[d] = check_dispatch(&en, d);
    }
    for (uint32_t i = 0; i < en.ninputs; i++)
      if (en.inputs[i].type == KILN_MTL_I64 && (en.inputs[i].size == 0 || en.inputs[i].size % 8))
        bad("entry %s: i64 input %s of %llu bytes", en.name, en.inputs[i].name, (unsigned long long)en.inputs[i].size);
    for (uint32_t i = 0; i < en.noutputs; i++)
      if (en.outputs[i].type == KILN_MTL_I64) bad("entry %s: output %s is i64 (inputs only)", en.name, en.outputs[i].name);
    for (uint32_t c = 0; c < en.nchecks; c++)
      if (en.checks[c].input >= en.ninputs || en.inputs[en.checks[c].input].type != KILN_MTL_I32 ||
          en.inputs[en.checks[c].input].size != 4)
        bad("entry %s: check %u does not name an i32 scalar input", en.name, c);
  }
  for (uint32_t d = 0; d < M->ndispatches; d++)
    if (kidx[d] < 0) bad("dispatch %u belongs to no entry", d);
  return kidx;
}

/* --entry: one call on files (see the file comment). */
static int entry_main(const Opts *op, unsigned char *weights, const int *kidx) {
  uint32_t e = 0;
  while (e < kiln_mtl_nentries(M) && strcmp(kiln_mtl_entry(M, e).name, op->entry) != 0) e++;
  if (e == kiln_mtl_nentries(M)) bad("model %s has no entry %s", M->name, op->entry);
  KilnMtlEntry en = kiln_mtl_entry(M, e);
  if ((uint32_t)op->nin != en.ninputs || (uint32_t)op->nout != en.noutputs)
    bad("entry %s takes %u inputs and %u outputs (given %d, %d)", en.name, en.ninputs, en.noutputs, op->nin, op->nout);
  if (!M->state_size && (strcmp(op->state_in, "-") != 0 || op->state_out)) bad("model %s has no state", M->name);
  const void *ins[64];
  for (uint32_t i = 0; i < en.ninputs; i++) ins[i] = read_exact(op->in[i], en.inputs[i].size, "input");
  unsigned char *state0 = strcmp(op->state_in, "-") == 0 ? region_alloc(M->state_size, 0)
                                                          : read_exact(op->state_in, M->state_size, "state");
  Regions r = {.weights = weights, .arena = region_alloc(M->arena_size, 0xff), .state = region_alloc(M->state_size, 0)};
  unsigned char *dev_in[64], *dev_out[64], *outs[2][64];
  for (uint32_t i = 0; i < en.ninputs; i++) dev_in[i] = region_alloc(kiln_mtl_device_size(&en.inputs[i]), 0x5a);
  for (uint32_t i = 0; i < en.noutputs; i++) {
    dev_out[i] = region_alloc(en.outputs[i].size, 0xff);
    outs[0][i] = region_alloc(en.outputs[i].size, 0xa5), outs[1][i] = region_alloc(en.outputs[i].size, 0xa5);
  }
  r.in = dev_in, r.out = dev_out;
  unsigned char *state_first = region_alloc(M->state_size, 0);

  /* Out of range: nothing may be touched. Snapshots of every byte the call could reach. */
  memcpy(r.state, state0, M->state_size);
  RangeWhy why;
  if (kiln_mtl_check_i64(&en, ins, NULL, NULL, NULL) != KILN_MTL_OK ||
      kiln_mtl_check_inputs(&en, ins, NULL, NULL) != KILN_MTL_OK) {
    size_t an = (size_t)(M->arena_size + 63) / 64 * 64 + 64;
    unsigned char *arena = malloc(an), *outs_before[64];
    memcpy(arena, r.arena, an);
    for (uint32_t i = 0; i < en.noutputs; i++) {
      outs_before[i] = malloc(en.outputs[i].size);
      memcpy(outs_before[i], outs[0][i], en.outputs[i].size);
    }
    int rc = call(&en, kidx, &r, ins, (void *const *)outs[0], EMU_FORWARD, op->seed, &why);
    bool same = memcmp(r.state, state0, M->state_size) == 0 && memcmp(r.arena, arena, an) == 0;
    for (uint32_t i = 0; i < en.ninputs; i++)
      for (uint64_t b = 0; b < kiln_mtl_device_size(&en.inputs[i]); b++) same &= dev_in[i][b] == 0x5a;
    for (uint32_t i = 0; i < en.noutputs; i++) {
      same &= memcmp(outs_before[i], outs[0][i], en.outputs[i].size) == 0;
      for (uint64_t b = 0; b < en.outputs[i].size; b++) same &= dev_out[i][b] == 0xff;
    }
    if (rc != KILN_MTL_E_RANGE) bad("the checks failed, then the call returned %d", rc);
    print_range(&en, &why, same);
    return same ? 6 : 7;
  }

  int norders = 0;
  bool all_same = true;
  for (const char *p = op->orders; *p;) {
    size_t len = strcspn(p, ",");
    EmuOrder o = parse_order(p, len);
    unsigned char **got = outs[norders ? 1 : 0];
    memcpy(r.state, state0, M->state_size);
    memset(r.arena, 0xff, (size_t)(M->arena_size + 63) / 64 * 64 + 64);   /* NaN: reads of unwritten bytes show */
    for (uint32_t i = 0; i < en.noutputs; i++) memset(dev_out[i], 0xff, en.outputs[i].size);
    int rc = call(&en, kidx, &r, ins, (void *const *)got, o, op->seed * 1000003u, &why);
    if (rc != KILN_MTL_OK) bad("the call returned %d", rc);
    if (norders == 0) memcpy(state_first, r.state, M->state_size);
    else {
      for (uint32_t i = 0; i < en.noutputs; i++)
        if (memcmp(got[i], outs[0][i], en.outputs[i].size) != 0) {
          printf("MISMATCH order=%.*s output=%s: differs from the first order's\n", (int)len, p, en.outputs[i].name);
          all_same = false;
        }
      if (memcmp(r.state, state_first, M->state_size) != 0) {
        printf("MISMATCH order=%.*s: the state block differs from the first order's\n", (int)len, p);
        all_same = false;
      }
    }
    norders++;
    p += len;
    if (*p == ',') p++;
  }
  for (uint32_t i = 0; i < en.noutputs; i++) write_file(op->out[i], outs[0][i], en.outputs[i].size);
  if (op->state_out) write_file(op->state_out, state_first, M->state_size);
  EmuStats s = emu_stats();
  printf("call %s_%s: %u dispatches, %d orders%s; %llu threadgroups, %llu threads, %llu barriers, %llu SIMD collectives\n",
         M->name, en.name, en.ndispatches, norders, all_same ? ", outputs and state the same bytes in each" : "",
         (unsigned long long)s.threadgroups, (unsigned long long)s.threads, (unsigned long long)s.barriers,
         (unsigned long long)s.collectives);
  return all_same ? 0 : 1;
}

#ifdef KH_RUN_V
static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static int type_size(int t) { return t == KILN_MTL_U8 ? 1 : t == KILN_MTL_I64 ? 8 : 4; }

/* Random inputs: f32 uniform in [-1, 1), i32 and i64 in [0, int_max), bool 0/1. */
static void fill_input(void *p, const KilnMtlIO *io, int int_max) {
  size_t n = io->size / (size_t)type_size(io->type);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = next();
    if (io->type == KILN_MTL_F32) ((float *)p)[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    else if (io->type == KILN_MTL_I32) ((int32_t *)p)[i] = (int32_t)(r % (uint64_t)int_max);
    else if (io->type == KILN_MTL_I64) ((int64_t *)p)[i] = (int64_t)(r % (uint64_t)int_max);
    else ((uint8_t *)p)[i] = (uint8_t)(r & 1);
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

/* DIR/<what><i>.bin in a static buffer (the next call overwrites it). */
static const char *save_path(const char *dir, const char *what, uint32_t i) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s%u.bin", dir, what, i);
  return path;
}

/* Random inputs through every order, compared with the C target's KH_RUN_V. The call
 * goes through `call` as kiln_metal_run's does (the caller's buffers copied to and from
 * the device buffers in r, i64 inputs narrowed on the way in). */
static int compare_main(const Opts *op, unsigned char *weights, const int *kidx) {
  rng ^= op->seed * 0x9E3779B97F4A7C15ull;
  KilnMtlEntry whole = kiln_mtl_entry(M, 0);
  Regions r = {.weights = weights};
  r.in = calloc(M->ninputs + 1, sizeof(void *));
  r.out = calloc(M->noutputs + 1, sizeof(void *));
  unsigned char **in = calloc(M->ninputs + 1, sizeof(void *)), **got = calloc(M->noutputs + 1, sizeof(void *));
  unsigned char **ref = calloc(M->noutputs + 1, sizeof(void *));
  for (uint32_t i = 0; i < M->ninputs; i++) {
    in[i] = region_alloc(M->inputs[i].size, 0);
    r.in[i] = region_alloc(kiln_mtl_device_size(&M->inputs[i]), 0);
    fill_input(in[i], &M->inputs[i], op->int_max);
  }
  for (uint32_t i = 0; i < M->noutputs; i++) {
    r.out[i] = region_alloc(M->outputs[i].size, 0);
    got[i] = region_alloc(M->outputs[i].size, 0);
    ref[i] = region_alloc(M->outputs[i].size, 0);
  }
  size_t arena_bytes = (M->arena_size + 63) / 64 * 64 + 64;
  r.arena = region_alloc(M->arena_size, 0);

  /* The C target: the reference (a model with i64 inputs returns its status: the
   * random values are in range, so it ran). */
  KH_RUN_V(weights, r.arena, (const void *const *)in, (void *const *)ref);

  bool all_ok = true;
  int norders = 0;
  for (const char *p = op->orders; *p;) {
    size_t len = strcspn(p, ",");
    EmuOrder o = parse_order(p, len);
    memset(r.arena, 0xff, arena_bytes);                 /* NaN everywhere: reads of unwritten bytes show */
    for (uint32_t i = 0; i < M->noutputs; i++) memset(r.out[i], 0xff, M->outputs[i].size);
    RangeWhy why;
    if (call(&whole, kidx, &r, (const void *const *)in, (void *const *)got, o, op->seed * 1000003u, &why) != KILN_MTL_OK)
      bad("the call returned KILN_MTL_E_RANGE on in-range inputs");
    for (uint32_t i = 0; i < M->noutputs; i++) all_ok &= compare(i, got[i], ref[i], o, op->rtol, op->atol, op->quiet);
    norders++;
    p += len;
    if (*p == ',') p++;
  }
  for (uint32_t i = 0; op->save && i < M->ninputs; i++)
    write_file(save_path(op->save, "in", i), in[i], M->inputs[i].size);
  for (uint32_t i = 0; op->save && i < M->noutputs; i++)
    write_file(save_path(op->save, "out", i), got[i], M->outputs[i].size);
  EmuStats s = emu_stats();
  printf("model %s: %u dispatches per inference, %d orders; %llu threadgroups, %llu threads, %llu barriers, %llu SIMD collectives\n",
         M->name, M->ndispatches, norders, (unsigned long long)s.threadgroups, (unsigned long long)s.threads,
         (unsigned long long)s.barriers, (unsigned long long)s.collectives);
  return all_ok ? 0 : 1;
}
#endif

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--msl") == 0) {   /* the embedded MSL text, to compare with the .metal file */
    for (const char *const *l = M->msl; *l; l++) fputs(*l, stdout);
    return 0;
  }
  if (argc < 2) bad("usage: harness WEIGHTS_FILE [--orders fwd,rev,rand] [--seed N] [--rtol R] [--atol A] [--int-max K] [--save DIR] "
                    "| --entry NAME --state-in FILE|- [--state-out FILE] [--in FILE]... [--out FILE]...");
  /* The emulator runs the same libm as the C target; only summation order differs
   (measured <= 1e-5 x max(1, max|c|) on every model): this is tight enough that a
   lost partial sum or a wrong epsilon fails. Real GPUs need the looser fast-math
   expectation stated in docs/metal.md. */
  Opts op = {.orders = "fwd,rev,rand", .seed = 1, .rtol = 1e-5, .atol = 2e-6, .int_max = 4};
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--quiet") == 0) { op.quiet = true; continue; }
    if (i + 1 >= argc) bad("%s needs a value", argv[i]);
    if (strcmp(argv[i], "--orders") == 0) op.orders = argv[++i];
    else if (strcmp(argv[i], "--seed") == 0) op.seed = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--rtol") == 0) op.rtol = atof(argv[++i]);
    else if (strcmp(argv[i], "--atol") == 0) op.atol = atof(argv[++i]);
    else if (strcmp(argv[i], "--int-max") == 0) op.int_max = atoi(argv[++i]);
    else if (strcmp(argv[i], "--entry") == 0) op.entry = argv[++i];
    else if (strcmp(argv[i], "--state-in") == 0) op.state_in = argv[++i];
    else if (strcmp(argv[i], "--state-out") == 0) op.state_out = argv[++i];
    else if (strcmp(argv[i], "--in") == 0 && op.nin < 64) op.in[op.nin++] = argv[++i];
    else if (strcmp(argv[i], "--out") == 0 && op.nout < 64) op.out[op.nout++] = argv[++i];
    else if (strcmp(argv[i], "--save") == 0) op.save = argv[++i];
    else bad("unknown option %s", argv[i]);
  }
  unsigned char *weights = load_weights(argv[1]);
  int *kidx = check_table();
  if (op.entry) {
    if (!op.state_in) bad("--entry needs --state-in FILE (or - for a fresh state)");
    return entry_main(&op, weights, kidx);
  }
#ifdef KH_RUN_V
  return compare_main(&op, weights, kidx);
#else
  bad("model %s has state or entry points: run one call with --entry", M->name);
#endif
}
