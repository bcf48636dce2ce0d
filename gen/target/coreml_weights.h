/*
 * coreml_weights.h — how the Core ML package holds a weight kept in a stored format
 * (docs/quantization.md): fp16 consts, iOS18's compressed-weight ops, or plain floats.
 * The table of what each format becomes is in docs/coreml.md ("Stored weight formats").
 */
#ifndef KILN_COREML_WEIGHTS_H
#define KILN_COREML_WEIGHTS_H

#include "mil.h"

typedef struct CwNotes CwNotes;

/* A fresh record of the weights a build holds uncompressed (for the build note). */
CwNotes *coreml_weight_notes(void);

/* Emits the ops holding WEIGHT w (rank 2, w->wfmt not f32) in a program computing in ft
 * (MIL_F16 or MIL_F32) at specification version spec, and returns the name of the value
 * whose elements are w's values (Node.data; rounded to fp16 when that value is fp16).
 * *t is that value's type: ft, or MIL_F16 below iOS18 in an fp32 program (an fp16 const
 * whose values are exact), or MIL_F32 in an fp16 program when the scales need fp32 to be
 * exact. A weight held as a plain fp16/fp32 tensor, larger than its format, is recorded
 * in notes under its name (once, whichever entry emits it first). */
const char *coreml_weight(Mil *m, const Node *w, MilType ft, int spec, MilType *t, CwNotes *notes);

/* Prints one line on stderr naming the weights recorded in notes and why each was held
 * uncompressed ("kiln: note: ..."); nothing when none was. */
void coreml_weight_report(const CwNotes *notes, const char *min_os, MilType ft);

#endif
