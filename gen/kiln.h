/*
 * kiln.h — the core types of the Kiln compiler, shared by every phase.
 *
 * Pipeline: a Lua model script is traced (lua.c) into a Program: one Graph of
 * Nodes in topological order per entry point (a script without kiln.entry has
 * one, "run"), the persistent states they share, one weights layout; passes (passes.c, memplan.c) verify, simplify, group nodes
 * into Kernels, schedule them and place every value in the weights blob, the
 * scratch arena or a caller's input/output buffer; emitters (emit_*.c) turn the
 * planned graph into files. interp.c evaluates any graph naively: the oracle.
 *
 * Memory policy: everything the compiler allocates for a model comes from one
 * Arena (kiln_alloc) released in one call at exit; nothing is freed piecemeal.
 * Errors in the user's model go through kiln_error_at (file:line of the Lua
 * source, then exit 1 after removing partial output); broken invariants inside
 * Kiln go through die() (C file:line, abort).
 */
#ifndef KILN_H
#define KILN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ops.h"

enum {
  KILN_MAX_RANK = 8,   /* ONNX allows more, but 8 covers its tests; CoreML allows 5 (its emitter checks) */
  KILN_ALIGN = 64,     /* every arena/weights offset is a multiple of this */
  /* Elements per tensor: kernels spell shapes as int enum constants, Metal indexes with
   * 32-bit uint. (Byte offsets and region sizes are 64-bit: KILN_MAX_BYTES.) */
  KILN_MAX_NUMEL = 0x7fffffff,
  KILN_PANEL = 32,     /* columns of a packed weight panel (pass_pack; templates/c/gemm_lib.c.tmpl) */
  /* Convolution filters packed in blocks of this many, tap-major (pass_pack; the rows of
   * a micro-kernel tile, KILN_FB in templates/c/conv_tile.c.tmpl), from this many filters a
   * group a convolution runs as a matrix product (conv_gemm). */
  KILN_CONV_BLOCK = 12,
  KILN_CONV_GEMM_MIN_OCG = 8,
  /* Taps a filter plane may have for a convolution over its padded grid (conv_pad: the
   * 12-filter tiles and the filters across the lanes; KILN_GRID_TAPS of conv_geom.c.tmpl). */
  KILN_GRID_TAPS = 256,
  /* Output pixels a task of a convolution with its filters across the lanes keeps the sums
   * of for a panel of 32 filters, on its stack (KILN_LANES_PIXELS of
   * templates/c/lanes_lib.c.tmpl): its rows; pass_pack's lanes_fit wants a row to fit. */
  KILN_LANES_PIXELS = 256,
  /* A 3x3 stride-1 convolution runs by Winograd's F(2x2, 3x3) (pass_pack: Node.wino) from
   * this many input and output channels and output pixels: below them the transforms cost
   * more than the 2.25x fewer multiply-adds save, and a small image wastes a tile's lanes. */
  KILN_WINO_MIN_CHANNELS = 16,
  KILN_WINO_MIN_PIXELS = 64,
  KILN_WINO_ALPHA = 16,   /* values of a transformed 4x4 tile: the products a tile needs */
  KILN_WINO_SKEW = 16,    /* floats between two values' input transforms in scratch (wino_lib) */
  /* kiln.sdpa of this many query rows or more (a prefill) runs on the matmul micro-kernel,
   * 32 queries a task (templates/c/attn_lib.c.tmpl), for a head size up to KILN_ATTN_DMAX
   * (its blocks live on the task's stack) and under 2^31 key slots; fewer rows (a decode) a
   * row at a time (sdpa.c.tmpl): a block would leave most of its 32 lanes empty. */
  KILN_ATTN_MIN_T = 8,
  KILN_ATTN_DMAX = 256,
};
/* Bytes of weights or arena a build may plan (1 TiB): generated C addresses them with
 * 64-bit offsets past 2 GiB; the bound keeps every sum of sizes far from overflow. */
#define KILN_MAX_BYTES ((int64_t)1 << 40)

/* ---- memory (util.c) ---- */
void *kiln_alloc(size_t n);                 /* zeroed, never NULL, freed by kiln_free_all */
char *kiln_strdup(const char *s);
char *kiln_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *kiln_vfmt(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
void kiln_free_all(void);

/* Growable byte buffer, used by every emitter to build a file before writing it. */
typedef struct {
  char *data;
  size_t len, cap;
} Buf;
void buf_put(Buf *b, const void *p, size_t n);
void buf_puts(Buf *b, const char *s);
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(Buf *b);                      /* Buf memory is malloc'd, not arena */

/* A map from strings to ints in the arena (open addressing, FNV-1a), also used as a
 * set of names. Keys are not copied. It is never iterated, so no hash order can
 * reach an output; it exists to keep name checks linear (20,000 kernels, 8,000
 * outputs). */
typedef struct {
  const char **key;
  int *val;
  size_t cap, n;
} StrMap;
int *strmap_get(const StrMap *m, const char *k);   /* the value, or NULL when k is absent */
int *strmap_put(StrMap *m, const char *k);         /* the value, inserted as 0 when absent */

/* Exact widening of stored floats (util.c): IEEE bits, half (subnormals, inf and NaN
 * payloads kept) and bfloat16. */
float kiln_f32_from_bits(uint32_t u);
float kiln_f16_to_f32(uint16_t h);
float kiln_bf16_to_f32(uint16_t h);
/* Narrowing, round to nearest even (util.c): overflow gives inf, NaN stays a quiet NaN,
 * half subnormals are produced. */
uint16_t kiln_f32_to_f16(float f);
uint16_t kiln_f32_to_bf16(float f);
float kiln_round_f16(float x);              /* the nearest half value (ties to even), as a float */

/* Progress of a long build on a terminal (util.c): phase, and done of total units when
 * total > 0. Silent unless stderr is a tty and a second has passed (KILN_PROGRESS=0/1
 * overrides). kiln_progress_end clears the line; kiln_error does too. */
void kiln_progress(const char *phase, int64_t done, int64_t total);
void kiln_progress_end(void);

/* ---- diagnostics (util.c) ---- */
typedef struct {
  const char *file;    /* as the user named it (relative), or its basename if absolute */
  int line;            /* 0 when unknown */
} SrcLoc;

_Noreturn void kiln_error_at(SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void kiln_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void die_(const char *cfile, int cline, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define die(...) die_(__FILE__, __LINE__, __VA_ARGS__)
/* Output directory that kiln_error removes if the build fails halfway (NULL: none). */
void kiln_set_cleanup_dir(const char *tmpdir);

/* ---- dtypes and shapes ---- */
/* BOOL is one byte per element. I64 is only ever an input's external type (kiln.input
 * "i64", PyTorch's token ids): the frontend casts it to i32 at once, and each entry
 * checks the range before running anything (docs/lua-api.md). */
typedef enum { DT_F32, DT_I32, DT_BOOL, DT_I64 } DType;

typedef struct {
  int rank;
  int64_t dim[KILN_MAX_RANK];
} Shape;

const char *dtype_name(DType t);            /* "f32" "i32" "bool" */
int dtype_size(DType t);                     /* 4 4 1 */
bool dtype_parse(const char *s, DType *out);
int64_t shape_numel(const Shape *s);
bool shape_eq(const Shape *a, const Shape *b);
char *shape_str(const Shape *s);             /* "[2, 3, 4]" in the arena */

/* ---- stored weight formats (gen/ir/quant.c, docs/quantization.md) ----
 * How a matrix weight W (n rows of k, the rows being what a product reduces over) may be
 * kept in the weights file. Every format but f32 is stored in panels of KILN_QPANEL rows
 * (the last panel zero-padded), each panel a run of blocks along k; the value of every
 * element is a fixed float expression of its stored bits, computed the same way by the
 * build (Node.data), the interpreter and every kernel (docs/quantization.md). */
typedef enum { WF_F32, WF_F16, WF_BF16, WF_I8, WF_Q8_0, WF_Q4_0, WF_Q4_K, WF_Q6_K, WF_G8, WF_G4, WF__COUNT } WFormat;
enum { KILN_QPANEL = 32 };
typedef struct {
  const char *name;             /* as --quantize spells it: "q4_0" */
  int block;                    /* k values per block; 0: one block is the whole row (i8) */
  int ggml_type;                /* GGUF tensor type with the same values (-1: none) */
} WFormatInfo;
const WFormatInfo *wformat_info(WFormat f);
bool wformat_parse(const char *s, WFormat *out);
/* Bytes of one panel of k columns (k a multiple of the format's block). */
int64_t wformat_panel_bytes(WFormat f, int64_t k);
/* Bytes of the whole n x k matrix in format f: panels * panel bytes. */
int64_t wformat_bytes(WFormat f, int64_t n, int64_t k);
/* W (n x k f32, row-major) in f's panel layout (wformat_bytes bytes, kiln_alloc'd);
 * deq (n * k floats, may be NULL, may alias w) receives the values the kernels compute
 * with. Deterministic: the same w gives the same bytes on every machine. */
unsigned char *quant_pack(WFormat f, const float *w, int64_t n, int64_t k, float *deq);
/* The same into out (wformat_bytes of it, zeroed: padding lanes are not written; the
 * build's writer passes a calloc'd buffer it frees after writing the tensor); returns out. */
unsigned char *quant_pack_into(WFormat f, const float *w, int64_t n, int64_t k, float *deq, unsigned char *out);
/* GGUF/ggml rows of the same format (n rows of k, ggml's block layout) re-laid as panels:
 * the same bits, no rounding. f16 and bf16 rows are plain 2-byte elements. */
unsigned char *quant_from_ggml(WFormat f, const unsigned char *raw, int64_t n, int64_t k);
/* The same into out (wformat_bytes of it, zeroed, as quant_pack_into's). */
unsigned char *quant_from_ggml_into(WFormat f, const unsigned char *raw, int64_t n, int64_t k, unsigned char *out);
/* The n x k values of a panel-laid matrix (the reference dequantization). */
void quant_unpack(WFormat f, const unsigned char *panels, int64_t n, int64_t k, float *out);
/* A stored matrix as integer codes under per-group affine terms: element (r, i) is
 * q[r*k + i] in group g = r * (k / group) + i / group, and its value (quant_unpack's,
 * bit for bit) is the f32 expression a[g] * q, or a[g] * q + c[g] when c is not NULL
 * (one rounding each). What a target with its own compressed-weight encoding (Core ML's
 * constexpr ops) needs; false, nothing set, for f32, f16 and bf16 (no integer codes). */
typedef struct {
  int64_t group;                /* values per (a, c) pair along a row */
  int qmin, qmax;               /* the codes' range: what a target's integer type must hold */
  int16_t *q;                   /* n * k codes, row-major */
  float *a, *c;                 /* n * (k / group) each; c NULL: no additive term */
} QuantSplit;
bool quant_split(WFormat f, const unsigned char *panels, int64_t n, int64_t k, QuantSplit *out);

/* ---- the op table (ops.h) ---- */
typedef enum {
#define X(id, name, mi, ma, fam, fl, ex, iex, doc) OP_##id,
  KILN_OPS(X)
#undef X
  OP__COUNT
} OpKind;

/* Kernel families: how a node is rendered. Each target has one template per family. */
typedef enum {
  FAM_LEAF, FAM_VIEW, FAM_UNARY, FAM_BINARY, FAM_SELECT, FAM_CAST, FAM_MATMUL, FAM_CONV,
  FAM_POOL, FAM_REDUCE, FAM_SOFTMAX, FAM_NORM, FAM_BATCHNORM, FAM_TRANSPOSE, FAM_CONCAT,
  FAM_SLICE, FAM_GATHER, FAM_ATTENTION, FAM_WRITE, FAM_ARGREDUCE,
  FAM_GATHER_ELEMENTS, FAM_TOPK, FAM_CONV_TRANSPOSE, FAM_SCATTER, FAM__COUNT
} OpFamily;

enum {
  OPF_F32 = 1 << 0,   /* float operands only (shape rule rejects other dtypes) */
  OPF_CMP = 1 << 1,   /* result dtype is DT_BOOL */
};

typedef struct {
  const char *name;
  int min_in, max_in;  /* max_in -1: variadic */
  OpFamily family;
  unsigned flags;
  const char *expr;    /* elementwise scalar expression over x, y, z, or NULL */
  const char *iexpr;   /* the same on i32 operands (wrapping), or NULL: f32 only */
  const char *doc;
} OpInfo;

extern const OpInfo kiln_ops[OP__COUNT];
bool op_parse(const char *name, OpKind *out);
/* The scalar expression of op on operands of dtype t (iexpr for i32), NULL if none. */
const char *op_expr(OpKind op, DType t);

/* Attributes: one fat struct for every op (chibicc's fat Node); each op reads its own. */
typedef struct {
  int axis;                     /* softmax, concat, gather, argmax/argmin; first normalised dim for norms */
  uint32_t axes;                /* reduce: bit i set = reduce dim i */
  bool keepdims;                /* reduce, argmax/argmin */
  int perm[KILN_MAX_RANK];      /* transpose */
  bool trans_x, trans_y;        /* matmul */
  int kernel[2];                /* pools: kh, kw */
  int stride[2];                /* conv, pools: sh, sw */
  int pad[4];                   /* conv, pools: top, left, bottom, right (conv_transpose2d: bottom and
                                   right are padding - output_padding, so may be negative) */
  int dilation[2];              /* conv */
  int groups;                   /* conv */
  bool count_pad;               /* avgpool: padding counts in the divisor */
  int64_t start[KILN_MAX_RANK], end[KILN_MAX_RANK], step[KILN_MAX_RANK]; /* slice, normalised */
  float eps;                    /* norms */
  DType to;                     /* cast */
  Shape reshape;                /* reshape: the target shape, fully resolved (no -1) */
  bool causal;                  /* sdpa: query row i sees keys j <= pos + i only */
  float scale;                  /* sdpa: the factor on q . k (1/sqrt(D) by default) */
  int window;                   /* sdpa: 0, or W > 0: row i sees positions pos + i - W < p <= pos + i, the key
                                   of position p in slot p mod S (a ring; docs/ops.md) */
  bool ring;                    /* write: row i lands in slot (at + i) mod the state's length */
  int state;                    /* state, write: index in Program.states (write: axis = a.axis) */
  int k;                        /* topk: how many indices along a.axis */
  bool largest;                 /* topk: the largest first (descending), else the smallest */
} Attrs;

/* Where a value lives at run time (memplan.c fills it). */
typedef enum { REG_NONE, REG_WEIGHTS, REG_ARENA, REG_INPUT, REG_OUTPUT, REG_STATE } Region;

typedef struct Node {
  int id;                       /* index in Graph.nodes; topological order */
  OpKind op;
  DType dtype;
  Shape shape;
  int *in;                      /* input node ids */
  int nin;
  Attrs a;
  const char *name;             /* stable dotted name: nn path or weight name ("layers.0.attn.q") */
  SrcLoc loc;                   /* Lua line that created it */

  /* leaves */
  void *data;                   /* CONST (and a WEIGHT given values outright): numel * dtype_size
                                   bytes, little-endian; a WEIGHT with src leaves it NULL: read
                                   its values through node_data */
  struct WeightSrc *src;        /* WEIGHT: where its values come from (shared by its copies) */
  int io_index;                 /* INPUT: position in Graph.inputs */

  /* filled by passes */
  bool dead;                    /* removed by a pass; kept in the array so ids stay stable */
  int kernel;                   /* index in Graph.kernels, -1 for leaves and views */
  int nuses;                    /* live consumers (+1 per graph output naming it) */
  Region region;
  int io_slot;                  /* REG_INPUT/REG_OUTPUT: which input/output buffer */
                                /* REG_STATE: every version of one state shares its bytes */
  int64_t offset;               /* byte offset within its region */
  int pack;                     /* WEIGHT stored as panels of this many columns (pass_pack), 0: as is */
  bool pack_t;                  /* packed from the transpose: the weight is B^T (a Linear's [N, K]) */
  bool wino;                    /* conv filters stored as F(2x2, 3x3) transforms (pass_pack, wino_geom) */
  WFormat src_fmt;              /* WEIGHT: the format its file stores it in (f32 for seeded weights) */
  const unsigned char *src_raw; /* ... and those bytes (ggml rows), when src_fmt is not f32 */
  WFormat wfmt;                 /* WEIGHT: the format the weights file keeps it in (pass_quant) */
} Node;

/* Where a WEIGHT's values come from, so that a build never holds the whole model: a
 * tensor of a loaded file (its bytes stay in the mapped file) or the seeded initialiser
 * (regenerated bit for bit from seed and name). Every copy of a parameter (one per entry
 * using it) points at the same WeightSrc. node_data materialises the values into
 * `values` and node_release frees them again (weight.c). */
typedef struct WeightSrc {
  const struct SafeTensor *file;  /* from a loaded file, or NULL: seeded */
  const char *name;             /* seeded: the parameter name init_fill hashes */
  const char *kind;             /* seeded: init kind and its numbers (init_fill) */
  double a, b;
  uint64_t seed;
  float *values;                /* node_data's values (malloc'd), or NULL */
  WFormat values_fmt;           /* the format whose values `values` holds (f32: as loaded) */
  bool listed;                  /* weight.c frees its values at exit */
  bool hashed;                  /* stored_fnv is set (weights_write hashes as it writes) */
  uint64_t stored_fnv;          /* FNV-1a 64 of its payload bytes (json.c reads it) */
} WeightSrc;

/* A kernel: nodes rendered as one function (C) / one dispatch (Metal). Nodes are in
 * topological order: the first is the anchor (rendered by its family's template), the
 * rest a chain of elementwise nodes applied to each value it stores (pass_group); the
 * last one is the kernel's result, the only one with storage. */
typedef struct {
  int *nodes;
  int nnodes;
  const char *cname;            /* unique identifier from the model: "layers_0_attn_q" */
  const char *cfunc;            /* its C function's name (emit_c: cname, with a '_' where another
                                 * entry's kernel or a public name holds cname); NULL before */
  int order;                    /* position in the schedule */
  int64_t scratch;              /* arena bytes the kernel needs while it runs (pass_memplan: */
  int64_t scratch_offset;       /* kernel_scratch), placed like a value live only at `order` */
} Kernel;

typedef struct {
  const char *name;             /* as declared in Lua: a C identifier */
  int node;
} GraphIO;

struct Program;

typedef struct Graph {
  const char *model;            /* model name: identifier, from the script's file name */
  const char *script;           /* the script path as recorded in SrcLoc */
  const char *entry;            /* entry point name ("run" for a script without kiln.entry) */
  SrcLoc entry_loc;             /* the kiln.entry call (line 0 for a script without one) */
  struct Program *prog;         /* the program it is an entry of; NULL for a standalone graph */
  int *state_last;              /* per state of prog (nstate_last of them): the node holding its */
  int nstate_last;              /* value when the entry returns (STATE leaf or WRITE), -1 untouched */
  int wslot_base;               /* memplan: 1 + index of the entry's first slot in prog->wslots; 0: none yet */
  Node **nodes;
  int nnodes, capnodes;
  GraphIO *inputs, *outputs;
  int ninputs, noutputs;
  int capinputs, capoutputs;    /* allocated lengths (arrays double, so tracing stays linear) */

  Kernel *kernels;              /* in schedule order once pass_schedule ran */
  int nkernels;
  int64_t arena_size;           /* bytes, memplan */
  int64_t weights_size;         /* bytes of the blob payload, memplan */
  bool no_fuse;                 /* pass_group: one node per kernel (--no-fuse, KILN_NOFUSE=1) */
} Graph;

/* One --quantize rule: the weights whose name matches glob (NULL: every weight) are
 * stored as fmt; keep: as the file stores them. The first matching rule wins. text: the
 * rule as the user wrote it. */
typedef struct {
  const char *glob;
  WFormat fmt;
  bool keep;
  const char *text;
} QuantRule;

/* What pass_quant made of one --quantize rule, over every entry: the weights it decided
 * (each once), how many of those stay f32 against it, and the first such and why. */
typedef struct {
  int reached, unfit;
  const char *example, *why;
} QuantRuleUse;

/* A persistent state (kiln.state): caller-owned bytes that outlive a call, shared by
 * every entry, at a fixed offset of the state block; all zero is a fresh state. */
typedef struct {
  const char *name;             /* dotted, as declared ("layers.0.k") */
  DType dtype;
  Shape shape;
  SrcLoc loc;                   /* the kiln.state call */
  int64_t offset;               /* bytes into the state block, a multiple of KILN_ALIGN */
} StateDecl;

/* One slot of the shared weights payload: the first node placed there (memplan). */
typedef struct {
  const Node *node;
  int64_t offset;
} WeightSlot;

/* What one model script defines: its entry points, which share the weights blob (a
 * parameter used by two entries is stored once) and the states. A script without
 * kiln.entry and kiln.state is a plain program: one entry, "run", emitted exactly as
 * Kiln always emitted a model (program_is_plain). */
typedef struct Program {
  const char *model, *script;
  Graph **entries;              /* in declaration order */
  int nentries;
  bool explicit_entries;        /* kiln.entry was used (else entries[0] is the script itself) */
  StateDecl *states;            /* in declaration order */
  int nstates;
  int64_t state_size;           /* bytes of the state block, a multiple of KILN_ALIGN */
  WeightSlot *wslots;           /* the weights layout every entry shares (memplan) */
  int nwslots, capwslots;
  int64_t weights_size;         /* payload bytes, once every entry is planned */
  uint64_t weights_checksum;    /* the payload's FNV-1a 64, once weights_write has written it */
  bool checksummed;             /* weights_checksum is set: later targets reuse it */
  int64_t arena_size;           /* the largest entry's arena */
  bool no_pack;                 /* keep every f32 weight row-major (Metal reads the blob too) */
  bool no_wino;                 /* --no-winograd: 3x3 convolutions keep the direct product */
  const QuantRule *qrules;      /* --quantize, in the order given (pass_quant) */
  int nqrules;
  QuantRuleUse *qrule_use;      /* nqrules of them, filled by pass_quant (NULL: not counted) */
  bool ggml_acts;               /* --activations ggml: products round activations as ggml (pass_actq) */
} Program;

Program *program_new(const char *model, const char *script);
/* Adds an entry graph named entry (a fresh Graph, prog and entry set). */
Graph *program_add_entry(Program *p, const char *entry);
bool program_is_plain(const Program *p);
/* The node holding state s at the end of g's entry, or -1 (the state is untouched). */
int graph_state_last(const Graph *g, int s);
void graph_set_state_last(Graph *g, int s, int node);

/* ---- graph building and shape rules (graph.c, shape.c) ---- */
Graph *graph_new(const char *model, const char *script);
/* Adds a node, runs its shape rule; on a rule violation returns NULL and writes a
 * message naming the op and the shapes into err. */
Node *graph_add(Graph *g, OpKind op, const int *in, int nin, const Attrs *a, SrcLoc loc,
                char *err, size_t errlen);
Node *graph_leaf(Graph *g, OpKind op, DType t, const Shape *s, const char *name, SrcLoc loc);
/* graph_leaf(OP_INPUT, ...) also appends {name, id} to Graph.inputs and sets io_index;
 * graph_output appends {name, node} to Graph.outputs (kiln.output). Neither checks names:
 * pass_verify does (unique, C identifiers). WEIGHT/CONST data: set n->data after. */
void graph_output(Graph *g, const char *name, int node);
/* A source file as generated files name it: relative to the model script's own
 * directory ("models/mlp.lua" -> "mlp.lua", "models/lib/x.lua" -> "lib/x.lua"), so
 * the bytes Kiln writes do not depend on the working directory. Diagnostics keep
 * the path as the user gave it. */
const char *graph_src_name(const Graph *g, const char *file);
Node *graph_node(Graph *g, int id);
/* Moves the nodes appended since there were n0 ([n0, nnodes), in their order) so that
 * node n0 + j sits just before old node host[j] (host ascending along j), and renumbers
 * every id: inputs, Graph.inputs/outputs, state_last. Before pass_group only (kernels
 * hold no ids yet). The moved nodes must read only nodes before their host. */
void graph_move_before(Graph *g, int n0, const int *host);
/* graph_move_before with one host for all of them: nodes [n0, nnodes) move, in their order,
 * to just before node at. */
void graph_move_all_before(Graph *g, int n0, int at);
int64_t node_numel(const Node *n);
int64_t node_bytes(const Node *n);           /* of its value: numel * dtype size */
/* The rule for one op: sets n->shape and n->dtype from its inputs and attrs, or
 * writes a message to err and returns false. Derived from the op table. */
bool shape_infer(Graph *g, Node *n, char *err, size_t errlen);
bool shape_broadcast(const Shape *a, const Shape *b, Shape *out);
/* The element count of s, or -1 when it exceeds KILN_MAX_NUMEL (never overflows,
 * unlike shape_numel, so it is safe on shapes not yet checked). */
int64_t shape_numel_checked(const Shape *s);
void graph_dump(Graph *g, FILE *f);         /* text form, one node a line */
void graph_dump_dot(Graph *g, FILE *f);     /* Graphviz */
/* The whole program: a plain one exactly as graph_dump; otherwise the states, then
 * each entry headed "entry NAME" (program_dump_dot: one DOT cluster per entry). */
void program_dump(Program *p, FILE *f);
void program_dump_dot(Program *p, FILE *f);

/* ---- passes (passes.c, memplan.c), run in this order by pipeline.c ---- */
void pass_verify(Graph *g);     /* invariants hold: topological, shapes re-infer, io valid */
void pass_dce(Graph *g);        /* nodes not reaching an output are marked dead */
void pass_cse(Graph *g);        /* identical (op, inputs, attrs) nodes merged */
void pass_fold(Graph *g);       /* nodes of CONST-only inputs become CONST (never WEIGHTs) */
void pass_pool_act(Graph *g);   /* maxpool(tanh(x)) and maxpool(sigmoid(x)) become tanh/sigmoid(maxpool(x)) */
void pass_narrow(Graph *g);     /* a slice of a value only it reads moves up: the op computes just the slice (narrow.c) */
void pass_legalize(Graph *g);   /* outputs that alias an input/weight/other output get a COPY */
void pass_group(Graph *g);      /* nodes -> kernels, with unique C names */
void pass_quant(Graph *g);      /* matrix weights read by row get their stored format (Node.wfmt) */
/* One "kiln: note:" line on f for each --quantize rule with a name pattern that reached no
 * weight, or whose weights (some of them) stay f32: a misspelt or unfit rule is not silent. */
void quant_rule_notes(const Program *p, FILE *f);
void pass_actq(Graph *g);       /* --activations ggml: products round their activations as ggml (actq.c) */
void pass_pack(Graph *g);       /* matmul weights read as B get a panel layout (Node.pack) */
void pass_schedule(Graph *g);   /* kernels in a deterministic topological order */
void pass_memplan(Graph *g);    /* region + offset for every live value; arena/weights size */

/* A matmul's matrix sizes after its transposes (m x k times k x n), and whether its C
 * kernel computes the transpose out^T = y^T x^T (a matrix-vector product W v: W's long
 * side then runs along the panels). One rule for pass_pack and emit_c. */
typedef struct {
  int64_t m, n, k;
} MatmulShape;
MatmulShape matmul_shape(Graph *g, const Node *mm);
bool matmul_swapped(const MatmulShape *s);
/* A convolution over Winograd filters (Node.wino): its output as th x tw tiles of 2 x 2,
 * transformed a band of at most `band` tiles at a time into scratch: 16 values, each C x ldv
 * floats and KILN_WINO_SKEW more (templates/c/wino_lib.c.tmpl); scratch: those bytes. One rule for
 * pass_memplan and emit_c. */
typedef struct {
  int64_t th, tw, band, ldv, scratch;
} WinoGeom;
WinoGeom wino_geom(Graph *g, const Node *conv);
/* A packed weight (Node.pack) as B: k rows, n columns. */
void pack_dims(const Node *w, int64_t *k, int64_t *n);
/* Bytes w takes in the weights payload: node_bytes, or its padded panels when packed. */
int64_t node_stored_bytes(const Node *w);
/* w's payload bytes when packed: a fresh malloc'd copy in panel order (the caller frees
 * it), so the build holds one tensor's panels at a time, never a second copy of the model. */
float *node_panels(const Node *w);
/* The bytes a weight takes in the payload (node_stored_bytes of them): its format's
 * panels, its f32 panels, or its data. *owned: the caller frees them. The values may be
 * materialised for it: call node_release(w) once done with the tensor. */
const void *node_stored(const Node *w, bool *owned);
/* The values of leaf n (node_bytes of them) that the kernels compute with: a CONST's data;
 * a WEIGHT's materialised from its source on first use (after pass_quant, the values of
 * its stored format). Valid until node_release(n) (weight.c). */
const void *node_data(const Node *n);
/* Frees what node_data materialised for n (any copy of the weight) and tells the kernel
 * that n's file pages are not needed now; a later node_data makes them again, bit for bit. */
void node_release(const Node *n);
/* The f32 values of n's source as loaded, before any stored format (malloc'd, the caller
 * frees them). */
float *weight_load(const Node *n);
/* Whether weight_rows can read n's rows one at a time: a rank-2 weight from a file (or
 * given values). A seeded one is one random stream: it is made whole (weight_load). */
bool weight_has_rows(const Node *n);
/* Rows [r0, r0 + nr) of n's f32 source values (nr * shape.dim[1] floats) into out. */
void weight_rows(const Node *n, int64_t r0, int64_t nr, float *out);

typedef struct {
  const char *name;
  void (*run)(Graph *g);
} Pass;
extern const Pass kiln_passes[];
extern const int kiln_npasses;
/* Runs every pass on every entry (pass by pass); after the one named dump_after (or
 * all, "all") prints the program to f. Sets p->weights_size and p->arena_size. */
void pipeline_run(Program *p, const char *dump_after, FILE *f);

/* ---- reference interpreter (interp.c) ---- */
typedef struct {
  DType dtype;
  Shape shape;
  void *data;
} Tensor;
/* Evaluates one node from its input tensors into out (allocated by the caller to
 * node_bytes(n)). Returns false with a message on a data-dependent error (index range). */
bool interp_node(Graph *g, Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen);
/* Evaluates the whole graph; inputs in Graph.inputs order, outputs allocated by it. */
bool interp_graph(Graph *g, const Tensor *inputs, Tensor *outputs, char *err, size_t errlen);
/* Evaluates one entry with persistent state: state[i] is Program.states[i]'s value on
 * the way in and, when the call succeeds, on the way out; on a data error (a write
 * offset out of range) it returns false and leaves state untouched. */
bool interp_entry(Graph *g, const Tensor *inputs, Tensor *state, Tensor *outputs, char *err, size_t errlen);

/* ---- frontend (lua.c, safetensors.c, init.c) ---- */
/* What a model script may do (sandbox.c, docs/lua-api.md "The sandbox"). */
typedef struct {
  bool unsafe;                  /* --unsafe-lua: the full standard library, no limits */
  int64_t max_instructions;     /* Lua VM instructions; 0: no limit */
  int64_t max_memory;           /* bytes the Lua state may hold; 0: no limit */
  const char *root;             /* the script's directory: reads and require stay below it */
} SandboxOptions;
enum {
  KILN_LUA_MAX_INSTRUCTIONS_DEFAULT = 1000000000,   /* ~10 s of Lua; bundled models use < 1% */
  KILN_LUA_MAX_MEMORY_MIB_DEFAULT = 1024,
};

typedef struct {
  const char *script;           /* path as given */
  const char *model;            /* NULL: from the script's base name */
  SandboxOptions sandbox;       /* root is filled in by frontend_trace */
  const char *const *defines;   /* -D NAME=VALUE, read by kiln.option */
  int ndefines;
} FrontendOptions;
Program *frontend_trace(const FrontendOptions *o);   /* errors via kiln_error_at */
/* `kiln import` (gen/frontend/onnx_import.c): argv after "import"; returns the exit status. */
int onnx_import_main(int argc, char **argv);

typedef struct SafeTensor {
  const char *name;
  DType dtype;                  /* after conversion: f16/bf16 become f32 */
  Shape shape;
  bool loads;                   /* Kiln reads its dtype (false: file_dtype is valid but not loadable: I64, U8...) */
  const unsigned char *bytes;   /* its bytes in the file's data section (decoded on demand: safetensor_f32) */
  int ggml_type;                /* GGUF: its ggml type id; -1 in a safetensors file */
  bool mapped;                  /* bytes lie in a read-only file mapping (pages may be dropped: safetensor_drop) */
  const char *file_dtype;       /* the dtype as written in the file: "F32", "F16", "BF16", ... */
  WFormat raw_fmt;              /* the stored format those bytes are in (f32: a plain f32 tensor) */
  const unsigned char *raw;     /* the tensor's bytes in the file's data (ggml rows) when raw_fmt is not
                                   f32: they point into the bytes parsed, which must outlive them */
} SafeTensor;
/* A metadata value of a weights file (a GGUF key's value; safetensors' __metadata__
 * strings). Integers are int64 (a u64 above INT64_MAX becomes a float). */
typedef enum { MV_INT, MV_FLOAT, MV_BOOL, MV_STR, MV_ARR } MetaKind;
typedef struct MetaVal {
  MetaKind kind;
  int64_t i;
  double f;
  bool b;
  const char *s;                /* MV_STR: NUL-terminated copy; slen bytes (may hold NULs) */
  size_t slen;
  struct MetaVal *items;        /* MV_ARR: n values */
  int64_t n;
} MetaVal;
typedef struct {
  const char *key;
  MetaVal v;
} MetaKV;

/* A loaded weights file, safetensors or GGUF: tensors in file order, metadata keys. */
typedef struct {
  const char *path;
  SafeTensor *tensors;
  int ntensors;
  MetaKV *meta;                 /* in file order */
  int nmeta;
} SafeFile;
/* Parses and validates a safetensors file; on any problem returns NULL and writes
 * "path: tensor 'name': problem" to err. */
SafeFile *safetensors_load(const char *path, char *err, size_t errlen);
/* The same on a file already in memory (data/size stay owned by the caller; only the
 * tensors' raw pointers refer to them afterwards); path only names it in messages. The
 * fuzz target. */
SafeFile *safetensors_parse(const char *path, const unsigned char *data, size_t size, char *err, size_t errlen);
SafeTensor *safetensors_find(SafeFile *f, const char *name);
/* t's numel values as f32 into out (widened, or dequantized from ggml blocks); t->loads. */
void safetensor_f32(const SafeTensor *t, float *out);
/* The same for a GGUF tensor of ggml type `type` (gguf.c). */
void gguf_to_f32(int type, const unsigned char *p, int64_t n, float *out);
int64_t gguf_tensor_bytes(int type, int64_t n);
/* Tells the kernel t's pages of a mapped file are not needed now (they are read again on
 * the next access), so reading a model tensor by tensor keeps one tensor resident. */
void safetensor_drop(const SafeTensor *t);
/* GGUF (gguf.c): the same contract as safetensors_load/_parse; quantized tensors are
 * dequantized to f32, shapes are numpy order (GGUF's dims reversed). gguf_is: the
 * first n bytes of a file start with GGUF's magic. gguf_meta_name: llama.cpp's name
 * of a llama tensor ("blk.3.attn_q.weight") as Meta's ("layers.3.attention.wq.weight"),
 * any other name unchanged. */
SafeFile *gguf_load(const char *path, char *err, size_t errlen);
SafeFile *gguf_parse(const char *path, const unsigned char *data, size_t size, char *err, size_t errlen);
bool gguf_is(const unsigned char *head, size_t n);
const char *gguf_meta_name(const char *name);
/* A Hugging Face tokenizer.json (the n bytes at data) as Kiln's tokenizer binary
 * (runtime/llm/kiln_tok.h) appended to out (tokjson.c); false and a one-line message
 * "<path>: <field>: <what>" in err otherwise, out untouched. The fuzz target. */
bool tokjson_convert(const char *path, const unsigned char *data, size_t size, Buf *out, char *err, size_t errlen);
/* The same from a GGUF file's byte-level vocabulary (tokenizer.ggml.model "gpt2": .pre,
 * .tokens, .token_type, .merges, .bos/.eos/.unknown_token_id) or WordPiece one ("bert":
 * .tokens as llama.cpp's converter spells them, .cls/.seperator/.unknown_token_id). */
bool tokgguf_convert(const char *path, const SafeFile *f, Buf *out, char *err, size_t errlen);
/* The same from a llama2.c tokenizer file (tok512.bin: int32 max piece length, then per
 * piece f32 score, int32 length, bytes; ids 0 UNK, 1 BOS, 2 EOS): SentencePiece BPE, its
 * merges derived from the scores. */
bool tokllama2c_convert(const char *path, const unsigned char *data, size_t size, Buf *out, char *err, size_t errlen);
/* JSON (json.c): strict RFC 8259. A parsed value; strings decoded and NUL-terminated. */
typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } JType;

typedef struct JVal {
  JType t;
  bool b;
  const char *text;             /* J_NUM: the number as written; J_STR: decoded, NUL-terminated */
  size_t len;                   /* its length (a decoded string may hold \u0000) */
  struct JVal *items;           /* J_ARR, J_OBJ: values */
  const char **keys;            /* J_OBJ: keys (decoded) */
  size_t *keylens;
  int n;
} JVal;
/* Parses the n bytes at s as one JSON value; false and a message ("bad JSON at byte N:
 * what") in *err otherwise. json_uint: a non-negative integer below 2^53 without
 * fraction or exponent. */
bool json_parse(const unsigned char *s, size_t n, JVal *out, char **err);
bool json_uint(const JVal *v, int64_t *out);
/* Deterministic initialiser (init.c): same bytes on every machine. */
void init_fill(float *out, int64_t n, uint64_t seed, const char *param_name, const char *kind,
               double a, double b);

/* ---- output (emit_*.c, weights.c, json.c) ---- */
typedef enum { TGT_C = 1, TGT_METAL = 2, TGT_COREML = 4 } TargetMask;

typedef struct {
  const char *outdir;           /* final directory; emitters write into tmpdir */
  const char *tmpdir;
  unsigned targets;             /* TargetMask bits */
  bool embed_weights;           /* C: weights as a const array in <model>_weights.c */
  bool profile;                 /* C: every kernel call timed into <model>_profile (--profile) */
  const char *min_os;           /* CoreML: "iOS15".."iOS18" */
  bool fp16;                    /* CoreML precision */
} EmitOptions;

/* The weights of the graphs gs[0..ng) (one plain graph, or every entry of a program:
 * a tensor entries share is stored once) in a payload of size bytes (weights.c).
 * weights_checksum: the payload's FNV-1a 64, without building it; weights_write:
 * header + payload streamed to dir/name, returns the checksum; weights_blob: the same
 * bytes appended to out (--embed-weights). */
uint64_t weights_checksum(Graph *const *gs, int ng, int64_t size);
uint64_t weights_write(Graph *const *gs, int ng, int64_t size, const char *dir, const char *name);
uint64_t weights_blob(Graph *const *gs, int ng, int64_t size, Buf *out);
uint64_t kiln_fnv1a64(const void *p, size_t n);
void emit_c(Program *p, const EmitOptions *o);
void emit_json(Program *p, const EmitOptions *o);
void emit_metal(Program *p, const EmitOptions *o);
void emit_coreml(Program *p, const EmitOptions *o);

/* ---- escaping user-derived text for each output language (escape.c) ---- */
char *esc_comment(const char *s);           /* inside a C/ObjC/MSL block or line comment */
char *esc_c_string(const char *s);          /* inside a C string literal, no quotes */
void esc_json(Buf *b, const char *s);       /* a JSON string literal, quotes included */
char *esc_message(const char *s);           /* one terminal-safe line of a message */

/* ---- publishing a build (publish.c; docs/output.md "Publishing") ---- */
typedef struct Publish Publish;
/* Locks the output, checks it, creates the staging directory (Publish.tmp). */
Publish *publish_begin(const char *outdir, const char *model);
const char *publish_staging(const Publish *p);
void publish_set_owned(Publish *p, const char *const *suffixes);
/* Swaps the finished staging directory in as outdir, keeping the user's other files. */
void publish_commit(Publish *p);
bool kiln_remove_tree(const char *path);    /* rm -rf without a shell; async-signal-safe */
void kiln_mkdir_p(const char *dir);

/* .npy files (npy.c): the data of a file whose header says dtype and exactly shape, or
 * NULL and a one-line message in err; and writing a tensor as dir/<name>.npy. */
unsigned char *npy_parse(const char *path, const char *iname, DType dtype, const Shape *shape, unsigned char *all,
                         size_t size, char *err, size_t errlen);
void npy_write(const char *dir, const char *name, const Tensor *t);

/* Reads at most max bytes of a file or stream (util.c); NULL and "path: why" in err. */
unsigned char *kiln_read_bounded(const char *path, size_t max, size_t *size, char *err, size_t errlen);
/* A regular file mapped read-only (util.c), so a model file's bytes are read from the page
 * cache as tensors are used instead of copied whole; *mapped says whether it is a mapping
 * (an empty file, or one mmap refuses, is read with kiln_read_bounded). NULL and "path: why". */
unsigned char *kiln_map_file(const char *path, size_t *size, bool *mapped, char *err, size_t errlen);
/* Drops the resident pages of [p, p + n) of a read-only file mapping (they fault in again
 * from the file when read): the build's RSS stays one tensor, not the model. */
void kiln_drop_pages(const void *p, size_t n);
/* The paths of the files kiln_map_file mapped (the first KILN_MAPPED_NAMES, each cut to
 * fit), for the bus-error message: readable from a signal handler. */
enum { KILN_MAPPED_NAMES = 8, KILN_MAPPED_NAME_MAX = 512 };
int kiln_mapped_count(void);
const char *kiln_mapped_name(int i);
/* Turns a bus error (a mapped weights file that shrank while kiln read it) into one line
 * naming the mapped files, removes the staging directory, exits 1 (publish.c). */
void publish_catch_bus_errors(void);

/* `kiln tokenize FILE [--decode]` (tokenize.c): text lines on stdin to ids, or back. */
int cmd_tokenize(const char *path, bool decode, char sep, const char *convert);
/* The tokenizer binary of path (a tokenizer.json, converted; or a .tok, checked) appended
 * to out; kiln_error (nothing written) when it is neither or is damaged. */
void tokenizer_binary(const char *path, Buf *out);

/* Writes a file under dir/name, dying loudly on I/O failure. */
void kiln_write_file(const char *dir, const char *name, const void *data, size_t n);

/* ==== emit_common.c: helpers shared by the C and Metal emitters (owner: C target) ==== */
/* A target's spelling of a neutral function used by ops.h expressions. */
typedef struct {
  const char *neutral;          /* exp log sqrt tanh erf fabs fmax fmin pow */
  const char *target;           /* "expf", "metal::exp", "kiln_erf" ... */
} EmitFn;
extern const EmitFn emit_c_fns[];   /* C: exp->kiln_expf, sqrt->sqrtf ...; NULL-terminated ({NULL, NULL}) */
/* Renders an ops.h expr for a target: x, y, z become operands[0..2] (parenthesised
 * unless already an identifier/array element), function names go through fns (a call
 * to a name missing from fns dies), numbers and operators are copied. Arena string. */
char *emit_expr(const char *expr, const EmitFn *fns, const char *const *operands, int noperands);
/* Row-major element strides of s (stride of the last dim is 1). */
void emit_strides(const Shape *s, int64_t strides[KILN_MAX_RANK]);
/* Element strides of an input of shape in read at every index of out (numpy
 * broadcasting, right-aligned): strides[i] for each of out->rank dims, 0 where in
 * is broadcast along out dim i. Dies if in does not broadcast to out. */
void emit_bcast_strides(const Shape *in, const Shape *out, int64_t strides[KILN_MAX_RANK]);
/* Merges adjacent dims of out that every operand walks the same way (all contiguous
 * together, or all broadcast together), so an elementwise loop nest is as short as
 * possible: on return *rank dims in dims[] and strides[k][] per operand (k < nops).
 * strides come in as from emit_bcast_strides over out->rank dims. Rank 0 becomes
 * rank 1 of size 1. */
void emit_coalesce(const Shape *out, int nops, int64_t strides[][KILN_MAX_RANK], int *rank,
                   int64_t dims[KILN_MAX_RANK]);
/* A C identifier from a dotted name: "layers.0.attn.q" -> "layers_0_attn_q"; other
 * non-identifier characters become '_', a leading digit gets a '_' prefix, "" -> "_".
 * Arena string. */
char *emit_ident(const char *name);
char *emit_upper(const char *s);          /* ASCII upper-case copy, arena string */
bool emit_is_c_keyword(const char *s);    /* C11 keywords and common macros (NULL...) */
/* "1 kernel", "3 kernels": n and the noun for it. Arena string. */
char *emit_count(int64_t n, const char *one, const char *many);
/* "{1, 2, 3}"-style list of n int64 values, arena string; n == 0 gives "{0}". */
char *emit_int_list(const int64_t *v, int n);
/* A float literal that round-trips exactly and prints the same everywhere: the
 * shortest decimal that reads back as the same float, plus 'f' ("1e-05f", "0.1f",
 * "3.0f"; exponent form below 1e-4 and from 1e16 on); inf/nan as INFINITY/NAN. */
char *emit_float(float v);
/* The C element type of a dtype: "float" "int32_t" "uint8_t". */
const char *emit_c_type(DType t);

/* Template variables: (name, value) pairs for template_expand, NULL-terminated. */
enum { EMIT_MAX_VARS = 48 };
typedef struct {
  const char *kv[2 * EMIT_MAX_VARS + 1];
  int n;
} EmitVars;
void emit_var(EmitVars *v, const char *name, const char *value);
/* An integer variable; kiln_error when it does not fit 32 bits (C enums, MSL uint). */
void emit_vari(EmitVars *v, const char *name, int64_t value);
void emit_varl(EmitVars *v, const char *name, int64_t value);   /* any 64-bit value (offsets, sizes) */
/* Kernel k for its comment: its anchor, the attributes that shape it and the chain
 * fused after it: "matmul f32 [2, 8], [4, 8] -> [2, 4], transposed: y, then add +
 * relu". Arena string, no newline. */
char *emit_describe(Graph *g, const Kernel *k);

/* A range check an entry makes before running anything (C: in the entry function,
 * Metal: on the host before encoding): the i32 scalar input `input` (a kiln.write's
 * run-time offset) must lie in [0, max]; `what` says which write, for comments and
 * messages ("cache: rows pos .. pos + 1 of 6 along axis 0, m.lua:15", the input
 * spelled `param`). */
typedef struct {
  int input;                    /* Graph.inputs index */
  int64_t max;                  /* the state's length along the axis minus the rows written;
                                   INT32_MAX for a ring write (any offset >= 0) */
  const char *what;
} EmitRangeCheck;
/* The distinct (offset input, max) pairs among g's live writes, in node order, into
 * *out (arena); returns how many. param[i] spells input i in `what` (NULL: its name).
 * Constant offsets are not here: the frontend checked them. */
int emit_range_checks(Graph *g, const char *const *param, EmitRangeCheck **out);
/* A target's spelling of conversions, each a template over $X (the value):
 * to_bool, to_f32, to_i32 from i32/bool, f32_to_i32 (truncating, NaN -> 0,
 * saturating at the int32 range, as the interpreter defines it). */
typedef struct {
  const char *to_bool, *to_f32, *to_i32, *f32_to_i32;
} EmitCasts;
/* x converted from one dtype to another (x itself when they are equal). */
const char *emit_cast(const EmitCasts *c, DType from, DType to, const char *x);

/* Per-family geometry: what a kernel's loops (C) or threads (Metal) walk, computed
 * once here from the node; each target only maps it to its template variables.
 * An EmitWalk is an index space after emit_coalesce: rank >= 1 dims and, per
 * operand, its element strides over them (0: broadcast); base is where operand 1
 * starts (slices). The function that makes a walk says which operand is which. */
enum { EMIT_MAX_WALK = 4 };
typedef struct {
  int rank, nops;
  int64_t dims[KILN_MAX_RANK];
  int64_t strides[EMIT_MAX_WALK][KILN_MAX_RANK];
  int64_t base;
} EmitWalk;
/* Unary, binary, select, cast: operand 0 the output, 1.. the inputs, broadcast. */
EmitWalk emit_elementwise_walk(Graph *g, const Node *n);
/* Transpose, slice: operand 0 the output, 1 x (permuted or stepped strides, base). */
EmitWalk emit_copy_walk(Graph *g, const Node *n);
typedef struct {
  int64_t m, n, k;              /* out [.., M, N] = x [.., M, K] @ y [.., K, N], transposes applied */
  bool trans_x, trans_y;
  int64_t xs_m, xs_k, ys_k, ys_n;   /* element strides inside one matrix of x and y */
  int64_t batch;                /* matrices: the element count of the broadcast batch dims */
  EmitWalk b;                   /* the batch: 0 out, 1 x, 2 y; strides in elements between matrices */
} MatmulGeom;
MatmulGeom emit_matmul_geom(Graph *g, const Node *n);
/* The variables every target's matmul templates share: M N K XS_M XS_K YS_K YS_N. */
void emit_matmul_vars(EmitVars *v, const MatmulGeom *m);
typedef struct {                /* NCHW x, OIHW w: sizes, per-group channels, stride, pad top/left, dilation */
  int64_t nb, c, h, w, oc, oh, ow, kh, kw, groups, cg, ocg, sh, sw, pt, pl, dh, dw;
  bool bias;
} ConvGeom;
ConvGeom emit_conv_geom(Graph *g, const Node *n);
/* NB C H W OC OH OW KH KW GROUPS CG OCG SH SW PT PL DH DW, as every target names them. */
void emit_conv_vars(EmitVars *v, const ConvGeom *c);
typedef struct {                /* planes = N * C windows of kh x kw over h x w planes */
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, pt, pl;
  bool count_pad;               /* avgpool: padding counts in the divisor */
} PoolGeom;
PoolGeom emit_pool_geom(Graph *g, const Node *n);
/* PLANES H W OH OW KH KW SH SW PT PL, as every target names them. */
void emit_pool_vars(EmitVars *v, const PoolGeom *p);
typedef struct {
  int64_t outn, red;            /* outputs; reduced elements per output */
  EmitWalk kept, reduced;       /* x's kept dims and its reduced dims; one operand: x */
} ReduceGeom;
ReduceGeom emit_reduce_geom(Graph *g, const Node *n);
/* A reduction's accumulator: init, update with element v, result (RED: the count). */
typedef struct {
  const char *init, *update, *finish;
} EmitReduceOp;
EmitReduceOp emit_reduce_op(OpKind op, const char *v_is_nan);
/* conv_transpose2d's sizes as template variables (see emit_common.c). */
void emit_conv_transpose_vars(EmitVars *v, Graph *g, const Node *n);
/* Topk's comparison: v strictly before w (see emit_common.c). */
char *emit_topk_before(bool largest, const char *v, const char *w, const char *nan_v, const char *nan_w);
/* A shape around one dim: OUTER x N x INNER; axis normalised; N = 1 past the rank. */
typedef struct {
  int axis;
  int64_t outer, n, inner;
} AxisGeom;
AxisGeom emit_axis_geom(const Shape *s, int axis);
typedef struct {                /* rows of d elements (dims a.axis.. end), optional affine */
  int64_t rows, d;
  bool gamma, beta;
  const char *affine, *affine_doc;   /* " * gamma[j] + beta[j]", " * gamma + beta" */
} NormGeom;
NormGeom emit_norm_geom(Graph *g, const Node *n);
typedef struct {                /* outer blocks of row elements, each the inputs' blocks side by side */
  int64_t outer, row;
  int nparts;
  int64_t *len, *at;            /* per input: its elements a block, their place in the output block */
} ConcatGeom;
ConcatGeom emit_concat_geom(Graph *g, const Node *n);
typedef struct {                /* x as outer x n x inner, nidx indices along n */
  int64_t outer, n, inner, nidx;
} GatherGeom;
GatherGeom emit_gather_geom(Graph *g, const Node *n);

/* Fused kernels (pass_group): the anchor's template stores each output element once,
 * written in the template as $EPILOGUE(value, flat index) or, where the template has the
 * element's column (its index in out's last dim) at hand, $EPILOGUE(value, flat index,
 * column) or $EPILOGUE(value, flat index, column, row) with its row as well (the row index,
 * flat index / N): a target whose EmitTarget names a col variable then reads an operand
 * that varies only along that dim (a bias) at the column instead of at the flat index
 * modulo the dim, which C compilers turn into a gather, and one that names a row variable
 * too reads any operand at the row's part (fixed along the row) plus the column (an
 * attention mask every head shares, a RoPE table over the heads); lines only a fused kernel
 * needs start with $IF_FUSED. A target expands templates with EPILOGUE and IF_FUSED
 * set to emit_hook_epilogue and emit_hook_fused, then emit_epilogue_apply rewrites
 * the hooks: to the bare value (one node), or to a call of the kernel's helper that
 * runs the chain on the value, reading each extra operand at the element's index. */
typedef struct {
  const EmitFn *fns;                        /* function spellings (emit_expr) */
  const char *(*type)(DType t);             /* element type names */
  const EmitCasts *casts;                   /* conversions of the value (cast nodes) */
  const char *index_type;                   /* the helper's index parameter: "int64_t" / "uint" */
  const char *int_suffix;                   /* integer literals in index arithmetic: "" / "u" */
  const char *index32;                      /* the index to divide when it fits 32 bits: "(int32_t)i" / "i" */
  const char *read_ptr;                     /* a read-only pointer parameter, %s = element type */
  const char *helper_tmpl, *step_tmpl;      /* templates of the helper and of one chain step */
  const char *operand_tmpl;                 /* the helper comment's line about one operand */
  bool conv_bn;                             /* its conv templates apply a fused batchnorm (chain node 1) */
  const char *col;                          /* the helper's column parameter ("j"), NULL: none (see above) */
  const char *row;                          /* its row parameter ("row"; with col only), NULL: none (above) */
} EmitTarget;
extern const char emit_hook_epilogue[], emit_hook_fused[];

typedef struct {
  bool fused;                   /* more than one node */
  int nextra;
  Node **extra;                 /* operands read by the chain, distinct, in first-use order */
  const char **extra_name;      /* their parameter names: "e0", "e1" ... */
  const char *fn;               /* the helper's name (fused only) */
  const char *helper;           /* its definition, "" when not fused */
  const char *ops;              /* "matmul + add + relu" */
  const char *lines;            /* "models/mlp.lua:7, :8": every distinct line, in op order */
  bool uses_index;              /* the helper takes the element index */
  bool uses_col;                /* ... and its column (EmitTarget.col) */
  bool uses_row;                /* ... and its row (EmitTarget.row) */
} EmitEpilogue;
/* The batchnorm a conv kernel applies (its chain's first node), or NULL. */
const Node *emit_conv_bn(Graph *g, const Kernel *k);
/* Describes kernel k (function kname) for target t; a fused kernel's helper is fn_name. */
void emit_epilogue(Graph *g, const Kernel *k, const char *kname, const char *fn_name, const EmitTarget *t,
                   EmitEpilogue *e);
/* text with every hook rewritten (see above); arena string. */
char *emit_epilogue_apply(const char *text, const EmitEpilogue *e);

/* ---- templates (template.c; texts embedded from templates/ at build time) ---- */
/* Returns the text of templates/<path>, e.g. "c/binary.c.tmpl"; dies if absent. */
const char *template_get(const char *path);
/* Expands a template: $NAME or ${NAME} is replaced by the value of NAME from vars
 * (pairs of name, value, NULL-terminated); $$ is a dollar. An unknown name dies. */
void template_expand(Buf *out, const char *tmpl, const char *const *vars);
/* The embedded file at a repository path ("gen/frontend/nn.lua"), or NULL; *len gets its size. */
const char *embedded_get(const char *path, size_t *len);

#endif
