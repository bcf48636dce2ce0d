/* selftest_metal.c — dispatch table for selftest.metal, written by hand in the
 * format Kiln generates. SELFTEST_VARIANT picks the kernels: 0 all correct,
 * 1 the matmul without a barrier, 2 the off-by-one scale, 3 the softmax that
 * returns before its barriers, 4 the matmul
 * without the barrier that protects a tile from the next one's loads. SELFTEST_CHECKSUM: FNV-1a of the weights payload. */
#include "selftest_metal.h"

#ifndef SELFTEST_VARIANT
#define SELFTEST_VARIANT 0
#endif

static const char *const kernels[] = {
    SELFTEST_VARIANT == 1 ? "tiled_matmul_nobarrier" : SELFTEST_VARIANT == 4 ? "tiled_matmul_reuse_race" : "tiled_matmul",
    SELFTEST_VARIANT == 3 ? "row_softmax_early" : "row_softmax",
    SELFTEST_VARIANT == 2 ? "scale2_offbyone" : "scale2",
};

/* a: input 0 [37, 29]; b: weights [29, 45]; t = a @ b at arena 0; u = softmax(t) at arena 6720 */
static const KilnMtlBinding bindings[] = {
    {0, KILN_MTL_INPUT, KILN_MTL_READ, KILN_MTL_F32, 0, 0, 0, 37 * 29 * 4},
    {1, KILN_MTL_WEIGHTS, KILN_MTL_READ, KILN_MTL_F32, 0, 0, 0, 29 * 45 * 4},
    {2, KILN_MTL_ARENA, KILN_MTL_WRITE, KILN_MTL_F32, 0, 0, 0, 37 * 45 * 4},
    {0, KILN_MTL_ARENA, KILN_MTL_READ, KILN_MTL_F32, 0, 0, 0, 37 * 45 * 4},
    {1, KILN_MTL_ARENA, KILN_MTL_WRITE, KILN_MTL_F32, 0, 0, 6720, 37 * 45 * 4},
    {0, KILN_MTL_ARENA, KILN_MTL_READ, KILN_MTL_F32, 0, 0, 6720, 37 * 45 * 4},
    {1, KILN_MTL_OUTPUT, KILN_MTL_WRITE, KILN_MTL_F32, 0, 0, 0, 37 * 45 * 4},
};

static const KilnMtlDispatch dispatches[] = {
    {0, 0, 3, {3, 3, 1}, {16, 16, 1}, "matmul"},
    {1, 3, 2, {37, 1, 1}, {40, 1, 1}, "softmax"},
    {2, 5, 2, {9, 1, 1}, {48, 1, 1}, "scale"},
};

static const KilnMtlIO inputs[] = {{"a", KILN_MTL_F32, 37 * 29 * 4}};
static const KilnMtlIO outputs[] = {{"out", KILN_MTL_F32, 37 * 45 * 4}};

const KilnMtlModel selftest_metal_model = {
    "selftest", 0, kernels, 3, dispatches, 3, bindings, 7, inputs, outputs, 1, 1,
    29 * 45 * 4, SELFTEST_CHECKSUM, 2 * 6720, NULL, 0, 0,   /* no entries list (one entry), no state */
};
