/*
 * frontend.h — what lua.c (the tracer: state, tensors, leaves, errors) and
 * lua_ops.c (the op bindings) share. Nothing outside the frontend includes it;
 * the rest of Kiln sees only frontend_trace() in kiln.h.
 *
 * Error policy inside the tracer: a binding that finds a problem raises an
 * ordinary Lua error whose message has no position (fe_error). The message
 * handler installed around the user's script (lua.c) then finds the user's
 * line — the first stack frame whose chunk name starts with '@' — while the
 * stack is still intact, so an error raised deep inside nn.lua still names the
 * line of the model script that caused it. Raising Lua errors (instead of
 * exiting on the spot) keeps pcall usable in scripts and lets to-be-closed
 * scope guards (kiln._scope) unwind.
 */
#ifndef KILN_FRONTEND_H
#define KILN_FRONTEND_H

#include "kiln.h"

#include <lauxlib.h>
#include <lua.h>

#define FE_TENSOR_MT "kiln.Tensor"   /* registry name of the tensor metatable */

/* A tensor userdata: a node of one of the traced graphs, or a state handle. */
typedef struct {
  int graph;                         /* FeProgram.graphs index of the graph holding id */
  int id;                            /* node id in that graph */
  int state;                         /* >= 0: a kiln.state handle (Program.states index); id unused */
} FeTensor;

/* The graphs being traced: the script's top level and one per kiln.entry. A script
 * without kiln.entry is its top level; with entries, the top level only holds what
 * entries share (parameters, tables computed from them), imported into each entry
 * that uses it (lua_entry.c). */
typedef struct {
  Program *prog;
  Graph **graphs;                    /* 0: the top level; then one per kiln.entry, in call order */
  int ngraphs, capgraphs;
  int cur;                           /* the graph ops are added to now */
  SrcLoc *entry_loc;                 /* per graph: the kiln.entry call that made it */
  uint64_t *memo_key;                /* imports made: (dst, src, id) packed + 1, 0 = free slot */
  int *memo_val;                     /* the node id in dst */
  size_t memo_cap, memo_n;           /* open addressing, capacity a power of two */
} FeProgram;

/* Where the user's line is: the first frame of a chunk loaded from a file ('@'). */
SrcLoc fe_loc(lua_State *L);
/* Raises a Lua error with a formatted message (no position: the handler adds it). */
int fe_error(lua_State *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
Graph *fe_graph(lua_State *L);        /* the graph ops are added to now */
FeProgram *fe_prog(lua_State *L);

/* The node id of argument idx: a tensor, or a Lua number (becomes an f32 scalar
 * CONST). Anything else raises "<op>: argument N must be a tensor or a number". */
int fe_operand(lua_State *L, int idx, const char *op);
/* Like fe_operand, but numbers are refused: the argument must be a tensor. */
int fe_tensor(lua_State *L, int idx, const char *op);
bool fe_is_tensor(lua_State *L, int idx);
void fe_push(lua_State *L, int id);   /* a tensor of the current graph */
Node *fe_node(lua_State *L, int id);
/* graph_add at the user's line, named after the current nn scope; a shape rule
 * violation is raised as a Lua error carrying graph_add's message. Returns the id. */
int fe_add(lua_State *L, OpKind op, const int *in, int nin, const Attrs *a);
/* A CONST node of f32 values (copied) with the given shape, at the user's line. */
int fe_const_f32(lua_State *L, const float *v, const Shape *s);
/* A scalar i32 CONST, at the user's line. */
int fe_const_i32(lua_State *L, int32_t v);
/* Node name for ops created now: the innermost nn scope path, or NULL at top level. */
const char *fe_scope_name(lua_State *L);

/* Reads a shape from a Lua array at idx ({2, 3}); dims must be integers >= 1. */
Shape fe_shape_arg(lua_State *L, int idx, const char *op, const char *what);
/* An integer argument (integral floats accepted). */
int64_t fe_int_arg(lua_State *L, int idx, const char *op, const char *what);
/* A name for generated code and JSON (no control characters), a dtype name (f32 when
 * absent), C identifiers, and ASCII case-insensitive equality: lua.c's checks. */
const char *fe_name_arg(lua_State *L, int idx, const char *op, const char *what);
DType fe_dtype_arg(lua_State *L, int idx, const char *op);
bool fe_is_c_identifier(const char *s);
bool fe_same_ignoring_case(const char *a, const char *b);
/* Normalises a PyTorch-style dim (negative counts from the end) for a rank. */
int fe_dim(lua_State *L, int64_t d, int rank, const char *op);

/* lua_entry.c: the node id, in the current graph, that tensor t stands for: a state
 * handle gives the state's current version in this entry, a tensor traced in another
 * graph is imported (or, if it depends on that graph's inputs or state, an error). */
int fe_resolve(lua_State *L, const FeTensor *t);
/* The state a state handle at idx stands for, or NULL when idx is no state handle. */
const StateDecl *fe_state_of(lua_State *L, int idx);
/* Sets kiln.state, kiln.write and kiln.entry into the table at the top of the stack. */
void fe_register_entries(lua_State *L);
/* Once the script has run: a script with entries traced no input, output or state
 * access outside them, and every entry has an output or writes state. Reports through
 * kiln_error_at at the offending line. */
void fe_check_entries(FeProgram *fp, const char *script_file);

/* lua_ops.c: sets every op function into the table at the top of the stack, and
 * fills the tensor metatable (at the top of the stack after that) with operators,
 * methods and fields. */
void fe_register_ops(lua_State *L);
void fe_register_tensor_mt(lua_State *L);

/* sandbox.c: the Lua state a script runs in (SandboxOptions is in kiln.h). */
lua_State *sandbox_open(const SandboxOptions *o);
bool sandbox_active(lua_State *L);
/* Whether path resolves (symlinks, ..) inside root; else false and *why a message. */
bool sandbox_inside(const char *root, const char *path, const char **why);
/* Makes a resolved path (a file, or a directory and everything below it) readable by
 * kiln.load and kiln.json: the user named it on the command line (kiln.path). */
void sandbox_allow(const char *real_path);
/* The one-line message when the memory cap refused the script memory, else NULL. */
const char *sandbox_memory_message(lua_State *L);

/* kiln.option and kiln.json (lua_config.c), registered into the kiln table at the top of
 * the stack: defines are the command line's -D NAME=VALUE strings. fe_check_config,
 * after the script ran: every -D was asked for (a user error otherwise). */
void fe_register_config(lua_State *L, const char *const *defines, int ndefines, const char *script_dir);
void fe_check_config(lua_State *L, const char *script_file);

#endif
