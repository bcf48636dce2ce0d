/* STUB: placeholder until this phase is written. */
#include "kiln.h"

void init_fill(float *out, int64_t n, uint64_t seed, const char *param_name, const char *kind, double a, double b) { (void)out; (void)n; (void)seed; (void)param_name; (void)kind; (void)a; (void)b; die("not written yet"); }
