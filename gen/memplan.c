/* STUB: placeholder until this phase is written. */
#include "kiln.h"

void pass_memplan(Graph *g) { (void)g; die("not written yet"); }
