/* STUB: placeholder until this phase is written. */
#include "kiln.h"

bool shape_infer(Graph *g, Node *n, char *err, size_t errlen) { (void)g; (void)n; (void)err; (void)errlen; die("not written yet"); }
bool shape_broadcast(const Shape *a, const Shape *b, Shape *out) { (void)a; (void)b; (void)out; die("not written yet"); }
