/* STUB: placeholder until this phase is written. */
#include "kiln.h"

Graph *graph_new(const char *model, const char *script) { (void)model; (void)script; die("graph_new: not written yet"); }
Node *graph_add(Graph *g, OpKind op, const int *in, int nin, const Attrs *a, SrcLoc loc, char *err, size_t errlen) { (void)g; (void)op; (void)in; (void)nin; (void)a; (void)loc; (void)err; (void)errlen; die("not written yet"); }
Node *graph_leaf(Graph *g, OpKind op, DType t, const Shape *s, const char *name, SrcLoc loc) { (void)g; (void)op; (void)t; (void)s; (void)name; (void)loc; die("not written yet"); }
Node *graph_node(Graph *g, int id) { (void)g; (void)id; die("not written yet"); }
int64_t node_numel(const Node *n) { return shape_numel(&n->shape); }
int64_t node_bytes(const Node *n) { return node_numel(n) * dtype_size(n->dtype); }
void graph_dump(Graph *g, FILE *f) { (void)g; (void)f; die("not written yet"); }
void graph_dump_dot(Graph *g, FILE *f) { (void)g; (void)f; die("not written yet"); }
