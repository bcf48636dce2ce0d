// lint_bad.metal — one construct per msllint rule; tests/t_metal.sh expects each
// to be reported (the shim alone would accept most of them).
#include <metal_stdlib>
#include <stdio.h>
using namespace metal;
static inline float rec(float x) { return x > 1.0f ? rec(x - 1.0f) : x; }
kernel void k(device const float *a [[buffer(0)]], device float *b [[buffer(1)]],
              uint3 g [[thread_position_in_grid]], uint t [[thread_position_in_threadgroup]]) {
  float4 v = (float4)(1.0f, 2.0f, 3.0f, 4.0f);
  float *p = b;
  static float z = 0;
  double d = 1;
  b[0] = v.s0 + v.lo.x + p[0] + metal::float4(1.0f).x;
  if constexpr (true) {}
  barrier(CLK_LOCAL_MEM_FENCE);
}
