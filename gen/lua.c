/* STUB: placeholder until this phase is written. */
#include "kiln.h"

Graph *frontend_trace(const FrontendOptions *o) { (void)o; die("not written yet"); }
