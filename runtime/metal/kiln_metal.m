/*
 * kiln_metal.m — the host runtime of Kiln's Metal target (Objective-C, ARC).
 *
 * Interprets any model's dispatch table (kiln_metal.h): at open, one device, one
 * command queue, the library (from a .metallib file, or compiled from the MSL
 * text embedded in the table), one compute pipeline per kernel, and shared-storage
 * buffers for the weights (copied once), the arena, every entry's inputs and
 * outputs, and the state block (zero: a fresh state). A call of an entry first
 * makes its range checks on the caller's inputs (every value of an i64 input must
 * fit int32; run-time offsets; KILN_MTL_E_RANGE before anything is touched), then
 * copies the inputs in (i64 ones narrowed to int32: kernels read i32), encodes
 * the entry's dispatches in table order into one serial compute encoder of one
 * command buffer (serial dispatches see each other's writes), commits, waits, and
 * copies the outputs out: the same caller-owned host-memory shape as the C
 * target's <m>_run. The state block stays on the device side between calls
 * (shared storage, so the host reads and writes it directly between calls).
 *
 * When a command buffer fails, Metal does not say which dispatch failed; the call
 * then replays the entry's dispatches one command buffer each to name the kernel.
 *
 * Build (macOS 11+ / iOS 14+):  clang -fobjc-arc -c kiln_metal.m
 * and link with -framework Metal -framework Foundation; see docs/metal.md.
 * On Linux this file is only type-checked (tests/t_metal.sh) against the stub
 * headers in tests/metal/stub/, which declare exactly the API used here.
 */
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include "kiln_metal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The Objective-C objects of one opened model; owned by KilnMetal through ARC. */
@interface KilnMetalState : NSObject
@property(nonatomic, strong) id<MTLDevice> device;
@property(nonatomic, strong) id<MTLCommandQueue> queue;
@property(nonatomic, strong) NSMutableArray *pipelines;   /* id<MTLComputePipelineState>, per kernel */
@property(nonatomic, strong) id<MTLBuffer> weights;
@property(nonatomic, strong) id<MTLBuffer> arena;
@property(nonatomic, strong) id<MTLBuffer> state;          /* the state block (a model with kiln.state) */
@property(nonatomic, strong) NSMutableArray *inputs;      /* per entry: NSMutableArray of id<MTLBuffer>, per input */
@property(nonatomic, strong) NSMutableArray *outputs;     /* per entry: the same, per output */
@end

@implementation KilnMetalState
@end

struct KilnMetal {
  const KilnMtlModel *m;
  void *state;                  /* KilnMetalState, retained (CFBridgingRetain) */
  double gpu_seconds;
};

static void set_err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t n, const char *fmt, ...) {
  if (!err || !n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

static const char *describe_error(NSError *e) {
  const char *s = e ? e.localizedDescription.UTF8String : NULL;
  return s ? s : "unknown error";
}

static uint64_t fnv1a64(const unsigned char *p, uint64_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* A shared buffer of n bytes (Metal rejects zero-length buffers: at least 16). */
static id<MTLBuffer> new_buffer(id<MTLDevice> dev, const void *bytes, uint64_t n) {
  NSUInteger len = n < 16 ? 16 : (NSUInteger)n;
  if (bytes && n) return [dev newBufferWithBytes:bytes length:len options:MTLResourceStorageModeShared];
  return [dev newBufferWithLength:len options:MTLResourceStorageModeShared];
}

/* The model's MSL text, joined from the table's lines. */
static NSString *msl_source(const KilnMtlModel *m) {
  size_t total = 1;
  for (const char *const *l = m->msl; *l; l++) total += strlen(*l);
  char *s = malloc(total), *p = s;
  if (!s) return nil;
  for (const char *const *l = m->msl; *l; l++) {
    size_t n = strlen(*l);
    memcpy(p, *l, n);
    p += n;
  }
  *p = 0;
  NSString *src = [NSString stringWithUTF8String:s];
  free(s);
  return src;
}

static id<MTLLibrary> load_library(id<MTLDevice> dev, const KilnMtlModel *m, const char *metallib_path, char *err,
                                   size_t errlen) {
  NSError *e = nil;
  id<MTLLibrary> lib = nil;
  if (metallib_path) {
    NSString *path = [NSString stringWithUTF8String:metallib_path];
    if (path) lib = [dev newLibraryWithURL:[NSURL fileURLWithPath:path] error:&e];
    if (!lib) set_err(err, errlen, "kiln_metal: cannot load %s: %s", metallib_path, describe_error(e));
    return lib;
  }
  NSString *src = msl_source(m);
  if (!src) {
    set_err(err, errlen, "kiln_metal: model %s: the embedded MSL is not UTF-8", m->name);
    return nil;
  }
  MTLCompileOptions *opt = [MTLCompileOptions new];
  opt.fastMathEnabled = YES;
  lib = [dev newLibraryWithSource:src options:opt error:&e];
  if (!lib) set_err(err, errlen, "kiln_metal: model %s: MSL compile failed: %s", m->name, describe_error(e));
  return lib;
}

/* One pipeline per kernel, checked against the largest threadgroup its dispatches use. */
static BOOL make_pipelines(KilnMetalState *s, id<MTLLibrary> lib, const KilnMtlModel *m, char *err, size_t errlen) {
  s.pipelines = [NSMutableArray arrayWithCapacity:m->nkernels];
  for (uint32_t k = 0; k < m->nkernels; k++) {
    NSString *name = [NSString stringWithUTF8String:m->kernels[k]];
    id<MTLFunction> fn = name ? [lib newFunctionWithName:name] : nil;
    if (!fn) {
      set_err(err, errlen, "kiln_metal: kernel %s is not in the library", m->kernels[k]);
      return NO;
    }
    NSError *e = nil;
    id<MTLComputePipelineState> p = [s.device newComputePipelineStateWithFunction:fn error:&e];
    if (!p) {
      set_err(err, errlen, "kiln_metal: kernel %s: pipeline: %s", m->kernels[k], describe_error(e));
      return NO;
    }
    [s.pipelines addObject:p];
  }
  for (uint32_t d = 0; d < m->ndispatches; d++) {
    const KilnMtlDispatch *dp = &m->dispatches[d];
    id<MTLComputePipelineState> p = s.pipelines[dp->kernel];
    NSUInteger threads = (NSUInteger)dp->threads[0] * dp->threads[1] * dp->threads[2];
    if (threads > p.maxTotalThreadsPerThreadgroup) {
      set_err(err, errlen, "kiln_metal: kernel %s: %lu threads per threadgroup, this device allows %lu",
              m->kernels[dp->kernel], (unsigned long)threads, (unsigned long)p.maxTotalThreadsPerThreadgroup);
      return NO;
    }
  }
  return YES;
}

/* One fresh buffer per I/O record into list; NO when one cannot be allocated. */
static BOOL io_buffers(id<MTLDevice> dev, NSMutableArray *list, const KilnMtlIO *io, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    id<MTLBuffer> b = new_buffer(dev, NULL, kiln_mtl_device_size(&io[i]));
    if (!b) return NO;
    [list addObject:b];
  }
  return YES;
}

/* The weights (copied), the arena, the state block (zeroed: a fresh state)
 * and every entry's input and output buffers. */
static BOOL make_buffers(KilnMetalState *s, const KilnMtlModel *m, const void *weights, char *err, size_t errlen) {
  s.weights = new_buffer(s.device, weights, m->weights_size);
  s.arena = new_buffer(s.device, NULL, m->arena_size);
  s.state = m->state_size ? new_buffer(s.device, NULL, m->state_size) : nil;
  uint32_t n = kiln_mtl_nentries(m);
  s.inputs = [NSMutableArray arrayWithCapacity:n];
  s.outputs = [NSMutableArray arrayWithCapacity:n];
  BOOL ok = s.weights && s.arena && (s.state || !m->state_size);
  for (uint32_t e = 0; e < n && ok; e++) {
    KilnMtlEntry en = kiln_mtl_entry(m, e);
    NSMutableArray *in = [NSMutableArray arrayWithCapacity:en.ninputs];
    NSMutableArray *out = [NSMutableArray arrayWithCapacity:en.noutputs];
    ok = io_buffers(s.device, in, en.inputs, en.ninputs) && io_buffers(s.device, out, en.outputs, en.noutputs);
    [s.inputs addObject:in];
    [s.outputs addObject:out];
  }
  if (ok && s.state) memset([s.state contents], 0, (size_t)m->state_size);
  if (!ok) set_err(err, errlen, "kiln_metal: model %s: cannot allocate device buffers", m->name);
  return ok;
}

KilnMetal *kiln_metal_open(const KilnMtlModel *m, const void *weights, const char *metallib_path, char *err,
                           size_t errlen) {
  @autoreleasepool {
    if (m->weights_size && (!weights || fnv1a64(weights, m->weights_size) != m->weights_checksum)) {
      set_err(err, errlen, "kiln_metal: model %s: the weights do not match (checksum)", m->name);
      return NULL;
    }
    KilnMetalState *s = [KilnMetalState new];
    s.device = MTLCreateSystemDefaultDevice();
    if (!s.device) {
      set_err(err, errlen, "kiln_metal: no Metal device");
      return NULL;
    }
    s.queue = [s.device newCommandQueue];
    id<MTLLibrary> lib = load_library(s.device, m, metallib_path, err, errlen);
    if (!s.queue || !lib || !make_pipelines(s, lib, m, err, errlen) || !make_buffers(s, m, weights, err, errlen))
      return NULL;
    KilnMetal *k = calloc(1, sizeof *k);
    if (!k) {
      set_err(err, errlen, "kiln_metal: out of memory");
      return NULL;
    }
    k->m = m;
    k->state = (void *)CFBridgingRetain(s);
    return k;
  }
}

/* The buffer a binding of entry e's dispatch refers to. */
static id<MTLBuffer> region_buffer(KilnMetalState *s, uint32_t e, const KilnMtlBinding *b) {
  switch (b->region) {
  case KILN_MTL_WEIGHTS: return s.weights;
  case KILN_MTL_ARENA: return s.arena;
  case KILN_MTL_STATE: return s.state;
  case KILN_MTL_INPUT: return s.inputs[e][b->slot];
  default: return s.outputs[e][b->slot];
  }
}

/* Encodes dispatches [from, to) of entry e into one command buffer and waits for it. */
static id<MTLCommandBuffer> encode_and_wait(KilnMetalState *s, const KilnMtlModel *m, uint32_t e, uint32_t from,
                                            uint32_t to) {
  id<MTLCommandBuffer> cb = [s.queue commandBuffer];
  id<MTLComputeCommandEncoder> enc = [cb computeCommandEncoder];
  if (!cb || !enc) return nil;
  for (uint32_t d = from; d < to; d++) {
    const KilnMtlDispatch *dp = &m->dispatches[d];
    [enc setComputePipelineState:s.pipelines[dp->kernel]];
    for (uint32_t j = 0; j < dp->nbindings; j++) {
      const KilnMtlBinding *b = &m->bindings[dp->first_binding + j];
      [enc setBuffer:region_buffer(s, e, b) offset:(NSUInteger)b->offset atIndex:b->index];
    }
    [enc dispatchThreadgroups:MTLSizeMake(dp->groups[0], dp->groups[1], dp->groups[2])
        threadsPerThreadgroup:MTLSizeMake(dp->threads[0], dp->threads[1], dp->threads[2])];
  }
  [enc endEncoding];
  [cb commit];
  [cb waitUntilCompleted];
  return cb;
}

/* After a failed command buffer: runs each dispatch of entry e alone to find the first
 * that fails. */
static void attribute_failure(KilnMetalState *s, const KilnMtlModel *m, uint32_t e, NSError *first, char *err,
                              size_t errlen) {
  KilnMtlEntry en = kiln_mtl_entry(m, e);
  for (uint32_t d = en.first_dispatch; d < en.first_dispatch + en.ndispatches; d++) {
    id<MTLCommandBuffer> cb = encode_and_wait(s, m, e, d, d + 1);
    if (!cb || cb.status != MTLCommandBufferStatusCompleted) {
      set_err(err, errlen, "kiln_metal: dispatch %u, kernel %s: %s", d, m->dispatches[d].what,
              describe_error(cb ? cb.error : first));
      return;
    }
  }
  set_err(err, errlen, "kiln_metal: model %s: command buffer failed (%s); no single dispatch fails alone", m->name,
          describe_error(first));
}

int kiln_metal_call(KilnMetal *k, uint32_t entry, const void *const *inputs, void *const *outputs, char *err,
                    size_t errlen) {
  @autoreleasepool {
    KilnMetalState *s = (__bridge KilnMetalState *)k->state;
    const KilnMtlModel *m = k->m;
    if (entry >= kiln_mtl_nentries(m)) {
      set_err(err, errlen, "kiln_metal: model %s has no entry %u", m->name, entry);
      return KILN_MTL_FAILED;
    }
    KilnMtlEntry en = kiln_mtl_entry(m, entry);
    uint32_t slot = 0;
    uint64_t element = 0;
    int64_t big = 0;
    if (kiln_mtl_check_i64(&en, inputs, &slot, &element, &big) != KILN_MTL_OK) {
      set_err(err, errlen, "kiln_metal: %s_%s: i64 input %s[%llu] = %lld is outside the int32 range; nothing was run",
              m->name, en.name, en.inputs[slot].name, (unsigned long long)element, (long long)big);
      return KILN_MTL_E_RANGE;
    }
    const KilnMtlCheck *bad = NULL;
    int32_t at = 0;
    if (kiln_mtl_check_inputs(&en, inputs, &bad, &at) != KILN_MTL_OK) {
      set_err(err, errlen, "kiln_metal: %s_%s: %s = %d is outside [0, %d] (%s); nothing was run", m->name, en.name,
              en.inputs[bad->input].name, (int)at, (int)bad->max, bad->what);
      return KILN_MTL_E_RANGE;
    }
    for (uint32_t i = 0; i < en.ninputs; i++) {
      id<MTLBuffer> b = s.inputs[entry][i];
      kiln_mtl_load_input(&en.inputs[i], [b contents], inputs[i]);
    }
    id<MTLCommandBuffer> cb = encode_and_wait(s, m, entry, en.first_dispatch, en.first_dispatch + en.ndispatches);
    if (!cb) {
      set_err(err, errlen, "kiln_metal: model %s: cannot create a command buffer", m->name);
      return KILN_MTL_FAILED;
    }
    if (cb.status != MTLCommandBufferStatusCompleted) {
      attribute_failure(s, m, entry, cb.error, err, errlen);
      return KILN_MTL_FAILED;
    }
    k->gpu_seconds = cb.GPUEndTime - cb.GPUStartTime;
    for (uint32_t i = 0; i < en.noutputs; i++) {
      id<MTLBuffer> b = s.outputs[entry][i];
      memcpy(outputs[i], [b contents], (size_t)en.outputs[i].size);
    }
    return KILN_MTL_OK;
  }
}

int kiln_metal_run(KilnMetal *k, const void *const *inputs, void *const *outputs, char *err, size_t errlen) {
  return kiln_metal_call(k, 0, inputs, outputs, err, errlen);
}

void *kiln_metal_state(KilnMetal *k) {
  KilnMetalState *s = (__bridge KilnMetalState *)k->state;
  return s.state ? [s.state contents] : NULL;
}

void kiln_metal_reset(KilnMetal *k) {
  void *p = kiln_metal_state(k);
  if (p) memset(p, 0, (size_t)k->m->state_size);
}

double kiln_metal_last_gpu_seconds(const KilnMetal *k) { return k->gpu_seconds; }

void kiln_metal_close(KilnMetal *k) {
  if (!k) return;
  @autoreleasepool {
    KilnMetalState *s = (KilnMetalState *)CFBridgingRelease(k->state);
    (void)s;
  }
  free(k);
}
