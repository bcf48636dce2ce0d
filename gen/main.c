/*
 * main.c — the `kiln` command line: build, graph, run.
 *
 * A build writes every file into a fresh staging directory beside the output
 * directory and swaps it in only when all targets succeeded (publish.c), so a
 * failed build leaves nothing half-written behind.
 */
#include "kiln.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: kiln <command> [options]\n"
    "\n"
    "Kiln compiles a Lua model script ahead of time into plain source files.\n"
    "\n"
    "commands:\n"
    "  kiln build MODEL.lua -o DIR   trace, optimise and emit the model into DIR:\n"
    "                                  C:      NAME.h NAME.c NAME.weights NAME.json\n"
    "                                  Metal:  NAME.metal NAME_metal.h NAME_metal.c\n"
    "                                  CoreML: NAME.mlpackage/\n"
    "  kiln graph MODEL.lua          print the traced graph, one node a line\n"
    "  kiln run MODEL.lua --input NAME=FILE ...\n"
    "                                evaluate with the reference interpreter and print\n"
    "                                every output; FILE is .npy (f32/i32/bool, C order)\n"
    "                                or raw little-endian bytes of the input's exact size\n"
    "                                (a model with kiln.entry: one entry per run, --entry)\n"
    "  kiln import MODEL.onnx -o DIR ONNX -> DIR/NAME.lua + NAME.safetensors (see below)\n"
    "  kiln ops                      list the op table\n"
    "  kiln tokenize FILE [--decode] text lines on stdin -> token ids (--decode: ids -> text);\n"
    "                                FILE a tokenizer.json (BPE byte-level or SentencePiece,\n"
    "                                WordPiece), a Kiln .tok, llama2.c's tok*.bin or a GGUF file;\n"
    "                                --null: texts on stdin end with NUL bytes, not newlines\n"
    "                                (texts holding newlines), still one line of ids per text\n"
    "  kiln tokenize FILE --convert OUT.tok   any of those FILEs -> Kiln's binary\n"
    "  kiln --help                   this text;  kiln --version  the version\n"
    "\n"
    "build options:\n"
    "  -o, --out DIR                 output directory (created; files of the same name replaced)\n"
    "  --target c|metal|coreml|all   what to emit (default c); repeat to combine\n"
    "  --name NAME                   model name, a C identifier (default: script base name)\n"
    "  --tokenizer FILE              also write NAME.tok: FILE (a tokenizer.json, a GGUF\n"
    "                                vocabulary, llama2.c's tok*.bin or a .tok) as the binary\n"
    "                                kiln_tok.h loads (scripts/llm_main.c's TOKENIZER)\n"
    "  --embed-weights               C: also write NAME_weights.c, the blob as a const array,\n"
    "                                for targets without a file system\n"
    "  --profile                     C: time every kernel call into a table NAME_profile\n"
    "                                (calls, nanoseconds, FLOPs; docs/output.md, Profiling)\n"
    "  --min-os iOS15|iOS16|iOS17|iOS18   CoreML spec 6..9, opset CoreML5..8 (default iOS15); a model\n"
    "                                with state or entry points needs iOS18\n"
    "  --precision fp32|fp16         CoreML compute precision (default fp32)\n"
    "  --quantize [GLOB=]FORMAT      store matrix weights (Linear, embedding) as FORMAT: f32 f16\n"
    "                                bf16 i8 q8_0 q4_0 q4_k q6_k g8 g4, or keep (as the file has\n"
    "                                them); repeatable, the first matching rule wins; without\n"
    "                                GLOB it applies to f32/f16/bf16 weights only. Default: as\n"
    "                                stored (a GGUF's Q4_K stays Q4_K). docs/quantization.md\n"
    "  --dump-after PASS|all         print the graph to stderr after that pass\n"
    "  --no-fuse                     one op per kernel: no elementwise chains fused into the\n"
    "                                kernel before them (also: environment KILN_NOFUSE=1)\n"
    "  --no-winograd                 C: 3x3 convolutions as the direct product, not Winograd's\n"
    "                                F(2x2, 3x3) (docs/output.md: its rounding, its weights)\n"
    "\n"
    "graph options:\n"
    "  --dot                         Graphviz DOT instead of text\n"
    "  --after PASS|all              the graph after that pass instead of as traced\n"
    "  --no-fuse, --no-winograd, --quantize, --activations   as for build\n"
    "\n";
/* The rest of the usage text: one string literal stays under C's 4095-byte minimum. */
static const char usage2[] =
    "run options:\n"
    "  --input NAME=FILE             one per model input (all are required)\n"
    "  --entry NAME                  the entry point to run (needed when there are several)\n"
    "  --quantize [GLOB=]FORMAT      compute with the values a build with these rules stores\n"
    "  --state-in FILE               the state block before the call: raw bytes, exactly\n"
    "                                NAME_STATE_SIZE of them in the generated layout (NAME.json\n"
    "                                \"states\"); default all zero, a fresh state\n"
    "  --state-out FILE              write the state block after the call (same layout), to\n"
    "                                carry state into the next run with --state-in\n"
    "  --save DIR                    also write each output as DIR/NAME.npy\n"
    "  --limit N                     print at most N values per output (default 64, 0 = all)\n"
    "\n"
    "script options (build, graph, run):\n"
    "  -D NAME=VALUE                 a build-time option the script reads with kiln.option(NAME,\n"
    "                                default), e.g. -D checkpoint=ckpt -D max_context=4096; an\n"
    "                                option the script never reads is an error\n"
    "\n"
    "model scripts (build, graph, run) run in a sandbox: no io, os, debug, C modules or binary\n"
    "chunks; require and kiln.load only below the script's directory (docs/lua-api.md):\n"
    "  --unsafe-lua                  the full Lua standard library and no limits (trusted scripts)\n"
    "  --lua-max-instructions N      Lua VM instructions a script may run (default 1000000000, 0 = none)\n"
    "  --lua-max-memory MIB          Lua memory a script may hold (default 1024, 0 = none)\n"
    "\n"
    "passes, in order: verify dce cse fold dce2 legalize verify2 quant actq group schedule pack memplan\n"
    "exit status: 0 on success; 1 with a one-line error naming file:line otherwise.\n";

/* Split from usage: ISO C guarantees string literals only up to 4095 characters. */
static const char usage_import[] =
    "\n"
    "import options:\n"
    "  -o, --out DIR                 output directory (replaced as a whole, like build's)\n"
    "  --name NAME                   model name, a C identifier (default: the file's base name)\n"
    "  -D DIM=N                      the size of a named dynamic dim (dim_param) of an input\n"
    "  --freeze INPUT=FILE.pb        make a graph input a constant with the value of a\n"
    "                                TensorProto file (a shape or axes given as an input)\n"
    "  the script has one line per ONNX node over the ordinary Lua API; build it with\n"
    "  `kiln build DIR/NAME.lua -o OUT`. Supported ops and limits: docs/onnx.md\n";

typedef struct {
  const char *cmd, *script, *outdir, *name, *dump_after, *save, *entry, *state_in, *state_out;
  const char *inputs[64];
  int ninputs;
  const char *defines[64];      /* -D NAME=VALUE */
  int ndefines;
  unsigned targets;
  bool embed, profile, dot, fp16, no_fuse, no_wino, decode, null_sep, ggml_acts;
  const char *convert, *tokenizer;   /* tokenize --convert OUT; build --tokenizer FILE */
  const char *min_os;
  QuantRule qrules[64];         /* --quantize */
  int nqrules;
  long limit;
  SandboxOptions sandbox;
} Args;

/* The value following option argv[*i], advancing *i past it; a missing value is a user error. */
static const char *need_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) kiln_error("option %s needs a value (see kiln --help)", argv[*i]);
  return argv[++*i];
}

/* One --quantize value, "FORMAT" or "GLOB=FORMAT" (FORMAT may be keep); a format Kiln
 * does not have is a user error listing those it has. */
static QuantRule parse_quant_rule(const char *v) {
  const char *eq = strrchr(v, '=');
  QuantRule r = {eq ? kiln_fmt("%.*s", (int)(eq - v), v) : NULL, WF_F32, false, v};
  const char *f = eq ? eq + 1 : v;
  if (r.glob && !r.glob[0]) kiln_error("--quantize '%s': the name pattern before '=' is empty", v);
  if (strcmp(f, "keep") == 0) {
    r.keep = true;
    return r;
  }
  if (!wformat_parse(f, &r.fmt)) {
    Buf names = {0};
    for (int i = 0; i < WF__COUNT; i++) buf_printf(&names, "%s ", wformat_info((WFormat)i)->name);
    kiln_error("--quantize '%s': no format '%s' (one of: %skeep)", v, f, names.data);
  }
  return r;
}

/* --target's value as TGT_* bits ("all" = every target); an unknown name is a user error. */
static unsigned parse_target(const char *s) {
  if (strcmp(s, "c") == 0) return TGT_C;
  if (strcmp(s, "metal") == 0) return TGT_METAL;
  if (strcmp(s, "coreml") == 0) return TGT_COREML;
  if (strcmp(s, "all") == 0) return TGT_C | TGT_METAL | TGT_COREML;
  kiln_error("unknown target '%s' (c, metal, coreml or all)", s);
}

/* --limit's value: a whole number >= 0 (strtol alone would read "abc" as 0, "all"). */
static long parse_limit(const char *v) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (!*v || *end || errno || n < 0) kiln_error("--limit: a whole number >= 0 (0 = all), not '%s'", v);
  return n;
}

/* A whole number >= 0 for option opt that fits max (0 means no limit). */
static int64_t parse_count(const char *opt, const char *v, int64_t max) {
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (!*v || *end || errno || n < 0 || n > max) kiln_error("%s: a whole number from 0 (no limit) to %lld, not '%s'", opt, (long long)max, v);
  return n;
}

/* Which commands take an option: one letter per command, b(uild) g(raph) r(un). */
static const struct {
  const char *opt, *cmds;
} option_cmds[] = {
    {"-o", "b"}, {"--out", "b"}, {"--target", "b"}, {"--name", "bgr"}, {"--embed-weights", "b"}, {"--profile", "b"}, {"--min-os", "b"},
    {"--precision", "b"}, {"--dump-after", "b"}, {"--after", "g"}, {"--dot", "g"}, {"--no-fuse", "bg"}, {"--no-winograd", "bg"},
    {"--input", "r"}, {"--save", "r"}, {"--limit", "r"}, {"--entry", "r"}, {"--state-in", "r"}, {"--state-out", "r"},
    {"-D", "bgr"}, {"--decode", "t"}, {"--null", "t"}, {"--convert", "t"}, {"--tokenizer", "b"}, {"--quantize", "bgr"}, {"--activations", "bgr"},
    {"--unsafe-lua", "bgr"}, {"--lua-max-instructions", "bgr"}, {"--lua-max-memory", "bgr"}};

/* An option given to a command that ignores it is a mistake worth hearing about
 * (`kiln graph m.lua -o out` writes nothing). */
static void check_option(const char *cmd, const char *opt) {
  char c = strcmp(cmd, "build") == 0 ? 'b' : strcmp(cmd, "graph") == 0 ? 'g' : strcmp(cmd, "run") == 0 ? 'r'
         : strcmp(cmd, "tokenize") == 0 ? 't' : 0;
  for (size_t i = 0; i < sizeof option_cmds / sizeof option_cmds[0]; i++)
    if (strcmp(option_cmds[i].opt, opt) == 0 && c && !strchr(option_cmds[i].cmds, c))
      kiln_error("%s: option %s does not apply to this command (see kiln --help)", cmd, opt);
}

/* Parses `kiln CMD [options] [script]` into Args (defaults: target c, --min-os iOS15,
 * --limit 64). Exits 0 after printing usage for --help; any malformed, unknown, misplaced or
 * extra argument is a user error. Does not check that the command itself exists (main does). */
static Args parse_args(int argc, char **argv) {
  Args a = {.limit = 64, .min_os = "iOS15",
            .sandbox = {.max_instructions = KILN_LUA_MAX_INSTRUCTIONS_DEFAULT,
                        .max_memory = (int64_t)KILN_LUA_MAX_MEMORY_MIB_DEFAULT << 20}};
  if (argc < 2) kiln_error("no command (see kiln --help)");
  a.cmd = argv[1];
  for (int i = 2; i < argc; i++) {
    const char *s = argv[i];
    if (s[0] == '-') check_option(a.cmd, s);
    if (strcmp(s, "-o") == 0 || strcmp(s, "--out") == 0) a.outdir = need_value(argc, argv, &i);
    else if (strcmp(s, "--target") == 0) a.targets |= parse_target(need_value(argc, argv, &i));
    else if (strcmp(s, "--name") == 0) a.name = need_value(argc, argv, &i);
    else if (strcmp(s, "--embed-weights") == 0) a.embed = true;
    else if (strcmp(s, "--profile") == 0) a.profile = true;
    else if (strcmp(s, "--min-os") == 0) a.min_os = need_value(argc, argv, &i);
    else if (strcmp(s, "--precision") == 0) {
      const char *p = need_value(argc, argv, &i);
      if (strcmp(p, "fp16") != 0 && strcmp(p, "fp32") != 0) kiln_error("--precision: fp32 or fp16, not '%s'", p);
      a.fp16 = strcmp(p, "fp16") == 0;
    } else if (strcmp(s, "--dump-after") == 0 || strcmp(s, "--after") == 0) a.dump_after = need_value(argc, argv, &i);
    else if (strcmp(s, "--dot") == 0) a.dot = true;
    else if (strcmp(s, "--no-fuse") == 0) a.no_fuse = true;
    else if (strcmp(s, "--no-winograd") == 0) a.no_wino = true;
    else if (strcmp(s, "--decode") == 0) a.decode = true;
    else if (strcmp(s, "--null") == 0) a.null_sep = true;
    else if (strcmp(s, "--convert") == 0) a.convert = need_value(argc, argv, &i);
    else if (strcmp(s, "--tokenizer") == 0) a.tokenizer = need_value(argc, argv, &i);
    else if (strcmp(s, "--quantize") == 0) {
      if (a.nqrules == 64) kiln_error("--quantize: at most 64 rules");
      a.qrules[a.nqrules++] = parse_quant_rule(need_value(argc, argv, &i));
    }
    else if (strcmp(s, "--activations") == 0) {
      const char *v = need_value(argc, argv, &i);
      if (strcmp(v, "f32") != 0 && strcmp(v, "ggml") != 0) kiln_error("--activations: f32 or ggml, not '%s'", v);
      a.ggml_acts = strcmp(v, "ggml") == 0;
    } else if (strcmp(s, "--input") == 0) {
      if (a.ninputs == 64) kiln_error("too many --input options");
      a.inputs[a.ninputs++] = need_value(argc, argv, &i);
    } else if (strcmp(s, "--save") == 0) a.save = need_value(argc, argv, &i);
    else if (strcmp(s, "--entry") == 0) a.entry = need_value(argc, argv, &i);
    else if (strcmp(s, "--state-in") == 0) a.state_in = need_value(argc, argv, &i);
    else if (strcmp(s, "--state-out") == 0) a.state_out = need_value(argc, argv, &i);
    else if (strcmp(s, "--limit") == 0) a.limit = parse_limit(need_value(argc, argv, &i));
    else if (strcmp(s, "-D") == 0 || (strncmp(s, "-D", 2) == 0 && s[2])) {
      if (a.ndefines == 64) kiln_error("too many -D options");
      a.defines[a.ndefines++] = s[2] ? s + 2 : need_value(argc, argv, &i);
    } else if (strcmp(s, "--unsafe-lua") == 0) a.sandbox.unsafe = true;
    else if (strcmp(s, "--lua-max-instructions") == 0)
      a.sandbox.max_instructions = parse_count(s, need_value(argc, argv, &i), INT64_MAX / 2);
    else if (strcmp(s, "--lua-max-memory") == 0)
      a.sandbox.max_memory = parse_count(s, need_value(argc, argv, &i), (int64_t)1 << 40) << 20;
    else if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
      fputs(usage, stdout), fputs(usage2, stdout);
      exit(0);
    } else if (s[0] == '-') kiln_error("unknown option '%s' (see kiln --help)", s);
    else if (!a.script && strcmp(a.cmd, "ops") != 0) a.script = s;
    else kiln_error("unexpected argument '%s' (%s)", s, strcmp(a.cmd, "ops") == 0 ? "ops takes none" : "one model script per command");
  }
  if (!a.targets) a.targets = TGT_C;
  if (a.profile && !(a.targets & TGT_C)) kiln_error("--profile: it times the C target's kernels, and this build has no C target");
  if (a.ggml_acts && (a.targets & TGT_COREML))
    kiln_error("--activations ggml: not for the Core ML target, whose products run in Core ML's own precision "
               "(the mode reproduces llama.cpp on the CPU: targets c and metal)");
  static const char *const oses[] = {"iOS15", "iOS16", "iOS17", "iOS18"};
  bool os_ok = false;
  for (int i = 0; i < 4; i++) os_ok |= strcmp(a.min_os, oses[i]) == 0;
  if (!os_ok) kiln_error("--min-os: one of iOS15, iOS16, iOS17, iOS18, not '%s'", a.min_os);
  return a;
}

/* Runs the model script through the Lua frontend into a fresh program, carrying --name and
 * --no-fuse; no script given is a user error. */
static Program *trace(const Args *a) {
  if (!a->script) kiln_error("%s: no model script given (see kiln --help)", a->cmd);
  kiln_progress("tracing", 0, 0);
  FrontendOptions fo = {.script = a->script, .model = a->name, .sandbox = a->sandbox, .defines = a->defines,
                        .ndefines = a->ndefines};
  Program *p = frontend_trace(&fo);
  for (int e = 0; e < p->nentries; e++) p->entries[e]->no_fuse = a->no_fuse;
  p->qrules = a->qrules;
  p->nqrules = a->nqrules;
  p->qrule_use = a->nqrules ? kiln_alloc(sizeof(QuantRuleUse) * (size_t)a->nqrules) : NULL;
  p->ggml_acts = a->ggml_acts;
  p->no_wino = a->no_wino;
  return p;
}

/* With --quantize (or --activations ggml, which depends on the formats), `kiln run`
 * computes with the values a build would store: the script is traced again and compiled
 * (pass_quant decides which weights a rule reaches, after the passes before it), and every
 * weight of p takes the format of its namesake there. */
static void quantize_like_build(Program *p, const Args *a) {
  Program *built = trace(a);
  pipeline_run(built, NULL, stderr);
  quant_rule_notes(built, stderr);
  for (int e = 0; e < p->nentries; e++)
    for (int i = 0; i < p->entries[e]->nnodes; i++) {
      Node *w = p->entries[e]->nodes[i];
      if (w->op != OP_WEIGHT || !w->name) continue;
      for (int f = 0; f < built->nentries; f++)
        for (int j = 0; j < built->entries[f]->nnodes; j++) {
          const Node *x = built->entries[f]->nodes[j];
          if (x->op == OP_WEIGHT && x->name && strcmp(x->name, w->name) == 0 && x->wfmt != WF_F32) {
            w->wfmt = x->wfmt;    /* node_data(w) makes what the build stores; pass_actq reads it */
            w->src_fmt = x->src_fmt, w->src_raw = x->src_raw;
          }
        }
    }
}


/* ---- build ---- */

/* Whether p exists as something other than a directory (a file where -o names one). */
static bool is_non_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && !S_ISDIR(st.st_mode);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The top-level names in dir, sorted, space-separated (the summary's file list). */
static char *staged_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return kiln_strdup("");
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) names = realloc(names, sizeof *names * (cap = cap ? 2 * cap : 16));
    if (!names) die("out of memory");
    names[n++] = kiln_strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_str);
  Buf b = {0};
  for (size_t i = 0; i < n; i++) buf_printf(&b, "%s%s", i ? " " : "", names[i]);
  free(names);
  char *r = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return r;
}

/* Bytes for people: 1.0 MiB, 45.2 KiB, 512 B. */
static const char *human_bytes(int64_t n) {
  if (n >= (int64_t)1 << 30) return kiln_fmt("%.1f GiB", (double)n / (double)((int64_t)1 << 30));
  if (n >= 1 << 20) return kiln_fmt("%.1f MiB", (double)n / (double)(1 << 20));
  if (n >= 1 << 10) return kiln_fmt("%.1f KiB", (double)n / (double)(1 << 10));
  return kiln_fmt("%lld B", (long long)n);
}

/* The line every successful build ends with, on stderr (stdout stays for data). */
static void build_summary(const Program *p, const char *outdir, const char *files) {
  Buf b = {0};
  buf_printf(&b, "kiln: built %s: %s; weights %s", esc_message(outdir), esc_message(files), human_bytes(p->weights_size));
  int64_t bytes[WF__COUNT] = {0};
  int count[WF__COUNT] = {0};
  for (int i = 0; i < p->nwslots; i++) {   /* each stored tensor once */
    const Node *w = p->wslots[i].node;
    WFormat f = w->op == OP_WEIGHT ? w->wfmt : WF_F32;
    bytes[f] += node_stored_bytes(w), count[f]++;
  }
  if (count[WF_F32] < p->nwslots) {   /* some are in a stored format: say how the size divides */
    buf_puts(&b, " (");
    for (int f = WF__COUNT - 1, first = 1; f >= 0; f--)
      if (count[f]) {
        buf_printf(&b, "%s%s %s in %d", first ? "" : ", ", wformat_info((WFormat)f)->name, human_bytes(bytes[f]), count[f]);
        first = 0;
      }
    buf_puts(&b, ")");
  }
  buf_printf(&b, ", arena %s", human_bytes(p->arena_size));
  if (p->nstates) buf_printf(&b, ", state %s", human_bytes(p->state_size));
  if (p->explicit_entries) buf_printf(&b, ", %d entries", p->nentries);
  fprintf(stderr, "%s\n", b.data);
  buf_free(&b);
}

/* `kiln build`: trace, run the pipeline, emit every requested target into a staging
 * directory and publish it as <out> in one step (publish.c): a failed or interrupted
 * build leaves the previous output as it was. User errors exit via kiln_error (which
 * removes the staging directory); returns 0 on success. */
static int cmd_build(const Args *a) {
  if (!a->outdir) kiln_error("build: no output directory (use -o DIR)");
  if (!a->outdir[0]) kiln_error("build: the output directory is an empty string");
  if (is_non_dir(a->outdir)) kiln_error("build: %s exists and is not a directory", a->outdir);
  Buf tok = {0};   /* converted before anything is written: a bad tokenizer.json writes nothing */
  if (a->tokenizer) tokenizer_binary(a->tokenizer, &tok);
  Program *p = trace(a);
  p->no_pack = (a->targets & TGT_METAL) != 0;   /* Metal reads f32 weights of the one file row-major */
  kiln_progress("optimising", 0, 0);
  pipeline_run(p, a->dump_after, stderr);
  quant_rule_notes(p, stderr);
  Graph *g = p->entries[0];
  /* Each tensor is within KILN_MAX_NUMEL already; their sum may not be. Offsets are 64-bit
   * in every target past 2 GiB (emit_c.c wide_region); this bound only keeps sums far from
   * overflow. */
  if (p->weights_size > KILN_MAX_BYTES || p->arena_size > KILN_MAX_BYTES)
    kiln_error_at((SrcLoc){p->script, 0}, "the model needs %lld bytes of weights and %lld of scratch arena; Kiln's "
                  "limit is %lld bytes of each", (long long)p->weights_size, (long long)p->arena_size, (long long)KILN_MAX_BYTES);

  Publish *pub = publish_begin(a->outdir, g->model);
  EmitOptions eo = {.outdir = a->outdir, .tmpdir = publish_staging(pub), .targets = a->targets,
                    .embed_weights = a->embed, .profile = a->profile, .min_os = a->min_os, .fp16 = a->fp16};
  emit_c(p, &eo);   /* the C header, weights and JSON are the contract every target shares */
  emit_json(p, &eo);
  if (a->targets & TGT_METAL) emit_metal(p, &eo);
  if (a->targets & TGT_COREML) emit_coreml(p, &eo);
  if (tok.len) kiln_write_file(publish_staging(pub), kiln_fmt("%s.tok", g->model), tok.data, tok.len);
  buf_free(&tok);
  char *files = staged_files(publish_staging(pub));
  publish_commit(pub);
  kiln_progress_end();
  build_summary(p, a->outdir, files);
  return 0;
}

/* ---- graph ---- */

/* `kiln graph`: prints the traced graph (text, or DOT with --dot), after the passes up to and
 * including --after's (all of them for "all"); an unknown pass name is a user error. */
static int cmd_graph(const Args *a) {
  Program *p = trace(a);
  if (a->dump_after) {
    bool all = strcmp(a->dump_after, "all") == 0, found = all;
    for (int i = 0; i < kiln_npasses && !(found && !all); i++) {
      for (int e = 0; e < p->nentries; e++) kiln_passes[i].run(p->entries[e]);
      found |= strcmp(kiln_passes[i].name, a->dump_after) == 0;
    }
    if (!found) kiln_error("--after: no pass named '%s' (see kiln --help)", a->dump_after);
  }
  if (a->dot) program_dump_dot(p, stdout);
  else program_dump(p, stdout);
  return 0;
}

/* ---- run ---- */

/* Reads an input file: .npy (see npy_data) or raw little-endian bytes of the exact size.
 * A bool input's bytes must be 0 or 1 (kernels would read another byte as true in one
 * place and as its value in another). */
static void *read_input(const char *path, const Node *n, const char *iname) {
  /* Raw bytes are exactly node_bytes; a .npy file adds at most a 12-byte preamble and a
   * 64 KiB header (numpy writes < 1 KiB): anything longer is refused unread. */
  size_t size;
  char err[1024];
  unsigned char *all = kiln_read_bounded(path, (size_t)node_bytes(n) + 12 + 65536, &size, err, sizeof err);
  if (!all) kiln_error("--input %s: %s", iname, err);
  unsigned char *data = all;
  if (size >= 6 && memcmp(all, "\x93NUMPY", 6) == 0) {
    data = npy_parse(path, iname, n->dtype, &n->shape, all, size, err, sizeof err);
    if (!data) kiln_error("%s", err);
  }
  else if ((int64_t)size != node_bytes(n))
    kiln_error("%s: --input %s is %s %s = %lld bytes, the file has %zu", path, iname, dtype_name(n->dtype),
               shape_str(&n->shape), (long long)node_bytes(n), size);
  for (int64_t i = 0; n->dtype == DT_BOOL && i < node_numel(n); i++)
    if (data[i] > 1) kiln_error("%s: --input %s is bool, but element %lld is the byte %d (not 0 or 1)", path, iname, (long long)i, data[i]);
  return data;
}

/* Prints "name: dtype [shape] = v0 v1 ..." on one line: the first limit values (all when
 * limit <= 0), floats with %.6g, then how many were left out. */
static void print_tensor(const char *name, const Tensor *t, long limit) {
  int64_t n = shape_numel(&t->shape);
  printf("%s: %s %s =", name, dtype_name(t->dtype), shape_str(&t->shape));
  for (int64_t i = 0; i < n && (limit <= 0 || i < limit); i++) {
    if (t->dtype == DT_F32) printf(" %.6g", (double)((float *)t->data)[i]);
    else if (t->dtype == DT_I32) printf(" %d", ((int32_t *)t->data)[i]);
    else printf(" %d", ((uint8_t *)t->data)[i]);
  }
  if (limit > 0 && n > limit) printf(" ... (%lld more)", (long long)(n - limit));
  printf("\n");
}

/* The entry `kiln run` evaluates: --entry's, or the only one; an unknown name, or none
 * given for a model with several entries, is a user error listing them. */
static Graph *run_entry(Program *p, const char *name) {
  Buf list = {0};
  for (int e = 0; e < p->nentries; e++) {
    if (name && strcmp(p->entries[e]->entry, name) == 0) {
      buf_free(&list);
      return p->entries[e];
    }
    buf_printf(&list, "%s%s", e ? ", " : "", p->entries[e]->entry);
  }
  const char *names = kiln_strdup(list.data);
  buf_free(&list);
  if (!name && p->nentries == 1) return p->entries[0];
  if (!name) kiln_error("run: the model has %d entries (%s): choose one with --entry NAME", p->nentries, names);
  kiln_error("run: --entry %s: the model has no such entry (it has: %s)", name, names);
}

/* --state-in and --state-out make sense only for a model with state. */
static void check_state_file_args(const Program *p, const Args *a) {
  if (p->nstates == 0 && (a->state_in || a->state_out))
    kiln_error("run: --state-%s: the model declares no state (kiln.state)", a->state_in ? "in" : "out");
}

/* The state block for a run: --state-in's raw bytes (exactly the block's size, the
 * generated layout), or zeros; one tensor per state pointing into it. *block gets it. */
static Tensor *state_tensors(const Program *p, const char *path, unsigned char **block) {
  *block = kiln_alloc((size_t)p->state_size + 1);
  if (path) {
    size_t size;
    char err[1024];
    unsigned char *data = kiln_read_bounded(path, (size_t)p->state_size, &size, err, sizeof err);
    if (!data) kiln_error("--state-in: %s", err);
    if ((int64_t)size != p->state_size)
      kiln_error("--state-in: %s has %zu bytes; the state block of %s is %lld bytes", path, size, p->model,
                 (long long)p->state_size);
    if (size) memcpy(*block, data, size);
  }
  Tensor *t = kiln_alloc(sizeof(Tensor) * (size_t)(p->nstates + 1));
  for (int i = 0; i < p->nstates; i++) {
    const StateDecl *d = &p->states[i];
    t[i] = (Tensor){d->dtype, d->shape, *block + d->offset};
    for (int64_t k = 0; d->dtype == DT_BOOL && k < shape_numel(&d->shape); k++)
      if (t[i].data && ((uint8_t *)t[i].data)[k] > 1)
        kiln_error("--state-in: %s: bool state %s holds the byte %d at element %lld (not 0 or 1)", path, d->name,
                   ((uint8_t *)t[i].data)[k], (long long)k);
  }
  return t;
}

/* Writes n bytes to path (replacing it); a failure is the user's error. */
static void write_raw(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) kiln_error("--state-out: cannot create %s: %s", path, strerror(errno));
  bool ok = fwrite(data, 1, n, f) == n;
  ok &= fclose(f) == 0;
  if (!ok) kiln_error("--state-out: cannot write %s", path);
}

/* `kiln run`: evaluates the model with the reference interpreter on --input NAME=FILE raw
 * files (each input exactly once, no unknown names), prints every output, and with --save
 * writes them as .npy. All mistakes are user errors; returns 0. */
static int cmd_run(const Args *a) {
  if (a->save && is_non_dir(a->save)) kiln_error("run: --save %s exists and is not a directory", a->save);
  for (int k = 0; k < a->ninputs; k++)
    if (!strchr(a->inputs[k], '=') || a->inputs[k][0] == '=')
      kiln_error("run: --input %s is not NAME=FILE", a->inputs[k]);
  Program *p = trace(a);
  if (a->nqrules || a->ggml_acts) quantize_like_build(p, a);
  Graph *g = run_entry(p, a->entry);
  check_state_file_args(p, a);
  pass_verify(g);
  pass_actq(g);
  for (int k = 0; k < a->ninputs; k++) {     /* a misspelt name first: it explains the missing one */
    bool known = false;
    Buf names = {0};
    for (int i = 0; i < g->ninputs; i++) {
      size_t nl = strlen(g->inputs[i].name);
      known |= strncmp(a->inputs[k], g->inputs[i].name, nl) == 0 && a->inputs[k][nl] == '=';
      buf_printf(&names, "%s%s", i ? ", " : "", g->inputs[i].name);
    }
    if (!known)
      kiln_error("run: --input %s: the model has no input '%.*s' (its inputs: %s)", a->inputs[k],
                 (int)strcspn(a->inputs[k], "="), a->inputs[k], names.len ? names.data : "none");
    buf_free(&names);
  }
  Tensor *ins = kiln_alloc(sizeof(Tensor) * (size_t)(g->ninputs + 1));
  for (int i = 0; i < g->ninputs; i++) {
    const char *file = NULL;
    size_t nl = strlen(g->inputs[i].name);
    for (int k = 0; k < a->ninputs; k++)
      if (strncmp(a->inputs[k], g->inputs[i].name, nl) == 0 && a->inputs[k][nl] == '=') {
        if (file) kiln_error("run: --input %s is given twice", g->inputs[i].name);
        file = a->inputs[k] + nl + 1;
      }
    Node *n = graph_node(g, g->inputs[i].node);
    if (!file) kiln_error("run: missing --input %s=FILE (%s %s)", g->inputs[i].name, dtype_name(n->dtype), shape_str(&n->shape));
    ins[i] = (Tensor){n->dtype, n->shape, read_input(file, n, g->inputs[i].name)};
  }
  Tensor *outs = kiln_alloc(sizeof(Tensor) * (size_t)(g->noutputs + 1));
  char err[512];
  unsigned char *block = NULL;
  Tensor *state = state_tensors(p, a->state_in, &block);
  if (!interp_entry(g, ins, state, outs, err, sizeof err)) kiln_error("%s", err);
  if (a->state_out) write_raw(a->state_out, block, (size_t)p->state_size);
  for (int i = 0; i < g->noutputs; i++) {
    print_tensor(g->outputs[i].name, &outs[i], a->limit);
    if (a->save) npy_write(a->save, g->outputs[i].name, &outs[i]);
  }
  return 0;
}

/* `kiln ops`: one line per op in table order: name, arity ("2", "1-3", "2+") and its doc. */
static int cmd_ops(void) {
  for (int i = 0; i < OP__COUNT; i++) {
    const OpInfo *o = &kiln_ops[i];
    char arity[16];
    if (o->max_in < 0) snprintf(arity, sizeof arity, "%d+", o->min_in);
    else if (o->min_in == o->max_in) snprintf(arity, sizeof arity, "%d", o->min_in);
    else snprintf(arity, sizeof arity, "%d-%d", o->min_in, o->max_in);
    printf("%-16s %-5s %s\n", o->name, arity, o->doc);   /* the longest name: conv_transpose2d */
  }
  return 0;
}

/* Dispatches `kiln CMD`; --help/-h/help and --version need no command. Exit status 0 on
 * success; kiln_error exits non-zero with a message, die() aborts on a Kiln bug. */
int main(int argc, char **argv) {
  atexit(kiln_free_all);
  publish_catch_bus_errors();
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0)) {
    fputs(usage, stdout), fputs(usage2, stdout);
    fputs(usage_import, stdout);
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
    puts("kiln 0.1");
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "import") == 0) return onnx_import_main(argc - 2, argv + 2);
  Args a = parse_args(argc, argv);
  if (strcmp(a.cmd, "build") == 0) return cmd_build(&a);
  if (strcmp(a.cmd, "graph") == 0) return cmd_graph(&a);
  if (strcmp(a.cmd, "run") == 0) return cmd_run(&a);
  if (strcmp(a.cmd, "ops") == 0) return cmd_ops();
  if (strcmp(a.cmd, "tokenize") == 0) {
    if (a.decode && a.convert) kiln_error("tokenize: --decode and --convert exclude each other");
    if (a.null_sep && a.convert) kiln_error("tokenize: --null and --convert exclude each other");
    return cmd_tokenize(a.script, a.decode, a.null_sep ? '\0' : '\n', a.convert);
  }
  kiln_error("unknown command '%s' (see kiln --help)", a.cmd);
}
