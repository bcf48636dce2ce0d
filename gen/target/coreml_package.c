/*
 * coreml_package.c — the outside of a Core ML package: the Model message around the
 * lowered ML Program (description features, multifunction descriptions, the kiln.*
 * metadata the runtime wrapper reads) and the .mlpackage directory (Manifest.json,
 * model.mlmodel, weight.bin), and what a program must be to have one (states, entry
 * points: coreml_check_program; the states' feature names). emit_coreml.c lowers the
 * graph into MIL; this file only checks, describes and writes what it built. Kept apart because none of it depends on how an
 * op is lowered, and everything in it must be byte-stable (sorted metadata, fixed ids).
 */
#include "coreml_package.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shape of an I/O multi-array: Core ML's need rank >= 1, so a rank-0 value is
 * exposed as [1] (the same single element, the same bytes as the C target's). */
const Shape *coreml_io_shape(const Node *n) {
  static const Shape one = {1, {1}};
  return n->shape.rank ? &n->shape : &one;
}

/* An ArrayFeatureType of shape s and data type dt. */
static CoreML__Specification__ArrayFeatureType *array_type(const Shape *s, CoreML__Specification__ArrayFeatureType__ArrayDataType dt) {
  CoreML__Specification__ArrayFeatureType *at = kiln_alloc(sizeof *at);
  *at = (CoreML__Specification__ArrayFeatureType)CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__INIT;
  at->n_shape = (size_t)s->rank;
  at->shape = kiln_alloc(sizeof(int64_t) * (size_t)(s->rank + 1));
  for (int i = 0; i < s->rank; i++) at->shape[i] = s->dim[i];
  at->datatype = dt;
  return at;
}

/* A FeatureDescription of a copy of name and type ft. */
static CoreML__Specification__FeatureDescription *describe(const char *name, CoreML__Specification__FeatureType *ft) {
  CoreML__Specification__FeatureDescription *fd = kiln_alloc(sizeof *fd);
  *fd = (CoreML__Specification__FeatureDescription)CORE_ML__SPECIFICATION__FEATURE_DESCRIPTION__INIT;
  fd->name = kiln_strdup(name);
  fd->type = ft;
  return fd;
}

/* A model-description feature: a MultiArray of n's I/O shape, FLOAT32 for f32 and INT32
 * otherwise (bools travel as int32; see IoList). The dims Core ML sees, not MIL's types. */
static CoreML__Specification__FeatureDescription *feature(const char *name, const Node *n) {
  CoreML__Specification__FeatureType *ft = kiln_alloc(sizeof *ft);
  *ft = (CoreML__Specification__FeatureType)CORE_ML__SPECIFICATION__FEATURE_TYPE__INIT;
  ft->type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE;
  ft->multiarraytype = array_type(coreml_io_shape(n), n->dtype == DT_F32 ? CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT32
                                                                  : CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__INT32);
  return describe(name, ft);
}

/* A state feature as coremltools writes one: StateFeatureType holding a FLOAT16
 * ArrayFeatureType of the state's shape. */
static CoreML__Specification__FeatureDescription *state_feature(const char *name, const StateDecl *d) {
  CoreML__Specification__StateFeatureType *st = kiln_alloc(sizeof *st);
  *st = (CoreML__Specification__StateFeatureType)CORE_ML__SPECIFICATION__STATE_FEATURE_TYPE__INIT;
  st->type_case = CORE_ML__SPECIFICATION__STATE_FEATURE_TYPE__TYPE_ARRAY_TYPE;
  st->arraytype = array_type(&d->shape, CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT16);
  CoreML__Specification__FeatureType *ft = kiln_alloc(sizeof *ft);
  *ft = (CoreML__Specification__FeatureType)CORE_ML__SPECIFICATION__FEATURE_TYPE__INIT;
  ft->type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE;
  ft->statetype = st;
  return describe(name, ft);
}

/* One function's features: its inputs, outputs (declaration order) and every state. */
typedef struct {
  CoreML__Specification__FeatureDescription **in, **out, **st;
  size_t nin, nout, nst;
} Features;

static Features features(Graph *g, const char *const *state_in, const Program *p) {
  Features f = {.nin = (size_t)g->ninputs, .nout = (size_t)g->noutputs, .nst = (size_t)p->nstates};
  f.in = kiln_alloc(sizeof *f.in * (f.nin + 1));
  f.out = kiln_alloc(sizeof *f.out * (f.nout + 1));
  f.st = kiln_alloc(sizeof *f.st * (f.nst + 1));
  for (int i = 0; i < g->ninputs; i++) f.in[i] = feature(g->inputs[i].name, graph_node(g, g->inputs[i].node));
  for (int i = 0; i < g->noutputs; i++) f.out[i] = feature(g->outputs[i].name, graph_node(g, g->outputs[i].node));
  for (int s = 0; s < p->nstates; s++) f.st[s] = state_feature(state_in[s], &p->states[s]);
  return f;
}

/* Comma-separated I/O names (declaration order), those that are Kiln bools
 * travelling as INT32, and the i64 inputs travelling as INT32: the runtime wrapper
 * (runtime/coreml) reads these, since Core ML's description is a dictionary without
 * order, a bool type or an int64 one. */
typedef enum { IO_INPUTS, IO_OUTPUTS, IO_BOOLS, IO_I64S } IoList;

/* The comma-separated names for one of the IoList lists, in declaration order ("" if none). */
static const char *io_list(Graph *g, IoList which) {
  Buf b = {0};
  for (int out = 0; out < 2; out++) {
    if (((which == IO_INPUTS || which == IO_I64S) && out) || (which == IO_OUTPUTS && !out)) continue;
    const GraphIO *v = out ? g->outputs : g->inputs;
    for (int i = 0; i < (out ? g->noutputs : g->ninputs); i++) {
      DType t = graph_node(g, v[i].node)->dtype;
      if ((which != IO_BOOLS || t == DT_BOOL) && (which != IO_I64S || t == DT_I64))
        buf_printf(&b, "%s%s", b.len ? "," : "", v[i].name);
    }
  }
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* Orders metadata entries by key, so the protobuf bytes are stable. */
static int entry_cmp(const void *a, const void *b) {
  const CoreML__Specification__Metadata__UserDefinedEntry *x = *(CoreML__Specification__Metadata__UserDefinedEntry *const *)a;
  const CoreML__Specification__Metadata__UserDefinedEntry *y = *(CoreML__Specification__Metadata__UserDefinedEntry *const *)b;
  return strcmp(x->key, y->key);
}

/* Appends userDefined key = value to md. */
static void md_put(CoreML__Specification__Metadata *md, const char *key, const char *value) {
  CoreML__Specification__Metadata__UserDefinedEntry **a = kiln_alloc(sizeof *a * (md->n_userdefined + 1));
  if (md->n_userdefined) memcpy(a, md->userdefined, sizeof *a * md->n_userdefined);
  a[md->n_userdefined] = kiln_alloc(sizeof **a);
  *a[md->n_userdefined] = (CoreML__Specification__Metadata__UserDefinedEntry)CORE_ML__SPECIFICATION__METADATA__USER_DEFINED_ENTRY__INIT;
  a[md->n_userdefined]->key = kiln_strdup(key);
  a[md->n_userdefined]->value = kiln_strdup(value);
  md->userdefined = a;
  md->n_userdefined++;
}

/* The model's metadata: a short description and the kiln.* user-defined keys, sorted,
 * that the runtime wrapper reads: for one function kiln.inputs, kiln.outputs and
 * kiln.bool_features (and kiln.i64_inputs when the entry has any); for entry points
 * kiln.entries (declaration order) and those per entry as kiln.<entry>.*; kiln.states (state feature names in declaration order)
 * when there are states; kiln.min_os and kiln.precision always. */
static CoreML__Specification__Metadata *metadata(const Program *p, const char *const *state_in, bool multi, const EmitOptions *o) {
  CoreML__Specification__Metadata *md = kiln_alloc(sizeof *md);
  *md = (CoreML__Specification__Metadata)CORE_ML__SPECIFICATION__METADATA__INIT;
  md->shortdescription = kiln_fmt("%s, compiled ahead of time by Kiln", p->model);
  Buf names = {0};
  for (int e = 0; e < p->nentries; e++) {
    Graph *g = p->entries[e];
    const char *pre = multi ? kiln_fmt("kiln.%s.", g->entry) : "kiln.";
    md_put(md, kiln_fmt("%sbool_features", pre), io_list(g, IO_BOOLS));
    const char *i64 = io_list(g, IO_I64S);   /* only when there are some: older packages' bytes stay the same */
    if (*i64) md_put(md, kiln_fmt("%si64_inputs", pre), i64);
    md_put(md, kiln_fmt("%sinputs", pre), io_list(g, IO_INPUTS));
    md_put(md, kiln_fmt("%soutputs", pre), io_list(g, IO_OUTPUTS));
    buf_printf(&names, "%s%s", e ? "," : "", g->entry);
  }
  if (multi) md_put(md, "kiln.entries", names.data);
  buf_free(&names);
  md_put(md, "kiln.min_os", o->min_os);
  md_put(md, "kiln.precision", o->fp16 ? "fp16" : "fp32");
  Buf st = {0};
  for (int s = 0; s < p->nstates; s++) buf_printf(&st, "%s%s", s ? "," : "", state_in[s]);
  if (p->nstates) md_put(md, "kiln.states", st.data);
  buf_free(&st);
  qsort(md->userdefined, md->n_userdefined, sizeof *md->userdefined, entry_cmp);
  return md;
}

/* The top-level Model message, after every function was lowered into m. One function
 * ("main": a plain model, or state without kiln.entry): description input, output and
 * state. Entry points: a multifunction description, one FunctionDescription per entry
 * (declaration order), the first entry the default, input/output left empty. */
CoreML__Specification__Model *coreml_model_message(const Program *p, const char *const *state_in, Mil *m, int spec,
                                                   bool multi, const EmitOptions *o) {
  CoreML__Specification__ModelDescription *d = kiln_alloc(sizeof *d);
  *d = (CoreML__Specification__ModelDescription)CORE_ML__SPECIFICATION__MODEL_DESCRIPTION__INIT;
  if (!multi) {
    Features f = features(p->entries[0], state_in, p);
    d->n_input = f.nin, d->input = f.in;
    d->n_output = f.nout, d->output = f.out;
    d->n_state = f.nst, d->state = f.st;
  } else {
    d->n_functions = (size_t)p->nentries;
    d->functions = kiln_alloc(sizeof *d->functions * (size_t)(p->nentries + 1));
    for (int e = 0; e < p->nentries; e++) {
      Features f = features(p->entries[e], state_in, p);
      CoreML__Specification__FunctionDescription *fd = kiln_alloc(sizeof *fd);
      *fd = (CoreML__Specification__FunctionDescription)CORE_ML__SPECIFICATION__FUNCTION_DESCRIPTION__INIT;
      fd->name = kiln_strdup(p->entries[e]->entry);
      fd->n_input = f.nin, fd->input = f.in;
      fd->n_output = f.nout, fd->output = f.out;
      fd->n_state = f.nst, fd->state = f.st;
      d->functions[e] = fd;
    }
    d->defaultfunctionname = kiln_strdup(p->entries[0]->entry);
  }
  d->metadata = metadata(p, state_in, multi, o);
  CoreML__Specification__Model *mdl = kiln_alloc(sizeof *mdl);
  *mdl = (CoreML__Specification__Model)CORE_ML__SPECIFICATION__MODEL__INIT;
  mdl->specificationversion = spec;
  mdl->description = d;
  mdl->type_case = CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM;
  mdl->mlprogram = mil_program(m);
  return mdl;
}

/* A fixed UUID-shaped identifier for a package item: two FNV-1a 64 hashes of
 * "kiln-coreml/<model>/<item>" (and of that with "/2"), formatted as an RFC 9562
 * version-8 ("custom") UUID, upper case like Xcode's. Same model name, same id. */
static const char *manifest_id(const char *model, const char *item) {
  const char *key = kiln_fmt("kiln-coreml/%s/%s", model, item), *key2 = kiln_fmt("%s/2", key);
  uint64_t hi = kiln_fnv1a64(key, strlen(key)), lo = kiln_fnv1a64(key2, strlen(key2));
  hi = (hi & ~0xf000ull) | 0x8000ull;                       /* version 8 */
  lo = (lo & ~(3ull << 62)) | (2ull << 62);                 /* variant 10 */
  return kiln_fmt("%08llX-%04llX-%04llX-%04llX-%012llX", (unsigned long long)(hi >> 32),
                  (unsigned long long)((hi >> 16) & 0xffff), (unsigned long long)(hi & 0xffff),
                  (unsigned long long)(lo >> 48), (unsigned long long)(lo & 0xffffffffffffull));
}

/* Writes <model>.mlpackage to o->tmpdir: Manifest.json (fixed item ids), the packed model
 * pb[0..npb) and, when any const went to a blob, weights/weight.bin. */
void coreml_write_package(const char *model, Mil *m, const EmitOptions *o, const uint8_t *pb, size_t npb) {
  const char *pkg = kiln_fmt("%s.mlpackage", model);
  const Buf *wb = mil_weights(m);
  Buf item = {0}, man = {0};
  const char *wid = manifest_id(model, "weights");
  if (mil_nblobs(m)) template_expand(&item, template_get("coreml/weights_item.json.tmpl"), (const char *const[]){"WEIGHTS_ID", wid, NULL});
  const char *vars[] = {"MODEL_ID", manifest_id(model, "model.mlmodel"), "WEIGHTS_ITEM", item.data ? item.data : "", NULL};
  template_expand(&man, template_get("coreml/Manifest.json.tmpl"), vars);
  kiln_write_file(o->tmpdir, kiln_fmt("%s/Manifest.json", pkg), man.data, man.len);
  kiln_write_file(o->tmpdir, kiln_fmt("%s/Data/com.apple.CoreML/model.mlmodel", pkg), pb, npb);
  if (mil_nblobs(m)) kiln_write_file(o->tmpdir, kiln_fmt("%s/Data/com.apple.CoreML/weights/weight.bin", pkg), wb->data, wb->len);
  buf_free(&item);
  buf_free(&man);
}

/* What a program with state or entry points needs from the Core ML target, checked
 * before anything is lowered, each a user error at the Lua line concerned: spec 9
 * (iOS18: states, multifunction models), states of f32 or bool (Core ML keeps states
 * in fp16: bool's 0/1 survive, i32 values beyond 2048 would not), of rank <= 5. */
void coreml_check_program(const Program *p, int spec, const EmitOptions *o) {
  SrcLoc where = p->nstates ? p->states[0].loc : p->entries[0]->entry_loc;
  if (where.line == 0) where = (SrcLoc){p->script, 0};
  if (spec < 9)
    kiln_error_at(where, "%s need --min-os iOS18 for the Core ML target (Core ML 8: states, multifunction models), not %s",
                  p->nstates && p->explicit_entries ? "state and entry points" : p->nstates ? "states" : "entry points", o->min_os);
  for (int s = 0; s < p->nstates; s++) {
    const StateDecl *d = &p->states[s];
    if (d->dtype == DT_I32)
      kiln_error_at(d->loc, "state %s is i32: Core ML keeps states in fp16, which cannot hold every i32 (the Core ML "
                    "target supports f32 and bool states; use --target c)", d->name);
    if (d->shape.rank > 5)
      kiln_error_at(d->loc, "state %s has rank %d; Core ML allows at most rank 5", d->name, d->shape.rank);
  }
}

/* Each state's Core ML name (function input and description feature): its name made a
 * MIL identifier ("layers.0.k" -> "layers_0_k"), the same in every function; two states
 * that would share one are a user error. */
const char **coreml_state_names(const Program *p) {
  const char **names = kiln_alloc(sizeof(char *) * (size_t)(p->nstates + 1));
  StrMap seen = {0};
  for (int s = 0; s < p->nstates; s++) {
    names[s] = mil_sanitize(p->states[s].name);
    if (strmap_get(&seen, names[s]))
      kiln_error_at(p->states[s].loc, "state %s is '%s' in Core ML, as another state is; rename one", p->states[s].name, names[s]);
    strmap_put(&seen, names[s]);
  }
  return names;
}

/* One build note ("kiln: note: ...", one line on stderr) when the program has i64 inputs:
 * the package declares them int32 (Core ML has no int64 multi-array) and the runtime
 * wrapper takes int64_t values for them, narrowed with the C entry's range check. */
void coreml_note_i64_inputs(const Program *p) {
  Buf b = {0};
  int count = 0;
  for (int e = 0; e < p->nentries; e++) {
    Graph *g = p->entries[e];
    for (int i = 0; i < g->ninputs; i++) {
      if (graph_node(g, g->inputs[i].node)->dtype != DT_I64) continue;
      bool seen = false;   /* an input shared by several entries is named once */
      for (int f = 0; f < e && !seen; f++)
        for (int j = 0; j < p->entries[f]->ninputs; j++)
          if (graph_node(p->entries[f], p->entries[f]->inputs[j].node)->dtype == DT_I64 &&
              strcmp(p->entries[f]->inputs[j].name, g->inputs[i].name) == 0)
            seen = true;
      if (!seen) buf_printf(&b, "%s%s", count++ ? ", " : "", g->inputs[i].name);
    }
  }
  if (count)
    fprintf(stderr, "kiln: note: Core ML package: i64 input%s %s declared int32 (Core ML has no int64 multi-array); "
            "kiln_coreml_call takes int64_t values and returns KILN_COREML_E_RANGE for one outside int32\n",
            count > 1 ? "s" : "", b.data);
  buf_free(&b);
}
