/*
 * main.c — the `kiln` command line: build, graph, run.
 *
 * A build writes every file into a fresh temporary directory beside the output
 * directory and moves the finished files in only when all targets succeeded, so a
 * failed build leaves nothing half-written behind.
 */
#include "kiln.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
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
    "  kiln ops                      list the op table\n"
    "  kiln --help                   this text;  kiln --version  the version\n"
    "\n"
    "build options:\n"
    "  -o, --out DIR                 output directory (created; files of the same name replaced)\n"
    "  --target c|metal|coreml|all   what to emit (default c); repeat to combine\n"
    "  --name NAME                   model name, a C identifier (default: script base name)\n"
    "  --embed-weights               C: also write NAME_weights.c, the blob as a const array,\n"
    "                                for targets without a file system\n"
    "  --min-os iOS15|iOS16|iOS17|iOS18   CoreML spec 6..9, opset CoreML5..8 (default iOS15)\n"
    "  --precision fp32|fp16         CoreML compute precision (default fp32)\n"
    "  --dump-after PASS|all         print the graph to stderr after that pass\n"
    "  --no-fuse                     one op per kernel: no elementwise chains fused into the\n"
    "                                kernel before them (also: environment KILN_NOFUSE=1)\n"
    "\n"
    "graph options:\n"
    "  --dot                         Graphviz DOT instead of text\n"
    "  --after PASS|all              the graph after that pass instead of as traced\n"
    "  --no-fuse                     as for build\n"
    "\n"
    "run options:\n"
    "  --input NAME=FILE             one per model input (all are required)\n"
    "  --save DIR                    also write each output as DIR/NAME.npy\n"
    "  --limit N                     print at most N values per output (default 64, 0 = all)\n"
    "\n"
    "passes, in order: verify dce cse fold dce2 legalize verify2 group schedule memplan\n"
    "exit status: 0 on success; 1 with a one-line error naming file:line otherwise.\n";

typedef struct {
  const char *cmd, *script, *outdir, *name, *dump_after, *save;
  const char *inputs[64];
  int ninputs;
  unsigned targets;
  bool embed, dot, fp16, no_fuse;
  const char *min_os;
  long limit;
} Args;

static const char *need_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) kiln_error("option %s needs a value (see kiln --help)", argv[*i]);
  return argv[++*i];
}

static unsigned parse_target(const char *s) {
  if (strcmp(s, "c") == 0) return TGT_C;
  if (strcmp(s, "metal") == 0) return TGT_METAL;
  if (strcmp(s, "coreml") == 0) return TGT_COREML;
  if (strcmp(s, "all") == 0) return TGT_C | TGT_METAL | TGT_COREML;
  kiln_error("unknown target '%s' (c, metal, coreml or all)", s);
}

static Args parse_args(int argc, char **argv) {
  Args a = {.limit = 64, .min_os = "iOS15"};
  if (argc < 2) kiln_error("no command (see kiln --help)");
  a.cmd = argv[1];
  for (int i = 2; i < argc; i++) {
    const char *s = argv[i];
    if (strcmp(s, "-o") == 0 || strcmp(s, "--out") == 0) a.outdir = need_value(argc, argv, &i);
    else if (strcmp(s, "--target") == 0) a.targets |= parse_target(need_value(argc, argv, &i));
    else if (strcmp(s, "--name") == 0) a.name = need_value(argc, argv, &i);
    else if (strcmp(s, "--embed-weights") == 0) a.embed = true;
    else if (strcmp(s, "--min-os") == 0) a.min_os = need_value(argc, argv, &i);
    else if (strcmp(s, "--precision") == 0) {
      const char *p = need_value(argc, argv, &i);
      if (strcmp(p, "fp16") != 0 && strcmp(p, "fp32") != 0) kiln_error("--precision: fp32 or fp16, not '%s'", p);
      a.fp16 = strcmp(p, "fp16") == 0;
    } else if (strcmp(s, "--dump-after") == 0 || strcmp(s, "--after") == 0) a.dump_after = need_value(argc, argv, &i);
    else if (strcmp(s, "--dot") == 0) a.dot = true;
    else if (strcmp(s, "--no-fuse") == 0) a.no_fuse = true;
    else if (strcmp(s, "--input") == 0) {
      if (a.ninputs == 64) kiln_error("too many --input options");
      a.inputs[a.ninputs++] = need_value(argc, argv, &i);
    } else if (strcmp(s, "--save") == 0) a.save = need_value(argc, argv, &i);
    else if (strcmp(s, "--limit") == 0) a.limit = strtol(need_value(argc, argv, &i), NULL, 10);
    else if (s[0] == '-') kiln_error("unknown option '%s' (see kiln --help)", s);
    else if (!a.script) a.script = s;
    else kiln_error("unexpected argument '%s' (one model script per command)", s);
  }
  if (!a.targets) a.targets = TGT_C;
  static const char *const oses[] = {"iOS15", "iOS16", "iOS17", "iOS18"};
  bool os_ok = false;
  for (int i = 0; i < 4; i++) os_ok |= strcmp(a.min_os, oses[i]) == 0;
  if (!os_ok) kiln_error("--min-os: one of iOS15, iOS16, iOS17, iOS18, not '%s'", a.min_os);
  return a;
}

static Graph *trace(const Args *a) {
  if (!a->script) kiln_error("%s: no model script given (see kiln --help)", a->cmd);
  FrontendOptions fo = {.script = a->script, .model = a->name};
  Graph *g = frontend_trace(&fo);
  g->no_fuse = a->no_fuse;
  return g;
}

/* ---- build ---- */

static bool is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Creates dir and its missing parents, like mkdir -p. */
static void mkdir_p(const char *dir) {
  char *p = kiln_strdup(dir);
  for (char *q = p + 1; *q; q++) {
    if (*q != '/') continue;
    *q = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) kiln_error("cannot create %s: %s", p, strerror(errno));
    *q = '/';
  }
  if (mkdir(p, 0777) != 0 && errno != EEXIST) kiln_error("cannot create %s: %s", p, strerror(errno));
}

/* Moves every entry of tmp into out, replacing entries of the same name. */
static void publish(const char *tmp, const char *out) {
  mkdir_p(out);
  DIR *d = opendir(tmp);
  if (!d) kiln_error("cannot read %s: %s", tmp, strerror(errno));
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char *from = kiln_fmt("%s/%s", tmp, e->d_name), *to = kiln_fmt("%s/%s", out, e->d_name);
    if (is_dir(to) && system(kiln_fmt("rm -rf -- '%s'", to)) != 0) kiln_error("cannot replace %s", to);
    if (rename(from, to) != 0) kiln_error("cannot move %s to %s: %s", from, to, strerror(errno));
  }
  closedir(d);
  rmdir(tmp);
}

static int cmd_build(const Args *a) {
  if (!a->outdir) kiln_error("build: no output directory (use -o DIR)");
  if (strchr(a->outdir, '\'')) kiln_error("build: output directory may not contain a quote");
  Graph *g = trace(a);
  pipeline_run(g, a->dump_after, stderr);

  char *tmp = kiln_fmt("%s.kiln-tmp", a->outdir);
  if (is_dir(tmp) && system(kiln_fmt("rm -rf -- '%s'", tmp)) != 0) kiln_error("cannot clear %s", tmp);
  char *slash = strrchr(tmp, '/');
  if (slash && slash != tmp) mkdir_p(kiln_fmt("%.*s", (int)(slash - tmp), tmp));
  if (mkdir(tmp, 0777) != 0) kiln_error("cannot create %s: %s", tmp, strerror(errno));
  kiln_set_cleanup_dir(tmp);

  EmitOptions eo = {.outdir = a->outdir, .tmpdir = tmp, .targets = a->targets,
                    .embed_weights = a->embed, .min_os = a->min_os, .fp16 = a->fp16};
  emit_c(g, &eo);   /* the C header, weights and JSON are the contract every target shares */
  emit_json(g, &eo);
  if (a->targets & TGT_METAL) emit_metal(g, &eo);
  if (a->targets & TGT_COREML) emit_coreml(g, &eo);
  publish(tmp, a->outdir);
  kiln_set_cleanup_dir(NULL);
  return 0;
}

/* ---- graph ---- */

static int cmd_graph(const Args *a) {
  Graph *g = trace(a);
  if (a->dump_after) {
    bool all = strcmp(a->dump_after, "all") == 0, found = all;
    for (int i = 0; i < kiln_npasses && !(found && !all); i++) {
      kiln_passes[i].run(g);
      found |= strcmp(kiln_passes[i].name, a->dump_after) == 0;
    }
    if (!found) kiln_error("--after: no pass named '%s' (see kiln --help)", a->dump_after);
  }
  if (a->dot) graph_dump_dot(g, stdout);
  else graph_dump(g, stdout);
  return 0;
}

/* ---- run ---- */

/* Reads an input file: .npy (v1/v2, little-endian, C order) or raw bytes. */
static void *read_input(const char *path, const Node *n, const char *iname) {
  FILE *f = fopen(path, "rb");
  if (!f) kiln_error("--input %s: cannot open %s: %s", iname, path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *all = kiln_alloc((size_t)size + 1);
  if (size > 0 && fread(all, 1, (size_t)size, f) != (size_t)size) kiln_error("--input %s: cannot read %s", iname, path);
  fclose(f);
  int64_t want = node_bytes(n);
  if (size >= 10 && memcmp(all, "\x93NUMPY", 6) == 0) {
    size_t hlen = all[6] == 1 ? (size_t)(all[8] | all[9] << 8) : (size_t)(all[8] | all[9] << 8 | all[10] << 16 | (size_t)all[11] << 24);
    size_t start = (all[6] == 1 ? 10 : 12) + hlen;
    if (start > (size_t)size) kiln_error("%s: truncated .npy header", path);
    char *hdr = kiln_alloc(hlen + 1);
    memcpy(hdr, all + (all[6] == 1 ? 10 : 12), hlen);
    const char *descr = n->dtype == DT_F32 ? "'<f4'" : n->dtype == DT_I32 ? "'<i4'" : "'|b1'";
    if (!strstr(hdr, descr)) kiln_error("%s: input %s wants %s (descr %s); header is %s", path, iname, dtype_name(n->dtype), descr, hdr);
    if (strstr(hdr, "'fortran_order': True")) kiln_error("%s: Fortran-order arrays are not supported", path);
    if ((int64_t)((size_t)size - start) != want)
      kiln_error("%s: input %s %s needs %lld bytes of data, the file has %lld", path, iname, shape_str(&n->shape),
                 (long long)want, (long long)((size_t)size - start));
    return all + start;
  }
  if (size != want)
    kiln_error("%s: input %s is %s %s = %lld bytes, the file has %ld", path, iname, dtype_name(n->dtype),
               shape_str(&n->shape), (long long)want, size);
  return all;
}

static void write_npy(const char *dir, const char *name, const Tensor *t) {
  Buf b = {0};
  char hdr[256];
  char shp[200] = "";
  size_t k = 0;
  for (int i = 0; i < t->shape.rank; i++)
    k += (size_t)snprintf(shp + k, sizeof shp - k, "%lld,%s", (long long)t->shape.dim[i], t->shape.rank > 1 && i < t->shape.rank - 1 ? " " : "");
  const char *descr = t->dtype == DT_F32 ? "<f4" : t->dtype == DT_I32 ? "<i4" : "|b1";
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shp);
  int total = 10 + n + 1;
  int pad = (64 - total % 64) % 64;
  buf_put(&b, "\x93NUMPY\x01\x00", 8);
  unsigned hl = (unsigned)(n + pad + 1);
  unsigned char hb[2] = {(unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
  buf_put(&b, hb, 2);
  buf_put(&b, hdr, (size_t)n);
  for (int i = 0; i < pad; i++) buf_puts(&b, " ");
  buf_puts(&b, "\n");
  buf_put(&b, t->data, (size_t)(shape_numel(&t->shape) * dtype_size(t->dtype)));
  kiln_write_file(dir, kiln_fmt("%s.npy", name), b.data, b.len);
  buf_free(&b);
}

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

static int cmd_run(const Args *a) {
  Graph *g = trace(a);
  pass_verify(g);
  Tensor *ins = kiln_alloc(sizeof(Tensor) * (size_t)(g->ninputs + 1));
  for (int i = 0; i < g->ninputs; i++) {
    const char *file = NULL;
    size_t nl = strlen(g->inputs[i].name);
    for (int k = 0; k < a->ninputs; k++)
      if (strncmp(a->inputs[k], g->inputs[i].name, nl) == 0 && a->inputs[k][nl] == '=') file = a->inputs[k] + nl + 1;
    Node *n = graph_node(g, g->inputs[i].node);
    if (!file) kiln_error("run: missing --input %s=FILE (%s %s)", g->inputs[i].name, dtype_name(n->dtype), shape_str(&n->shape));
    ins[i] = (Tensor){n->dtype, n->shape, read_input(file, n, g->inputs[i].name)};
  }
  for (int k = 0; k < a->ninputs; k++) {
    bool known = false;
    for (int i = 0; i < g->ninputs; i++) {
      size_t nl = strlen(g->inputs[i].name);
      known |= strncmp(a->inputs[k], g->inputs[i].name, nl) == 0 && a->inputs[k][nl] == '=';
    }
    if (!known) kiln_error("run: --input %s names no input of the model", a->inputs[k]);
  }
  Tensor *outs = kiln_alloc(sizeof(Tensor) * (size_t)(g->noutputs + 1));
  char err[512];
  if (!interp_graph(g, ins, outs, err, sizeof err)) kiln_error("%s", err);
  for (int i = 0; i < g->noutputs; i++) {
    print_tensor(g->outputs[i].name, &outs[i], a->limit);
    if (a->save) write_npy(a->save, g->outputs[i].name, &outs[i]);
  }
  return 0;
}

static int cmd_ops(void) {
  for (int i = 0; i < OP__COUNT; i++) {
    const OpInfo *o = &kiln_ops[i];
    char arity[16];
    if (o->max_in < 0) snprintf(arity, sizeof arity, "%d+", o->min_in);
    else if (o->min_in == o->max_in) snprintf(arity, sizeof arity, "%d", o->min_in);
    else snprintf(arity, sizeof arity, "%d-%d", o->min_in, o->max_in);
    printf("%-12s %-5s %s\n", o->name, arity, o->doc);
  }
  return 0;
}

int main(int argc, char **argv) {
  atexit(kiln_free_all);
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0)) {
    fputs(usage, stdout);
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
    puts("kiln 0.1");
    return 0;
  }
  Args a = parse_args(argc, argv);
  if (strcmp(a.cmd, "build") == 0) return cmd_build(&a);
  if (strcmp(a.cmd, "graph") == 0) return cmd_graph(&a);
  if (strcmp(a.cmd, "run") == 0) return cmd_run(&a);
  if (strcmp(a.cmd, "ops") == 0) return cmd_ops();
  kiln_error("unknown command '%s' (see kiln --help)", a.cmd);
}
