/* STUB: placeholder until this phase is written. */
#include "kiln.h"

bool interp_node(Graph *g, Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) { (void)g; (void)n; (void)in; (void)out; (void)err; (void)errlen; die("not written yet"); }
bool interp_graph(Graph *g, const Tensor *inputs, Tensor *outputs, char *err, size_t errlen) { (void)g; (void)inputs; (void)outputs; (void)err; (void)errlen; die("not written yet"); }
