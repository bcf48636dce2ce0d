/*
 * coreml_package.h — the Model message and the .mlpackage of a lowered program
 * (coreml_package.c), shared by the Core ML emitter (emit_coreml.c).
 */
#ifndef KILN_COREML_PACKAGE_H
#define KILN_COREML_PACKAGE_H

#include "mil.h"

/* The shape of an I/O multi-array: n's shape, or [1] for a rank-0 value (Core ML's
 * multi-arrays need rank >= 1; the same single element, the same bytes as C's). */
const Shape *coreml_io_shape(const Node *n);

/* The top-level Model message of program p, after every entry was lowered into m
 * (one function "main", or one per entry point when multi); state_in names each
 * state's function input. */
CoreML__Specification__Model *coreml_model_message(const Program *p, const char *const *state_in, Mil *m, int spec,
                                                   bool multi, const EmitOptions *o);

/* Writes <model>.mlpackage to o->tmpdir: Manifest.json (fixed item ids), the packed
 * model pb[0..npb) and, when any const went to a blob, weights/weight.bin. */
void coreml_write_package(const char *model, Mil *m, const EmitOptions *o, const uint8_t *pb, size_t npb);

/* What a program with state or entry points needs from the Core ML target, each a user
 * error at the Lua line concerned: spec 9 (iOS18), states of f32 or bool, of rank <= 5. */
void coreml_check_program(const Program *p, int spec, const EmitOptions *o);

/* Each state's Core ML name (function input and description feature): its name made a
 * MIL identifier, the same in every function; two states sharing one are a user error. */
const char **coreml_state_names(const Program *p);

/* One build note on stderr ("kiln: note: ...", one line) naming p's i64 inputs, which the
 * package declares int32; nothing when there are none. */
void coreml_note_i64_inputs(const Program *p);

#endif
