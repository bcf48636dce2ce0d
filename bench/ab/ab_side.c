/*
 * ab_side.c — one build's half of the paired harness (bench/ab.py): the generated model's
 * sizes and its <m>_run_v, renamed for the side. Compiled once a side, with that build's
 * directory on the include path and the model's exported functions renamed (two builds of
 * one model define the same names):
 *
 *   cc -I BUILD -Iruntime -DKILN_MODEL=m -DKILN_MODEL_UPPER=M -DAB_SIDE=ab_a \
 *      -Dm_run=ab_a_run -Dm_run_v=ab_a_run_v -Dm_run_par=ab_a_run_par -c bench/ab/ab_side.c
 *
 * and BUILD/m.c compiled with the same renames.
 */
#include "ab.h"
#include "kiln_runtime.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#include STR(KILN_MODEL.h)
#define M_(suffix) CAT(KILN_MODEL_UPPER, suffix)

static const size_t input_sizes[] = M_(_INPUT_SIZES), output_sizes[] = M_(_OUTPUT_SIZES);

const ab_model AB_SIDE = {M_(_WEIGHTS_SIZE), M_(_WEIGHTS_CHECKSUM), M_(_ARENA_SIZE),   M_(_NUM_INPUTS),
                          M_(_NUM_OUTPUTS),  input_sizes,          output_sizes,      CAT(KILN_MODEL, _run_v),
                          CAT(KILN_MODEL, _run_par)};
