/*
 * mock_coreml.m — a fake Foundation + Core ML for driving runtime/coreml/kiln_coreml.m
 * on Linux (tests/t_coreml.sh, "mock"). Nothing here is Apple's: every class is
 * written for this test from the selectors the wrapper sends (declared in
 * runtime/coreml/stub/), on GCC's Objective-C runtime (libobjc), without ARC (that
 * runtime has no ARC support: objects are never freed, which a short test can
 * afford).
 *
 * What it models: compileModelAtURL copies the package's model.mlmodel into a
 * fresh directory (the "compiled model"); a load reads that protobuf (protobuf-c,
 * Kiln's own schema subset) and describes ONE function: the configuration's
 * functionName, or defaultFunctionName, as Core ML documents; newState makes fp16
 * buffers (zero, padded strides) for that function's states; a prediction checks
 * the inputs against the function's description like Core ML would (names, shape,
 * element type), then "runs": every state element grows by 1, and output element i
 * is  1000 * n + sum(inputs) + i % 7  where n is the first state's element 0 before
 * the call (the number of calls that state has seen), written fp32 with a padded
 * innermost stride. Every call the wrapper makes is logged, one line each, to the
 * file named by $KILN_MOCK_LOG: t_coreml compares that log with an expected one.
 * $KILN_MOCK_STRICT_STATE=1 makes a prediction refuse a state made by another
 * function's model (what the wrapper's PER_ENTRY mode exists for).
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coreml.pb-c.h"

typedef long NSInteger;
typedef unsigned long NSUInteger;
typedef signed char BOOL;
#define nil ((id)0)
#define YES ((BOOL)1)
#define NO ((BOOL)0)

id class_createInstance(Class cls, size_t extra);

/* Blocks runtime symbols the compiler references; the wrapper's blocks are never
 * copied (every handler is NS_NOESCAPE), so the helpers must never run. */
void *_NSConcreteStackBlock[32];
void *_NSConcreteGlobalBlock[32];
void _Block_object_assign(void *dst, const void *obj, int flags) { (void)dst, (void)obj, (void)flags; abort(); }
void _Block_object_dispose(const void *obj, int flags) { (void)obj, (void)flags; abort(); }

static FILE *mock_log(void) {
  static FILE *f;
  if (!f) {
    const char *p = getenv("KILN_MOCK_LOG");
    f = p ? fopen(p, "a") : stderr;
    if (!f) f = stderr;
  }
  return f;
}

static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(mock_log(), fmt, ap);
  va_end(ap);
  fputc('\n', mock_log());
  fflush(mock_log());
}

/* ---- Foundation ---- */

__attribute__((objc_root_class))
@interface NSObject { Class isa; }
+ (id)alloc;
+ (id)new;
- (id)init;
@end
@implementation NSObject
+ (id)alloc { return class_createInstance(self, 0); }
+ (id)new { return [[self alloc] init]; }
- (id)init { return self; }
@end

@interface NSAutoreleasePool : NSObject
- (void)drain;
@end
@implementation NSAutoreleasePool
- (void)drain {}
@end

@interface NSString : NSObject { @public char *str; }
+ (id)stringWithUTF8String:(const char *)s;
+ (id)stringWithFormat:(NSString *)format, ...;
- (const char *)UTF8String;
@end
@interface NSConstantString : NSString { @public unsigned int len; }
@end
@interface NSArray : NSObject { @public id *items; NSUInteger n, cap; }
+ (id)arrayWithCapacity:(NSUInteger)c;
- (void)addObject:(id)o;
- (NSUInteger)count;
- (id)objectAtIndex:(NSUInteger)i;
@end
@interface NSMutableArray : NSArray
@end

static NSString *str_own(char *s) {
  NSString *r = [NSString alloc];
  r->str = s;
  return r;
}

@implementation NSString
+ (id)stringWithUTF8String:(const char *)s { return str_own(strdup(s)); }
/* %@ takes an object's UTF8String; the other conversions the wrapper uses are
 * integers (%llx with flags and width) and %s. */
+ (id)stringWithFormat:(NSString *)format, ... {
  va_list ap;
  va_start(ap, format);
  char out[4096] = "", spec[32];
  size_t o = 0;
  for (const char *p = [format UTF8String]; *p && o < sizeof out - 1; p++) {
    if (*p != '%') { out[o++] = *p; continue; }
    size_t k = 1;             /* the spec runs to the conversion character */
    while (p[k] && k < sizeof spec - 2 && !strchr("@sdiuxX%", p[k])) k++;
    memcpy(spec, p, k + 1);
    spec[k + 1] = 0;
    char c = p[k];
    if (c == '@') o += (size_t)snprintf(out + o, sizeof out - o, "%s", [va_arg(ap, id) UTF8String]);
    else if (c == 's') o += (size_t)snprintf(out + o, sizeof out - o, spec, va_arg(ap, const char *));
    else if (c == '%') out[o++] = '%';
    else if (strstr(spec, "ll")) o += (size_t)snprintf(out + o, sizeof out - o, spec, va_arg(ap, long long));
    else o += (size_t)snprintf(out + o, sizeof out - o, spec, va_arg(ap, int));
    p += k;
  }
  va_end(ap);
  out[o < sizeof out ? o : sizeof out - 1] = 0;
  return [NSString stringWithUTF8String:out];
}
- (const char *)UTF8String { return str; }
- (NSUInteger)length { return strlen([self UTF8String]); }
- (BOOL)isEqualToString:(NSString *)o { return o && strcmp([self UTF8String], [o UTF8String]) == 0; }
- (NSString *)stringByAppendingString:(NSString *)o {
  size_t a = strlen([self UTF8String]), b = strlen([o UTF8String]);
  char *s = malloc(a + b + 1);
  memcpy(s, [self UTF8String], a);
  memcpy(s + a, [o UTF8String], b + 1);
  return str_own(s);
}
- (NSString *)stringByAppendingPathComponent:(NSString *)o {
  return [[self stringByAppendingString:@"/"] stringByAppendingString:o];
}
- (NSArray *)componentsSeparatedByString:(NSString *)sep {
  NSMutableArray *a = [NSMutableArray arrayWithCapacity:4];
  const char *s = [self UTF8String], *d = [sep UTF8String];
  for (;;) {
    const char *e = strstr(s, d);
    size_t n = e ? (size_t)(e - s) : strlen(s);
    char *part = malloc(n + 1);
    memcpy(part, s, n);
    part[n] = 0;
    [a addObject:str_own(part)];
    if (!e) break;
    s = e + strlen(d);
  }
  return a;
}
@end

@implementation NSConstantString
- (const char *)UTF8String { return str; }
@end

@implementation NSArray
+ (id)arrayWithCapacity:(NSUInteger)c { (void)c; return [[self alloc] init]; }
- (void)addObject:(id)o {
  if (n == cap) items = realloc(items, sizeof(id) * (cap = cap ? 2 * cap : 8));
  items[n++] = o;
}
- (NSUInteger)count { return n; }
- (id)objectAtIndex:(NSUInteger)i {
  if (i >= n) { say("FATAL index %lu of %lu", i, n); abort(); }
  return items[i];
}
- (id)firstObject { return n ? items[0] : nil; }
@end
@implementation NSMutableArray
@end

/* Keys are strings, looked up by value, kept in insertion order (the log's order). */
@interface NSDictionary : NSObject { @public NSArray *keys, *values; }
+ (id)dictionaryWithCapacity:(NSUInteger)c;
- (id)objectForKey:(id)key;
- (void)setObject:(id)obj forKey:(id)key;
- (NSArray *)keys;
@end
@interface NSMutableDictionary : NSDictionary
@end
@implementation NSDictionary
+ (id)dictionaryWithCapacity:(NSUInteger)c {
  (void)c;
  NSDictionary *d = [[self alloc] init];
  d->keys = [NSMutableArray new];
  d->values = [NSMutableArray new];
  return d;
}
- (id)objectForKey:(id)key {
  for (NSUInteger i = 0; i < [keys count]; i++)
    if ([[keys objectAtIndex:i] isEqualToString:key]) return [values objectAtIndex:i];
  return nil;
}
- (void)setObject:(id)obj forKey:(id)key { [keys addObject:key]; [values addObject:obj]; }
- (NSArray *)keys { return keys; }
@end
@implementation NSMutableDictionary
@end

@interface NSNumber : NSObject { @public long long v; }
+ (NSNumber *)numberWithLongLong:(long long)x;
- (long long)longLongValue;
@end
@implementation NSNumber
+ (NSNumber *)numberWithLongLong:(long long)x { NSNumber *r = [self new]; r->v = x; return r; }
- (long long)longLongValue { return v; }
@end

@interface NSError : NSObject { @public NSString *msg; }
+ (NSError *)with:(NSString *)m;
@end
@implementation NSError
+ (NSError *)with:(NSString *)m { NSError *e = [self new]; e->msg = m; return e; }
- (NSString *)localizedDescription { return msg; }
@end

static BOOL fail(NSError **e, NSString *m) {
  if (e) *e = [NSError with:m];
  return NO;
}

@interface NSData : NSObject { @public void *p; NSUInteger n; }
@end
@implementation NSData
+ (id)dataWithContentsOfFile:(NSString *)path options:(NSUInteger)o error:(NSError **)e {
  (void)o;
  FILE *f = fopen([path UTF8String], "rb");
  if (!f) return (id)(long)fail(e, [NSString stringWithFormat:@"cannot read %s", [path UTF8String]]);
  NSData *d = [self new];
  fseek(f, 0, SEEK_END);
  d->n = (NSUInteger)ftell(f);
  fseek(f, 0, SEEK_SET);
  d->p = malloc(d->n + 1);
  if (fread(d->p, 1, d->n, f) != d->n) d->n = 0;
  fclose(f);
  return d;
}
- (const void *)bytes { return p; }
- (NSUInteger)length { return n; }
@end

@interface NSURL : NSObject { @public NSString *path; }
+ (NSURL *)fileURLWithPath:(NSString *)p;
- (NSString *)path;
@end
@implementation NSURL
+ (NSURL *)fileURLWithPath:(NSString *)p { NSURL *u = [self new]; u->path = p; return u; }
- (NSString *)path { return path; }
@end

@interface NSFileManager : NSObject
@end
@implementation NSFileManager
+ (NSFileManager *)defaultManager { return [self new]; }
- (BOOL)fileExistsAtPath:(NSString *)p { return access([p UTF8String], F_OK) == 0; }
- (BOOL)createDirectoryAtPath:(NSString *)p withIntermediateDirectories:(BOOL)i attributes:(id)a error:(NSError **)e {
  (void)i, (void)a;
  if (mkdir([p UTF8String], 0777) == 0 || access([p UTF8String], F_OK) == 0) return YES;
  return fail(e, @"mkdir failed");
}
- (BOOL)moveItemAtURL:(NSURL *)a toURL:(NSURL *)b error:(NSError **)e {
  return rename([[a path] UTF8String], [[b path] UTF8String]) == 0 || fail(e, @"rename failed");
}
- (BOOL)removeItemAtURL:(NSURL *)u error:(NSError **)e { (void)u, (void)e; return YES; }
@end

id NSSearchPathForDirectoriesInDomains(NSUInteger d, NSUInteger m, BOOL t) {
  (void)d, (void)m, (void)t;
  return [NSMutableArray arrayWithCapacity:0];   /* no caches directory: the test passes cache_dir */
}

/* ---- Core ML ---- */

NSString *const MLModelCreatorDefinedKey = @"MLModelCreatorDefinedKey";

enum { DT_F32 = 0x10020, DT_F64 = 0x10040, DT_F16 = 0x10010, DT_I32 = 0x20020 };

static const char *dt_name(NSInteger dt) {
  return dt == DT_F32 ? "fp32" : dt == DT_F16 ? "fp16" : dt == DT_I32 ? "int32" : dt == DT_F64 ? "double" : "?";
}

static NSArray *numbers(const int64_t *v, size_t n) {
  NSMutableArray *a = [NSMutableArray arrayWithCapacity:n];
  for (size_t i = 0; i < n; i++) [a addObject:[NSNumber numberWithLongLong:v[i]]];
  return a;
}

/* "[2, 3]" of an NSArray of NSNumber. */
static const char *dims(NSArray *a) {
  static char buf[8][128];
  static int k;
  char *s = buf[k++ % 8];
  size_t o = (size_t)snprintf(s, 128, "[");
  for (NSUInteger i = 0; i < [a count]; i++) o += (size_t)snprintf(s + o, 128 - o, "%s%lld", i ? ", " : "", [[a objectAtIndex:i] longLongValue]);
  snprintf(s + o, 128 - o, "]");
  return s;
}

@interface MLMultiArrayConstraint : NSObject { @public NSArray *shape; NSInteger dataType; }
@end
@implementation MLMultiArrayConstraint
- (NSArray *)shape { return shape; }
- (NSInteger)dataType { return dataType; }
@end
@interface MLStateConstraint : NSObject { @public NSArray *bufferShape; NSInteger dataType; }
@end
@implementation MLStateConstraint
- (NSArray *)bufferShape { return bufferShape; }
- (NSInteger)dataType { return dataType; }
@end

@interface MLFeatureDescription : NSObject { @public NSString *name; id array, state; }
+ (id)from:(CoreML__Specification__FeatureDescription *)fd;
@end
@implementation MLFeatureDescription
+ (id)from:(CoreML__Specification__FeatureDescription *)fd {
  MLFeatureDescription *d = [self new];
  d->name = [NSString stringWithUTF8String:fd->name];
  CoreML__Specification__FeatureType *t = fd->type;
  if (t && t->type_case == CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE) {
    MLMultiArrayConstraint *c = [MLMultiArrayConstraint new];
    c->shape = numbers(t->multiarraytype->shape, t->multiarraytype->n_shape);
    c->dataType = t->multiarraytype->datatype;
    d->array = c;
  } else if (t && t->type_case == CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE) {
    MLStateConstraint *c = [MLStateConstraint new];
    c->bufferShape = numbers(t->statetype->arraytype->shape, t->statetype->arraytype->n_shape);
    c->dataType = t->statetype->arraytype->datatype;
    d->state = c;
  }
  return d;
}
- (NSString *)name { return name; }
- (id)multiArrayConstraint { return array; }
- (id)stateConstraint { return state; }
@end

@interface MLModelDescription : NSObject { @public NSDictionary *ins, *outs, *states, *metadata; }
@end
@implementation MLModelDescription
- (NSDictionary *)inputDescriptionsByName { return ins; }
- (NSDictionary *)outputDescriptionsByName { return outs; }
- (NSDictionary *)stateDescriptionsByName { return states; }
- (NSDictionary *)metadata { return metadata; }
@end

@interface MLMultiArray : NSObject { @public void *data; NSArray *shape, *strides; NSInteger dataType; }
+ (MLMultiArray *)zeros:(NSArray *)shape type:(NSInteger)dt pad:(int)pad;
@end
@implementation MLMultiArray
/* A new array with the innermost dimension padded by `pad` elements. */
+ (MLMultiArray *)zeros:(NSArray *)shp type:(NSInteger)dt pad:(int)pad {
  MLMultiArray *a = [self new];
  NSUInteger r = [shp count];
  int64_t st[8], s = 1;
  for (NSUInteger k = r; k-- > 0;) {
    st[k] = s;
    s *= [[shp objectAtIndex:k] longLongValue] + (k == r - 1 ? pad : 0);
  }
  a->shape = shp;
  a->strides = numbers(st, r);
  a->dataType = dt;
  a->data = calloc((size_t)s + 1, (size_t)(dt & 0xff) / 8);
  return a;
}
- (id)initWithDataPointer:(void *)p shape:(NSArray *)s dataType:(NSInteger)dt strides:(NSArray *)st
              deallocator:(id)d error:(NSError **)e {
  (void)d, (void)e;
  data = p, shape = s, dataType = dt, strides = st;
  return self;
}
- (void *)dataPointer { return data; }
- (NSInteger)dataType { return dataType; }
- (NSArray *)shape { return shape; }
- (NSArray *)strides { return strides; }
- (NSInteger)count {
  NSInteger n = 1;
  for (NSUInteger k = 0; k < [shape count]; k++) n *= (NSInteger)[[shape objectAtIndex:k] longLongValue];
  return n;
}
- (void)getBytesWithHandler:(void (^)(const void *bytes, NSInteger size))h { h(data, [self count] * (dataType & 0xff) / 8); }
- (void)getMutableBytesWithHandler:(void (^)(void *bytes, NSInteger size, NSArray *strides))h {
  h(data, [self count] * (dataType & 0xff) / 8, strides);
}
@end

@interface MLFeatureValue : NSObject { @public MLMultiArray *a; }
@end
@implementation MLFeatureValue
+ (id)featureValueWithMultiArray:(MLMultiArray *)x { MLFeatureValue *v = [self new]; v->a = x; return v; }
- (MLMultiArray *)multiArrayValue { return a; }
@end

@interface MLDictionaryFeatureProvider : NSObject { @public NSDictionary *d; }
- (NSDictionary *)dict;
@end
@implementation MLDictionaryFeatureProvider
- (id)initWithDictionary:(NSDictionary *)x error:(NSError **)e { (void)e; d = x; return self; }
- (id)featureValueForName:(NSString *)n { return [d objectForKey:n]; }
- (NSDictionary *)dict { return d; }
@end

@interface MLModelConfiguration : NSObject { @public NSInteger units; NSString *fn; }
@end
@implementation MLModelConfiguration
- (NSInteger)computeUnits { return units; }
- (void)setComputeUnits:(NSInteger)u { units = u; }
- (NSString *)functionName { return fn; }
- (void)setFunctionName:(NSString *)f { fn = f; }
@end

@interface MLState : NSObject { @public int serial; const char *maker; NSDictionary *buffers; }
@end
@implementation MLState
- (void)getMultiArrayForStateNamed:(NSString *)n handler:(void (^)(MLMultiArray *buffer))h {
  say("  state#%d buffer %s", serial, [n UTF8String]);
  h([buffers objectForKey:n]);
}
@end

static float h2f(uint16_t h) {       /* fp16 -> float for the small integers the mock stores */
  int e = (h >> 10) & 31, m = h & 1023;
  return e == 0 ? m / 16777216.0f : (float)(1024 + m) * (float)(1 << e) / (1024.0f * 32768.0f);
}
static uint16_t f2h(float v) {       /* positive integers below 2048, exactly */
  if (v < 1) return 0;
  int e = 0;
  while ((float)(1 << (e + 1)) <= v) e++;
  return (uint16_t)(((e + 15) << 10) | (int)((v / (float)(1 << e) - 1) * 1024));
}

@interface MLModel : NSObject { @public
  CoreML__Specification__FeatureDescription **in, **out, **st;
  size_t nin, nout, nst;
  const char *fn;
  int serial;
  MLModelDescription *desc;
}
@end

static int model_serial, state_serial;

/* Dense index i of an array of `shape` -> element offset by `strides`. */
static long long offset_of(NSArray *shape, NSArray *strides, long long i) {
  long long off = 0;
  for (NSUInteger k = [shape count]; k-- > 0;) {
    long long d = [[shape objectAtIndex:k] longLongValue];
    off += (i % d) * [[strides objectAtIndex:k] longLongValue];
    i /= d;
  }
  return off;
}

static double element(MLMultiArray *a, long long off) {
  NSInteger dt = [a dataType];
  if (dt == DT_I32) return ((int32_t *)[a dataPointer])[off];   /* apart: through ?: with floats it would round to float */
  return dt == DT_F16 ? h2f(((uint16_t *)[a dataPointer])[off]) : ((float *)[a dataPointer])[off];
}

@implementation MLModel
+ (NSURL *)compileModelAtURL:(NSURL *)url error:(NSError **)e {
  const char *pkg = [[url path] UTF8String], *slash = strrchr(pkg, '/');
  say("compile %s", slash ? slash + 1 : pkg);
  const char *tmp = getenv("KILN_MOCK_TMP");   /* on the cache's file system: the wrapper renames it */
  char dir[1024], cmd[4096];
  snprintf(dir, sizeof dir, "%s/compiled-XXXXXX", tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return (NSURL *)(long)fail(e, @"mkdtemp failed");
  snprintf(cmd, sizeof cmd, "cp '%s/Data/com.apple.CoreML/model.mlmodel' '%s/model.mlmodel'", pkg, dir);
  if (system(cmd) != 0) return (NSURL *)(long)fail(e, @"no model.mlmodel in the package");
  return [NSURL fileURLWithPath:[NSString stringWithUTF8String:dir]];
}

+ (id)modelWithContentsOfURL:(NSURL *)url configuration:(MLModelConfiguration *)cfg error:(NSError **)e {
  NSData *bytes = [NSData dataWithContentsOfFile:[[url path] stringByAppendingPathComponent:@"model.mlmodel"] options:0 error:e];
  if (!bytes) return nil;
  CoreML__Specification__Model *pb = core_ml__specification__model__unpack(NULL, [bytes length], [bytes bytes]);
  if (!pb || !pb->description) return (id)(long)fail(e, @"model.mlmodel does not parse");
  CoreML__Specification__ModelDescription *d = pb->description;
  MLModel *m = [self new];
  NSString *want = [cfg functionName];
  m->serial = ++model_serial;
  if (d->n_functions) {
    const char *name = want ? [want UTF8String] : d->defaultfunctionname;
    for (size_t i = 0; i < d->n_functions; i++) {
      CoreML__Specification__FunctionDescription *f = d->functions[i];
      if (strcmp(f->name, name) != 0) continue;
      m->fn = f->name, m->in = f->input, m->nin = f->n_input, m->out = f->output, m->nout = f->n_output;
      m->st = f->state, m->nst = f->n_state;
    }
    if (!m->fn) return (id)(long)fail(e, [NSString stringWithFormat:@"no function %s in the model", name]);
  } else {
    if (want) return (id)(long)fail(e, @"functionName set for a model without functions");
    m->fn = "main", m->in = d->input, m->nin = d->n_input, m->out = d->output, m->nout = d->n_output;
    m->st = d->state, m->nst = d->n_state;
  }
  say("load model#%d function=%s (functionName %s) units=%ld", m->serial, m->fn, want ? [want UTF8String] : "unset",
      [cfg computeUnits]);
  MLModelDescription *md = [MLModelDescription new];
  NSMutableDictionary *ins = [NSMutableDictionary dictionaryWithCapacity:4], *outs = [NSMutableDictionary dictionaryWithCapacity:4];
  NSMutableDictionary *sts = [NSMutableDictionary dictionaryWithCapacity:4], *user = [NSMutableDictionary dictionaryWithCapacity:4];
  for (size_t i = 0; i < m->nin; i++) [ins setObject:[MLFeatureDescription from:m->in[i]] forKey:[NSString stringWithUTF8String:m->in[i]->name]];
  for (size_t i = 0; i < m->nout; i++) [outs setObject:[MLFeatureDescription from:m->out[i]] forKey:[NSString stringWithUTF8String:m->out[i]->name]];
  for (size_t i = 0; i < m->nst; i++) [sts setObject:[MLFeatureDescription from:m->st[i]] forKey:[NSString stringWithUTF8String:m->st[i]->name]];
  for (size_t i = 0; d->metadata && i < d->metadata->n_userdefined; i++)
    [user setObject:[NSString stringWithUTF8String:d->metadata->userdefined[i]->value]
             forKey:[NSString stringWithUTF8String:d->metadata->userdefined[i]->key]];
  NSMutableDictionary *meta = [NSMutableDictionary dictionaryWithCapacity:1];
  [meta setObject:user forKey:MLModelCreatorDefinedKey];
  md->ins = ins, md->outs = outs, md->states = sts, md->metadata = meta;
  m->desc = md;
  return m;
}

- (MLModelDescription *)modelDescription { return desc; }

- (MLState *)newState {
  MLState *s = [MLState new];
  s->serial = ++state_serial;
  s->maker = fn;
  s->buffers = [NSMutableDictionary dictionaryWithCapacity:4];
  for (size_t i = 0; i < nst; i++) {
    MLStateConstraint *c = [[MLFeatureDescription from:st[i]] stateConstraint];
    [s->buffers setObject:[MLMultiArray zeros:[c bufferShape] type:DT_F16 pad:1]
                   forKey:[NSString stringWithUTF8String:st[i]->name]];
  }
  say("newState model#%d function=%s -> state#%d", serial, fn, s->serial);
  return s;
}

/* Logs and checks each input against the function's description; returns sum(inputs). */
- (BOOL)checkInputs:(MLDictionaryFeatureProvider *)fp sum:(double *)sum error:(NSError **)e {
  NSArray *keys = [[fp dict] keys];
  *sum = 0;
  if ([keys count] != nin) return fail(e, [NSString stringWithFormat:@"function %s takes %d inputs", fn, (int)nin]);
  for (NSUInteger i = 0; i < [keys count]; i++) {
    MLMultiArray *a = [[fp featureValueForName:[keys objectAtIndex:i]] multiArrayValue];
    char vals[256] = "";
    size_t o = 0;
    for (long long k = 0; k < [a count]; k++) {
      double v = element(a, offset_of([a shape], [a strides], k));
      *sum += v;
      if (k < 4 && [a dataType] == DT_I32)   /* every digit: an i64 input's narrowed value */
        o += (size_t)snprintf(vals + o, sizeof vals - o, "%s%lld", k ? " " : "", (long long)v);
      else if (k < 4) o += (size_t)snprintf(vals + o, sizeof vals - o, "%s%g", k ? " " : "", v);
    }
    if ([a count] > 4) snprintf(vals + o, sizeof vals - o, " ...");
    say("  input %s %s %s strides %s = %s", [[keys objectAtIndex:i] UTF8String], dt_name([a dataType]), dims([a shape]), dims([a strides]), vals);
    MLMultiArrayConstraint *c = nil;
    for (size_t j = 0; j < nin; j++)
      if (strcmp(in[j]->name, [[keys objectAtIndex:i] UTF8String]) == 0) c = [[MLFeatureDescription from:in[j]] multiArrayConstraint];
    if (!c) return fail(e, [NSString stringWithFormat:@"function %s has no input %s", fn, [[keys objectAtIndex:i] UTF8String]]);
    if ([c dataType] != [a dataType] || strcmp(dims([c shape]), dims([a shape])) != 0)
      return fail(e, [NSString stringWithFormat:@"input %s: want %s %s", [[keys objectAtIndex:i] UTF8String], dt_name([c dataType]), dims([c shape])]);
  }
  return YES;
}

/* The outputs: element i = 1000 * n + sum + i % 7, fp32, innermost stride padded by 3. */
- (id)outputs:(double)n sum:(double)sum {
  NSMutableDictionary *res = [NSMutableDictionary dictionaryWithCapacity:4];
  for (size_t i = 0; i < nout; i++) {
    MLMultiArray *a = [MLMultiArray zeros:[[[MLFeatureDescription from:out[i]] multiArrayConstraint] shape] type:DT_F32 pad:3];
    for (long long k = 0; k < [a count]; k++)
      ((float *)[a dataPointer])[offset_of([a shape], [a strides], k)] = (float)(1000 * n + sum + (double)(k % 7));
    [res setObject:[MLFeatureValue featureValueWithMultiArray:a] forKey:[NSString stringWithUTF8String:out[i]->name]];
  }
  return [[MLDictionaryFeatureProvider alloc] initWithDictionary:res error:NULL];
}

- (id)predictionFromFeatures:(MLDictionaryFeatureProvider *)fp error:(NSError **)e {
  say("predict model#%d function=%s (no state)", serial, fn);
  double sum;
  if (nst) return (id)(long)fail(e, [NSString stringWithFormat:@"function %s is stateful: predict with a state", fn]);
  if (![self checkInputs:fp sum:&sum error:e]) return nil;
  return [self outputs:0 sum:sum];
}

- (id)predictionFromFeatures:(MLDictionaryFeatureProvider *)fp usingState:(MLState *)s error:(NSError **)e {
  say("predict model#%d function=%s state#%d (made by %s)", serial, fn, s->serial, s->maker);
  const char *strict = getenv("KILN_MOCK_STRICT_STATE");
  if (strict && *strict == '1' && strcmp(s->maker, fn) != 0)
    return (id)(long)fail(e, [NSString stringWithFormat:@"state made by function %s, not %s", s->maker, fn]);
  double sum;
  if (![self checkInputs:fp sum:&sum error:e]) return nil;
  double n = 0;
  for (size_t i = 0; i < nst; i++) {
    MLMultiArray *b = [s->buffers objectForKey:[NSString stringWithUTF8String:st[i]->name]];
    if (!b) return (id)(long)fail(e, [NSString stringWithFormat:@"the state has no %s", st[i]->name]);
    if (i == 0) n = element(b, 0);
    say("  state %s in: %g", st[i]->name, element(b, 0));
    for (long long k = 0; k < [b count]; k++) {
      uint16_t *p = (uint16_t *)[b dataPointer] + offset_of([b shape], [b strides], k);
      *p = f2h(h2f(*p) + 1);
    }
  }
  return [self outputs:n sum:sum];
}
@end
