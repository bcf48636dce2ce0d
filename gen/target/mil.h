/*
 * mil.h — a small builder for Core ML ML Programs (MIL), used by emit_coreml.c.
 *
 * It owns the three things every op needs and that are easy to get wrong by
 * hand: unique MIL identifiers (sanitised, never a MIL keyword), const ops
 * (small values inline in the protobuf, large float tensors in the MILBlob v2
 * weight file, shared by every function of the program), and typed op outputs. It knows nothing about Kiln's graph: the
 * emitter decides which MIL ops a node becomes; this file only writes them.
 * Everything is built in Kiln's arena, in call order, so the bytes are the same
 * on every run.
 */
#ifndef KILN_MIL_H
#define KILN_MIL_H

#include "kiln.h"
#include "coreml.pb-c.h"

/* The value types Kiln's programs use (a subset of MIL's DataType). The 8- and 4-bit
 * integers appear only as the packed data of compressed weights (iOS18 constexpr ops). */
typedef enum { MIL_BOOL, MIL_F16, MIL_F32, MIL_I32, MIL_STR, MIL_I8, MIL_U8, MIL_I4, MIL_U4 } MilType;

typedef CoreML__Specification__MILSpec__Operation MilOp;
typedef CoreML__Specification__MILSpec__Program MilProgram;
typedef struct Mil Mil;

enum { MIL_BLOB_MIN_ELEMS = 10 };   /* float consts with this many elements go to weight.bin */

/* A new, empty program for the given opset ("CoreML5".."CoreML8"). */
Mil *mil_new(const char *opset);
/* Starts a function of the program ("main", or an entry point's name); what follows
 * (names, inputs, ops, outputs) belongs to it. */
void mil_function(Mil *m, const char *name);
/* Identical blobs are stored once from now on (weights shared by several functions). */
void mil_share_blobs(Mil *m);

/* ---- names ---- */
bool mil_is_keyword(const char *s);
bool mil_is_ident(const char *s);
/* Claims exactly `name` (a graph input or output); false if it is taken, not an
 * identifier, or a keyword. */
bool mil_claim(Mil *m, const char *name);
/* base made an identifier by the rules below (no uniqueness): arena string. */
char *mil_sanitize(const char *base);
/* A fresh identifier derived from base: invalid characters become '_', a leading
 * digit gets "v_", a keyword gets a trailing '_', a taken name "_1", "_2"... */
const char *mil_fresh(Mil *m, const char *base);

/* ---- function signature ---- */
void mil_input(Mil *m, const char *name, MilType t, const Shape *s);
/* A state input (iOS18): state<tensor<fp16, s>>, read with read_state, written with write_state. */
void mil_state_input(Mil *m, const char *name, const Shape *s);
void mil_output(Mil *m, const char *name);

/* ---- constants: each emits a const op and returns its value name ---- */
/* Float data (always given as f32) stored as t (MIL_F16 or MIL_F32). */
const char *mil_const_float(Mil *m, const char *base, MilType t, const Shape *s, const float *v);
const char *mil_const_int(Mil *m, const char *base, const Shape *s, const int32_t *v);
/* Integer data of type t (MIL_I8, MIL_U8: one byte per element; MIL_I4, MIL_U4: two per
 * byte, element i in bits 4(i % 2)..4(i % 2) + 3 of byte i / 2, MILBlob's order), always in
 * weight.bin: the packed payload of a compressed weight. Dies under MIL_BLOB_MIN_ELEMS. */
const char *mil_const_packed(Mil *m, const char *base, MilType t, const Shape *s, const uint8_t *payload);
const char *mil_const_bool(Mil *m, const char *base, const Shape *s, const uint8_t *v);
const char *mil_const_str(Mil *m, const char *base, const char *v);
const char *mil_scalar_float(Mil *m, const char *base, MilType t, float v);
const char *mil_scalar_int(Mil *m, const char *base, int32_t v);
const char *mil_scalar_bool(Mil *m, const char *base, bool v);
const char *mil_ints(Mil *m, const char *base, const int32_t *v, int n);   /* 1-D */
const char *mil_bools(Mil *m, const char *base, const uint8_t *v, int n);  /* 1-D */

/* ---- ops ---- */
/* Starts an op of `type`; its name and (single) output name are mil_fresh(base),
 * or exactly `base` when exact (a graph output claimed earlier). */
MilOp *mil_op(Mil *m, const char *type, const char *base, bool exact);
/* Binds parameter `param` to one value (or n values, for variadic ones). */
void mil_arg(Mil *m, MilOp *op, const char *param, const char *value);
void mil_args(Mil *m, MilOp *op, const char *param, const char *const *values, int n);
/* Declares the op's output type; returns the output's value name. */
const char *mil_result(Mil *m, MilOp *op, MilType t, const Shape *s);

/* ---- results ---- */
/* The Program message (every function, in creation order), ready to pack. */
MilProgram *mil_program(Mil *m);
/* The weight.bin bytes (MILBlob storage v2); NULL length 0 when no blob was written. */
const Buf *mil_weights(Mil *m);
int mil_nblobs(Mil *m);
int mil_nops(Mil *m);   /* of the function being built */

/* IEEE-754 binary16 bits of f, round to nearest even (overflow -> inf). */
uint16_t mil_f32_to_f16(float f);

#endif
