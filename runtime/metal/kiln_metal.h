/*
 * kiln_metal.h — the Metal target's dispatch-table format and host runtime API.
 *
 * `kiln build m.lua --target metal` writes m.metal (one MSL compute kernel per
 * Kiln kernel), m_metal.h and m_metal.c. m_metal.c holds a KilnMtlModel: plain
 * data saying, for every dispatch of one call in order, which kernel runs,
 * which byte ranges of which memory regions it binds at which [[buffer(i)]]
 * index, whether it reads or writes them, and the grid. One small runtime
 * (kiln_metal.m, Objective-C) interprets any model's table; the Linux test
 * harness (tests/metal/harness.c) interprets the very same table on an emulator.
 * The table is data, not code, so both stay honest about each other.
 *
 * Memory regions mirror the C target's memory plan exactly: the weights payload
 * (the m.weights file minus its 64-byte header), one scratch arena, the caller's
 * input and output buffers and, for a model with kiln.state, the state block (the
 * C target's layout byte for byte). Shapes, strides and epsilons are literals in
 * each kernel's source, so dispatches carry no run-time constants; run-time i32
 * scalars (a position) are input buffers like any other.
 *
 * A model with entry points (kiln.entry) has one slice of the dispatch table per
 * entry, each with its own inputs, outputs and range checks (KilnMtlEntry); a
 * plain model's table has no entries array and is one entry spanning it
 * (kiln_mtl_entry hides the difference).
 *
 * API shape (as the C target's m_run: the caller owns the model's host memory):
 *   KilnMetal *k = kiln_metal_open(&mlp_metal_model, weights, NULL, err, sizeof err);
 *   kiln_metal_run(k, inputs, outputs, err, sizeof err);   // any number of times
 *   kiln_metal_close(k);
 * and with entries: kiln_metal_call(k, entry, inputs, outputs, err, sizeof err);
 * the state block persists in the KilnMetal between calls (kiln_metal_state).
 * This header is plain C; only kiln_metal.m needs Objective-C.
 */
#ifndef KILN_METAL_H
#define KILN_METAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where a binding's bytes live. */
typedef enum {
  KILN_MTL_WEIGHTS = 0,   /* weights payload, read-only */
  KILN_MTL_ARENA = 1,     /* scratch, arena_size bytes */
  KILN_MTL_INPUT = 2,     /* caller's input buffer number `slot` */
  KILN_MTL_OUTPUT = 3,    /* caller's output buffer number `slot` */
  KILN_MTL_STATE = 4,     /* the persistent state block, state_size bytes */
} KilnMtlRegion;

/* What an entry call returns: the C target's <M>_OK and <M>_E_RANGE, or an error. */
enum {
  KILN_MTL_OK = 0,
  KILN_MTL_E_RANGE = 1,   /* an i64 input held a value outside i32, or a run-time offset would */
                          /* write outside a state: nothing was touched */
  KILN_MTL_FAILED = -1,   /* a device error; the message is in err */
};

enum { KILN_MTL_READ = 1, KILN_MTL_WRITE = 2 };                  /* KilnMtlBinding.access */
/* u8: bool, or a weight's stored bytes. i64: a model input only (token ids as PyTorch
 * exports them): the caller passes int64_t values, its device buffer holds them narrowed
 * to int32 (kiln_mtl_load_input) and kernels bind it as i32. */
typedef enum { KILN_MTL_F32 = 0, KILN_MTL_I32 = 1, KILN_MTL_U8 = 2, KILN_MTL_I64 = 3 } KilnMtlType;

/* One [[buffer(index)]] argument of one dispatch. */
typedef struct {
  uint32_t index;         /* the kernel's [[buffer(index)]] */
  uint8_t region;         /* KilnMtlRegion */
  uint8_t access;         /* KILN_MTL_READ or KILN_MTL_WRITE */
  uint8_t type;           /* element type the kernel reads it as */
  uint8_t pad_;
  uint32_t slot;          /* INPUT/OUTPUT: position in the entry's declaration order; else 0 */
  uint64_t offset;        /* bytes from the region's start (a multiple of 4, of 16 for float4 access) */
  uint64_t size;          /* bytes the kernel may touch, starting at offset */
} KilnMtlBinding;

/* One compute dispatch: dispatchThreadgroups:groups threadsPerThreadgroup:threads. */
typedef struct {
  uint32_t kernel;        /* index into KilnMtlModel.kernels */
  uint32_t first_binding; /* bindings[first_binding .. first_binding + nbindings) */
  uint32_t nbindings;
  uint32_t groups[3];     /* threadgroups per grid */
  uint32_t threads[3];    /* threads per threadgroup (product <= 256) */
  const char *what;       /* "matmul [1, 784] x [512, 784] (models/mlp.lua:14)", for errors */
} KilnMtlDispatch;

/* An input or output of the model (of an entry). */
typedef struct {
  const char *name;
  uint8_t type;           /* KilnMtlType */
  uint64_t size;          /* bytes in the caller's memory (its device buffer: kiln_mtl_device_size) */
} KilnMtlIO;

/* A range check of an entry, made on the caller's inputs before any dispatch is
 * encoded: input `input` (an i32 scalar, the run-time offset of a kiln.write)
 * must lie in [0, max], else the call returns KILN_MTL_E_RANGE. */
typedef struct {
  uint32_t input;         /* slot of the entry's input */
  int32_t max;            /* the largest offset that keeps the write inside its state */
  const char *what;       /* "cache: rows pos .. pos + 1 of 6 along axis 0, m.lua:15", for errors */
} KilnMtlCheck;

/* One entry point: dispatches [first_dispatch, first_dispatch + ndispatches) of the
 * model's table, its own inputs and outputs (bindings' slots index these), and its
 * range checks. */
typedef struct {
  const char *name;
  uint32_t first_dispatch, ndispatches;
  const KilnMtlIO *inputs, *outputs;
  uint32_t ninputs, noutputs;
  const KilnMtlCheck *checks;
  uint32_t nchecks;
} KilnMtlEntry;

typedef struct {
  const char *name;                   /* model name */
  const char *const *msl;             /* the m.metal text as lines (NULL-terminated), for */
                                      /* building the library at run time */
  const char *const *kernels;         /* kernel function names, one pipeline each */
  uint32_t nkernels;
  const KilnMtlDispatch *dispatches;  /* in execution order: one inference (each entry's, */
  uint32_t ndispatches;               /* one after the other, for a model with entries) */
  const KilnMtlBinding *bindings;
  uint32_t nbindings;
  const KilnMtlIO *inputs, *outputs;  /* a plain model's; NULL, 0 with entries */
  uint32_t ninputs, noutputs;
  uint64_t weights_size;              /* bytes of the weights payload */
  uint64_t weights_checksum;          /* FNV-1a 64 of the payload (as in m.weights' header) */
  uint64_t arena_size;                /* bytes (the largest entry's) */
  const KilnMtlEntry *entries;        /* in declaration order; NULL, 0 for a plain model */
  uint32_t nentries;
  uint64_t state_size;                /* bytes of the state block (0: no kiln.state) */
} KilnMtlModel;

/* How many entries m has: a plain model is one. */
static inline uint32_t kiln_mtl_nentries(const KilnMtlModel *m) { return m->nentries ? m->nentries : 1; }

/* Entry e of m (e < kiln_mtl_nentries(m)); a plain model's one entry spans its table. */
static inline KilnMtlEntry kiln_mtl_entry(const KilnMtlModel *m, uint32_t e) {
  if (m->nentries) return m->entries[e];
  KilnMtlEntry whole = {"run", 0, m->ndispatches, m->inputs, m->outputs, m->ninputs, m->noutputs, NULL, 0};
  return whole;
}

/* The bytes of io's device buffer: the caller's, but half for an i64 input (narrowed to i32). */
static inline uint64_t kiln_mtl_device_size(const KilnMtlIO *io) {
  return io->type == KILN_MTL_I64 ? io->size / 2 : io->size;
}

/* The i64 inputs of entry e checked as the C entry checks them, every element in input
 * order, before anything else: KILN_MTL_OK when every value fits int32, else
 * KILN_MTL_E_RANGE with the first offender's input slot, element index and value in
 * *input, *element, *value (each when not NULL). */
static inline int kiln_mtl_check_i64(const KilnMtlEntry *e, const void *const *inputs, uint32_t *input,
                                     uint64_t *element, int64_t *value) {
  for (uint32_t i = 0; i < e->ninputs; i++) {
    if (e->inputs[i].type != KILN_MTL_I64) continue;
    const unsigned char *p = (const unsigned char *)inputs[i];
    for (uint64_t j = 0; j < e->inputs[i].size / 8; j++) {
      int64_t v;
      memcpy(&v, p + 8 * j, sizeof v);
      if (v < INT32_MIN || v > INT32_MAX) {
        if (input) *input = i;
        if (element) *element = j;
        if (value) *value = v;
        return KILN_MTL_E_RANGE;
      }
    }
  }
  return KILN_MTL_OK;
}

/* Copies the caller's input `src` (io's size) into its device buffer `dst`
 * (kiln_mtl_device_size bytes): the bytes themselves, or for an i64 input each value
 * narrowed to int32 (kiln_mtl_check_i64 has passed: they all fit). */
static inline void kiln_mtl_load_input(const KilnMtlIO *io, void *dst, const void *src) {
  if (io->type != KILN_MTL_I64) {
    memcpy(dst, src, (size_t)io->size);
    return;
  }
  for (uint64_t j = 0; j < io->size / 8; j++) {
    int64_t v;
    memcpy(&v, (const unsigned char *)src + 8 * j, sizeof v);
    int32_t w = (int32_t)v;
    memcpy((unsigned char *)dst + 4 * j, &w, sizeof w);
  }
}

/* The range checks of entry e on the caller's inputs, which nothing has read yet:
 * KILN_MTL_OK, or KILN_MTL_E_RANGE with *failed (when not NULL) the first check that
 * fails and *value its input's value. The runtime and the test harness both call
 * this, after kiln_mtl_check_i64 (the C entry's order), before encoding or running
 * any dispatch. */
static inline int kiln_mtl_check_inputs(const KilnMtlEntry *e, const void *const *inputs, const KilnMtlCheck **failed,
                                        int32_t *value) {
  for (uint32_t i = 0; i < e->nchecks; i++) {
    const KilnMtlCheck *c = &e->checks[i];
    int32_t v;
    memcpy(&v, inputs[c->input], sizeof v);
    if (v < 0 || v > c->max) {
      if (failed) *failed = c;
      if (value) *value = v;
      return KILN_MTL_E_RANGE;
    }
  }
  return KILN_MTL_OK;
}

/* ---- the host runtime (kiln_metal.m; macOS 11+ / iOS 14+) ---- */
typedef struct KilnMetal KilnMetal;

/* Creates the device objects for a model: the default device and one command
 * queue; the library from metallib_path (a .metallib built with xcrun, see
 * docs/metal.md) or, when it is NULL, compiled from the embedded m->msl text; one
 * compute pipeline per kernel; shared-storage buffers for the weights (copied once
 * from `weights`, m->weights_size bytes: the payload after the file's 64-byte
 * header), the arena, every entry's inputs and outputs and the state block (zero).
 * Returns NULL and writes a message to err (kernel name included when a pipeline
 * fails) on any failure. */
KilnMetal *kiln_metal_open(const KilnMtlModel *m, const void *weights, const char *metallib_path, char *err,
                           size_t errlen);

/* One call of entry `entry` (an index into m->entries, in declaration order; 0 for a
 * plain model): checks that every value of every i64 input fits int32, then makes the
 * entry's range checks on the caller's inputs (an i32 scalar input points at its
 * int32_t), and returns KILN_MTL_E_RANGE (the C target's <M>_E_RANGE) with a message
 * naming the input, element and value if one fails, before touching anything: state,
 * arena, device buffers and outputs keep their bytes. Else copies inputs[i] in (an
 * i64 input narrowed to int32, kiln_mtl_load_input), encodes the entry's
 * dispatches into one command buffer, commits, waits, and copies the outputs back
 * into outputs[i]; the state block is updated in place. Returns
 * KILN_MTL_OK, or KILN_MTL_FAILED (-1) with a message naming the failing dispatch's
 * kernel (then the state block's contents are unspecified: reset or reload it). */
int kiln_metal_call(KilnMetal *k, uint32_t entry, const void *const *inputs, void *const *outputs, char *err,
                    size_t errlen);

/* kiln_metal_call of entry 0: one inference of a plain model. Returns 0, or -1 with a
 * message (KILN_MTL_E_RANGE for a value of an i64 input outside int32, or an
 * out-of-range offset of a model with state). */
int kiln_metal_run(KilnMetal *k, const void *const *inputs, void *const *outputs, char *err, size_t errlen);

/* The state block, m->state_size bytes of shared storage that persist between calls
 * (NULL for a model without state): all zero after kiln_metal_open (a fresh state).
 * Its layout is the C target's (<M>_STATE_*_OFFSET), so a block saved from the C
 * target or `kiln run --state-out` can be copied in, and this one out, between calls. */
void *kiln_metal_state(KilnMetal *k);

/* Zeroes the state block: a fresh state, as <m>_reset does for the C target. */
void kiln_metal_reset(KilnMetal *k);

/* The GPU time of the last run in seconds (MTLCommandBuffer GPUStartTime/GPUEndTime). */
double kiln_metal_last_gpu_seconds(const KilnMetal *k);

void kiln_metal_close(KilnMetal *k);

#ifdef __cplusplus
}
#endif

#endif
