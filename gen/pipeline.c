/*
 * pipeline.c — the compiler's passes as one flat list, run top to bottom.
 * `--dump-after NAME` prints the graph after the pass of that name (QBE's habit).
 */
#include "kiln.h"

#include <string.h>

const Pass kiln_passes[] = {
    {"verify", pass_verify},     /* what the frontend built is well formed */
    {"dce", pass_dce},
    {"cse", pass_cse},
    {"fold", pass_fold},
    {"dce2", pass_dce},          /* folding leaves the folded inputs unused */
    {"legalize", pass_legalize},
    {"verify2", pass_verify},
    {"group", pass_group},
    {"schedule", pass_schedule},
    {"memplan", pass_memplan},
};
const int kiln_npasses = (int)(sizeof kiln_passes / sizeof kiln_passes[0]);

/* Runs every pass of kiln_passes in order on g. With dump_after set, prints "## after <pass>"
 * and the graph to f after that pass (after each one for "all"); a name matching no pass is a
 * user error, reported once all passes have run. */
void pipeline_run(Graph *g, const char *dump_after, FILE *f) {
  bool found = !dump_after;
  for (int i = 0; i < kiln_npasses; i++) {
    kiln_passes[i].run(g);
    if (dump_after && (strcmp(dump_after, "all") == 0 || strcmp(dump_after, kiln_passes[i].name) == 0)) {
      fprintf(f, "## after %s\n", kiln_passes[i].name);
      graph_dump(g, f);
      found = true;
    }
  }
  if (!found) kiln_error("--dump-after: no pass named '%s' (see kiln --help)", dump_after);
}
