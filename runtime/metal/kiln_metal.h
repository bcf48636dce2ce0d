/*
 * kiln_metal.h — the Metal target's dispatch-table format and host runtime API.
 *
 * `kiln build m.lua --target metal` writes m.metal (one MSL compute kernel per
 * Kiln kernel), m_metal.h and m_metal.c. m_metal.c holds a KilnMtlModel: plain
 * data saying, for every dispatch of one inference in order, which kernel runs,
 * which byte ranges of which memory regions it binds at which [[buffer(i)]]
 * index, whether it reads or writes them, and the grid. One small runtime
 * (kiln_metal.m, Objective-C) interprets any model's table; the Linux test
 * harness (tests/metal/harness.c) interprets the very same table on an emulator.
 * The table is data, not code, so both stay honest about each other.
 *
 * Memory regions mirror the C target's memory plan exactly: the weights payload
 * (the m.weights file minus its 64-byte header), one scratch arena, and the
 * caller's input and output buffers. Shapes, strides and epsilons are literals in
 * each kernel's source, so dispatches carry no run-time constants.
 *
 * API shape (as the C target's m_run: the caller owns the model's host memory):
 *   KilnMetal *k = kiln_metal_open(&mlp_metal_model, weights, NULL, err, sizeof err);
 *   kiln_metal_run(k, inputs, outputs, err, sizeof err);   // any number of times
 *   kiln_metal_close(k);
 * This header is plain C; only kiln_metal.m needs Objective-C.
 */
#ifndef KILN_METAL_H
#define KILN_METAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where a binding's bytes live. */
typedef enum {
  KILN_MTL_WEIGHTS = 0,   /* weights payload, read-only */
  KILN_MTL_ARENA = 1,     /* scratch, arena_size bytes */
  KILN_MTL_INPUT = 2,     /* caller's input buffer number `slot` */
  KILN_MTL_OUTPUT = 3,    /* caller's output buffer number `slot` */
} KilnMtlRegion;

enum { KILN_MTL_READ = 1, KILN_MTL_WRITE = 2 };                  /* KilnMtlBinding.access */
typedef enum { KILN_MTL_F32 = 0, KILN_MTL_I32 = 1, KILN_MTL_U8 = 2 } KilnMtlType;  /* u8: bool */

/* One [[buffer(index)]] argument of one dispatch. */
typedef struct {
  uint32_t index;         /* the kernel's [[buffer(index)]] */
  uint8_t region;         /* KilnMtlRegion */
  uint8_t access;         /* KILN_MTL_READ or KILN_MTL_WRITE */
  uint8_t type;           /* element type the kernel reads it as */
  uint8_t pad_;
  uint32_t slot;          /* INPUT/OUTPUT: position in declaration order; else 0 */
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

/* An input or output of the model. */
typedef struct {
  const char *name;
  uint8_t type;           /* KilnMtlType */
  uint64_t size;          /* bytes */
} KilnMtlIO;

typedef struct {
  const char *name;                   /* model name */
  const char *const *msl;             /* the m.metal text as lines (NULL-terminated), for */
                                      /* building the library at run time */
  const char *const *kernels;         /* kernel function names, one pipeline each */
  uint32_t nkernels;
  const KilnMtlDispatch *dispatches;  /* in execution order: one inference */
  uint32_t ndispatches;
  const KilnMtlBinding *bindings;
  uint32_t nbindings;
  const KilnMtlIO *inputs, *outputs;
  uint32_t ninputs, noutputs;
  uint64_t weights_size;              /* bytes of the weights payload */
  uint64_t weights_checksum;          /* FNV-1a 64 of the payload (as in m.weights' header) */
  uint64_t arena_size;                /* bytes */
} KilnMtlModel;

/* ---- the host runtime (kiln_metal.m; macOS 11+ / iOS 14+) ---- */
typedef struct KilnMetal KilnMetal;

/* Creates the device objects for a model: the default device and one command
 * queue; the library from metallib_path (a .metallib built with xcrun, see
 * docs/metal.md) or, when it is NULL, compiled from the embedded m->msl text; one
 * compute pipeline per kernel; shared-storage buffers for the weights (copied once
 * from `weights`, m->weights_size bytes: the payload after the file's 64-byte
 * header), the arena and every input and output. Returns NULL and writes a
 * message to err (kernel name included when a pipeline fails) on any failure. */
KilnMetal *kiln_metal_open(const KilnMtlModel *m, const void *weights, const char *metallib_path, char *err,
                           size_t errlen);

/* One inference: copies inputs[i] (m->inputs[i].size bytes each) in, encodes every
 * dispatch of the table into one command buffer, commits, waits, copies outputs
 * back into outputs[i]. Returns 0, or -1 with a message naming the failing
 * dispatch's kernel (a command-buffer error is attributed to the whole buffer). */
int kiln_metal_run(KilnMetal *k, const void *const *inputs, void *const *outputs, char *err, size_t errlen);

/* The GPU time of the last run in seconds (MTLCommandBuffer GPUStartTime/GPUEndTime). */
double kiln_metal_last_gpu_seconds(const KilnMetal *k);

void kiln_metal_close(KilnMetal *k);

#ifdef __cplusplus
}
#endif

#endif
