/*
 * kiln_coreml.h — run a Kiln-built NAME.mlpackage through Core ML from C, C++,
 * Objective-C or Swift (via a bridging header).
 *
 * The same shape as the C target's NAME_run_v: inputs and outputs are arrays of
 * pointers to dense, row-major (C order) buffers in declaration order, element
 * types f32 -> float, i32 -> int32_t, bool -> uint8_t, i64 (an input only) ->
 * int64_t. Core ML has no int64 multi-array, so the package declares an i64 input
 * int32 and the wrapper narrows the caller's values, after checking that every one
 * fits int32 as the C entry does (KILN_COREML_E_RANGE otherwise; nothing is run).
 * The wrapper compiles the
 * package once (cached under the user's caches directory by a hash of the
 * package's bytes), loads it with the compute units asked for, wraps the input
 * buffers without copying, and copies every output back BY ITS STRIDES: Core ML
 * may hand back padded arrays (the Neural Engine pads the innermost dimension)
 * and fp16 or double element types, which are converted to the declared type.
 *
 * Entry points and state (packages built with --min-os iOS18 from a script with
 * kiln.entry / kiln.state): kiln_coreml_open loads one Core ML model per entry
 * (MLModelConfiguration.functionName, iOS 18 / macOS 15); entry e is called with
 * kiln_coreml_call(m, e, state, ...). The states live in a KilnCoreMLState (Core
 * ML's MLState: fp16 buffers, zero when new), which every entry of the same
 * KilnCoreML may use; a one-function package is entry 0, named "main". An i32
 * scalar input (a position) is passed like any input: a pointer to one int32_t.
 *
 * Thread safety: one KilnCoreML, and one KilnCoreMLState, may be used from one
 * thread at a time.
 */
#ifndef KILN_COREML_H
#define KILN_COREML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What kiln_coreml_call and kiln_coreml_run_v return: the C target's <M>_OK and
 * <M>_E_RANGE, or a failure. */
enum {
  KILN_COREML_OK = 0,
  KILN_COREML_E_RANGE = 1,       /* a value of an i64 input lies outside int32: nothing was run */
  KILN_COREML_FAILED = -1,       /* anything else; the message is in err */
};

typedef enum {
  KILN_COREML_CPU_ONLY = 0,      /* MLComputeUnitsCPUOnly */
  KILN_COREML_CPU_AND_GPU = 1,   /* MLComputeUnitsCPUAndGPU */
  KILN_COREML_CPU_AND_NE = 2,    /* MLComputeUnitsCPUAndNeuralEngine (iOS 16 / macOS 13; else ALL) */
  KILN_COREML_ALL = 3,           /* MLComputeUnitsAll */
} KilnCoreMLUnits;

/* How a KilnCoreMLState holds Core ML's state across entries (see docs/coreml.md,
 * "Running entry points with state"). */
typedef enum {
  /* One MLState, made by entry 0's model, passed to every entry's predictions: no
   * copies. Relies on Core ML accepting a state made by another function of the
   * same package (the functions declare identical states); not verified on a Mac. */
  KILN_COREML_STATE_SHARED = 0,
  /* One MLState per entry, each made by that entry's own model; when a call uses
   * another entry than the previous call, every state buffer is first copied from
   * the previous entry's MLState into this one's (fp16, element by element). Never
   * hands Core ML a foreign state; costs one copy of the states per switch. */
  KILN_COREML_STATE_PER_ENTRY = 1,
} KilnCoreMLStateMode;

typedef struct KilnCoreML KilnCoreML;
typedef struct KilnCoreMLState KilnCoreMLState;

/* Compiles (or finds in the cache) and loads the package at `package_path`
 * (".../NAME.mlpackage"): every entry of a multifunction package. cache_dir NULL:
 * <user caches>/kiln-coreml. Returns NULL and writes a message to err on failure. */
KilnCoreML *kiln_coreml_open(const char *package_path, KilnCoreMLUnits units, const char *cache_dir,
                             char *err, size_t errlen);

/* Entry 0's inputs and outputs (the whole model's for a one-function package). */
int kiln_coreml_num_inputs(const KilnCoreML *m);
int kiln_coreml_num_outputs(const KilnCoreML *m);
/* Name of input/output i in declaration order (valid while m is open). */
const char *kiln_coreml_input_name(const KilnCoreML *m, int i);
const char *kiln_coreml_output_name(const KilnCoreML *m, int i);
/* Element count of input/output i. */
int64_t kiln_coreml_input_numel(const KilnCoreML *m, int i);
int64_t kiln_coreml_output_numel(const KilnCoreML *m, int i);

/* Entries in declaration order (kiln.entry); 1 for a one-function package. */
int kiln_coreml_num_entries(const KilnCoreML *m);
const char *kiln_coreml_entry_name(const KilnCoreML *m, int e);
/* Index of the entry called `name`, or -1. */
int kiln_coreml_entry_index(const KilnCoreML *m, const char *name);
int kiln_coreml_entry_num_inputs(const KilnCoreML *m, int e);
int kiln_coreml_entry_num_outputs(const KilnCoreML *m, int e);
const char *kiln_coreml_entry_input_name(const KilnCoreML *m, int e, int i);
const char *kiln_coreml_entry_output_name(const KilnCoreML *m, int e, int i);
int64_t kiln_coreml_entry_input_numel(const KilnCoreML *m, int e, int i);
int64_t kiln_coreml_entry_output_numel(const KilnCoreML *m, int e, int i);
/* 1 when input i of entry e is a Kiln i64 input (the caller passes int64_t values), 0
 * when not, -1 for no such input. */
int kiln_coreml_entry_input_is_i64(const KilnCoreML *m, int e, int i);

/* States in declaration order (kiln.state; Core ML feature names: `layers.0.k` ->
 * `layers_0_k`); 0 for a stateless model. */
int kiln_coreml_num_states(const KilnCoreML *m);
const char *kiln_coreml_state_name(const KilnCoreML *m, int i);
int64_t kiln_coreml_state_numel(const KilnCoreML *m, int i);

/* A fresh state (every buffer zero) for the entries of m; NULL and a message on
 * failure (a stateless model, or Core ML older than iOS 18 / macOS 15). Free it
 * before closing m. */
KilnCoreMLState *kiln_coreml_state_new(KilnCoreML *m, KilnCoreMLStateMode mode, char *err, size_t errlen);
/* Back to zero (Core ML has no reset: the MLStates are replaced by new ones).
 * Returns 0, or -1 with a message. */
int kiln_coreml_state_reset(KilnCoreMLState *s, char *err, size_t errlen);
/* Copies state i (its latest values) into dst, kiln_coreml_state_numel floats, dense
 * C order (Core ML keeps fp16; a bool state reads 0/1). Returns 0, or -1. */
int kiln_coreml_state_read(KilnCoreMLState *s, int i, float *dst, char *err, size_t errlen);
void kiln_coreml_state_free(KilnCoreMLState *s);

/* One prediction of entry e with state s (NULL for a stateless model; a stateful
 * model needs one). First checks every value of every i64 input (in input order):
 * one outside int32 returns KILN_COREML_E_RANGE with a message naming the entry,
 * input, element and value, before anything is run (state and outputs untouched).
 * Returns 0, or -1 with a message naming the entry. After a failed prediction the
 * state's contents are unspecified. Positions are not checked here:
 * Core ML clamps an out-of-range offset and leaves the states as they were, but
 * the outputs are then meaningless (docs/coreml.md): check them first. */
int kiln_coreml_call(KilnCoreML *m, int e, KilnCoreMLState *s, const void *const *inputs, void *const *outputs,
                     char *err, size_t errlen);

/* One prediction of entry 0 without state: kiln_coreml_call(m, 0, NULL, ...) (so 0,
 * KILN_COREML_E_RANGE or -1). */
int kiln_coreml_run_v(KilnCoreML *m, const void *const *inputs, void *const *outputs, char *err, size_t errlen);

void kiln_coreml_close(KilnCoreML *m);

#ifdef __cplusplus
}
#endif

#endif
