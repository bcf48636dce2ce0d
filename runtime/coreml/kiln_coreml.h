/*
 * kiln_coreml.h — run a Kiln-built NAME.mlpackage through Core ML from C, C++,
 * Objective-C or Swift (via a bridging header).
 *
 * The same shape as the C target's NAME_run_v: inputs and outputs are arrays of
 * pointers to dense, row-major (C order) buffers in declaration order, element
 * types f32 -> float, i32 -> int32_t, bool -> uint8_t. The wrapper compiles the
 * package once (cached under the user's caches directory by a hash of the
 * package's bytes), loads it with the compute units asked for, wraps the input
 * buffers without copying, and copies every output back BY ITS STRIDES: Core ML
 * may hand back padded arrays (the Neural Engine pads the innermost dimension)
 * and fp16 or double element types, which are converted to the declared type.
 *
 * Thread safety: one KilnCoreML may be used from one thread at a time.
 */
#ifndef KILN_COREML_H
#define KILN_COREML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  KILN_COREML_CPU_ONLY = 0,      /* MLComputeUnitsCPUOnly */
  KILN_COREML_CPU_AND_GPU = 1,   /* MLComputeUnitsCPUAndGPU */
  KILN_COREML_CPU_AND_NE = 2,    /* MLComputeUnitsCPUAndNeuralEngine (iOS 16 / macOS 13; else ALL) */
  KILN_COREML_ALL = 3,           /* MLComputeUnitsAll */
} KilnCoreMLUnits;

typedef struct KilnCoreML KilnCoreML;

/* Compiles (or finds in the cache) and loads the package at `package_path`
 * (".../NAME.mlpackage"). cache_dir NULL: <user caches>/kiln-coreml. Returns NULL
 * and writes a message to err on failure. */
KilnCoreML *kiln_coreml_open(const char *package_path, KilnCoreMLUnits units, const char *cache_dir,
                             char *err, size_t errlen);

int kiln_coreml_num_inputs(const KilnCoreML *m);
int kiln_coreml_num_outputs(const KilnCoreML *m);
/* Name of input/output i in declaration order (valid while m is open). */
const char *kiln_coreml_input_name(const KilnCoreML *m, int i);
const char *kiln_coreml_output_name(const KilnCoreML *m, int i);
/* Element count of input/output i. */
int64_t kiln_coreml_input_numel(const KilnCoreML *m, int i);
int64_t kiln_coreml_output_numel(const KilnCoreML *m, int i);

/* One prediction. Returns 0, or -1 with a message in err. */
int kiln_coreml_run_v(KilnCoreML *m, const void *const *inputs, void *const *outputs, char *err, size_t errlen);

void kiln_coreml_close(KilnCoreML *m);

#ifdef __cplusplus
}
#endif

#endif
