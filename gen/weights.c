/* STUB: placeholder until this phase is written. */
#include "kiln.h"

void weights_blob(Graph *g, Buf *out, uint64_t *checksum) { (void)g; (void)out; (void)checksum; die("not written yet"); }
