/*
 * emit_metal.c — the Metal target: <m>.metal, <m>_metal.h, <m>_metal.c.
 *
 * Planned program in (the same kernels, schedule and memory plan as the C target),
 * files out: one MSL compute kernel per Kiln kernel (rendered by
 * emit_metal_kernels.c from templates/metal/), and a dispatch table in C that
 * says, per dispatch in schedule order, which kernel runs on what grid and which
 * byte ranges of the weights payload, the arena, the state block or the caller's
 * buffers it binds at which [[buffer(i)]] index. The table is data
 * (runtime/metal/kiln_metal.h describes the format); runtime/metal/kiln_metal.m
 * interprets it on a device and tests/metal/harness.c interprets the same table on
 * the Linux emulator.
 *
 * A plain program (one entry, no state) is emitted exactly as it always was. A
 * program with state or entry points gets one .metal file with every entry's
 * kernels, one dispatch list with the entries one after the other, and an entries
 * table: each entry's slice of it, its inputs and outputs, and its range checks
 * (emit_range_checks, the C target's), which the host makes on the caller's inputs
 * before encoding anything. State versions are bound in REG_STATE at the state's
 * offset of the one state block, the C target's layout.
 *
 * Buffer order is fixed for every kernel: the anchor node's inputs in order, then
 * the extra operands of a fused chain (e0, e1...), then the kernel's result, so the
 * table and the kernel signature are derived from one list here.
 * The table also embeds the .metal text (as lines, so no string literal exceeds
 * what ISO C promises) for building the library at run time.
 */
#include "emit_metal.h"

#include <string.h>

/* MSL/C++ keywords and the names the generated file uses at file scope or calls
 * unqualified; a kernel of this name gets a trailing '_'. */
static bool reserved(const char *s) {
  static const char *const own[] = {
      "kernel", "device", "constant", "threadgroup", "thread", "using", "namespace", "metal", "template",
      "class", "struct", "union", "enum", "const", "static", "inline", "void", "bool", "char", "uchar", "short",
      "ushort", "int", "uint", "long", "ulong", "float", "half", "double", "signed", "unsigned", "if", "else",
      "for", "while", "do", "return", "break", "continue", "switch", "case", "default", "goto", "sizeof",
      "true", "false", "this", "new", "delete", "operator", "typedef", "typename", "virtual", "public",
      "private", "protected", "friend", "explicit", "auto", "register", "volatile", "extern", "mutable",
      "exp", "log", "sqrt", "rsqrt", "tanh", "fabs", "abs", "fmax", "fmin", "max", "min", "pow", "powr",
      "isnan", "isinf", "select", "clamp", "dot", "floor", "ceil", "round", "trunc", "sin", "cos", "fmod", "remainder",
      "simd_sum", "simd_max", "simd_min", "threadgroup_barrier", "mem_flags", "main", "x", "y", "z", "out",
      "INFINITY", "NAN", "INT_MAX", "INT_MIN", "float2", "float3", "float4", "uint2", "uint3", "uint4",
      NULL};
  for (int i = 0; own[i]; i++)
    if (strcmp(own[i], s) == 0) return true;
  return strncmp(s, "kiln_", 5) == 0;
}

/* Unique MSL function names for g's kernels (their helpers included); spelled holds
 * every name an earlier kernel (of this or an earlier entry) may define. */
static const char **kernel_names(Graph *g, StrMap *spelled_by) {
  static const char *const helper[] = {"", "_op", "_epilogue"};   /* what a kernel may define */
  const char **names = kiln_alloc(sizeof(char *) * (size_t)(g->nkernels + 1));
  StrMap spelled = *spelled_by;
  for (int k = 0; k < g->nkernels; k++) {
    const char *name = emit_ident(g->kernels[k].cname);
    for (bool clash = true; clash;) {
      clash = reserved(name);
      for (int i = 0; i < 3 && !clash; i++) clash = strmap_get(&spelled, kiln_fmt("%s%s", name, helper[i])) != NULL;
      if (clash) name = kiln_fmt("%s_", name);
    }
    for (int i = 0; i < 3; i++) strmap_put(&spelled, kiln_fmt("%s%s", name, helper[i]));
    names[k] = name;
  }
  *spelled_by = spelled;
  return names;
}

static const char *const region_c[] = {"?", "KILN_MTL_WEIGHTS", "KILN_MTL_ARENA", "KILN_MTL_INPUT", "KILN_MTL_OUTPUT",
                                       "KILN_MTL_STATE"};
/* The host-side dtype constant of t; anything not f32, i32 or i64 is taken as bool (u8). */
static const char *mtl_type_c(DType t) {
  return t == DT_F32 ? "KILN_MTL_F32" : t == DT_I32 ? "KILN_MTL_I32" : t == DT_I64 ? "KILN_MTL_I64" : "KILN_MTL_U8";
}

/* How a kernel binds value n: its element type (bytes for a weight in a stored format,
 * whatever its dtype; i32 for an i64 input, which the host narrowed into its device
 * buffer) and how many bytes it may touch. */
static const char *binding_type_c(const Node *n) {
  return mtl_stored(n) ? "KILN_MTL_U8" : n->dtype == DT_I64 ? "KILN_MTL_I32" : mtl_type_c(n->dtype);
}
static const char *param_type(const Node *n) { return mtl_stored(n) ? "uchar" : mtl_type(n->dtype); }
static int64_t binding_bytes(const Node *n) {
  return mtl_stored(n) ? node_stored_bytes(n) : n->dtype == DT_I64 ? 4 * node_numel(n) : node_bytes(n);
}

/* Appends the table row binding value n at [[buffer(index)]]. */
static void binding_row(Buf *out, Node *n, int index, bool write, const char *param) {
  if (n->region == REG_NONE) die("Metal: value %%%d has no memory region (was pass_memplan run?)", n->id);
  if (write && (n->region == REG_WEIGHTS || n->region == REG_INPUT)) die("Metal: kernel writes into %%%d's region", n->id);
  bool io = n->region == REG_INPUT || n->region == REG_OUTPUT;
  EmitVars v = {0};
  emit_vari(&v, "INDEX", index);
  emit_var(&v, "REGION", region_c[n->region]);
  emit_var(&v, "ACCESS", write ? "KILN_MTL_WRITE" : "KILN_MTL_READ");
  emit_var(&v, "TYPE", binding_type_c(n));
  emit_vari(&v, "SLOT", io ? n->io_slot : 0);
  emit_var(&v, "OFFSET", kiln_fmt("%lld", (long long)n->offset));
  emit_var(&v, "SIZE", kiln_fmt("%lld", (long long)binding_bytes(n)));
  const char *fmt = mtl_stored(n) ? mtl_stored(n)->name : dtype_name(n->dtype);
  emit_var(&v, "WHAT", esc_comment(kiln_fmt("%s: %s %s%s%s", param, fmt, shape_str(&n->shape), n->name ? " " : "",
                                           n->name ? n->name : "")));
  template_expand(out, template_get("metal/binding.c.tmpl"), v.kv);
}

/* Buffer parameter i of a kernel: const when read, one a line after the first. */
static void buffer_param(Buf *b, int i, bool read, const char *t, const char *name) {
  const char *vars[] = {"SEP", i ? ",\n    " : "", "CONST", read ? "const " : "", "T", t,
                        "NAME", name, "I", kiln_fmt("%d", i), NULL};
  template_expand(b, template_get("metal/buffer_param.metal.tmpl"), vars);
}

/* The buffer parameters of a kernel: operands read, then `out`. */
static char *params(const MtlKernel *k) {
  Buf b = {0};
  for (int i = 0; i < k->nops; i++) buffer_param(&b, i, true, param_type(k->op[i]), k->opname[i]);
  buffer_param(&b, k->nops, false, mtl_type(k->out->dtype), "out");
  char *s = kiln_strdup(b.data);
  buf_free(&b);
  return s;
}

/* Renders kernel ki of g (after its epilogue helper, if fused) into src and its
 * dispatch (of kernel number `index` of the model's list) and bindings into the
 * table texts. The anchor's family renders the kernel; the chain's extra operands
 * bind after the anchor's, before `out`. */
static void emit_kernel(Graph *g, int ki, int index, const char *name, Buf *src, Buf *dispatches, Buf *bindings,
                        int *nbind) {
  const Kernel *kr = &g->kernels[ki];
  Node *n = graph_node(g, kr->nodes[0]);
  MtlKernel k = {.g = g, .n = n, .out = graph_node(g, kr->nodes[kr->nnodes - 1]), .name = name};
  EmitEpilogue e;
  emit_epilogue(g, kr, name, kiln_fmt("%s_epilogue", name), &mtl_target, &e);
  if (n->nin + e.nextra + 1 > MTL_MAX_OPS)
    kiln_error_at(n->loc, "%s: Metal target: kernel %s reads %d buffers (Metal binds at most %d beside the output)",
                  kiln_ops[n->op].name, name, n->nin + e.nextra, MTL_MAX_OPS - 1);
  static const char *const xyz[] = {"x", "y", "z"};
  for (int i = 0; i < n->nin; i++) {
    k.op[i] = graph_node(g, n->in[i]);
    k.opname[i] = n->nin <= 3 ? xyz[i] : kiln_fmt("x%d", i);
  }
  k.nops = n->nin;
  emit_var(&k.v, "NAME", name);
  const char *desc = emit_describe(g, kr), *loc = e.lines;
  emit_var(&k.v, "DESC", desc);
  emit_var(&k.v, "LOC", loc);
  emit_var(&k.v, "EPILOGUE", emit_hook_epilogue);
  emit_var(&k.v, "IF_FUSED", emit_hook_fused);
  const char *tmpl = mtl_render(&k);
  for (int i = 0; i < e.nextra; i++) {
    k.op[k.nops] = e.extra[i];
    k.opname[k.nops++] = e.extra_name[i];
  }
  emit_var(&k.v, "PARAMS", params(&k));
  Buf text = {0};
  template_expand(&text, template_get(tmpl), k.v.kv);
  buf_puts(src, e.helper);
  buf_puts(src, emit_epilogue_apply(text.data, &e));
  buf_free(&text);

  int first = *nbind;
  for (int i = 0; i < k.nops; i++) binding_row(bindings, k.op[i], i, false, k.opname[i]);
  binding_row(bindings, k.out, k.nops, true, "out");
  *nbind += k.nops + 1;
  EmitVars v = {0};
  emit_vari(&v, "KERNEL", index);
  emit_vari(&v, "FIRST", first);
  emit_vari(&v, "NBIND", k.nops + 1);
  emit_var(&v, "GROUPS", kiln_fmt("%u, %u, %u", k.groups[0], k.groups[1], k.groups[2]));
  emit_var(&v, "THREADS", kiln_fmt("%u, %u, %u", k.threads[0], k.threads[1], k.threads[2]));
  emit_var(&v, "WHAT", esc_c_string(kiln_fmt("%s: %s (%s)", name, desc, loc)));
  template_expand(dispatches, template_get("metal/dispatch.c.tmpl"), v.kv);
}

/* Appends the KilnMtlIO rows of g's inputs or outputs to b. */
static void io_rows_to(Buf *b, Graph *g, bool outputs) {
  int n = outputs ? g->noutputs : g->ninputs;
  for (int i = 0; i < n; i++) {
    const GraphIO *io = outputs ? &g->outputs[i] : &g->inputs[i];
    Node *nd = graph_node(g, io->node);
    const char *vars[] = {"NAME", esc_c_string(io->name), "TYPE", mtl_type_c(nd->dtype), "BYTES",
                          kiln_fmt("%lld", (long long)node_bytes(nd)), "DTYPE", dtype_name(nd->dtype),
                          "SHAPE", shape_str(&nd->shape), NULL};
    template_expand(b, template_get("metal/io_row.c.tmpl"), vars);
  }
}

/* The KilnMtlIO rows of the inputs or outputs (a "none" row when there are none: C
 * has no empty initialisers). */
static char *io_rows(Graph *g, bool outputs) {
  Buf b = {0};
  io_rows_to(&b, g, outputs);
  if (!b.len) buf_puts(&b, template_get("metal/io_row_none.c.tmpl"));
  char *s = kiln_strdup(b.data);
  buf_free(&b);
  return s;
}

/* The expansion of template path with v, as an arena string. */
static char *expand_str(const char *path, const EmitVars *v) {
  Buf b = {0};
  template_expand(&b, template_get(path), v->kv);
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* `    "text",` and a newline: one C string literal of a table. */
static void string_line(Buf *b, const char *text) {
  const char *vars[] = {"TEXT", text, NULL};
  template_expand(b, template_get("metal/string_line.c.tmpl"), vars);
}

/* The .metal text as C string literals, one a line. */
static char *msl_lines(const char *text) {
  Buf b = {0};
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p + 1) : strlen(p);
    char *line = kiln_alloc(len + 1);
    memcpy(line, p, len);
    string_line(&b, esc_c_string(line));
    p += len;
  }
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* Does g take an i64 input? Then a call can return KILN_MTL_E_RANGE. */
static bool has_i64_input(Graph *g) {
  for (int i = 0; i < g->ninputs; i++)
    if (graph_node(g, g->inputs[i].node)->dtype == DT_I64) return true;
  return false;
}

/* The wrappers' words on KILN_MTL_E_RANGE: why a call of g may return it (its i64
 * inputs, nchecks run-time offsets), "" when it cannot. */
static const char *range_doc(Graph *g, int nchecks) {
  bool i64 = has_i64_input(g);
  if (!i64 && !nchecks) return "";
  return kiln_fmt(", KILN_MTL_E_RANGE (%s%s%s out of range;\n * nothing was touched)", i64 ? "an i64 input's value" : "",
                  i64 && nchecks ? " or " : "", nchecks ? "an offset" : "");
}

/* ", const float *image" (an input) or ", float *logits": a C pointer parameter;
 * ", int32_t pos" for an input passed by value. */
static void run_param(Buf *b, bool input, bool byval, DType t, const char *name) {
  const char *vars[] = {"CONST", input ? "const " : "", "T", emit_c_type(t), "NAME", name, NULL};
  template_expand(b, template_get(byval ? "c/run_param_value.c.tmpl" : "c/run_param.c.tmpl"), vars);
}

/* Whether input i of g is passed by value by its entry's wrapper: an i32 scalar (a
 * position) of a program with state or entries, as the C target's entry functions do. */
static bool by_value(Graph *g, int i) {
  const Node *n = graph_node(g, g->inputs[i].node);
  return g->prog && !program_is_plain(g->prog) && n->dtype == DT_I32 && n->shape.rank == 0;
}

/* base, or base with '_' appended until no input or output of g is named so: the
 * wrapper's own parameters and locals must not shadow the model's (an input `k`). */
static const char *wrapper_own(Graph *g, const char *base) {
  for (bool clash = true; clash;) {
    clash = false;
    for (int i = 0; i < g->ninputs && !clash; i++) clash = strcmp(emit_ident(g->inputs[i].name), base) == 0;
    for (int i = 0; i < g->noutputs && !clash; i++) clash = strcmp(emit_ident(g->outputs[i].name), base) == 0;
    if (clash) base = kiln_fmt("%s_", base);
  }
  return base;
}

/* ", const float *image, float *logits" and "image, logits" for the typed wrapper
 * (an input passed by value is listed by its address, "&pos"). */
static void wrapper_args(Graph *g, char **decl, char **ins, char **outs) {
  Buf d = {0}, i = {0}, o = {0};
  for (int k = 0; k < g->ninputs; k++) {
    const char *nm = emit_ident(g->inputs[k].name);
    run_param(&d, true, by_value(g, k), graph_node(g, g->inputs[k].node)->dtype, nm);
    buf_printf(&i, "%s%s%s", k ? ", " : "", by_value(g, k) ? "&" : "", nm);
  }
  for (int k = 0; k < g->noutputs; k++) {
    const char *nm = emit_ident(g->outputs[k].name);
    run_param(&d, false, false, graph_node(g, g->outputs[k].node)->dtype, nm);
    buf_printf(&o, "%s%s", k ? ", " : "", nm);
  }
  *decl = kiln_strdup(d.data ? d.data : "");
  *ins = kiln_strdup(i.data ? i.data : "0");
  *outs = kiln_strdup(o.data ? o.data : "0");
  buf_free(&d);
  buf_free(&i);
  buf_free(&o);
}

/* The kiln_w_<format> helpers (templates/metal/deq/) of the stored formats that the
 * kernels of gs read, in format order, after the helpers they share; "" when every
 * weight they read is f32 (the file is then what it always was). */
static const char *format_helpers(Graph *const *gs, int ng) {
  bool used[WF__COUNT] = {0}, any = false;
  for (int e = 0; e < ng; e++)
    for (int k = 0; k < gs[e]->nkernels; k++) {
      const Node *n = graph_node(gs[e], gs[e]->kernels[k].nodes[0]);
      for (int i = 0; i < n->nin; i++) {
        const Node *x = graph_node(gs[e], n->in[i]);
        if (mtl_stored(x)) used[x->wfmt] = any = true;
      }
    }
  if (!any) return "";
  Buf b = {0};
  buf_puts(&b, template_get("metal/deq/common.metal.tmpl"));
  for (int f = 0; f < WF__COUNT; f++)
    if (used[f]) buf_puts(&b, template_get(kiln_fmt("metal/deq/%s.metal.tmpl", wformat_info((WFormat)f)->name)));
  char *s = kiln_strdup(b.data);
  buf_free(&b);
  return s;
}

/* The files of a plain program's one graph g (see emit_metal). */
static void emit_plain(Graph *g, const EmitOptions *o) {
  StrMap spelled = {0};
  const char **names = kernel_names(g, &spelled);
  Buf kernels = {0}, dispatches = {0}, bindings = {0}, knames = {0};
  int nbind = 0;
  for (int k = 0; k < g->nkernels; k++) {
    emit_kernel(g, k, k, names[k], &kernels, &dispatches, &bindings, &nbind);
    string_line(&knames, names[k]);
  }
  Buf msl = {0}, hdr = {0}, tab = {0};
  uint64_t checksum = weights_checksum(&g, 1, g->weights_size);

  EmitVars v = {0};
  const char *script = esc_comment(graph_src_name(g, g->script));
  emit_var(&v, "MODEL", g->model);
  emit_var(&v, "UPPER", emit_upper(g->model));
  emit_var(&v, "SCRIPT", script);
  emit_vari(&v, "NKERNELS", g->nkernels);
  emit_var(&v, "KERNEL_COUNT", emit_count(g->nkernels, "compute kernel", "compute kernels"));
  emit_var(&v, "DISPATCH_COUNT", emit_count(g->nkernels, "dispatch", "dispatches"));
  emit_var(&v, "KERNELS", kernels.data ? kernels.data : "");
  emit_var(&v, "FORMATS", format_helpers(&g, 1));
  emit_var(&v, "ABOUT", expand_str("metal/file_about.metal.tmpl", &v));
  template_expand(&msl, template_get("metal/file.metal.tmpl"), v.kv);

  char *decl, *ins, *outs;
  wrapper_args(g, &decl, &ins, &outs);
  emit_var(&v, "WRAP_PARAMS", decl);
  static const char *const own[] = {"W_K", "k", "W_ERR", "err", "W_ERRLEN", "errlen", "W_INPUTS", "inputs",
                                    "W_OUTPUTS", "outputs"};
  for (int i = 0; i < 10; i += 2) emit_var(&v, own[i], wrapper_own(g, own[i + 1]));
  emit_var(&v, "RANGE_DOC",
           has_i64_input(g) ? " KILN_MTL_E_RANGE (1) when a\n * value of an i64 input lies outside int32 (nothing was run)," : "");
  emit_var(&v, "WRAP_PARAMS_DOC", kiln_fmt("%s%s, %s", g->ninputs ? ", " : "", g->ninputs ? ins : "", outs));
  emit_var(&v, "WRAP_INPUTS", ins);
  emit_var(&v, "WRAP_OUTPUTS", outs);
  emit_vari(&v, "NDISPATCHES", g->nkernels);
  emit_vari(&v, "NBINDINGS", nbind);
  emit_vari(&v, "NINPUTS", g->ninputs);
  emit_vari(&v, "NOUTPUTS", g->noutputs);
  emit_var(&v, "MSL", msl_lines(msl.data));
  emit_var(&v, "KERNEL_NAMES", knames.data ? knames.data : "");
  emit_var(&v, "DISPATCHES", dispatches.data ? dispatches.data : "");
  emit_var(&v, "BINDINGS", bindings.data ? bindings.data : "");
  emit_var(&v, "INPUTS", io_rows(g, false));
  emit_var(&v, "OUTPUTS", io_rows(g, true));
  emit_var(&v, "WEIGHTS_SIZE", kiln_fmt("%lld", (long long)g->weights_size));
  emit_var(&v, "CHECKSUM", kiln_fmt("0x%016llxull", (unsigned long long)checksum));
  emit_var(&v, "ARENA_SIZE", kiln_fmt("%lld", (long long)g->arena_size));
  template_expand(&hdr, template_get("metal/table.h.tmpl"), v.kv);
  template_expand(&tab, template_get("metal/table.c.tmpl"), v.kv);

  kiln_write_file(o->tmpdir, kiln_fmt("%s.metal", g->model), msl.data, msl.len);
  kiln_write_file(o->tmpdir, kiln_fmt("%s_metal.h", g->model), hdr.data, hdr.len);
  kiln_write_file(o->tmpdir, kiln_fmt("%s_metal.c", g->model), tab.data, tab.len);
  Buf *all[] = {&kernels, &dispatches, &bindings, &knames, &msl, &hdr, &tab};
  for (int i = 0; i < 7; i++) buf_free(all[i]);
}

/* ==== programs: state and several entry points ==== */

/* `p + k` as a table pointer, or NULL for an empty range (C has no empty arrays). */
static const char *table_ptr(const char *array, int k, int n) { return n ? kiln_fmt("%s + %d", array, k) : "NULL"; }

/* The KilnMtlCheck rows of g's range checks into b; returns how many. */
static int check_rows(Graph *g, Buf *b) {
  EmitRangeCheck *rc;
  int n = emit_range_checks(g, NULL, &rc);
  for (int i = 0; i < n; i++) {
    EmitVars v = {0};
    emit_vari(&v, "INPUT", rc[i].input);
    emit_vari(&v, "MAX", rc[i].max);
    emit_var(&v, "WHAT", esc_c_string(rc[i].what));
    template_expand(b, template_get("metal/check_row.c.tmpl"), v.kv);
  }
  return n;
}

/* The wrapper functions' names, <m>_metal_<entry>, each taking '_'s until it clashes
 * with nothing the C header or this one declares. */
static const char **wrapper_names(Program *p) {
  StrMap taken = {0};
  strmap_put(&taken, kiln_fmt("%s_metal_model", p->model));
  strmap_put(&taken, kiln_fmt("%s_reset", p->model));
  for (int e = 0; e < p->nentries; e++) {
    strmap_put(&taken, kiln_fmt("%s_%s", p->model, p->entries[e]->entry));
    strmap_put(&taken, kiln_fmt("%s_%s_v", p->model, p->entries[e]->entry));
  }
  const char **fn = kiln_alloc(sizeof(char *) * (size_t)p->nentries);
  for (int e = 0; e < p->nentries; e++) {
    const char *name = kiln_fmt("%s_metal_%s", p->model, p->entries[e]->entry);
    while (strmap_get(&taken, name)) name = kiln_fmt("%s_", name);
    strmap_put(&taken, name);
    fn[e] = name;
  }
  return fn;
}

/* Where entry g was declared, for comments: the kiln.entry line, or the script. */
static const char *entry_loc(const Graph *g) {
  if (g->entry_loc.line > 0) return kiln_fmt("%s:%d", graph_src_name(g, g->entry_loc.file), g->entry_loc.line);
  return graph_src_name(g, g->script);
}

/* Entry e's typed wrapper (and its index and dispatch-count macros) into b; its
 * parameter list for the header's usage comment into *args_doc. */
static void entry_wrapper(Program *p, int e, const char *fn, int nchecks, Buf *b, const char **args_doc) {
  Graph *g = p->entries[e];
  char *decl, *ins, *outs;
  wrapper_args(g, &decl, &ins, &outs);
  EmitVars v = {0};
  emit_var(&v, "ENTRY", g->entry);
  emit_var(&v, "LOC", esc_comment(entry_loc(g)));
  emit_var(&v, "DISPATCH_COUNT", emit_count(g->nkernels, "dispatch", "dispatches"));
  emit_var(&v, "C_FN", kiln_fmt("%s_%s", p->model, g->entry));
  emit_var(&v, "STATE_ARG", p->nstates ? ", state" : "");
  emit_var(&v, "RANGE_DOC", range_doc(g, nchecks));
  emit_var(&v, "UPPER", emit_upper(p->model));
  emit_var(&v, "EUPPER", emit_upper(g->entry));
  emit_vari(&v, "INDEX", e);
  emit_vari(&v, "NDISPATCHES", g->nkernels);
  emit_var(&v, "FN", fn);
  emit_var(&v, "WRAP_PARAMS", decl);
  static const char *const own[] = {"W_K", "k", "W_ERR", "err", "W_ERRLEN", "errlen", "W_INPUTS", "inputs",
                                    "W_OUTPUTS", "outputs"};
  for (int i = 0; i < 10; i += 2) emit_var(&v, own[i], wrapper_own(g, own[i + 1]));
  emit_var(&v, "WRAP_INPUTS", ins);
  emit_var(&v, "WRAP_OUTPUTS", outs);
  template_expand(b, template_get("metal/entry_wrapper.h.tmpl"), v.kv);
  Buf d = {0};
  for (int k = 0; k < g->ninputs; k++) buf_printf(&d, ", %s", emit_ident(g->inputs[k].name));
  for (int k = 0; k < g->noutputs; k++) buf_printf(&d, ", %s", emit_ident(g->outputs[k].name));
  *args_doc = kiln_strdup(d.data ? d.data : "");
  buf_free(&d);
}

/* The files of a program with state or entry points (see the file comment). */
static void emit_program(Program *p, const EmitOptions *o) {
  StrMap spelled = {0};
  Buf kernels = {0}, dispatches = {0}, bindings = {0}, knames = {0}, ins = {0}, outs = {0}, checks = {0};
  Buf entries = {0}, wrappers = {0}, list = {0};
  const char **fn = wrapper_names(p);
  const char *first_args = "";
  int nbind = 0, nkern = 0, nin = 0, nout = 0, nchk = 0;
  for (int e = 0; e < p->nentries; e++) {
    Graph *g = p->entries[e];
    const char **names = kernel_names(g, &spelled);
    for (int k = 0; k < g->nkernels; k++) {
      emit_kernel(g, k, nkern + k, names[k], &kernels, &dispatches, &bindings, &nbind);
      string_line(&knames, names[k]);
    }
    io_rows_to(&ins, g, false);
    io_rows_to(&outs, g, true);
    int nc = check_rows(g, &checks);
    EmitVars v = {0};
    emit_var(&v, "NAME", esc_c_string(g->entry));
    emit_vari(&v, "FIRST", nkern);
    emit_vari(&v, "NDISPATCHES", g->nkernels);
    emit_var(&v, "INPUTS", table_ptr("inputs", nin, g->ninputs));
    emit_var(&v, "OUTPUTS", table_ptr("outputs", nout, g->noutputs));
    emit_vari(&v, "NIN", g->ninputs);
    emit_vari(&v, "NOUT", g->noutputs);
    emit_var(&v, "CHECKS", table_ptr("checks", nchk, nc));
    emit_vari(&v, "NCHECKS", nc);
    emit_var(&v, "LOC", esc_comment(entry_loc(g)));
    template_expand(&entries, template_get("metal/entry_row.c.tmpl"), v.kv);
    const char *args_doc;
    entry_wrapper(p, e, fn[e], nc, &wrappers, &args_doc);
    if (e == 0) first_args = args_doc;
    buf_printf(&list, "%s%s %d", e ? ", " : "", g->entry, g->nkernels);
    nkern += g->nkernels, nin += g->ninputs, nout += g->noutputs, nchk += nc;
  }
  Buf tables = {0};   /* only the arrays some entry points into: C has no empty ones */
  const char *const tv[][6] = {{"WHAT", "inputs", "ROWS", ins.data, NULL}, {"WHAT", "outputs", "ROWS", outs.data, NULL},
                               {"ROWS", checks.data, NULL}};
  if (nin) template_expand(&tables, template_get("metal/io_table.c.tmpl"), tv[0]);
  if (nout) template_expand(&tables, template_get("metal/io_table.c.tmpl"), tv[1]);
  if (nchk) template_expand(&tables, template_get("metal/check_table.c.tmpl"), tv[2]);
  Buf msl = {0}, hdr = {0}, tab = {0};
  uint64_t checksum = weights_checksum(p->entries, p->nentries, p->weights_size);

  EmitVars v = {0};
  emit_var(&v, "MODEL", p->model);
  emit_var(&v, "UPPER", emit_upper(p->model));
  emit_var(&v, "SCRIPT", esc_comment(graph_src_name(p->entries[0], p->script)));
  emit_vari(&v, "NKERNELS", nkern);
  emit_var(&v, "KERNEL_COUNT", emit_count(nkern, "compute kernel", "compute kernels"));
  emit_var(&v, "ENTRY_COUNT", emit_count(p->nentries, "entry point", "entry points"));
  emit_var(&v, "ENTRY_LIST", esc_comment(list.data));
  emit_var(&v, "KERNELS", kernels.data ? kernels.data : "");
  emit_var(&v, "FORMATS", format_helpers(p->entries, p->nentries));
  emit_var(&v, "ABOUT", expand_str("metal/file_about_entries.metal.tmpl", &v));
  template_expand(&msl, template_get("metal/file.metal.tmpl"), v.kv);

  emit_vari(&v, "NENTRIES", p->nentries);
  emit_var(&v, "STATE_SIZE", kiln_fmt("%lld", (long long)p->state_size));
  emit_var(&v, "STATE_WORDS", p->nstates ? " and one state block" : "");
  emit_var(&v, "STATE_DOC", p->nstates ? expand_str("metal/state_doc.h.tmpl", &v) : "");
  emit_var(&v, "FIRST_FN", fn[0]);
  emit_var(&v, "FIRST_ARGS_DOC", first_args);
  emit_var(&v, "WRAPPERS", wrappers.data);
  emit_vari(&v, "NDISPATCHES", nkern);
  emit_vari(&v, "NBINDINGS", nbind);
  emit_var(&v, "MSL", msl_lines(msl.data));
  emit_var(&v, "KERNEL_NAMES", knames.data ? knames.data : "");
  emit_var(&v, "DISPATCHES", dispatches.data ? dispatches.data : "");
  emit_var(&v, "BINDINGS", bindings.data ? bindings.data : "");
  emit_var(&v, "TABLES", tables.data ? tables.data : "");
  emit_var(&v, "ENTRIES", entries.data);
  emit_var(&v, "WEIGHTS_SIZE", kiln_fmt("%lld", (long long)p->weights_size));
  emit_var(&v, "CHECKSUM", kiln_fmt("0x%016llxull", (unsigned long long)checksum));
  emit_var(&v, "ARENA_SIZE", kiln_fmt("%lld", (long long)p->arena_size));
  template_expand(&hdr, template_get("metal/table_entries.h.tmpl"), v.kv);
  template_expand(&tab, template_get("metal/table_entries.c.tmpl"), v.kv);

  kiln_write_file(o->tmpdir, kiln_fmt("%s.metal", p->model), msl.data, msl.len);
  kiln_write_file(o->tmpdir, kiln_fmt("%s_metal.h", p->model), hdr.data, hdr.len);
  kiln_write_file(o->tmpdir, kiln_fmt("%s_metal.c", p->model), tab.data, tab.len);
  Buf *all[] = {&kernels, &dispatches, &bindings, &knames, &ins, &outs, &checks, &tables, &entries, &wrappers,
                &list, &msl, &hdr, &tab};
  for (int i = 0; i < 14; i++) buf_free(all[i]);
}

/* Writes the Metal target's files for planned program p into o->tmpdir: a plain
 * program exactly as always, one with state or entries with an entries table; dies
 * on broken IR, user errors (kiln_error_at) on grids Metal cannot dispatch. */
void emit_metal(Program *p, const EmitOptions *o) {
  if (program_is_plain(p)) emit_plain(p->entries[0], o);
  else emit_program(p, o);
}
