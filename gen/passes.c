/* STUB: placeholder until this phase is written. */
#include "kiln.h"

void pass_verify(Graph *g) { (void)g; die("not written yet"); }
void pass_dce(Graph *g) { (void)g; die("not written yet"); }
void pass_cse(Graph *g) { (void)g; die("not written yet"); }
void pass_fold(Graph *g) { (void)g; die("not written yet"); }
void pass_legalize(Graph *g) { (void)g; die("not written yet"); }
void pass_group(Graph *g) { (void)g; die("not written yet"); }
void pass_schedule(Graph *g) { (void)g; die("not written yet"); }
