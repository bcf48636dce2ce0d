/*
 * coreml_rank.h — values of rank 6 on the Core ML target, whose ops stop at rank 5
 * (coreml_rank.c): folded for the emitter, put back after.
 */
#ifndef KILN_COREML_RANK_H
#define KILN_COREML_RANK_H

#include "kiln.h"

/* Checks every live node of g that reads or makes a value of rank > 5 (a user error at
 * its Lua line unless it is a reshape or an elementwise op whose operands fold alike, and
 * not a graph input or output), then gives each live node its folded shape (leading dims
 * merged down to rank 5). Returns every node's shape before, for coreml_unfold_ranks. */
Shape *coreml_fold_ranks(Graph *g);

/* Puts back the shapes coreml_fold_ranks saved. */
void coreml_unfold_ranks(Graph *g, const Shape *saved);

#endif
