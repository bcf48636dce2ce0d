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
 * types come from Core ML's own description. Nor has it int64 arrays: the inputs
 * named in kiln.i64_inputs are INT32 in the package and int64_t for the caller.
 *
 * Entry points: a package whose metadata has kiln.entries is a multifunction
 * ML Program. The first load (no function name: Core ML's default function) is
 * the whole model of a one-function package; for a multifunction one it only reads
 * that list, then each entry is loaded on its own with
 * MLModelConfiguration.functionName = the entry, and its signature read from
 * kiln.<entry>.inputs/outputs/bool_features. States (kiln.states) are checked
 * against each entry's stateDescriptionsByName. A KilnCoreMLState holds the
 * MLState(s): one shared by every entry, or one per entry with a copy of the
 * buffers whenever the entry changes (KilnCoreMLStateMode says why both exist).
 *
 * run = check that every value of every i64 input fits int32 (the C entry's check:
 * KILN_COREML_E_RANGE before anything runs), wrap each caller buffer in an
 * MLMultiArray without copying (bool inputs are widened, i64 ones narrowed, to
 * int32 first), predict (predictionFromFeatures:usingState:error:
 * with a state), then copy each output element by element through the array's
 * *strides* into the caller's dense buffer, converting fp16/fp32/double/int32 to
 * the declared element type. Never assume an output is dense: on the Neural
 * Engine the innermost dimension is padded.
 *
 * Collections are read with objectAtIndex:/objectForKey: rather than subscripts,
 * so the same source also builds on GCC's Objective-C runtime (no subscripting
 * there), which is what the Linux mock test runs on.
 *
 * Built with ARC (-fobjc-arc). On Linux it is compile-checked against the stub
 * headers in stub/ and driven through a fake Core ML (tests/coreml/mock/, without
 * ARC); nothing here has run on Apple hardware (see docs/coreml.md).
 */
#import <CoreML/CoreML.h>
#import <Foundation/Foundation.h>

#include "kiln_coreml.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_F32, KIND_I32, KIND_BOOL, KIND_I64 };   /* I64: an input the package holds as INT32 */
enum { MAX_RANK = 8 };

typedef struct {
  char *name;
  int kind;
  int rank;
  int64_t shape[MAX_RANK];
  int64_t numel;
} Feature;

/* One entry point: one Core ML model loaded for one function of the package. */
typedef struct {
  char *name;                   /* the entry (function) name; "main" for a one-function package */
  void *model;                  /* MLModel *, retained with __bridge_retained */
  int nin, nout;
  Feature *in, *out;
} Entry;

struct KilnCoreML {
  int nentries;
  Entry *entries;
  int nstates;
  Feature *states;              /* name and shape from Core ML's state description (fp16) */
};

struct KilnCoreMLState {
  KilnCoreML *m;
  KilnCoreMLStateMode mode;
  void **st;                    /* MLState *: [0] only (SHARED) or one per entry (PER_ENTRY) */
  int current;                  /* PER_ENTRY: entry whose MLState holds the latest values */
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
  NSString *s = [md objectForKey:key];
  if (!s || s.length == 0) return [NSMutableArray arrayWithCapacity:0];
  return [s componentsSeparatedByString:@","];
}

static BOOL contains(NSArray<NSString *> *list, NSString *s) {
  for (NSUInteger i = 0; i < list.count; i++)
    if ([[list objectAtIndex:i] isEqualToString:s]) return YES;
  return NO;
}

/* Fills f's name, rank, shape and numel from a shape array. */
static BOOL set_shape(Feature *f, NSString *name, NSArray<NSNumber *> *shape, char *err, size_t errlen) {
  if (shape.count > MAX_RANK) {
    set_err(err, errlen, "feature %s has rank %lu", name.UTF8String, (unsigned long)shape.count);
    return NO;
  }
  f->name = strdup(name.UTF8String);
  f->rank = (int)shape.count;
  f->numel = 1;
  for (int k = 0; k < f->rank; k++) {
    f->shape[k] = [shape objectAtIndex:(NSUInteger)k].longLongValue;
    f->numel *= f->shape[k];
  }
  return YES;
}

/* Fills f from Core ML's description of feature `name` of entry `entry`; kind
 * KIND_BOOL or KIND_I64 (the metadata's word, which must agree with an INT32
 * description) overrides the description's type. */
static BOOL describe_feature(Feature *f, const char *entry, NSString *name, MLFeatureDescription *fd, int kind,
                             char *err, size_t errlen) {
  MLMultiArrayConstraint *c = fd.multiArrayConstraint;
  if (!c) {
    set_err(err, errlen, "entry %s: feature %s is missing or not a multi-array", entry, name.UTF8String);
    return NO;
  }
  BOOL i32 = c.dataType == MLMultiArrayDataTypeInt32;
  if (kind == KIND_I64 && !i32) {
    set_err(err, errlen, "entry %s: i64 input %s is not INT32 in the package", entry, name.UTF8String);
    return NO;
  }
  f->kind = kind != KIND_F32 ? kind : i32 ? KIND_I32 : KIND_F32;
  return set_shape(f, name, c.shape, err, errlen);
}

/* The entry's inputs and outputs: order and bools from the metadata under `prefix`
 * ("kiln." or "kiln.<entry>."), shapes and types from the loaded model's description. */
static BOOL read_signature(Entry *en, MLModel *model, NSString *prefix, char *err, size_t errlen) {
  MLModelDescription *desc = model.modelDescription;
  NSDictionary *md = [desc.metadata objectForKey:MLModelCreatorDefinedKey];
  NSArray<NSString *> *ins = split_list(md, [prefix stringByAppendingString:@"inputs"]);
  NSArray<NSString *> *outs = split_list(md, [prefix stringByAppendingString:@"outputs"]);
  NSArray<NSString *> *bools = split_list(md, [prefix stringByAppendingString:@"bool_features"]);
  NSArray<NSString *> *i64s = split_list(md, [prefix stringByAppendingString:@"i64_inputs"]);   /* absent: none */
  if (outs.count == 0) {
    set_err(err, errlen, "entry %s: the model has no %soutputs metadata: not built by Kiln?", en->name, prefix.UTF8String);
    return NO;
  }
  en->nin = (int)ins.count;
  en->nout = (int)outs.count;
  en->in = calloc((size_t)en->nin + 1, sizeof(Feature));
  en->out = calloc((size_t)en->nout + 1, sizeof(Feature));
  if (!en->in || !en->out) {
    set_err(err, errlen, "out of memory");
    return NO;
  }
  for (int i = 0; i < en->nin; i++) {
    NSString *n = [ins objectAtIndex:(NSUInteger)i];
    int kind = contains(bools, n) ? KIND_BOOL : contains(i64s, n) ? KIND_I64 : KIND_F32;
    if (!describe_feature(&en->in[i], en->name, n, [desc.inputDescriptionsByName objectForKey:n], kind, err, errlen)) return NO;
  }
  for (int i = 0; i < en->nout; i++) {
    NSString *n = [outs objectAtIndex:(NSUInteger)i];
    if (!describe_feature(&en->out[i], en->name, n, [desc.outputDescriptionsByName objectForKey:n],
                          contains(bools, n) ? KIND_BOOL : KIND_F32, err, errlen))
      return NO;
  }
  return YES;
}

/* Checks that every state in kiln.states is described by the entry's model as a
 * state, and (first entry) records the shapes; later entries must agree, since the
 * state object is shared by all of them. */
static BOOL read_states(KilnCoreML *m, const Entry *en, MLModel *model, NSArray<NSString *> *names, char *err, size_t errlen) {
  if (@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, *)) {
    NSDictionary<NSString *, MLFeatureDescription *> *sd = model.modelDescription.stateDescriptionsByName;
    for (int i = 0; i < (int)names.count; i++) {
      NSString *n = [names objectAtIndex:(NSUInteger)i];
      MLStateConstraint *c = [sd objectForKey:n].stateConstraint;
      if (!c) {
        set_err(err, errlen, "entry %s: state %s is not described as a state by Core ML", en->name, n.UTF8String);
        return NO;
      }
      Feature f = {0};
      if (!set_shape(&f, n, c.bufferShape, err, errlen)) return NO;
      if (!m->states[i].name) {
        m->states[i] = f;
        continue;
      }
      BOOL same = f.rank == m->states[i].rank;
      for (int k = 0; same && k < f.rank; k++) same = f.shape[k] == m->states[i].shape[k];
      free(f.name);
      if (!same) {
        set_err(err, errlen, "entry %s: state %s has another shape than in entry %s", en->name, n.UTF8String, m->entries[0].name);
        return NO;
      }
    }
    return YES;
  }
  set_err(err, errlen, "the model has states (kiln.states): Core ML runs them from iOS 18 / macOS 15");
  return NO;
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

/* Loads the compiled model at url for function `fn` (nil: the default function). */
static MLModel *load_model(NSURL *url, KilnCoreMLUnits units, NSString *fn, char *err, size_t errlen) {
  MLModelConfiguration *cfg = [[MLModelConfiguration alloc] init];
  cfg.computeUnits = compute_units(units);
  if (fn) {
    if (@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, *)) {
      cfg.functionName = fn;
    } else {
      set_err(err, errlen, "the package has entry points (Core ML functions): they need iOS 18 / macOS 15");
      return nil;
    }
  }
  NSError *e = nil;
  MLModel *model = [MLModel modelWithContentsOfURL:url configuration:cfg error:&e];
  if (!model)
    set_err(err, errlen, "Core ML could not load %s%s%s: %s", url.path.UTF8String, fn ? " function " : "",
            fn ? fn.UTF8String : "", describe(e));
  return model;
}

/* Fills entry en, named `name`, from its loaded model (fn: its function name, nil
 * for a one-function package). */
static BOOL open_entry(KilnCoreML *m, Entry *en, MLModel *model, NSString *name, NSString *fn, NSArray<NSString *> *states,
                       char *err, size_t errlen) {
  en->name = strdup(name.UTF8String);
  en->model = (__bridge_retained void *)model;
  NSString *prefix = fn ? [NSString stringWithFormat:@"kiln.%@.", fn] : @"kiln.";
  if (!read_signature(en, model, prefix, err, errlen)) return NO;
  return states.count == 0 || read_states(m, en, model, states, err, errlen);
}

/* Loads the default function and reads the entry and state lists from it. A
 * one-function package is that model; a multifunction one loads each entry again
 * under its own function name (explicit, rather than trusting that the default is
 * entry 0). */
static BOOL open_entries(KilnCoreML *m, NSURL *url, KilnCoreMLUnits units, char *err, size_t errlen) {
  MLModel *probe = load_model(url, units, nil, err, errlen);
  if (!probe) return NO;
  NSDictionary *md = [probe.modelDescription.metadata objectForKey:MLModelCreatorDefinedKey];
  NSArray<NSString *> *entries = split_list(md, @"kiln.entries"), *states = split_list(md, @"kiln.states");
  BOOL multi = entries.count > 0;
  m->nentries = multi ? (int)entries.count : 1;
  m->nstates = (int)states.count;
  m->entries = calloc((size_t)m->nentries, sizeof(Entry));
  m->states = calloc((size_t)m->nstates + 1, sizeof(Feature));
  if (!m->entries || !m->states) {
    set_err(err, errlen, "out of memory");
    return NO;
  }
  if (!multi) return open_entry(m, &m->entries[0], probe, @"main", nil, states, err, errlen);
  probe = nil;
  for (int e = 0; e < m->nentries; e++) {
    NSString *name = [entries objectAtIndex:(NSUInteger)e];
    MLModel *model = load_model(url, units, name, err, errlen);
    if (!model || !open_entry(m, &m->entries[e], model, name, name, states, err, errlen)) return NO;
  }
  return YES;
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
    KilnCoreML *m = calloc(1, sizeof *m);
    if (!m) {
      set_err(err, errlen, "out of memory");
      return NULL;
    }
    if (!open_entries(m, url, units, err, errlen)) {
      kiln_coreml_close(m);
      return NULL;
    }
    return m;
  }
}

static void free_features(Feature *f, int n) {
  for (int i = 0; f && i < n; i++) free(f[i].name);
  free(f);
}

void kiln_coreml_close(KilnCoreML *m) {
  if (!m) return;
  for (int e = 0; m->entries && e < m->nentries; e++) {
    Entry *en = &m->entries[e];
    if (en->model) {
      MLModel *model = (__bridge_transfer MLModel *)en->model;
      (void)model;              /* released when it goes out of scope */
    }
    free(en->name);
    free_features(en->in, en->nin);
    free_features(en->out, en->nout);
  }
  free(m->entries);
  free_features(m->states, m->nstates);
  free(m);
}

/* ---- queries ---- */

static const Entry *entry_at(const KilnCoreML *m, int e) { return e >= 0 && e < m->nentries ? &m->entries[e] : NULL; }

int kiln_coreml_num_entries(const KilnCoreML *m) { return m->nentries; }
const char *kiln_coreml_entry_name(const KilnCoreML *m, int e) { return entry_at(m, e) ? m->entries[e].name : NULL; }

int kiln_coreml_entry_index(const KilnCoreML *m, const char *name) {
  for (int e = 0; name && e < m->nentries; e++)
    if (strcmp(m->entries[e].name, name) == 0) return e;
  return -1;
}

int kiln_coreml_entry_num_inputs(const KilnCoreML *m, int e) { return entry_at(m, e) ? m->entries[e].nin : -1; }
int kiln_coreml_entry_num_outputs(const KilnCoreML *m, int e) { return entry_at(m, e) ? m->entries[e].nout : -1; }

const char *kiln_coreml_entry_input_name(const KilnCoreML *m, int e, int i) {
  const Entry *en = entry_at(m, e);
  return en && i >= 0 && i < en->nin ? en->in[i].name : NULL;
}

const char *kiln_coreml_entry_output_name(const KilnCoreML *m, int e, int i) {
  const Entry *en = entry_at(m, e);
  return en && i >= 0 && i < en->nout ? en->out[i].name : NULL;
}

int64_t kiln_coreml_entry_input_numel(const KilnCoreML *m, int e, int i) {
  const Entry *en = entry_at(m, e);
  return en && i >= 0 && i < en->nin ? en->in[i].numel : -1;
}

int64_t kiln_coreml_entry_output_numel(const KilnCoreML *m, int e, int i) {
  const Entry *en = entry_at(m, e);
  return en && i >= 0 && i < en->nout ? en->out[i].numel : -1;
}

int kiln_coreml_entry_input_is_i64(const KilnCoreML *m, int e, int i) {
  const Entry *en = entry_at(m, e);
  return en && i >= 0 && i < en->nin ? en->in[i].kind == KIND_I64 : -1;
}

int kiln_coreml_num_inputs(const KilnCoreML *m) { return kiln_coreml_entry_num_inputs(m, 0); }
int kiln_coreml_num_outputs(const KilnCoreML *m) { return kiln_coreml_entry_num_outputs(m, 0); }
const char *kiln_coreml_input_name(const KilnCoreML *m, int i) { return kiln_coreml_entry_input_name(m, 0, i); }
const char *kiln_coreml_output_name(const KilnCoreML *m, int i) { return kiln_coreml_entry_output_name(m, 0, i); }
int64_t kiln_coreml_input_numel(const KilnCoreML *m, int i) { return kiln_coreml_entry_input_numel(m, 0, i); }
int64_t kiln_coreml_output_numel(const KilnCoreML *m, int i) { return kiln_coreml_entry_output_numel(m, 0, i); }

int kiln_coreml_num_states(const KilnCoreML *m) { return m->nstates; }
const char *kiln_coreml_state_name(const KilnCoreML *m, int i) { return i >= 0 && i < m->nstates ? m->states[i].name : NULL; }
int64_t kiln_coreml_state_numel(const KilnCoreML *m, int i) { return i >= 0 && i < m->nstates ? m->states[i].numel : -1; }

/* ---- element access ---- */

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

/* Offset, in elements, of dense index i of f in an array with the given strides. */
static int64_t strided_offset(const Feature *f, int64_t i, const int64_t *stride) {
  int64_t off = 0;
  for (int k = f->rank - 1; k >= 0; k--) {
    off += (i % f->shape[k]) * stride[k];
    i /= f->shape[k];
  }
  return off;
}

/* Copies a (any strides, fp16/fp32/double/int32) into the dense buffer dst of f's type. */
static void copy_strided(const Feature *f, const void *base, MLMultiArrayDataType dt, const int64_t *stride, void *dst) {
  for (int64_t i = 0; i < f->numel; i++) {
    int64_t off = strided_offset(f, i, stride);
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

/* Checks that a has f's shape and stores its strides; what = "output" or "state". */
static BOOL check_array(const Feature *f, MLMultiArray *a, const char *what, int64_t *stride, char *err, size_t errlen) {
  if (!a || (int)a.shape.count != f->rank) {
    set_err(err, errlen, "%s %s: missing, or not rank %d", what, f->name, f->rank);
    return NO;
  }
  for (int k = 0; k < f->rank; k++) {
    long long dim = [a.shape objectAtIndex:(NSUInteger)k].longLongValue;
    if (dim != f->shape[k]) {
      set_err(err, errlen, "%s %s: dim %d is %lld, expected %lld", what, f->name, k, dim,
              (long long)f->shape[k]);
      return NO;
    }
    stride[k] = [a.strides objectAtIndex:(NSUInteger)k].longLongValue;
  }
  return YES;
}

/* Copies array a (output or state f) into the dense buffer dst, by a's strides. */
static BOOL read_array(const Feature *f, MLMultiArray *a, const char *what, void *dst, char *err, size_t errlen) {
  int64_t stride[MAX_RANK];
  if (!check_array(f, a, what, stride, err, errlen)) return NO;
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

/* ---- run ---- */

/* A dense row-major MLMultiArray over the caller's buffer (no copy). An i32 scalar
 * (a position) is shape [1], INT32, as the package describes it. */
static MLMultiArray *wrap_input(const char *entry, const Feature *f, void *data, char *err, size_t errlen) {
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
  if (!a) set_err(err, errlen, "entry %s: input %s: %s", entry, f->name, describe(e));
  return a;
}

/* The feature provider for entry en's inputs; widened[i] receives the int32 copy of
 * bool input i, or of i64 input i narrowed (check_i64 has passed: every value fits). */
static MLDictionaryFeatureProvider *make_inputs(const Entry *en, const void *const *inputs, int32_t **widened, char *err,
                                                size_t errlen) {
  NSMutableDictionary<NSString *, id> *feeds = [NSMutableDictionary dictionaryWithCapacity:(NSUInteger)en->nin];
  for (int i = 0; i < en->nin; i++) {
    const Feature *f = &en->in[i];
    void *data = (void *)inputs[i];     /* Core ML reads inputs only */
    if (f->kind == KIND_BOOL) {         /* bools travel as int32 */
      widened[i] = malloc(sizeof(int32_t) * (size_t)(f->numel + 1));
      if (!widened[i]) {
        set_err(err, errlen, "out of memory");
        return nil;
      }
      for (int64_t k = 0; k < f->numel; k++) widened[i][k] = ((const uint8_t *)inputs[i])[k] != 0;
      data = widened[i];
    } else if (f->kind == KIND_I64) {   /* int64 values travel narrowed to int32 */
      widened[i] = malloc(sizeof(int32_t) * (size_t)(f->numel + 1));
      if (!widened[i]) {
        set_err(err, errlen, "out of memory");
        return nil;
      }
      for (int64_t k = 0; k < f->numel; k++) widened[i][k] = (int32_t)((const int64_t *)inputs[i])[k];
      data = widened[i];
    }
    MLMultiArray *a = wrap_input(en->name, f, data, err, errlen);
    if (!a) return nil;
    [feeds setObject:[MLFeatureValue featureValueWithMultiArray:a] forKey:[NSString stringWithUTF8String:f->name]];
  }
  NSError *e = nil;
  MLDictionaryFeatureProvider *fp = [[MLDictionaryFeatureProvider alloc] initWithDictionary:feeds error:&e];
  if (!fp) set_err(err, errlen, "entry %s: inputs: %s", en->name, describe(e));
  return fp;
}

static BOOL copy_state_buffers(KilnCoreMLState *s, int from, int to, char *err, size_t errlen);

/* The C entry's check of entry en's i64 inputs, every element in input order: YES when
 * every value fits int32, else NO with a message naming the entry, the first offender's
 * input, element index and value. */
static BOOL check_i64(const Entry *en, const void *const *inputs, char *err, size_t errlen) {
  for (int i = 0; i < en->nin; i++) {
    if (en->in[i].kind != KIND_I64) continue;
    const int64_t *v = (const int64_t *)inputs[i];
    for (int64_t k = 0; k < en->in[i].numel; k++)
      if (v[k] < INT32_MIN || v[k] > INT32_MAX) {
        set_err(err, errlen, "kiln_coreml: entry %s: i64 input %s[%lld] = %lld is outside the int32 range; nothing was run",
                en->name, en->in[i].name, (long long)k, (long long)v[k]);
        return NO;
      }
  }
  return YES;
}

/* The MLState entry e predicts with (after bringing it up to date), or nil. */
static MLState *state_for(KilnCoreMLState *s, int e, char *err, size_t errlen) {
  if (s->mode == KILN_COREML_STATE_SHARED) return (__bridge MLState *)s->st[0];
  if (s->current >= 0 && s->current != e && !copy_state_buffers(s, s->current, e, err, errlen)) return nil;
  s->current = e;
  return (__bridge MLState *)s->st[e];
}

/* The prediction itself, with or without state. */
static BOOL predict(KilnCoreML *m, int e, KilnCoreMLState *s, const void *const *inputs, void *const *outputs,
                    int32_t **widened, char *err, size_t errlen) {
  const Entry *en = &m->entries[e];
  MLModel *model = (__bridge MLModel *)en->model;
  MLDictionaryFeatureProvider *fp = make_inputs(en, inputs, widened, err, errlen);
  if (!fp) return NO;
  NSError *ne = nil;
  id<MLFeatureProvider> result = nil;
  if (s) {
    if (@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, *)) {
      MLState *st = state_for(s, e, err, errlen);
      if (!st) return NO;
      result = [model predictionFromFeatures:fp usingState:st error:&ne];
    } else {                    /* unreachable: kiln_coreml_state_new fails there */
      set_err(err, errlen, "entry %s: states need iOS 18 / macOS 15 (MLState)", en->name);
      return NO;
    }
  } else {
    result = [model predictionFromFeatures:fp error:&ne];
  }
  if (!result) {
    set_err(err, errlen, "entry %s: Core ML prediction failed: %s", en->name, describe(ne));
    return NO;
  }
  for (int i = 0; i < en->nout; i++) {
    MLFeatureValue *v = [result featureValueForName:[NSString stringWithUTF8String:en->out[i].name]];
    if (!read_array(&en->out[i], v.multiArrayValue, "output", outputs[i], err, errlen)) {
      size_t n = strlen(err);   /* name the entry too */
      if (n + 1 < errlen) snprintf(err + n, errlen - n, " (entry %s)", en->name);
      return NO;
    }
  }
  return YES;
}

int kiln_coreml_call(KilnCoreML *m, int e, KilnCoreMLState *s, const void *const *inputs, void *const *outputs, char *err,
                     size_t errlen) {
  if (!entry_at(m, e)) {
    set_err(err, errlen, "no entry %d (the model has %d)", e, m->nentries);
    return -1;
  }
  if (m->nstates > 0 && !s) {
    set_err(err, errlen, "entry %s: the model has states: pass a KilnCoreMLState (kiln_coreml_state_new)", m->entries[e].name);
    return -1;
  }
  if (s && s->m != m) {
    set_err(err, errlen, "entry %s: the state was made for another KilnCoreML", m->entries[e].name);
    return -1;
  }
  if (!check_i64(&m->entries[e], inputs, err, errlen)) return KILN_COREML_E_RANGE;
  int32_t **widened = calloc((size_t)m->entries[e].nin + 1, sizeof *widened);
  if (!widened) {
    set_err(err, errlen, "out of memory");
    return -1;
  }
  BOOL ok;
  @autoreleasepool {
    ok = predict(m, e, m->nstates > 0 ? s : NULL, inputs, outputs, widened, err, errlen);
  }
  for (int i = 0; i < m->entries[e].nin; i++) free(widened[i]);
  free(widened);
  return ok ? 0 : -1;
}

int kiln_coreml_run_v(KilnCoreML *m, const void *const *inputs, void *const *outputs, char *err, size_t errlen) {
  return kiln_coreml_call(m, 0, NULL, inputs, outputs, err, errlen);
}

/* ---- state ---- */

/* Number of MLStates s holds: one shared, or one per entry. */
static int state_slots(const KilnCoreMLState *s) { return s->mode == KILN_COREML_STATE_SHARED ? 1 : s->m->nentries; }

/* Releases the MLStates of s (slots stay allocated). */
static void drop_states(KilnCoreMLState *s) {
  for (int i = 0; i < state_slots(s); i++) {
    if (s->st[i]) {
      MLState *st = (__bridge_transfer MLState *)s->st[i];
      (void)st;                 /* released when it goes out of scope */
      s->st[i] = NULL;
    }
  }
}

/* New MLStates from Core ML (zero-filled, per Apple's documentation of newState):
 * slot i made by entry i's model. */
static BOOL make_states(KilnCoreMLState *s, char *err, size_t errlen) {
  if (@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, *)) {
    for (int i = 0; i < state_slots(s); i++) {
      MLModel *model = (__bridge MLModel *)s->m->entries[i].model;
      MLState *st = [model newState];
      if (!st) {
        set_err(err, errlen, "entry %s: Core ML made no state", s->m->entries[i].name);
        return NO;
      }
      s->st[i] = (__bridge_retained void *)st;
    }
    s->current = -1;
    return YES;
  }
  set_err(err, errlen, "states need iOS 18 / macOS 15 (MLState)");
  return NO;
}

KilnCoreMLState *kiln_coreml_state_new(KilnCoreML *m, KilnCoreMLStateMode mode, char *err, size_t errlen) {
  if (m->nstates == 0) {
    set_err(err, errlen, "the model has no states (no kiln.states metadata)");
    return NULL;
  }
  if (mode != KILN_COREML_STATE_SHARED && mode != KILN_COREML_STATE_PER_ENTRY) {
    set_err(err, errlen, "unknown state mode %d", (int)mode);
    return NULL;
  }
  KilnCoreMLState *s = calloc(1, sizeof *s);
  if (s) s->st = calloc((size_t)m->nentries, sizeof *s->st);
  if (!s || !s->st) {
    free(s);
    set_err(err, errlen, "out of memory");
    return NULL;
  }
  s->m = m;
  s->mode = mode;
  BOOL ok;
  @autoreleasepool {
    ok = make_states(s, err, errlen);
  }
  if (!ok) {
    kiln_coreml_state_free(s);
    return NULL;
  }
  return s;
}

int kiln_coreml_state_reset(KilnCoreMLState *s, char *err, size_t errlen) {
  BOOL ok;
  @autoreleasepool {
    drop_states(s);
    ok = make_states(s, err, errlen);
  }
  return ok ? 0 : -1;
}

void kiln_coreml_state_free(KilnCoreMLState *s) {
  if (!s) return;
  if (s->st) drop_states(s);
  free(s->st);
  free(s);
}

/* Copies state buffer f from src to dst element by element through both arrays'
 * strides (the element type must agree: fp16 in every Kiln package). */
static BOOL copy_buffer(const Feature *f, MLMultiArray *src, MLMultiArray *dst, char *err, size_t errlen) {
  int64_t ss[MAX_RANK], ds[MAX_RANK];
  if (!check_array(f, src, "state", ss, err, errlen) || !check_array(f, dst, "state", ds, err, errlen)) return NO;
  if (src.dataType != dst.dataType) {
    set_err(err, errlen, "state %s: the entries' buffers have different element types", f->name);
    return NO;
  }
  size_t size = (size_t)(src.dataType & 0xff) / 8;   /* the enum's low byte is the element's bit width */
  const int64_t *sst = ss, *dst_st = ds;
  if (@available(macOS 12.3, iOS 15.4, tvOS 15.4, watchOS 8.5, *)) {
    [src getBytesWithHandler:^(const void *from, NSInteger n1) {
      (void)n1;
      [dst getMutableBytesWithHandler:^(void *to, NSInteger n2, NSArray<NSNumber *> *strides) {
        (void)n2, (void)strides;
        for (int64_t i = 0; i < f->numel; i++)
          memcpy((char *)to + strided_offset(f, i, dst_st) * (int64_t)size,
                 (const char *)from + strided_offset(f, i, sst) * (int64_t)size, size);
      }];
    }];
    return YES;
  }
  set_err(err, errlen, "copying states needs iOS 15.4 / macOS 12.3");
  return NO;
}

/* PER_ENTRY: brings entry to's MLState up to date with entry from's, every buffer. */
static BOOL copy_state_buffers(KilnCoreMLState *s, int from, int to, char *err, size_t errlen) {
  if (@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, *)) {
    MLState *src = (__bridge MLState *)s->st[from], *dst = (__bridge MLState *)s->st[to];
    for (int i = 0; i < s->m->nstates; i++) {
      const Feature *f = &s->m->states[i];
      NSString *name = [NSString stringWithUTF8String:f->name];
      __block BOOL ok = NO;
      [src getMultiArrayForStateNamed:name handler:^(MLMultiArray *a) {
        [dst getMultiArrayForStateNamed:name handler:^(MLMultiArray *b) {
          ok = copy_buffer(f, a, b, err, errlen);
        }];
      }];
      if (!ok) return NO;
    }
    return YES;
  }
  set_err(err, errlen, "states need iOS 18 / macOS 15 (MLState)");
  return NO;
}

int kiln_coreml_state_read(KilnCoreMLState *s, int i, float *dst, char *err, size_t errlen) {
  if (i < 0 || i >= s->m->nstates) {
    set_err(err, errlen, "no state %d (the model has %d)", i, s->m->nstates);
    return -1;
  }
  __block BOOL ok = NO;
  @autoreleasepool {
    if (@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, *)) {
      int slot = s->mode == KILN_COREML_STATE_SHARED || s->current < 0 ? 0 : s->current;
      MLState *st = (__bridge MLState *)s->st[slot];
      const Feature *f = &s->m->states[i];
      Feature as_f32 = *f;      /* read as float whatever Kiln's dtype (bool states hold 0/1) */
      as_f32.kind = KIND_F32;
      const Feature *fp = &as_f32;
      [st getMultiArrayForStateNamed:[NSString stringWithUTF8String:f->name] handler:^(MLMultiArray *a) {
        ok = read_array(fp, a, "state", dst, err, errlen);
      }];
    } else {
      set_err(err, errlen, "states need iOS 18 / macOS 15 (MLState)");
    }
  }
  return ok ? 0 : -1;
}
