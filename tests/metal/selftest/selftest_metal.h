/* selftest_metal.h — the hand-written dispatch table of selftest.metal. */
#ifndef SELFTEST_METAL_H
#define SELFTEST_METAL_H
#include "kiln_metal.h"
extern const KilnMtlModel selftest_metal_model;
#endif
