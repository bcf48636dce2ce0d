/* STUB: placeholder until this phase is written. */
#include "kiln.h"

void emit_coreml(Graph *g, const EmitOptions *o) { (void)g; (void)o; kiln_error("the CoreML target is not built yet"); }
