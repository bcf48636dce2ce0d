/* selftest.h — the C reference for selftest.metal: out = 2 * softmax_rows(a @ b). */
#ifndef SELFTEST_H
#define SELFTEST_H
void selftest_run_v(const void *weights, void *arena, const void *const *inputs, void *const *outputs);
#endif
