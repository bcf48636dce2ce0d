/* STUB: placeholder until this phase is written. */
#include "kiln.h"

void emit_metal(Graph *g, const EmitOptions *o) { (void)g; (void)o; kiln_error("the Metal target is not built yet"); }
