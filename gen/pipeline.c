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
    {"poolact", pass_pool_act},  /* the activation after a max pool: on fewer values */
    {"narrow", pass_narrow},     /* a slice moves up to the ops it discards rows of */
    {"fold2", pass_fold},        /* the slices it puts on constants */
    {"legalize", pass_legalize},
    {"verify2", pass_verify},
    {"quant", pass_quant},       /* before pack: a weight in a stored format is not also packed */
    {"actq", pass_actq},         /* after quant: it rounds the activations of stored-format products */
    {"group", pass_group},
    {"schedule", pass_schedule},
    {"pack", pass_pack},         /* after every entry is grouped: a weight's uses span entries */
    {"memplan", pass_memplan},
};
const int kiln_npasses = (int)(sizeof kiln_passes / sizeof kiln_passes[0]);

/* Runs every pass of kiln_passes in order, each on every entry of p in entry order
 * (memplan lays the shared weights out entry by entry). With dump_after set, prints
 * "## after <pass>" and the program to f after that pass (after each one for "all"); a
 * name matching no pass is a user error, reported once all passes have run. Then the
 * program's sizes: the weights payload every entry shares, the largest arena. */
void pipeline_run(Program *p, const char *dump_after, FILE *f) {
  bool found = !dump_after;
  for (int i = 0; i < kiln_npasses; i++) {
    for (int e = 0; e < p->nentries; e++) kiln_passes[i].run(p->entries[e]);
    if (dump_after && (strcmp(dump_after, "all") == 0 || strcmp(dump_after, kiln_passes[i].name) == 0)) {
      fprintf(f, "## after %s\n", kiln_passes[i].name);
      program_dump(p, f);
      found = true;
    }
  }
  if (!found) kiln_error("--dump-after: no pass named '%s' (see kiln --help)", dump_after);
  p->arena_size = 0;
  for (int e = 0; e < p->nentries; e++) {
    p->entries[e]->weights_size = p->weights_size;
    if (p->entries[e]->arena_size > p->arena_size) p->arena_size = p->entries[e]->arena_size;
  }
}
