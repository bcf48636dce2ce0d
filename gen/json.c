/* STUB: placeholder until this phase is written. */
#include "kiln.h"

void emit_json(Graph *g, const EmitOptions *o) { (void)g; (void)o; die("not written yet"); }
