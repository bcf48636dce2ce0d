/*
 * emit_metal.h — what the two halves of the Metal target share: emit_metal.c
 * (files, names, the dispatch table) and emit_metal_kernels.c (one render
 * function per OpFamily, filling template variables for templates/metal/).
 */
#ifndef KILN_EMIT_METAL_H
#define KILN_EMIT_METAL_H

#include "kiln.h"

enum {
  MTL_MAX_OPS = 31,          /* buffers per kernel: Metal's argument table (indices 0..30) */
  MTL_MAX_THREADS = 256,     /* per threadgroup: every Apple GPU pipeline allows this */
};

/* One kernel being rendered. The caller sets g, n, name and the default operand
 * list (the node's inputs as x, y, z or x0, x1, ...); the family's render function
 * may rename operands, sets the grid and the template variables, and returns the
 * template; the caller then adds PARAMS (the buffer parameters) and expands it. */
typedef struct {
  Graph *g;
  Node *n;                     /* the kernel's anchor: its family renders the kernel */
  Node *out;                   /* the kernel's result (its last node), bound as `out` */
  const char *name;            /* MSL function name */
  EmitVars v;
  Node *op[MTL_MAX_OPS];       /* read operands, in [[buffer(i)]] order; out comes last */
  const char *opname[MTL_MAX_OPS];
  int nops;
  uint32_t groups[3], threads[3];
} MtlKernel;

/* Fills k for k->n's family and returns the template path ("metal/x.metal.tmpl");
 * kiln_error for a kernel the Metal target cannot express. */
const char *mtl_render(MtlKernel *k);
/* "float" "int" "uchar": the MSL element type of a dtype. */
const char *mtl_type(DType t);
/* The stored format of operand n when it is a WEIGHT kept in one (not f32: the kernel
 * reads its panels as bytes, docs/quantization.md), else NULL. */
const WFormatInfo *mtl_stored(const Node *n);
/* The MSL spelling of a fused kernel's epilogue (emit_common.c does the rest). */
extern const EmitTarget mtl_target;

#endif
