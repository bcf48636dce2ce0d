/*
 * emit_c.c — the C target: <m>.h, <m>.c, <m>.weights (and <m>_weights.c).
 *
 * Planned graph in (kernels scheduled, every value placed by pass_memplan), files
 * out. Every line of C comes from a template under templates/c/: this file only
 * computes the values the templates name (offsets, identifiers, rendered op
 * expressions). What a kernel walks (a matmul's batch and strides, a reduction's
 * kept and reduced dims, a broadcast's coalesced loops...) is the family's
 * geometry from emit_common.c, the same the Metal target reads; one render
 * function per OpFamily maps it to the template's variables (C walks it with
 * loops: the innermost dim a contiguous inner loop, the rest split from a row
 * index). The family table at the bottom picks the function, so a new family is
 * one geometry, one function, one row and one template per target. A fused kernel is rendered by its
 * anchor's family; its chain becomes an inline `<kernel>_epilogue` helper called at
 * the template's $EPILOGUE hooks (emit_common.c), its extra operands parameters
 * e0, e1... after the anchor's.
 *
 * Names: kernels are Kernel.cname (made unique by pass_group); weights get
 * W_<NAME> and arena values A_<KERNEL> byte-offset constants; inputs and outputs
 * keep their Lua names as parameters. Anything that could collide with C or with
 * the generated code's own identifiers gets a trailing '_' until it is unique.
 */
#include "emit_c.h"

#include <stdlib.h>
#include <string.h>

/* ---- names ---- */

/* Identifiers the generated C file itself uses at file scope or in the run function,
 * besides C keywords, and the functions of the headers it includes (math.h, string.h, and
 * stdlib.h, which immintrin.h includes: a kernel named after the `div` op failed to
 * compile at -march=x86-64-v3): a kernel or parameter of this name would clash. */
static bool reserved_ident(const char *s) {
  static const char *const own[] = {
      "w", "a", "weights", "arena", "inputs", "outputs", "exp", "expf", "log", "logf", "sqrt", "sqrtf",
      "tanh", "tanhf", "erf", "erff", "fabs", "fabsf", "fmax", "fmaxf", "fmin", "fminf", "pow", "powf",
      "INFINITY", "NAN", "INT32_MAX", "INT32_MIN", "abs", "floor", "ceil", "round", "sin", "cos", "max",
      "min", "sinf", "cosf", "floorf", "ceilf", "rint", "rintf", "fmod", "fmodf", "remainder", "remainderf", "par", "pfor", "pool", "kiln_bits",
      "kiln_select", "kiln_expf", "kiln_tanhf", "kiln_erff", "kiln_logf",
      /* stdlib.h */
      "div", "ldiv", "lldiv", "labs", "llabs", "malloc", "calloc", "realloc", "free", "aligned_alloc", "exit",
      "abort", "atexit", "getenv", "system", "atoi", "atol", "atoll", "atof", "strtol", "strtoul", "strtoll",
      "strtoull", "strtof", "strtod", "strtold", "rand", "srand", "qsort", "bsearch",
      /* string.h */
      "memcpy", "memmove", "memset", "memcmp", "memchr", "strlen", "strcpy", "strncpy", "strcat", "strncat",
      "strcmp", "strncmp", "strchr", "strrchr", "strstr", "strtok", "strerror", "strspn", "strcspn", "strpbrk",
      /* the rest of math.h's functions */
      "fma", "fmaf", "trunc", "truncf", "copysign", "copysignf", "hypot", "hypotf", "atan2", "atan2f", "tan",
      "tanf", "sinh", "sinhf", "cosh", "coshf", "asin", "asinf", "acos", "acosf", "atan", "atanf", "asinh",
      "acosh", "atanh", "log2", "log2f", "log10", "log10f", "exp2", "exp2f", "expm1", "expm1f", "log1p",
      "log1pf", "cbrt", "cbrtf", "nearbyint", "nearbyintf", "lround", "lrint", "nan", "nanf", "frexp",
      "ldexp", "modf", "scalbn", "erfc", "erfcf", "lgamma", "tgamma", "fdim", "logb", "ilogb", NULL};
  for (int i = 0; own[i]; i++)
    if (strcmp(own[i], s) == 0) return true;
  return emit_is_c_keyword(s);
}

/* A set of names handed out so far, to keep generated identifiers unique; also, when
 * set, names another set holds are taken (an entry's parameters vs file scope). */
typedef struct Names {
  StrMap set;
  const struct Names *also;
} Names;

/* True iff name was already handed out in s (or is in s->also). */
static bool names_has(const Names *s, const char *name) {
  return strmap_get(&s->set, name) || (s->also && names_has(s->also, name));
}

/* Returns base, or base with '_' appended until it is neither taken nor reserved. */
static const char *names_claim(Names *s, const char *base) {
  const char *name = base;
  while (names_has(s, name) || reserved_ident(name)) name = kiln_fmt("%s_", name);
  strmap_put(&s->set, name);
  return name;
}

/* Whether kernel k's scratch (Kernel.scratch) holds a Winograd convolution's input
 * transforms (its filters are Node.wino) rather than a convolution's padded input. */
static bool scratch_is_wino(Graph *g, int k) {
  const Node *n = g->nodes[g->kernels[k].nodes[0]];
  return n->op == OP_CONV2D && graph_node(g, n->in[1])->wino;
}

/* The arena constant of kernel k's scratch: A_<KERNEL>_PAD, or A_<KERNEL>_TILES. */
static const char *scratch_name(Graph *g, int k, const char *kname) {
  return kiln_fmt(scratch_is_wino(g, k) ? "A_%s_TILES" : "A_%s_PAD", emit_upper(kname));
}

/* Claims from ids the A_ constants of g's arena: c->aname of each kernel result in the arena,
 * c->pname (allocated here) of each kernel's scratch. Needs c->kname. */
static void arena_names(Ctx *c, Graph *g, Names *ids) {
  c->pname = kiln_alloc(sizeof(char *) * (size_t)(g->nkernels + 1));
  for (int k = 0; k < g->nkernels; k++) {
    const Kernel *kr = &g->kernels[k];
    const Node *n = g->nodes[kr->nodes[kr->nnodes - 1]];
    if (n->region == REG_ARENA) c->aname[n->id] = names_claim(ids, kiln_fmt("A_%s", emit_upper(c->kname[k])));
    if (kr->scratch) c->pname[k] = names_claim(ids, scratch_name(g, k, c->kname[k]));
  }
}

/* The file-scope helpers a kernel's templates name after it ("${NAME}_rows", ...). */
static const char *const kernel_helpers[] = {"_args", "_job", "_out", "_planes", "_row", "_rows", "_store", "_task", "_window", NULL};

/* Claims a kernel's name: base, or base with '_' appended, such that neither it nor any of
 * its kernel_helpers names is taken or reserved, and claims those too, so that a module
 * named like another's helper ("fc" and "fc_store") gets a name of its own. */
static const char *kernel_claim(Names *s, const char *base) {
  const char *name = base;
  for (;;) {
    bool free = !names_has(s, name) && !reserved_ident(name);
    for (int i = 0; free && kernel_helpers[i]; i++) {
      const char *h = kiln_fmt("%s%s", name, kernel_helpers[i]);
      free = !names_has(s, h) && !reserved_ident(h);
    }
    if (free) break;
    name = kiln_fmt("%s_", name);
  }
  for (int i = 0; kernel_helpers[i]; i++) names_claim(s, kiln_fmt("%s%s", name, kernel_helpers[i]));
  return names_claim(s, name);
}

/* The profile's own names (ProfNames), claimed last: <model>_profile and the like, given
 * way ('_' appended) to whatever already holds them. */
static ProfNames profile_claim(Names *ids, const char *model) {
  return (ProfNames){model, names_claim(ids, kiln_fmt("%s_profile", model)), names_claim(ids, kiln_fmt("%s_prof_kernel", model)),
                     names_claim(ids, kiln_fmt("%s_prof_now", model)), names_claim(ids, kiln_fmt("%s_prof_tick", model))};
}

/* What <time.h> declares (C11, and POSIX's where a build defines _POSIX_C_SOURCE), and the
 * run function's clock reading prof_t: a profile includes the one and declares the other, so
 * no kernel or parameter of such a build may take these names. */
static void claim_time_h(Names *ids) {
  static const char *const own[] = {"prof_t", "time", "clock", "difftime", "mktime", "timespec_get", "asctime", "ctime", "gmtime",
                                    "localtime", "strftime", "clock_t", "time_t", "CLOCKS_PER_SEC", "TIME_UTC",
                                    "clock_gettime", "clock_getres", "clock_settime", "clock_nanosleep", "nanosleep",
                                    "clock_getcpuclockid", "tzset", "tzname", "timezone", "daylight", "getdate",
                                    "getdate_err", "strptime", "asctime_r", "ctime_r", "gmtime_r", "localtime_r",
                                    "timer_create", "timer_delete", "timer_gettime", "timer_settime",
                                    "timer_getoverrun", "CLOCK_REALTIME", "CLOCK_MONOTONIC", "CLOCK_PROCESS_CPUTIME_ID",
                                    "CLOCK_THREAD_CPUTIME_ID", "TIMER_ABSTIME", NULL};
  for (int i = 0; own[i]; i++) names_claim(ids, own[i]);
}

/* One of the profile's templates (templates/c/prof*.tmpl, profile*.tmpl) with names pn, for
 * a file of n kernels in all and the table rows `rows`; "" without a profile (rows NULL). */
static const char *profile_text(const char *tmpl, const ProfNames *pn, const char *upper, int n, const Buf *rows) {
  if (!rows) return "";
  EmitVars v = {0};
  emit_var(&v, "MODEL", pn->model);
  emit_var(&v, "PROF_TABLE", pn->table);
  emit_var(&v, "PROF_TYPE", pn->type);
  emit_var(&v, "PROF_NOW", pn->now);
  emit_var(&v, "PROF_TICK", pn->tick);
  emit_var(&v, "UPPER", upper);
  emit_vari(&v, "COUNT", n);
  emit_vari(&v, "LEN", n > 0 ? n : 1);
  emit_var(&v, "ROWS", rows->len ? rows->data : "    {0},\n");
  return expand_str(tmpl, &v);
}

/* Names every kernel, weight, arena value and I/O parameter, uniquely. The I/O
 * parameters claim their names first: they appear in the public header, while a
 * kernel's name is private to m.c (a clash renames the kernel). */
static void ctx_init(Ctx *c, Graph *g, bool profile) {
  c->g = g;
  c->model = g->model;
  c->upper = emit_upper(g->model);
  Names ids = {0}, stems = {0};
  names_claim(&ids, kiln_fmt("%s_run", g->model));
  names_claim(&ids, kiln_fmt("%s_run_v", g->model));
  names_claim(&ids, kiln_fmt("%s_run_par", g->model));
  names_claim(&ids, kiln_fmt("%s_body", g->model));
  if (profile) claim_time_h(&ids);
  c->in_param = kiln_alloc(sizeof(char *) * (size_t)(g->ninputs + 1));
  c->in_read = kiln_alloc(sizeof(bool) * (size_t)(g->ninputs + 1));
  c->out_param = kiln_alloc(sizeof(char *) * (size_t)(g->noutputs + 1));
  c->in_stem = kiln_alloc(sizeof(char *) * (size_t)(g->ninputs + 1));
  c->out_stem = kiln_alloc(sizeof(char *) * (size_t)(g->noutputs + 1));
  static const char *const macro_reserved[] = {"WEIGHTS", "ARENA", "WEIGHTS_FILE", NULL};
  for (int i = 0; macro_reserved[i]; i++) names_claim(&stems, macro_reserved[i]);
  for (int i = 0; i < g->ninputs; i++) {
    c->in_param[i] = names_claim(&ids, emit_ident(g->inputs[i].name));
    c->in_stem[i] = names_claim(&stems, emit_upper(emit_ident(g->inputs[i].name)));
  }
  for (int i = 0; i < g->noutputs; i++) {
    c->out_param[i] = names_claim(&ids, emit_ident(g->outputs[i].name));
    c->out_stem[i] = names_claim(&stems, emit_upper(emit_ident(g->outputs[i].name)));
  }
  c->kname = kiln_alloc(sizeof(char *) * (size_t)(g->nkernels + 1));
  for (int k = 0; k < g->nkernels; k++) c->kname[k] = g->kernels[k].cfunc = kernel_claim(&ids, emit_ident(g->kernels[k].cname));
  c->ename = kiln_alloc(sizeof(char *) * (size_t)(g->nkernels + 1));
  for (int k = 0; k < g->nkernels; k++)
    if (g->kernels[k].nnodes > 1) c->ename[k] = names_claim(&ids, kiln_fmt("%s_epilogue", c->kname[k]));
  c->wname = kiln_alloc(sizeof(char *) * (size_t)(g->nnodes + 1));
  c->aname = kiln_alloc(sizeof(char *) * (size_t)(g->nnodes + 1));
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->op == OP_RESHAPE) continue;
    if (n->region == REG_WEIGHTS) {
      const char *base = n->name && *n->name ? n->name : kiln_fmt("%s_%d", kiln_ops[n->op].name, n->id);
      c->wname[i] = names_claim(&ids, emit_upper(emit_ident(kiln_fmt("W_%s", base))));   /* "0.weight": W_0_WEIGHT */
    }
  }
  arena_names(c, g, &ids);
  c->prof = profile_claim(&ids, g->model);
}

/* ---- the files ---- */

/* Offsets in a region of size bytes are enum constants, as a reader expects, unless the
 * region passes what an int holds: then 64-bit #defines (docs/output.md). The test hook
 * KILN_TEST_WIDE_OFFSETS=1 takes the wide form for any size, so t_build can compile and
 * run it without writing gigabytes. */
/* The helper functions the generated kernels may call, in the order they are written (each
 * after what it uses), with the name whose use needs it ('|' between alternatives). */
static const struct {
  const char *tmpl, *uses;
} c_helpers[] = {
    {"c/round_f16.c.tmpl", "kiln_round_f16("},        /* x.half().float() */
    {"c/dot4.c.tmpl", "kiln_dot4("},                  /* gathered patches, attention scores */
    {"c/math_exp.c.tmpl", "kiln_expf(|kiln_select(|kiln_bits"},   /* math: exp first, */
    {"c/math_expneg.c.tmpl", "kiln_expf_neg("},       /* exp of a softmax's x - max */
    {"c/math_tanh.c.tmpl", "kiln_tanhf("},            /* which the others call */
    {"c/math_erf.c.tmpl", "kiln_erff("},
    {"c/math_log.c.tmpl", "kiln_logf("},
    {"c/row_lanes.c.tmpl", "kiln_row_max(|kiln_row_sum(|kiln_row_sqdev(|KILN_ROW_LANES"},   /* softmax rows, attention, norms */
    {"c/row_nonfinite.c.tmpl", "kiln_row_nonfinite("},   /* prefill attention's check of V */
    {"c/par_for.c.tmpl", "kiln_for(|KILN_TASK"},      /* tasks */
    {"c/rows_for.c.tmpl", "kiln_rows_for("},          /* row-wise kernels' tasks */
    {"c/vec_lanes.c.tmpl", "kiln_cv_"},               /* vector lanes: */
    {"c/vec_muladd.c.tmpl", "kiln_cv_muladd("},       /* direct convolutions */
    {"c/vec_maxtap.c.tmpl", "kiln_cv_maxtap("},       /* stride-2 max pools */
    {"c/isa.c.tmpl", "KILN_INLINE|KILN_NOINLINE|KILN_MR|KILN_PANEL|kiln_avx512("},   /* vector types */
    {"c/split_cols.c.tmpl", "kiln_split_row(|kiln_split_cols("},   /* even and odd columns */
    {"c/ask.c.tmpl", "kiln_ask("},                    /* prefetches */
    {"c/gemm_lib.c.tmpl", "kiln_panels_pass(|kiln_tile_full("},   /* the micro-kernels */
    {"c/gemm_split.c.tmpl", "kiln_split("},
    {"c/gemm_row.c.tmpl", "kiln_row("},               /* one row of A */
    {"c/gemm_par.c.tmpl", "kiln_gemm_par("},          /* matmul */
    {"c/attn_lib.c.tmpl", "kiln_attn_par("},          /* attention over a prefill's queries */
    {"c/conv_geom.c.tmpl", "kiln_conv_geom|kiln_grid_taps|kiln_conv_store"},   /* convolutions: their types, */
    {"c/conv_tile.c.tmpl", "kiln_grid_tile(|kiln_conv_cut_of("},   /* tiles and tasks, */
    {"c/conv_pad.c.tmpl", "kiln_pad_planes(|kiln_grid_taps_of("},  /* padded grid, */
    {"c/conv_lib.c.tmpl", "kiln_conv_par("},          /* as a matrix product, */
    {"c/lanes_lib.c.tmpl", "kiln_lanes_par("},        /* with the filters across the lanes */
    {"c/wino_lib.c.tmpl", "kiln_wino_par("},          /* 3x3 convolution by Winograd's F(2x2, 3x3) */
    {"c/quant_lib.c.tmpl", "KILN_QPANEL|KILN_QKC"},   /* weights in a stored format */
    {"c/h2f_lanes.c.tmpl", "kiln_h2f_lanes("},
    {"c/deq/nib_sym.c.tmpl", "kiln_nib_sym("},
    {"c/deq/nib_affine.c.tmpl", "kiln_nib_affine("},
    {"c/deq/bytes.c.tmpl", "kiln_bytes("},
    {"c/deq/f16.c.tmpl", "kiln_deq_f16,"},
    {"c/deq/bf16.c.tmpl", "kiln_deq_bf16,"},
    {"c/deq/i8.c.tmpl", "kiln_deq_i8,"},
    {"c/deq/q8_0.c.tmpl", "kiln_deq_q8_0,"},
    {"c/deq/q4_0.c.tmpl", "kiln_deq_q4_0,"},
    {"c/deq/q4_k.c.tmpl", "kiln_deq_q4_k,"},
    {"c/deq/q6_k.c.tmpl", "kiln_deq_q6_k,"},
    {"c/deq/g8.c.tmpl", "kiln_deq_g8,"},
    {"c/deq/g4.c.tmpl", "kiln_deq_g4,"},
    {"c/qgemm_lib.c.tmpl", "kiln_qgemm_par("},        /* products with such a weight */
    {"c/qrow.c.tmpl", "kiln_qrow("},                  /* embeddings from one */
};
enum { C_NHELPERS = sizeof c_helpers / sizeof c_helpers[0] };

/* Whether text uses any of the '|'-separated names in uses. */
static bool uses_any(const char *text, const char *uses) {
  for (const char *u = uses; *u;) {
    const char *bar = strchr(u, '|');
    size_t n = bar ? (size_t)(bar - u) : strlen(u);
    if (strstr(text, kiln_fmt("%.*s", (int)n, u))) return true;
    u += n + (bar != NULL);
  }
  return false;
}

/* The helpers the kernels (and the helpers they need) call, each once, in table order: a
 * helper is needed when the kernels or a later helper that is needed use it (a helper only
 * uses earlier ones), so one pass from the end decides; nothing unused is written (-Werror
 * knows unused static functions). */
static const char *helpers(const char *kernels) {
  bool need[C_NHELPERS] = {false};
  for (int i = C_NHELPERS - 1; i >= 0; i--) {
    need[i] = kernels && uses_any(kernels, c_helpers[i].uses);
    for (int j = i + 1; j < C_NHELPERS && !need[i]; j++)
      need[i] = need[j] && uses_any(template_get(c_helpers[j].tmpl), c_helpers[i].uses);
  }
  Buf b = {0};
  for (int i = 0; i < C_NHELPERS; i++)
    if (need[i]) buf_puts(&b, template_get(c_helpers[i].tmpl));
  const char *s = b.len ? kiln_strdup(b.data) : "";
  buf_free(&b);
  return s;
}

static bool wide_region(int64_t size) {
  const char *force = getenv("KILN_TEST_WIDE_OFFSETS");
  return size > INT32_MAX || (force && strcmp(force, "1") == 0);
}

/* One enum line "name = value" (a #define in a wide region) with what as its comment
 * (made comment-safe), as a fresh arena string. */
static const char *offset_line(const char *name, int64_t value, const char *what, bool wide) {
  EmitVars v = {0};
  emit_var(&v, "NAME", name);
  emit_varl(&v, "VALUE", value);
  emit_var(&v, "WHAT", esc_comment(what));
  return expand_str(wide ? "c/offset_wide.c.tmpl" : "c/offset.c.tmpl", &v);
}

/* The offsets list of a region: its enum template, or the wide variant. */
static const char *offset_block(const char *tmpl, const char *wide_tmpl, bool wide, EmitVars *v) {
  return expand_str(wide ? wide_tmpl : tmpl, v);
}

/* What a W_ constant's comment says about weights-region leaf n: "f32 [512, 784] fc1.weight". */
static const char *weight_what(const Node *n) {
  const WFormatInfo *q = stored_format(n);   /* "q4_0 [40, 64] proj.weight": values f32, stored as q4_0 */
  return kiln_fmt("%s %s %s", q ? q->name : dtype_name(n->dtype), shape_of(n), n->name ? n->name : kiln_ops[n->op].name);
}

/* The A_ enum of c's graph (arena values and kernels' scratch in schedule order), "" when it has none. */
static const char *arena_enum(const Ctx *c) {
  Graph *g = c->g;
  Buf al = {0};
  for (int k = 0; k < g->nkernels; k++) {
    Node *n = node(g, g->kernels[k].nodes[g->kernels[k].nnodes - 1]);
    if (c->aname[n->id]) {
      const char *what = kiln_fmt("%s %s, %lld bytes", dtype_name(n->dtype), shape_of(n), (long long)node_bytes(n));
      buf_puts(&al, offset_line(c->aname[n->id], n->offset, what, wide_region(g->arena_size)));
    }
    if (c->pname[k]) {   /* pass_memplan's scratch: a conv's padded input, or its tiles' transforms */
      const char *what = kiln_fmt(scratch_is_wino(g, k) ? "%s's input tiles, transformed, %lld bytes" : "%s's padded input, %lld bytes",
                                  c->kname[k], (long long)g->kernels[k].scratch);
      buf_puts(&al, offset_line(c->pname[k], g->kernels[k].scratch_offset, what, wide_region(g->arena_size)));
    }
  }
  EmitVars av = {0};
  emit_var(&av, "ENTRIES", al.data ? al.data : "");
  emit_varl(&av, "ARENA_SIZE", g->arena_size);
  const char *s = al.len ? offset_block("c/arena_enum.c.tmpl", "c/arena_enum_wide.c.tmpl", wide_region(g->arena_size), &av) : "";
  buf_free(&al);
  return s;
}

/* The W_ enum (weights in offset order) and the A_ enum (arena values in schedule order). */
static void offset_enums(const Ctx *c, EmitVars *fv) {
  Graph *g = c->g;
  Buf wl = {0};
  for (int i = 0; i < g->nnodes; i++)
    if (c->wname[i])
      buf_puts(&wl, offset_line(c->wname[i], g->nodes[i]->offset, weight_what(g->nodes[i]), wide_region(g->weights_size)));
  EmitVars wv = {0};
  emit_var(&wv, "ENTRIES", wl.data ? wl.data : "");
  emit_var(fv, "WEIGHT_ENUM", wl.len ? offset_block("c/weight_enum.c.tmpl", "c/weight_enum_wide.c.tmpl",
                                                    wide_region(g->weights_size), &wv) : "");
  emit_var(fv, "ARENA_ENUM", arena_enum(c));
  buf_free(&wl);
}

/* One of the run function's parameters (NAME) or of its _v wrapper's casts (ARRAY[I]):
 * const for an input, t its element type. */
static void run_arg(Buf *b, const char *tmpl, bool input, const char *t, const char *name, int i) {
  EmitVars v = {0};
  emit_var(&v, "CONST", input ? "const " : "");
  emit_var(&v, "T", t);
  emit_var(&v, "NAME", name);
  emit_var(&v, "ARRAY", input ? "inputs" : "outputs");
  emit_vari(&v, "I", i);
  expand(b, tmpl, &v);
}

/* "(void)name;" for a pointer the run function does not use, so -Wextra stays quiet. */
static void unused_line(Buf *b, const char *name) {
  EmitVars v = {0};
  emit_var(&v, "NAME", name);
  expand(b, "c/unused.c.tmpl", &v);
}

/* ", const float *image, float *logits" for the run function. */
static char *run_params(const Ctx *c) {
  Buf b = {0};
  Graph *g = c->g;
  for (int i = 0; i < g->ninputs; i++)
    run_arg(&b, "c/run_param.c.tmpl", true, emit_c_type(node(g, g->inputs[i].node)->dtype), c->in_param[i], i);
  for (int i = 0; i < g->noutputs; i++)
    run_arg(&b, "c/run_param.c.tmpl", false, emit_c_type(node(g, g->outputs[i].node)->dtype), c->out_param[i], i);
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* Does g take an i64 input? Then its entry checks every value fits i32 before running
 * anything and returns <M>_OK or <M>_E_RANGE. */
static bool has_i64_input(Graph *g) {
  for (int i = 0; i < g->ninputs; i++)
    if (node(g, g->inputs[i].node)->dtype == DT_I64) return true;
  return false;
}

/* The range check of each i64 input (entry_check_i64.c.tmpl), in input order. */
static char *i64_checks(const Ctx *c, const char *upper) {
  Buf b = {0};
  Graph *g = c->g;
  for (int i = 0; i < g->ninputs; i++) {
    const Node *n = node(g, g->inputs[i].node);
    if (n->dtype != DT_I64) continue;
    c->in_read[i] = true;
    EmitVars v = {0};
    emit_var(&v, "X", c->in_param[i]);
    emit_var(&v, "NAME", esc_comment(g->inputs[i].name));
    emit_varl(&v, "N", node_numel(n));
    emit_var(&v, "UPPER", upper);
    expand(&b, "c/entry_check_i64.c.tmpl", &v);
  }
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* ", image, logits": the run function's parameter names, to pass them on. */
static char *param_names(const Ctx *c) {
  Buf b = {0};
  Graph *g = c->g;
  for (int i = 0; i < g->ninputs; i++) run_arg(&b, "c/run_name.c.tmpl", true, "", c->in_param[i], i);
  for (int i = 0; i < g->noutputs; i++) run_arg(&b, "c/run_name.c.tmpl", false, "", c->out_param[i], i);
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* Appends <model>.c to out: every kernel in schedule order, the offset enums and the
 * run function calling them, (void)-ing the pointers no kernel uses. c is initialised. */
static void emit_source(const Ctx *c, Buf *out) {
  Graph *g = c->g;
  Buf kernels = {0}, calls = {0}, vargs = {0};
  for (int k = 0; k < g->nkernels; k++) c_emit_kernel(c, k, &kernels, &calls);
  for (int i = 0; i < g->ninputs; i++)
    run_arg(&vargs, "c/run_varg.c.tmpl", true, emit_c_type(node(g, g->inputs[i].node)->dtype), c->in_param[i], i);
  for (int i = 0; i < g->noutputs; i++)
    run_arg(&vargs, "c/run_varg.c.tmpl", false, emit_c_type(node(g, g->outputs[i].node)->dtype), c->out_param[i], i);
  EmitVars rv = {0};
  bool checked = has_i64_input(g);
  const char *checks = i64_checks(c, c->upper);
  emit_var(&rv, "MODEL", c->model);
  emit_var(&rv, "PARAMS", run_params(c));
  emit_var(&rv, "RET", checked ? "int" : "void");
  emit_var(&rv, "CHECK_DOC", checked ? "the range checks of the i64 inputs, then " : "");
  emit_var(&rv, "CHECKS", checks);
  emit_var(&rv, "RETURN", checked ? kiln_fmt("  return %s_OK;\n", c->upper) : "");
  emit_var(&rv, "RETURN_KW", checked ? "return " : "");
  emit_var(&rv, "NAMES", param_names(c));
  emit_var(&rv, "CALLS", calls.data ? calls.data : "");
  emit_var(&rv, "VARGS", vargs.data ? vargs.data : "");
  emit_var(&rv, "PROF_START", profile_text("c/prof_start.c.tmpl", &c->prof, c->upper, g->nkernels, c->prof_rows));
  /* (void) for the pointers a model does not use, so -Wextra stays quiet */
  const char *calltext = calls.data ? calls.data : "";
  Buf unused = {0};
  if (!strstr(calltext, "(par, ")) unused_line(&unused, "par");
  if (!strstr(calltext, "(w + ")) unused_line(&unused, "w");
  if (!strstr(calltext, "(a + ")) unused_line(&unused, "a");
  for (int i = 0; i < g->ninputs; i++)   /* an input no kernel reads stays in the signature */
    if (!c->in_read[i]) unused_line(&unused, c->in_param[i]);
  emit_var(&rv, "UNUSED", kiln_strdup(unused.data ? unused.data : ""));
  buf_free(&unused);
  Buf unused_v = {0};
  if (!g->ninputs) unused_line(&unused_v, "inputs");
  if (!g->noutputs) unused_line(&unused_v, "outputs");
  emit_var(&rv, "UNUSED_V", kiln_strdup(unused_v.data ? unused_v.data : ""));
  buf_free(&unused_v);
  EmitVars fv = {0};
  emit_var(&fv, "MODEL", c->model);
  emit_var(&fv, "SCRIPT", esc_comment(graph_src_name(g, g->script)));
  emit_var(&fv, "KERNEL_COUNT", emit_count(g->nkernels, "kernel", "kernels"));
  offset_enums(c, &fv);
  emit_var(&fv, "KERNELS", kernels.data ? kernels.data : "");
  /* Helpers only the kernels that call them pull in (so small models stay small). */
  emit_var(&fv, "HELPERS", helpers(kernels.data));
  emit_var(&fv, "RUN", expand_str("c/run.c.tmpl", &rv));
  emit_var(&fv, "PROFILE_INCLUDE", c->prof_rows ? "#include <time.h>\n" : "");
  emit_var(&fv, "PROFILE", profile_text("c/profile.c.tmpl", &c->prof, c->upper, g->nkernels, c->prof_rows));
  emit_var(&fv, "PROFILE_TABLE", profile_text("c/profile_table.c.tmpl", &c->prof, c->upper, g->nkernels, c->prof_rows));
  expand(out, "c/file.c.tmpl", &fv);
  buf_free(&kernels);
  buf_free(&calls);
  buf_free(&vargs);
}

/* The per-I/O doc lines and #defines of the header, for inputs or outputs. */
static void io_lines(const Ctx *c, bool outputs, Buf *doc, Buf *defs, Buf *sizes, Buf *names) {
  Graph *g = c->g;
  int n = outputs ? g->noutputs : g->ninputs;
  for (int i = 0; i < n; i++) {
    const GraphIO *io = outputs ? &g->outputs[i] : &g->inputs[i];
    Node *nd = node(g, io->node);
    EmitVars v = {0};
    emit_var(&v, "UPPER", c->upper);
    emit_var(&v, "STEM", outputs ? c->out_stem[i] : c->in_stem[i]);
    emit_var(&v, "KIND", outputs ? "output" : "input");
    emit_var(&v, "NAME", io->name);
    emit_var(&v, "DTYPE", dtype_name(nd->dtype));
    emit_var(&v, "SHAPE", shape_of(nd));
    emit_var(&v, "BYTES", kiln_fmt("%lld", (long long)node_bytes(nd)));
    emit_var(&v, "NUMEL", kiln_fmt("%lld", (long long)node_numel(nd)));
    expand(doc, "c/io_doc.h.tmpl", &v);
    expand(defs, "c/io_define.h.tmpl", &v);
    buf_printf(sizes, "%s%s_%s_SIZE", i ? ", " : "", c->upper, outputs ? c->out_stem[i] : c->in_stem[i]);
    buf_printf(names, "%s\"%s\"", i ? ", " : "", io->name);
  }
  if (n == 0) {
    buf_puts(doc, " *   (none)\n");
    buf_puts(sizes, "0");
    buf_puts(names, "\"\"");
  }
}

/* Appends <model>.h to out: I/O docs, size/name macros, the weights checksum and the
 * run prototype; embed adds the embedded-weights declaration, a profile (c->prof_rows) its
 * table's. */
static void emit_header(const Ctx *c, uint64_t checksum, bool embed, Buf *out) {
  Graph *g = c->g;
  Buf idoc = {0}, odoc = {0}, defs = {0}, isz = {0}, osz = {0}, inm = {0}, onm = {0};
  io_lines(c, false, &idoc, &defs, &isz, &inm);
  io_lines(c, true, &odoc, &defs, &osz, &onm);
  EmitVars v = {0};
  emit_var(&v, "MODEL", c->model);
  emit_var(&v, "UPPER", c->upper);
  emit_var(&v, "SCRIPT", esc_comment(graph_src_name(g, g->script)));
  emit_var(&v, "INPUT_DOC", idoc.data);
  emit_var(&v, "OUTPUT_DOC", odoc.data);
  emit_var(&v, "WEIGHTS_SIZE", kiln_fmt("%lld", (long long)g->weights_size));
  emit_var(&v, "CHECKSUM", kiln_fmt("%016llx", (unsigned long long)checksum));
  emit_var(&v, "FILE_SIZE", kiln_fmt("%lld", (long long)g->weights_size + KILN_ALIGN));
  emit_var(&v, "ARENA_SIZE", kiln_fmt("%lld", (long long)g->arena_size));
  emit_var(&v, "NUM_INPUTS", kiln_fmt("%d", g->ninputs));
  emit_var(&v, "NUM_OUTPUTS", kiln_fmt("%d", g->noutputs));
  emit_var(&v, "IO_DEFINES", defs.data ? defs.data : "");
  emit_var(&v, "INPUT_SIZES", isz.data);
  emit_var(&v, "OUTPUT_SIZES", osz.data);
  emit_var(&v, "INPUT_NAMES", inm.data);
  emit_var(&v, "OUTPUT_NAMES", onm.data);
  emit_var(&v, "PARAMS", run_params(c));
  emit_var(&v, "RET", has_i64_input(g) ? "int" : "void");
  emit_var(&v, "RANGE_DEFINES", has_i64_input(g) ? expand_str("c/range_defines.h.tmpl", &v) : "");
  emit_var(&v, "EMBED_DECL", embed ? expand_str("c/embed_decl.h.tmpl", &v) : "");
  emit_var(&v, "PROFILE_DECL", profile_text("c/profile.h.tmpl", &c->prof, c->upper, g->nkernels, c->prof_rows));
  emit_var(&v, "PARALLEL_TYPE", template_get("c/parallel_type.h.tmpl"));
  expand(out, "c/header.h.tmpl", &v);
  Buf *all[] = {&idoc, &odoc, &defs, &isz, &osz, &inm, &onm};
  for (int i = 0; i < 7; i++) buf_free(all[i]);
}

/* <m>_weights.c: the blob as hex bytes, 16 a line. */
static void emit_embedded(const Ctx *c, const Buf *blob, Buf *out) {
  static const char hex[] = "0123456789abcdef";
  Buf bytes = {0};
  char line[16 * 6 + 4];
  for (size_t i = 0; i < blob->len; i += 16) {
    char *p = line;
    *p++ = ' ';
    for (size_t j = i; j < i + 16 && j < blob->len; j++) {
      unsigned char b = (unsigned char)blob->data[j];
      *p++ = ' ', *p++ = '0', *p++ = 'x', *p++ = hex[b >> 4], *p++ = hex[b & 15], *p++ = ',';
    }
    *p++ = '\n';
    buf_put(&bytes, line, (size_t)(p - line));
  }
  EmitVars v = {0};
  emit_var(&v, "MODEL", c->model);
  emit_var(&v, "UPPER", c->upper);
  emit_var(&v, "SCRIPT", esc_comment(graph_src_name(c->g, c->g->script)));
  emit_var(&v, "BYTES", bytes.data ? bytes.data : "");
  expand(out, "c/weights.c.tmpl", &v);
  buf_free(&bytes);
}

/* Writes <model>.h, <model>.c, <model>.weights (and <model>_weights.c if embedding)
 * into o->tmpdir; g must be planned (kernels, regions, offsets). Dies on broken IR. */
static void emit_plain(Graph *g, const EmitOptions *o) {
  Ctx c = {0};
  ctx_init(&c, g, o->profile);
  Buf hdr = {0}, src = {0}, prof_rows = {0};
  if (o->profile) c.prof_rows = &prof_rows;
  uint64_t checksum = weights_write(&g, 1, g->weights_size, o->tmpdir, kiln_fmt("%s.weights", g->model));
  emit_header(&c, checksum, o->embed_weights, &hdr);
  emit_source(&c, &src);
  kiln_write_file(o->tmpdir, kiln_fmt("%s.h", g->model), hdr.data, hdr.len);
  kiln_write_file(o->tmpdir, kiln_fmt("%s.c", g->model), src.data, src.len);
  if (o->embed_weights) {
    Buf blob = {0}, emb = {0};
    weights_blob(&g, 1, g->weights_size, &blob);
    emit_embedded(&c, &blob, &emb);
    kiln_write_file(o->tmpdir, kiln_fmt("%s_weights.c", g->model), emb.data, emb.len);
    buf_free(&emb);
    buf_free(&blob);
  }
  buf_free(&hdr);
  buf_free(&src);
  buf_free(&prof_rows);
}

/* ==== programs: state and several entry points ==== */

/* What the emitter decides once for a program that is not plain: file-scope names and
 * one Ctx per entry (its kernels, arena values and parameters). */
typedef struct {
  Program *p;
  const char *model, *upper;
  bool has_state;                 /* entries take `state` and return int */
  Ctx *e;                         /* per entry */
  const char **fn;                /* per entry: <model>_<entry> (<model>_run for the script itself) */
  const char **estem;             /* per entry: its macro prefix, "PREFILL_" ("" for the script itself) */
  const char **sname, **sstem;    /* per state: S_ constant, macro stem */
  const char **slot_name;         /* per weights slot (Program.wslots): W_ constant */
} PCtx;

/* Adds name to s unless it is there (a set of names to avoid, not handed out). */
static void names_add(Names *s, const char *name) {
  if (names_has(s, name)) return;
  const Names *also = s->also;
  s->also = NULL;
  names_claim(s, name);
  s->also = also;
}

/* The W_ constant of the slot at offset (slots are in offset order). */
static const char *slot_name_at(const PCtx *pc, int64_t offset) {
  int lo = 0, hi = pc->p->nwslots - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (pc->p->wslots[mid].offset == offset) return pc->slot_name[mid];
    if (pc->p->wslots[mid].offset < offset) lo = mid + 1;
    else hi = mid - 1;
  }
  die("C: no weights slot at offset %lld", (long long)offset);
}

/* Entry e's kernels, epilogue helpers and arena constants, named in ids (file scope); its
 * weights take their slot's W_ name. (pass_group starts a named entry's kernel names
 * with the entry's, so the entries' kernels do not clash.) */
static void pctx_entry_names(PCtx *pc, int e, Names *ids) {
  Ctx *c = &pc->e[e];
  Graph *g = pc->p->entries[e];
  c->g = g;
  c->model = pc->model;
  c->upper = pc->upper;
  c->sname = pc->sname;
  c->kname = kiln_alloc(sizeof(char *) * (size_t)(g->nkernels + 1));
  c->ename = kiln_alloc(sizeof(char *) * (size_t)(g->nkernels + 1));
  for (int k = 0; k < g->nkernels; k++) c->kname[k] = g->kernels[k].cfunc = kernel_claim(ids, emit_ident(g->kernels[k].cname));
  for (int k = 0; k < g->nkernels; k++)
    if (g->kernels[k].nnodes > 1) c->ename[k] = names_claim(ids, kiln_fmt("%s_epilogue", c->kname[k]));
  c->wname = kiln_alloc(sizeof(char *) * (size_t)(g->nnodes + 1));
  c->aname = kiln_alloc(sizeof(char *) * (size_t)(g->nnodes + 1));
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!n->dead && n->op != OP_RESHAPE && n->region == REG_WEIGHTS) c->wname[i] = slot_name_at(pc, n->offset);
  }
  arena_names(c, g, ids);
}

/* Entry e's parameters, kept as the script named them unless a file-scope name of ids
 * or the entry function's own locals take them, and their macro stems. An i32 scalar
 * input is passed by value. */
static void pctx_entry_params(PCtx *pc, int e, Names *ids) {
  Ctx *c = &pc->e[e];
  Graph *g = c->g;
  Names local = {.also = ids}, stems = {0};
  static const char *const locals[] = {"s", "state", NULL};
  static const char *const fixed[] = {"NUM_INPUTS", "NUM_OUTPUTS", "ARENA", "WEIGHTS", "WEIGHTS_FILE", "STATE",
                                      "NUM_ENTRIES", "NUM_STATES", "OK", "E_RANGE", NULL};
  for (int i = 0; locals[i]; i++) names_add(&local, locals[i]);
  for (int i = 0; fixed[i]; i++) names_add(&stems, fixed[i]);
  c->in_param = kiln_alloc(sizeof(char *) * (size_t)(g->ninputs + 1));
  c->in_stem = kiln_alloc(sizeof(char *) * (size_t)(g->ninputs + 1));
  c->in_read = kiln_alloc(sizeof(bool) * (size_t)(g->ninputs + 1));
  c->in_byval = kiln_alloc(sizeof(bool) * (size_t)(g->ninputs + 1));
  c->out_param = kiln_alloc(sizeof(char *) * (size_t)(g->noutputs + 1));
  c->out_stem = kiln_alloc(sizeof(char *) * (size_t)(g->noutputs + 1));
  for (int i = 0; i < g->ninputs; i++) {
    const Node *n = node(g, g->inputs[i].node);
    c->in_param[i] = names_claim(&local, emit_ident(g->inputs[i].name));
    c->in_stem[i] = kiln_fmt("%s%s", pc->estem[e], names_claim(&stems, emit_upper(emit_ident(g->inputs[i].name))));
    c->in_byval[i] = n->dtype == DT_I32 && n->shape.rank == 0;
  }
  for (int i = 0; i < g->noutputs; i++) {
    c->out_param[i] = names_claim(&local, emit_ident(g->outputs[i].name));
    c->out_stem[i] = kiln_fmt("%s%s", pc->estem[e], names_claim(&stems, emit_upper(emit_ident(g->outputs[i].name))));
  }
}

/* Names everything: the public functions first (they are the API), then the file-scope
 * names of the weights, states, kernels and arena values, which avoid every entry's
 * parameter names (a parameter would hide them inside its function), then each entry's
 * parameters and macro stems. */
static void pctx_init(PCtx *pc, Program *p, bool profile) {
  pc->p = p;
  pc->model = p->model;
  pc->upper = emit_upper(p->model);
  pc->has_state = p->nstates > 0;
  Names ids = {0}, params = {0};
  pc->fn = kiln_alloc(sizeof(char *) * (size_t)p->nentries);
  pc->estem = kiln_alloc(sizeof(char *) * (size_t)p->nentries);
  if (pc->has_state) names_claim(&ids, kiln_fmt("%s_reset", p->model));
  if (profile) claim_time_h(&ids);
  for (int e = 0; e < p->nentries; e++) {
    const Graph *g = p->entries[e];
    pc->fn[e] = names_claim(&ids, kiln_fmt("%s_%s", p->model, g->entry));
    names_claim(&ids, kiln_fmt("%s_v", pc->fn[e]));
    names_claim(&ids, kiln_fmt("%s_par", pc->fn[e]));
    names_claim(&ids, kiln_fmt("%s_body", pc->fn[e]));
    pc->estem[e] = p->explicit_entries ? kiln_fmt("%s_", emit_upper(g->entry)) : "";
    for (int i = 0; i < g->ninputs; i++) names_add(&params, emit_ident(g->inputs[i].name));
    for (int i = 0; i < g->noutputs; i++) names_add(&params, emit_ident(g->outputs[i].name));
  }
  ids.also = &params;
  pc->slot_name = kiln_alloc(sizeof(char *) * (size_t)(p->nwslots + 1));
  for (int i = 0; i < p->nwslots; i++) {
    const Node *n = p->wslots[i].node;
    const char *base = n->name && *n->name ? n->name : kiln_fmt("%s_%d", kiln_ops[n->op].name, n->id);
    pc->slot_name[i] = names_claim(&ids, emit_upper(emit_ident(kiln_fmt("W_%s", base))));
  }
  Names sstems = {0};
  pc->sname = kiln_alloc(sizeof(char *) * (size_t)(p->nstates + 1));
  pc->sstem = kiln_alloc(sizeof(char *) * (size_t)(p->nstates + 1));
  for (int i = 0; i < p->nstates; i++) {
    pc->sname[i] = names_claim(&ids, emit_upper(emit_ident(kiln_fmt("S_%s", p->states[i].name))));
    pc->sstem[i] = names_claim(&sstems, emit_upper(emit_ident(p->states[i].name)));
  }
  pc->e = kiln_alloc(sizeof(Ctx) * (size_t)p->nentries);
  for (int e = 0; e < p->nentries; e++) pctx_entry_names(pc, e, &ids);
  ids.also = NULL;
  for (int e = 0; e < p->nentries; e++) pctx_entry_params(pc, e, &ids);
  const ProfNames pn = profile_claim(&ids, p->model);
  for (int e = 0; e < p->nentries; e++) pc->e[e].prof = pn;
}

/* ", const float *x, int32_t pos, float *y": an entry's parameters (vargs: its _v casts). */
static char *entry_params(const Ctx *c, bool vargs) {
  Buf b = {0};
  Graph *g = c->g;
  for (int i = 0; i < g->ninputs; i++) {
    const char *t = emit_c_type(node(g, g->inputs[i].node)->dtype);
    const char *tmpl = c->in_byval[i] ? (vargs ? "c/run_varg_value.c.tmpl" : "c/run_param_value.c.tmpl")
                                      : (vargs ? "c/run_varg.c.tmpl" : "c/run_param.c.tmpl");
    run_arg(&b, tmpl, true, t, c->in_param[i], i);
  }
  for (int i = 0; i < g->noutputs; i++)
    run_arg(&b, vargs ? "c/run_varg.c.tmpl" : "c/run_param.c.tmpl", false, emit_c_type(node(g, g->outputs[i].node)->dtype),
            c->out_param[i], i);
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* The range checks an entry makes before any kernel runs: one per distinct (offset
 * input, largest valid offset) among its writes, in node order, so a call that would
 * write outside a state returns E_RANGE with nothing touched. Constant offsets were
 * checked by the frontend. */
static char *entry_checks(const PCtx *pc, const Ctx *c) {
  Buf b = {0};
  if (has_i64_input(c->g) && !pc->has_state)   /* such entries return void: no way to report a range error */
    kiln_error_at(c->g->entry_loc, "C target: i64 inputs in a script with kiln.entry need a kiln.state (entries "
                                   "without state return nothing) - not supported yet; declare them \"i32\"");
  buf_puts(&b, i64_checks(c, pc->upper));
  EmitRangeCheck *rc;
  int n = emit_range_checks(c->g, c->in_param, &rc);
  for (int i = 0; i < n; i++) {
    c->in_read[rc[i].input] = true;
    EmitVars v = {0};
    emit_var(&v, "AT", c->in_param[rc[i].input]);
    emit_vari(&v, "MAX", rc[i].max);
    emit_var(&v, "UPPER", pc->upper);
    emit_var(&v, "WHAT", esc_comment(rc[i].what));
    expand(&b, rc[i].max >= INT32_MAX ? "c/entry_check_ring.c.tmpl" : "c/entry_check.c.tmpl", &v);   /* no always-false test */
  }
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* Where entry g was declared, for comments: the kiln.entry line, or the script itself. */
static const char *entry_loc(const Graph *g) {
  if (g->entry_loc.line > 0) return kiln_fmt("%s:%d", graph_src_name(g, g->entry_loc.file), g->entry_loc.line);
  return graph_src_name(g, g->script);
}

/* Entry e's section of <model>.c: its arena enum, kernels and entry function (+ _v). */
static void emit_entry_section(const PCtx *pc, int e, Buf *out) {
  const Ctx *c = &pc->e[e];
  Graph *g = c->g;
  Buf kernels = {0}, calls = {0}, unused = {0}, unused_v = {0};
  for (int k = 0; k < g->nkernels; k++) c_emit_kernel(c, k, &kernels, &calls);
  const char *checks = entry_checks(pc, c);
  const char *calltext = calls.data ? calls.data : "";
  if (!strstr(calltext, "(par, ")) unused_line(&unused, "par");
  if (!strstr(calltext, "(w + ")) unused_line(&unused, "w");
  if (pc->has_state && !strstr(calltext, "(s + ")) unused_line(&unused, "s");
  if (!strstr(calltext, "(a + ")) unused_line(&unused, "a");
  for (int i = 0; i < g->ninputs; i++)
    if (!c->in_read[i]) unused_line(&unused, c->in_param[i]);
  if (!g->ninputs) unused_line(&unused_v, "inputs");
  if (!g->noutputs) unused_line(&unused_v, "outputs");
  EmitVars rv = {0};
  emit_var(&rv, "ENTRY", g->entry);
  emit_var(&rv, "FN", pc->fn[e]);
  emit_var(&rv, "RET", pc->has_state ? "int" : "void");
  emit_var(&rv, "STATE_PARAM", pc->has_state ? "void *state, " : "");
  emit_var(&rv, "STATE_ARG", pc->has_state ? "state, " : "");
  emit_var(&rv, "STATE_PTR", pc->has_state ? "  unsigned char *s = (unsigned char *)state;\n" : "");
  emit_var(&rv, "CHECK_DOC", *checks ? "the range checks, then " : "");
  emit_var(&rv, "PARAMS", entry_params(c, false));
  emit_var(&rv, "NAMES", param_names(c));
  emit_var(&rv, "VARGS", entry_params(c, true));
  emit_var(&rv, "UNUSED", kiln_strdup(unused.data ? unused.data : ""));
  emit_var(&rv, "UNUSED_V", kiln_strdup(unused_v.data ? unused_v.data : ""));
  emit_var(&rv, "CHECKS", checks);
  emit_var(&rv, "CALLS", calltext);
  emit_var(&rv, "PROF_START", profile_text("c/prof_start.c.tmpl", &c->prof, pc->upper, 0, c->prof_rows));
  emit_var(&rv, "RETURN", pc->has_state ? kiln_fmt("  return %s_OK;\n", pc->upper) : "");
  emit_var(&rv, "RETURN_KW", pc->has_state ? "return " : "");
  EmitVars sv = {0};
  emit_var(&sv, "ENTRY", g->entry);
  emit_var(&sv, "LOC", esc_comment(entry_loc(g)));
  emit_var(&sv, "KERNEL_COUNT", emit_count(g->nkernels, "kernel", "kernels"));
  emit_var(&sv, "ARENA_ENUM", arena_enum(c));
  emit_var(&sv, "KERNELS", kernels.data ? kernels.data : "");
  emit_var(&sv, "RUN", expand_str("c/entry.c.tmpl", &rv));
  expand(out, "c/entry_section.c.tmpl", &sv);
  Buf *all[] = {&kernels, &calls, &unused, &unused_v};
  for (int i = 0; i < 4; i++) buf_free(all[i]);
}

/* Kernels of every entry of p: the rows of its profile. */
static int program_kernels(const Program *p) {
  int n = 0;
  for (int e = 0; e < p->nentries; e++) n += p->entries[e]->nkernels;
  return n;
}

/* <model>.c of a program: the shared W_ and S_ enums, the reset function, then one
 * section per entry in declaration order. */
static void emit_program_source(const PCtx *pc, Buf *out) {
  Program *p = pc->p;
  Buf wl = {0}, sl = {0}, entries = {0}, list = {0};
  for (int i = 0; i < p->nwslots; i++)
    buf_puts(&wl, offset_line(pc->slot_name[i], p->wslots[i].offset, weight_what(p->wslots[i].node), wide_region(p->weights_size)));
  for (int i = 0; i < p->nstates; i++) {
    const StateDecl *d = &p->states[i];
    buf_puts(&sl, offset_line(pc->sname[i], d->offset, kiln_fmt("%s %s %s", dtype_name(d->dtype), shape_str(&d->shape), d->name),
                              wide_region(p->state_size)));
  }
  for (int e = 0; e < p->nentries; e++) {
    emit_entry_section(pc, e, &entries);
    buf_printf(&list, "%s%s (%s)", e ? ", " : "", p->entries[e]->entry, emit_count(p->entries[e]->nkernels, "kernel", "kernels"));
  }
  EmitVars wv = {0}, sv = {0}, rv = {0}, fv = {0};
  emit_var(&wv, "ENTRIES", wl.data ? wl.data : "");
  emit_var(&sv, "ENTRIES", sl.data ? sl.data : "");
  emit_var(&sv, "UPPER", pc->upper);
  emit_var(&rv, "MODEL", pc->model);
  emit_var(&rv, "UPPER", pc->upper);
  emit_var(&fv, "MODEL", pc->model);
  emit_var(&fv, "SCRIPT", esc_comment(graph_src_name(p->entries[0], p->script)));
  emit_var(&fv, "ENTRY_COUNT", emit_count(p->nentries, "entry point", "entry points"));
  emit_var(&fv, "ENTRY_LIST", list.data);
  emit_var(&fv, "STATE_BLOCK", pc->has_state ? "the caller's state block (S_* byte offsets),\n * " : "");
  const char *help = helpers(entries.data);   /* the matmul and conv helpers include <string.h> */
  emit_var(&fv, "INCLUDES", pc->has_state && !strstr(help, "#include <string.h>") ? "#include <string.h>\n" : "");
  emit_var(&fv, "WEIGHT_ENUM", wl.len ? offset_block("c/weight_enum.c.tmpl", "c/weight_enum_wide.c.tmpl",
                                                    wide_region(p->weights_size), &wv) : "");
  emit_var(&fv, "STATE_ENUM", sl.len ? offset_block("c/state_enum.c.tmpl", "c/state_enum_wide.c.tmpl",
                                                   wide_region(p->state_size), &sv) : "");
  emit_var(&fv, "RESET", pc->has_state ? expand_str("c/reset.c.tmpl", &rv) : "");
  emit_var(&fv, "ENTRIES", entries.data);
  emit_var(&fv, "HELPERS", help);
  emit_var(&fv, "PROFILE_INCLUDE", pc->e[0].prof_rows ? "#include <time.h>\n" : "");
  emit_var(&fv, "PROFILE", profile_text("c/profile.c.tmpl", &pc->e[0].prof, pc->upper, program_kernels(p), pc->e[0].prof_rows));
  emit_var(&fv, "PROFILE_TABLE", profile_text("c/profile_table.c.tmpl", &pc->e[0].prof, pc->upper, program_kernels(p), pc->e[0].prof_rows));
  expand(out, "c/file_entries.c.tmpl", &fv);
  Buf *all[] = {&wl, &sl, &entries, &list};
  for (int i = 0; i < 4; i++) buf_free(all[i]);
}

/* One I/O line of an entry's doc comment and its #defines. */
static void entry_io(const PCtx *pc, const Ctx *c, bool output, int i, Buf *doc, Buf *defs, Buf *sizes, Buf *names) {
  const GraphIO *io = output ? &c->g->outputs[i] : &c->g->inputs[i];
  const Node *n = node(c->g, io->node);
  EmitVars v = {0};
  emit_var(&v, "UPPER", pc->upper);
  emit_var(&v, "STEM", output ? c->out_stem[i] : c->in_stem[i]);
  emit_var(&v, "KIND", output ? "output" : "input");
  emit_var(&v, "NAME", io->name);
  emit_var(&v, "DTYPE", dtype_name(n->dtype));
  emit_var(&v, "SHAPE", shape_of(n));
  emit_var(&v, "BYTES", kiln_fmt("%lld", (long long)node_bytes(n)));
  emit_var(&v, "NUMEL", kiln_fmt("%lld", (long long)node_numel(n)));
  emit_var(&v, "BYVAL", !output && c->in_byval[i] ? ", by value" : "");
  expand(doc, "c/entry_io_doc.h.tmpl", &v);
  expand(defs, "c/io_define.h.tmpl", &v);
  buf_printf(sizes, "%s%s_%s_SIZE", sizes->len ? ", " : "", pc->upper, output ? c->out_stem[i] : c->in_stem[i]);
  buf_printf(names, "%s\"%s\"", names->len ? ", " : "", io->name);
}

/* Entry e's part of the header: its doc lines (into doc) and its #defines and prototypes. */
static void entry_header(const PCtx *pc, int e, Buf *doc, Buf *defs) {
  const Ctx *c = &pc->e[e];
  Graph *g = c->g;
  Buf io = {0}, iod = {0}, isz = {0}, osz = {0}, inm = {0}, onm = {0};
  for (int i = 0; i < g->ninputs; i++) entry_io(pc, c, false, i, &iod, &io, &isz, &inm);
  for (int i = 0; i < g->noutputs; i++) entry_io(pc, c, true, i, &iod, &io, &osz, &onm);
  EmitVars dv = {0};
  emit_var(&dv, "FN", pc->fn[e]);
  emit_var(&dv, "SIGNATURE_DOC", kiln_fmt("entry `%s` (%s)", g->entry, esc_comment(entry_loc(g))));
  expand(doc, "c/entry_doc.h.tmpl", &dv);
  buf_puts(doc, iod.data ? iod.data : " *     (no inputs or outputs)\n");
  EmitVars v = {0};
  emit_var(&v, "UPPER", pc->upper);
  emit_var(&v, "ESTEM", pc->estem[e]);
  emit_var(&v, "ENTRY", g->entry);
  emit_var(&v, "LOC", esc_comment(entry_loc(g)));
  emit_var(&v, "FN", pc->fn[e]);
  emit_var(&v, "RET", pc->has_state ? "int" : "void");
  emit_var(&v, "STATE_PARAM", pc->has_state ? "void *state, " : "");
  emit_var(&v, "NUM_INPUTS", kiln_fmt("%d", g->ninputs));
  emit_var(&v, "NUM_OUTPUTS", kiln_fmt("%d", g->noutputs));
  emit_var(&v, "ARENA_SIZE", kiln_fmt("%lld", (long long)g->arena_size));
  emit_var(&v, "IO_DEFINES", io.data ? io.data : "");
  emit_var(&v, "INPUT_SIZES", isz.len ? isz.data : "0");
  emit_var(&v, "OUTPUT_SIZES", osz.len ? osz.data : "0");
  emit_var(&v, "INPUT_NAMES", inm.len ? inm.data : "\"\"");
  emit_var(&v, "OUTPUT_NAMES", onm.len ? onm.data : "\"\"");
  emit_var(&v, "PARAMS", entry_params(c, false));
  expand(defs, "c/entry_defines.h.tmpl", &v);
  Buf *all[] = {&io, &iod, &isz, &osz, &inm, &onm};
  for (int i = 0; i < 6; i++) buf_free(all[i]);
}

/* The state list of the header's comment and the state #defines (with <model>_reset). */
static void state_header(const PCtx *pc, Buf *doc, Buf *defs) {
  Program *p = pc->p;
  Buf offs = {0};
  for (int i = 0; i < p->nstates; i++) {
    const StateDecl *d = &p->states[i];
    Buf writers = {0};
    for (int e = 0; e < p->nentries; e++) {
      int last = graph_state_last(p->entries[e], i);
      if (last >= 0 && p->entries[e]->nodes[last]->op == OP_WRITE)
        buf_printf(&writers, "%s%s", writers.len ? ", " : "; written by ", p->entries[e]->entry);
    }
    EmitVars v = {0};
    emit_var(&v, "UPPER", pc->upper);
    emit_var(&v, "STEM", pc->sstem[i]);
    emit_var(&v, "NAME", esc_comment(d->name));
    emit_var(&v, "DTYPE", dtype_name(d->dtype));
    emit_var(&v, "SHAPE", shape_str(&d->shape));
    emit_var(&v, "OFFSET", kiln_fmt("%lld", (long long)d->offset));
    emit_var(&v, "BYTES", kiln_fmt("%lld", (long long)(shape_numel(&d->shape) * dtype_size(d->dtype))));
    emit_var(&v, "WRITERS", writers.len ? kiln_strdup(writers.data) : "");
    buf_free(&writers);
    expand(doc, "c/state_doc.h.tmpl", &v);
    expand(&offs, "c/state_offset.h.tmpl", &v);
  }
  EmitVars v = {0};
  emit_var(&v, "MODEL", pc->model);
  emit_var(&v, "UPPER", pc->upper);
  emit_var(&v, "STATE_SIZE", kiln_fmt("%lld", (long long)p->state_size));
  emit_var(&v, "NUM_STATES", kiln_fmt("%d", p->nstates));
  emit_var(&v, "STATE_OFFSETS", offs.data ? offs.data : "");
  expand(defs, "c/state_defines.h.tmpl", &v);
  buf_free(&offs);
}

/* <model>.h of a program: every entry's signature and sizes, the states, the shared sizes. */
static void emit_program_header(const PCtx *pc, uint64_t checksum, bool embed, Buf *out) {
  Program *p = pc->p;
  Buf edoc = {0}, edefs = {0}, sdoc = {0}, sdefs = {0};
  for (int e = 0; e < p->nentries; e++) entry_header(pc, e, &edoc, &edefs);
  if (pc->has_state) {
    buf_puts(&sdoc, " *\n * State (caller-owned, persistent; byte offsets in the state block):\n");
    state_header(pc, &sdoc, &sdefs);
  }
  EmitVars v = {0};
  emit_var(&v, "MODEL", pc->model);
  emit_var(&v, "UPPER", pc->upper);
  emit_var(&v, "SCRIPT", esc_comment(graph_src_name(p->entries[0], p->script)));
  emit_var(&v, "ENTRY_COUNT", emit_count(p->nentries, "entry", "entries"));
  emit_var(&v, "STATE_WORDS", pc->has_state ? " and one state block" : "");
  emit_var(&v, "ENTRY_DOC", edoc.data);
  emit_var(&v, "STATE_DOC", sdoc.data ? sdoc.data : "");
  emit_var(&v, "MEMORY_DOC", expand_str(pc->has_state ? "c/header_memory_state.h.tmpl" : "c/header_memory.h.tmpl", &v));
  emit_var(&v, "WEIGHTS_SIZE", kiln_fmt("%lld", (long long)p->weights_size));
  emit_var(&v, "CHECKSUM", kiln_fmt("%016llx", (unsigned long long)checksum));
  emit_var(&v, "FILE_SIZE", kiln_fmt("%lld", (long long)p->weights_size + KILN_ALIGN));
  emit_var(&v, "STATE_DEFINES", sdefs.data ? sdefs.data : "");
  emit_var(&v, "ARENA_SIZE", kiln_fmt("%lld", (long long)p->arena_size));
  emit_var(&v, "NUM_ENTRIES", kiln_fmt("%d", p->nentries));
  emit_var(&v, "ENTRY_DEFINES", edefs.data);
  emit_var(&v, "EMBED_DECL", embed ? expand_str("c/embed_decl.h.tmpl", &v) : "");
  emit_var(&v, "PROFILE_DECL", profile_text("c/profile.h.tmpl", &pc->e[0].prof, pc->upper, program_kernels(p), pc->e[0].prof_rows));
  emit_var(&v, "PARALLEL_TYPE", template_get("c/parallel_type.h.tmpl"));
  expand(out, "c/header_entries.h.tmpl", &v);
  Buf *all[] = {&edoc, &edefs, &sdoc, &sdefs};
  for (int i = 0; i < 4; i++) buf_free(all[i]);
}

/* Contract: see emit_plain; a program with state or entries gets one function per entry. */
void emit_c(Program *p, const EmitOptions *o) {
  if (program_is_plain(p)) {
    emit_plain(p->entries[0], o);
    return;
  }
  PCtx pc = {0};
  pctx_init(&pc, p, o->profile);
  Buf hdr = {0}, src = {0}, prof_rows = {0};
  for (int e = 0, base = 0; o->profile && e < p->nentries; base += p->entries[e++]->nkernels)
    pc.e[e].prof_base = base, pc.e[e].prof_rows = &prof_rows;
  uint64_t checksum = weights_write(p->entries, p->nentries, p->weights_size, o->tmpdir, kiln_fmt("%s.weights", p->model));
  emit_program_header(&pc, checksum, o->embed_weights, &hdr);
  emit_program_source(&pc, &src);
  kiln_write_file(o->tmpdir, kiln_fmt("%s.h", p->model), hdr.data, hdr.len);
  kiln_write_file(o->tmpdir, kiln_fmt("%s.c", p->model), src.data, src.len);
  if (o->embed_weights) {
    Buf blob = {0}, emb = {0};
    weights_blob(p->entries, p->nentries, p->weights_size, &blob);
    emit_embedded(&pc.e[0], &blob, &emb);
    kiln_write_file(o->tmpdir, kiln_fmt("%s_weights.c", p->model), emb.data, emb.len);
    buf_free(&emb);
    buf_free(&blob);
  }
  buf_free(&hdr);
  buf_free(&src);
  buf_free(&prof_rows);
}
