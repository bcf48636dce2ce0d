/* selftest.c — reference for selftest.metal: a [37, 29] input, b [29, 45] weights,
 * out [37, 45] = 2 * softmax over rows of a @ b. Plain loops, float accumulators. */
#include "selftest.h"

#include <math.h>

void selftest_run_v(const void *weights, void *arena, const void *const *inputs, void *const *outputs) {
  enum { M = 37, N = 45, K = 29 };
  const float *a = inputs[0], *b = weights;
  float *out = outputs[0], *t = arena;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float acc = 0.0f;
      for (int k = 0; k < K; k++) acc += a[i * K + k] * b[k * N + j];
      t[i * N + j] = acc;
    }
  for (int i = 0; i < M; i++) {
    float m = -INFINITY, s = 0.0f;
    for (int j = 0; j < N; j++) m = fmaxf(m, t[i * N + j]);
    for (int j = 0; j < N; j++) s += expf(t[i * N + j] - m);
    for (int j = 0; j < N; j++) out[i * N + j] = 2.0f * (expf(t[i * N + j] - m) / s);
  }
}
