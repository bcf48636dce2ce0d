// selftest.metal — hand-written kernels that test the test: the correct ones must
// match selftest.c under every thread order; the broken ones (a missing barrier,
// an off-by-one bound, an early return before a barrier) must be caught.
#include <metal_stdlib>
using namespace metal;

// out (37 x 45) = a (37 x 29) @ b (29 x 45); 16x16 tiles, every tile partial somewhere.
kernel void tiled_matmul(device const float *a [[buffer(0)]], device const float *b [[buffer(1)]],
                         device float *out [[buffer(2)]], uint3 tid [[thread_position_in_threadgroup]],
                         uint3 tg [[threadgroup_position_in_grid]]) {
  const uint M = 37, N = 45, K = 29, T = 16;
  threadgroup float as[16][17];
  threadgroup float bs[16][17];
  const uint row = tg.y * T + tid.y, col = tg.x * T + tid.x;
  float acc = 0.0f;
  for (uint k0 = 0; k0 < K; k0 += T) {
    as[tid.y][tid.x] = row < M && k0 + tid.x < K ? a[row * K + k0 + tid.x] : 0.0f;
    bs[tid.y][tid.x] = k0 + tid.y < K && col < N ? b[(k0 + tid.y) * N + col] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < T; k++) acc += as[tid.y][k] * bs[k][tid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (row < M && col < N) out[row * N + col] = acc;
}

// The same without the barrier between loading a tile and using it.
kernel void tiled_matmul_nobarrier(device const float *a [[buffer(0)]], device const float *b [[buffer(1)]],
                                   device float *out [[buffer(2)]], uint3 tid [[thread_position_in_threadgroup]],
                                   uint3 tg [[threadgroup_position_in_grid]]) {
  const uint M = 37, N = 45, K = 29, T = 16;
  threadgroup float as[16][17];
  threadgroup float bs[16][17];
  const uint row = tg.y * T + tid.y, col = tg.x * T + tid.x;
  float acc = 0.0f;
  for (uint k0 = 0; k0 < K; k0 += T) {
    as[tid.y][tid.x] = row < M && k0 + tid.x < K ? a[row * K + k0 + tid.x] : 0.0f;
    bs[tid.y][tid.x] = k0 + tid.y < K && col < N ? b[(k0 + tid.y) * N + col] : 0.0f;
    for (uint k = 0; k < T; k++) acc += as[tid.y][k] * bs[k][tid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (row < M && col < N) out[row * N + col] = acc;
}

// The same without the barrier that keeps the next tile's loads from overwriting
// values other threads still read: only a thread order can expose it.
kernel void tiled_matmul_reuse_race(device const float *a [[buffer(0)]], device const float *b [[buffer(1)]],
                                    device float *out [[buffer(2)]], uint3 tid [[thread_position_in_threadgroup]],
                                    uint3 tg [[threadgroup_position_in_grid]]) {
  const uint M = 37, N = 45, K = 29, T = 16;
  threadgroup float as[16][17];
  threadgroup float bs[16][17];
  const uint row = tg.y * T + tid.y, col = tg.x * T + tid.x;
  float acc = 0.0f;
  for (uint k0 = 0; k0 < K; k0 += T) {
    as[tid.y][tid.x] = row < M && k0 + tid.x < K ? a[row * K + k0 + tid.x] : 0.0f;
    bs[tid.y][tid.x] = k0 + tid.y < K && col < N ? b[(k0 + tid.y) * N + col] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < T; k++) acc += as[tid.y][k] * bs[k][tid.x];
  }
  if (row < M && col < N) out[row * N + col] = acc;
}

// Sum over the threadgroup: SIMD-group sums, then one partial per SIMD group.
static inline float tg_sum(float v, threadgroup float *part, uint sg, uint lane, uint nsg) {
  v = simd_sum(v);
  if (lane == 0) part[sg] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float s = 0.0f;
  for (uint i = 0; i < nsg; i++) s += part[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return s;
}

static inline float tg_max(float v, threadgroup float *part, uint sg, uint lane, uint nsg) {
  v = simd_max(v);
  if (lane == 0) part[sg] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float m = part[0];
  for (uint i = 1; i < nsg; i++) m = fmax(m, part[i]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return m;
}

// Softmax of each of 37 rows of 45; one threadgroup of 40 threads (not a multiple of 32) per row.
kernel void row_softmax(device const float *x [[buffer(0)]], device float *out [[buffer(1)]],
                        uint3 tg [[threadgroup_position_in_grid]], uint3 tid [[thread_position_in_threadgroup]],
                        uint lane [[thread_index_in_simdgroup]], uint sg [[simdgroup_index_in_threadgroup]]) {
  const uint L = 45, T = 40, NSG = (T + 31) / 32;
  threadgroup float part[NSG];
  device const float *row = x + tg.x * L;
  float m = -INFINITY;
  for (uint i = tid.x; i < L; i += T) m = fmax(m, row[i]);
  m = tg_max(m, part, sg, lane, NSG);
  float s = 0.0f;
  for (uint i = tid.x; i < L; i += T) s += exp(row[i] - m);
  s = tg_sum(s, part, sg, lane, NSG);
  for (uint i = tid.x; i < L; i += T) out[tg.x * L + i] = exp(row[i] - m) / s;
}

// The same, but threads with nothing to do return before the reductions' barriers.
kernel void row_softmax_early(device const float *x [[buffer(0)]], device float *out [[buffer(1)]],
                              uint3 tg [[threadgroup_position_in_grid]], uint3 tid [[thread_position_in_threadgroup]],
                              uint lane [[thread_index_in_simdgroup]], uint sg [[simdgroup_index_in_threadgroup]]) {
  const uint L = 45, T = 40, NSG = (T + 31) / 32;
  threadgroup float part[NSG];
  if (tid.x >= 36) return;
  device const float *row = x + tg.x * L;
  float m = -INFINITY;
  for (uint i = tid.x; i < L; i += T) m = fmax(m, row[i]);
  m = tg_max(m, part, sg, lane, NSG);
  float s = 0.0f;
  for (uint i = tid.x; i < L; i += T) s += exp(row[i] - m);
  s = tg_sum(s, part, sg, lane, NSG);
  for (uint i = tid.x; i < L; i += T) out[tg.x * L + i] = exp(row[i] - m) / s;
}

// out = 2 x, four elements a thread (37 * 45 = 1665 = 4 * 416 + 1: a ragged tail).
kernel void scale2(device const float *x [[buffer(0)]], device float *out [[buffer(1)]],
                   uint3 gid [[thread_position_in_grid]]) {
  const uint N = 1665;
  const uint i = gid.x * 4;
  if (i + 3 < N) {
    const float4 v = float4(x[i], x[i + 1], x[i + 2], x[i + 3]);
    const float4 r = 2.0f * v;
    out[i] = r.x; out[i + 1] = r.y; out[i + 2] = r.z; out[i + 3] = r.w;
  } else {
    for (uint j = i; j < N; j++) out[j] = 2.0f * x[j];
  }
}

// The same with the tail loop's bound off by one.
kernel void scale2_offbyone(device const float *x [[buffer(0)]], device float *out [[buffer(1)]],
                            uint3 gid [[thread_position_in_grid]]) {
  const uint N = 1665;
  const uint i = gid.x * 4;
  if (i + 3 < N) {
    const float4 v = float4(x[i], x[i + 1], x[i + 2], x[i + 3]);
    const float4 r = 2.0f * v;
    out[i] = r.x; out[i + 1] = r.y; out[i + 2] = r.z; out[i + 3] = r.w;
  } else {
    for (uint j = i; j <= N; j++) out[j] = 2.0f * x[j];
  }
}
