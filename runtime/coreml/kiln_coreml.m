/*
 * kiln_coreml.m — the Core ML runtime wrapper behind kiln_coreml.h.
 *
 * Shape: open = hash the package's bytes -> compile once into
 * <cache>/<hash>.mlmodelc (MLModel compileModelAtURL:, then an atomic move, so
 * two processes racing both end up with one complete copy) -> load with an
 * MLModelConfiguration carrying the compute units -> read the I/O signature.
 * Core ML's description is a dictionary (no order) and has no bool arrays, so
 * the declaration order and the bool features come from the metadata Kiln
 * writes (kiln.inputs, kiln.outputs, kiln.bool_features); shapes and element
 * types come from Core ML's own description.
 *
 * run = wrap each caller buffer in an MLMultiArray without copying (bool inputs
 * are widened to int32 first), predict, then copy each output element by
 * element through the array's *strides* into the caller's dense buffer,
 * converting fp16/fp32/double/int32 to the declared element type. Never assume
 * an output is dense: on the Neural Engine the innermost dimension is padded.
 *
 * Built with ARC (-fobjc-arc). On Linux only compile-checked against the stub
 * headers in stub/ (see docs/coreml.md); nothing here has run on Apple hardware.
 */
#import <CoreML/CoreML.h>
#import <Foundation/Foundation.h>

#include "kiln_coreml.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_F32, KIND_I32, KIND_BOOL };
enum { MAX_RANK = 8 };

typedef struct {
  char *name;
  int kind;
  int rank;
  int64_t shape[MAX_RANK];
  int64_t numel;
} Feature;

struct KilnCoreML {
  void *model;                  /* MLModel *, retained with __bridge_retained */
  int nin, nout;
  Feature *in, *out;
};

static void set_err(char *err, size_t n, const char *fmt, ...) {
  if (!err || !n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

static const char *describe(NSError *e) { return e ? e.localizedDescription.UTF8String : "unknown error"; }

/* ---- compile cache ---- */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
  return h;
}

/* FNV-1a 64 over the package's files (relative path, then bytes), in a fixed order. */
static BOOL package_hash(NSString *pkg, uint64_t *out, char *err, size_t errlen) {
  static const char *const parts[] = {"Manifest.json", "Data/com.apple.CoreML/model.mlmodel",
                                      "Data/com.apple.CoreML/weights/weight.bin"};
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    NSString *full = [pkg stringByAppendingPathComponent:[NSString stringWithUTF8String:parts[i]]];
    if (![[NSFileManager defaultManager] fileExistsAtPath:full]) {
      if (i == 2) continue;     /* a model without large constants has no weight.bin */
      set_err(err, errlen, "%s: missing %s", pkg.UTF8String, parts[i]);
      return NO;
    }
    NSError *e = nil;
    NSData *d = [NSData dataWithContentsOfFile:full options:NSDataReadingMappedIfSafe error:&e];
    if (!d) {
      set_err(err, errlen, "%s: %s", full.UTF8String, describe(e));
      return NO;
    }
    h = fnv1a(h, parts[i], strlen(parts[i]));
    h = fnv1a(h, d.bytes, d.length);
  }
  *out = h;
  return YES;
}

/* The compiled model for pkg: <cache>/<hash>.mlmodelc, compiled now if absent. */
static NSURL *compiled_model(NSString *pkg, NSString *cache, char *err, size_t errlen) {
  uint64_t h;
  if (!package_hash(pkg, &h, err, errlen)) return nil;
  NSString *dst = [cache stringByAppendingPathComponent:[NSString stringWithFormat:@"%016llx.mlmodelc", (unsigned long long)h]];
  NSFileManager *fm = [NSFileManager defaultManager];
  if ([fm fileExistsAtPath:dst]) return [NSURL fileURLWithPath:dst];
  NSError *e = nil;
  if (![fm createDirectoryAtPath:cache withIntermediateDirectories:YES attributes:nil error:&e]) {
    set_err(err, errlen, "cannot create %s: %s", cache.UTF8String, describe(e));
    return nil;
  }
  NSURL *tmp = [MLModel compileModelAtURL:[NSURL fileURLWithPath:pkg] error:&e];
  if (!tmp) {
    set_err(err, errlen, "Core ML could not compile %s: %s", pkg.UTF8String, describe(e));
    return nil;
  }
  NSURL *dstURL = [NSURL fileURLWithPath:dst];
  if (![fm moveItemAtURL:tmp toURL:dstURL error:&e]) {
    [fm removeItemAtURL:tmp error:nil];
    if (![fm fileExistsAtPath:dst]) {   /* not just another process winning the race */
      set_err(err, errlen, "cannot store the compiled model in %s: %s", dst.UTF8String, describe(e));
      return nil;
    }
  }
  return dstURL;
}

/* ---- signature ---- */

static NSArray<NSString *> *split_list(NSDictionary *md, NSString *key) {
  NSString *s = md[key];
  if (!s || s.length == 0) return [NSMutableArray arrayWithCapacity:0];
  return [s componentsSeparatedByString:@","];
}

static BOOL contains(NSArray<NSString *> *list, NSString *s) {
  for (NSUInteger i = 0; i < list.count; i++)
    if ([list[i] isEqualToString:s]) return YES;
  return NO;
}

/* Fills f from Core ML's description of feature `name`. */
static BOOL describe_feature(Feature *f, NSString *name, MLFeatureDescription *fd, BOOL is_bool, char *err, size_t errlen) {
  MLMultiArrayConstraint *c = fd.multiArrayConstraint;
  if (!c) {
    set_err(err, errlen, "feature %s is not a multi-array", name.UTF8String);
    return NO;
  }
  if (c.shape.count > MAX_RANK) {
    set_err(err, errlen, "feature %s has rank %lu", name.UTF8String, (unsigned long)c.shape.count);
    return NO;
  }
  f->name = strdup(name.UTF8String);
  f->kind = is_bool ? KIND_BOOL : c.dataType == MLMultiArrayDataTypeInt32 ? KIND_I32 : KIND_F32;
  f->rank = (int)c.shape.count;
  f->numel = 1;
  for (int k = 0; k < f->rank; k++) {
    f->shape[k] = c.shape[(NSUInteger)k].longLongValue;
    f->numel *= f->shape[k];
  }
  return YES;
}

static BOOL read_signature(KilnCoreML *m, MLModel *model, char *err, size_t errlen) {
  MLModelDescription *desc = model.modelDescription;
  NSDictionary *md = desc.metadata[MLModelCreatorDefinedKey];
  NSArray<NSString *> *ins = split_list(md, @"kiln.inputs"), *outs = split_list(md, @"kiln.outputs");
  NSArray<NSString *> *bools = split_list(md, @"kiln.bool_features");
  if (outs.count == 0) {
    set_err(err, errlen, "the model has no kiln.outputs metadata: not built by Kiln?");
    return NO;
  }
  m->nin = (int)ins.count;
  m->nout = (int)outs.count;
  m->in = calloc((size_t)m->nin + 1, sizeof(Feature));
  m->out = calloc((size_t)m->nout + 1, sizeof(Feature));
  for (int i = 0; i < m->nin; i++) {
    NSString *n = ins[(NSUInteger)i];
    if (!describe_feature(&m->in[i], n, desc.inputDescriptionsByName[n], contains(bools, n), err, errlen)) return NO;
  }
  for (int i = 0; i < m->nout; i++) {
    NSString *n = outs[(NSUInteger)i];
    if (!describe_feature(&m->out[i], n, desc.outputDescriptionsByName[n], contains(bools, n), err, errlen)) return NO;
  }
  return YES;
}

/* ---- open / close ---- */

static MLComputeUnits compute_units(KilnCoreMLUnits u) {
  switch (u) {
  case KILN_COREML_CPU_ONLY: return MLComputeUnitsCPUOnly;
  case KILN_COREML_CPU_AND_GPU: return MLComputeUnitsCPUAndGPU;
  case KILN_COREML_CPU_AND_NE:
    if (@available(macOS 13.0, iOS 16.0, tvOS 16.0, watchOS 9.0, *)) return MLComputeUnitsCPUAndNeuralEngine;
    return MLComputeUnitsAll;
  case KILN_COREML_ALL: break;
  }
  return MLComputeUnitsAll;
}

KilnCoreML *kiln_coreml_open(const char *package_path, KilnCoreMLUnits units, const char *cache_dir, char *err, size_t errlen) {
  @autoreleasepool {
    NSString *pkg = [NSString stringWithUTF8String:package_path];
    NSString *cache = cache_dir ? [NSString stringWithUTF8String:cache_dir] : nil;
    if (!cache) {
      NSString *caches = NSSearchPathForDirectoriesInDomains(NSCachesDirectory, NSUserDomainMask, YES).firstObject;
      if (!caches) {
        set_err(err, errlen, "no user caches directory; pass cache_dir");
        return NULL;
      }
      cache = [caches stringByAppendingPathComponent:@"kiln-coreml"];
    }
    NSURL *url = compiled_model(pkg, cache, err, errlen);
    if (!url) return NULL;
    MLModelConfiguration *cfg = [[MLModelConfiguration alloc] init];
    cfg.computeUnits = compute_units(units);
    NSError *e = nil;
    MLModel *model = [MLModel modelWithContentsOfURL:url configuration:cfg error:&e];
    if (!model) {
      set_err(err, errlen, "Core ML could not load %s: %s", url.path.UTF8String, describe(e));
      return NULL;
    }
    KilnCoreML *m = calloc(1, sizeof *m);
    if (!m) {
      set_err(err, errlen, "out of memory");
      return NULL;
    }
    m->model = (__bridge_retained void *)model;
    if (!read_signature(m, model, err, errlen)) {
      kiln_coreml_close(m);
      return NULL;
    }
    return m;
  }
}

void kiln_coreml_close(KilnCoreML *m) {
  if (!m) return;
  if (m->model) {
    MLModel *model = (__bridge_transfer MLModel *)m->model;
    (void)model;                /* released when it goes out of scope */
  }
  for (int i = 0; m->in && i < m->nin; i++) free(m->in[i].name);
  for (int i = 0; m->out && i < m->nout; i++) free(m->out[i].name);
  free(m->in);
  free(m->out);
  free(m);
}

int kiln_coreml_num_inputs(const KilnCoreML *m) { return m->nin; }
int kiln_coreml_num_outputs(const KilnCoreML *m) { return m->nout; }
const char *kiln_coreml_input_name(const KilnCoreML *m, int i) { return i >= 0 && i < m->nin ? m->in[i].name : NULL; }
const char *kiln_coreml_output_name(const KilnCoreML *m, int i) { return i >= 0 && i < m->nout ? m->out[i].name : NULL; }
int64_t kiln_coreml_input_numel(const KilnCoreML *m, int i) { return i >= 0 && i < m->nin ? m->in[i].numel : -1; }
int64_t kiln_coreml_output_numel(const KilnCoreML *m, int i) { return i >= 0 && i < m->nout ? m->out[i].numel : -1; }

/* ---- run ---- */

static float half_to_float(uint16_t h) {
  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, f = h & 1023, bits;
  if (e == 0) {
    if (f == 0) {
      bits = s;
    } else {                    /* subnormal: normalise */
      e = 127 - 15 + 1;
      while (!(f & 1024)) f <<= 1, e--;
      bits = s | (e << 23) | ((f & 1023) << 13);
    }
  } else if (e == 31) {
    bits = s | 0x7f800000u | (f << 13);
  } else {
    bits = s | ((e + 127 - 15) << 23) | (f << 13);
  }
  float out;
  memcpy(&out, &bits, 4);
  return out;
}

/* A dense row-major MLMultiArray over the caller's buffer (no copy). */
static MLMultiArray *wrap_input(const Feature *f, void *data, char *err, size_t errlen) {
  NSMutableArray<NSNumber *> *shape = [NSMutableArray arrayWithCapacity:(NSUInteger)f->rank];
  NSMutableArray<NSNumber *> *strides = [NSMutableArray arrayWithCapacity:(NSUInteger)f->rank];
  int64_t st[MAX_RANK], s = 1;
  for (int k = f->rank - 1; k >= 0; k--) st[k] = s, s *= f->shape[k];
  for (int k = 0; k < f->rank; k++) {
    [shape addObject:[NSNumber numberWithLongLong:f->shape[k]]];
    [strides addObject:[NSNumber numberWithLongLong:st[k]]];
  }
  NSError *e = nil;
  MLMultiArray *a = [[MLMultiArray alloc] initWithDataPointer:data shape:shape
                                                     dataType:f->kind == KIND_F32 ? MLMultiArrayDataTypeFloat32 : MLMultiArrayDataTypeInt32
                                                      strides:strides deallocator:nil error:&e];
  if (!a) set_err(err, errlen, "input %s: %s", f->name, describe(e));
  return a;
}

/* Copies a (any strides, fp16/fp32/double/int32) into the dense buffer dst of f's type. */
static void copy_strided(const Feature *f, const void *base, MLMultiArrayDataType dt, const int64_t *stride, void *dst) {
  for (int64_t i = 0; i < f->numel; i++) {
    int64_t rem = i, off = 0;
    for (int k = f->rank - 1; k >= 0; k--) {
      off += (rem % f->shape[k]) * stride[k];
      rem /= f->shape[k];
    }
    double v;
    if (dt == MLMultiArrayDataTypeFloat32) v = ((const float *)base)[off];
    else if (dt == MLMultiArrayDataTypeDouble) v = ((const double *)base)[off];
    else if (dt == MLMultiArrayDataTypeInt32) v = ((const int32_t *)base)[off];
    else v = half_to_float(((const uint16_t *)base)[off]);
    if (f->kind == KIND_F32) ((float *)dst)[i] = (float)v;
    else if (f->kind == KIND_I32) ((int32_t *)dst)[i] = (int32_t)v;
    else ((uint8_t *)dst)[i] = v != 0;
  }
}

static BOOL read_output(const Feature *f, MLMultiArray *a, void *dst, char *err, size_t errlen) {
  if (!a || (int)a.shape.count != f->rank) {
    set_err(err, errlen, "output %s: missing, or not rank %d", f->name, f->rank);
    return NO;
  }
  int64_t stride[MAX_RANK];
  for (int k = 0; k < f->rank; k++) {
    if (a.shape[(NSUInteger)k].longLongValue != f->shape[k]) {
      set_err(err, errlen, "output %s: dim %d is %lld, expected %lld", f->name, k, a.shape[(NSUInteger)k].longLongValue, (long long)f->shape[k]);
      return NO;
    }
    stride[k] = a.strides[(NSUInteger)k].longLongValue;
  }
  MLMultiArrayDataType dt = a.dataType;
  const int64_t *st = stride;   /* blocks cannot capture arrays */
  if (@available(macOS 12.3, iOS 15.4, tvOS 15.4, watchOS 8.5, *)) {
    [a getBytesWithHandler:^(const void *bytes, NSInteger size) {
      (void)size;
      copy_strided(f, bytes, dt, st, dst);
    }];
  } else {
    copy_strided(f, a.dataPointer, dt, stride, dst);
  }
  return YES;
}

/* The prediction itself; widened[i] receives the int32 copy of bool input i. */
static BOOL predict(KilnCoreML *m, const void *const *inputs, void *const *outputs, int32_t **widened, char *err, size_t errlen) {
  MLModel *model = (__bridge MLModel *)m->model;
  NSMutableDictionary<NSString *, id> *feeds = [NSMutableDictionary dictionaryWithCapacity:(NSUInteger)m->nin];
  for (int i = 0; i < m->nin; i++) {
    const Feature *f = &m->in[i];
    void *data = (void *)inputs[i];     /* Core ML reads inputs only */
    if (f->kind == KIND_BOOL) {         /* bools travel as int32 */
      widened[i] = malloc(sizeof(int32_t) * (size_t)(f->numel + 1));
      if (!widened[i]) {
        set_err(err, errlen, "out of memory");
        return NO;
      }
      for (int64_t k = 0; k < f->numel; k++) widened[i][k] = ((const uint8_t *)inputs[i])[k] != 0;
      data = widened[i];
    }
    MLMultiArray *a = wrap_input(f, data, err, errlen);
    if (!a) return NO;
    feeds[[NSString stringWithUTF8String:f->name]] = [MLFeatureValue featureValueWithMultiArray:a];
  }
  NSError *e = nil;
  MLDictionaryFeatureProvider *fp = [[MLDictionaryFeatureProvider alloc] initWithDictionary:feeds error:&e];
  if (!fp) {
    set_err(err, errlen, "inputs: %s", describe(e));
    return NO;
  }
  id<MLFeatureProvider> result = [model predictionFromFeatures:fp error:&e];
  if (!result) {
    set_err(err, errlen, "Core ML prediction failed: %s", describe(e));
    return NO;
  }
  for (int i = 0; i < m->nout; i++) {
    MLFeatureValue *v = [result featureValueForName:[NSString stringWithUTF8String:m->out[i].name]];
    if (!read_output(&m->out[i], v.multiArrayValue, outputs[i], err, errlen)) return NO;
  }
  return YES;
}

int kiln_coreml_run_v(KilnCoreML *m, const void *const *inputs, void *const *outputs, char *err, size_t errlen) {
  int32_t **widened = calloc((size_t)m->nin + 1, sizeof *widened);
  if (!widened) {
    set_err(err, errlen, "out of memory");
    return -1;
  }
  BOOL ok;
  @autoreleasepool {
    ok = predict(m, inputs, outputs, widened, err, errlen);
  }
  for (int i = 0; i < m->nin; i++) free(widened[i]);
  free(widened);
  return ok ? 0 : -1;
}
