/*
 * emit_c.h — what the C target's two files share: emit_c.c (names, the files) and
 * emit_c_kernels.c (one render function per kernel family, the kernel calls).
 */
#ifndef KILN_EMIT_C_H
#define KILN_EMIT_C_H

#include "kiln.h"

#include <string.h>

/* Appends templates/<tmpl> expanded with v's variables to out; dies if the template
 * is absent or names a variable v lacks. */
static inline void expand(Buf *out, const char *tmpl, const EmitVars *v) { template_expand(out, template_get(tmpl), v->kv); }

/* As expand, but returns the text as a fresh arena string ("" for an empty expansion). */
static inline char *expand_str(const char *tmpl, const EmitVars *v) {
  Buf b = {0};
  expand(&b, tmpl, v);
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* "<sep>const <t> *restrict <name>", a kernel's read-only pointer parameter. */
static inline char *restrict_param(const char *sep, const char *t, const char *name) {
  EmitVars v = {0};
  emit_var(&v, "SEP", sep);
  emit_var(&v, "T", t);
  emit_var(&v, "NAME", name);
  return expand_str("c/restrict_param.c.tmpl", &v);
}

/* The identifiers a profile adds (--profile: templates/c/profile*.tmpl): the table, its row
 * type, the clock and the tick; claimed after every other name, so that a build without a
 * profile names nothing differently and the profile's own names give way on a clash. */
typedef struct {
  const char *model;   /* the file's: its comments name <model>.c and <model>.h */
  const char *table, *type, *now, *tick;
} ProfNames;

/* Everything the emitter decides once per model. */
typedef struct {
  Graph *g;
  const char *model, *upper;      /* "mlp", "MLP" */
  const char **kname;             /* per kernel: function name */
  const char **ename;             /* per kernel: its epilogue helper's name (fused kernels) */
  const char **wname;             /* per node id: W_ constant of a weights-region root */
  const char **aname;             /* per node id: A_ constant of an arena-region root */
  const char **pname;             /* per kernel: A_ constant of its scratch (Kernel.scratch), or NULL */
  const char **in_param, **out_param;   /* per graph input/output: parameter name */
  const char **in_stem, **out_stem;     /* per graph input/output: macro stem */
  bool *in_read;                  /* per graph input: some kernel reads it (else the run voids it) */
  const char **sname;             /* per state of the program: its S_ offset constant (NULL: plain) */
  bool *in_byval;                 /* per graph input: passed by value (an i32 scalar of an entry) */
  /* --profile (templates/c/profile*.tmpl): the profile's names; the row of this graph's first
   * kernel; the table's rows, appended by c_emit_kernel. prof_rows NULL: no profile. */
  ProfNames prof;
  int prof_base;
  Buf *prof_rows;
} Ctx;

/* Node id of g; dies (in graph_node) if id is out of range. */
static inline Node *node(Graph *g, int id) { return graph_node(g, id); }
/* The node feeding operand i of n; i must be < n->nin (not checked here). */
static inline Node *input(Graph *g, const Node *n, int i) { return graph_node(g, n->in[i]); }

/* n's shape as display text ("[2,3]"), in the arena, for doc comments. */
static inline char *shape_of(const Node *n) { return shape_str(&n->shape); }

/* The stored format of value n when it is a WEIGHT kept in one (not f32), else NULL. */
static inline const WFormatInfo *stored_format(const Node *n) {
  return n->op == OP_WEIGHT && n->wfmt != WF_F32 ? wformat_info(n->wfmt) : NULL;
}

/* Renders kernel ki of c's graph: its function (and epilogue helper) into out, its call
 * from the run function into calls (and, profiling, the tick after it into calls and its
 * row into c->prof_rows). */
void c_emit_kernel(const Ctx *c, int ki, Buf *out, Buf *calls);

#endif
