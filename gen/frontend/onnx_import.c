/*
 * onnx_import.c — `kiln import MODEL.onnx -o DIR`: an ONNX model becomes DIR/<m>.lua, a
 * script over Kiln's ordinary Lua API, and DIR/<m>.safetensors with its float weights.
 *
 * The pipeline: onnx_read decodes and checks the file; onnx.lua (embedded, run in a
 * plain Lua state of its own: it is Kiln's code, not the user's) translates the graph
 * into script text and names the weights to write; this file writes both into a
 * staging directory published in one step (publish.c), so a failed import writes
 * nothing. The output depends only on the file and the options: no paths, no times.
 */
#include "frontend/onnx.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
  const char *file, *outdir, *name;
  const char *defines[64];                 /* -D NAME=VALUE: values of named dynamic dims */
  int ndefines;
  const char *freeze[64];                  /* --freeze NAME=FILE.pb: inputs made constants */
  int nfreeze;
} ImportArgs;

static const char import_usage[] =
    "usage: kiln import MODEL.onnx -o DIR [--name NAME] [-D DIM=N ...] [--freeze INPUT=FILE.pb ...]";

/* The value after option argv[*i]; a missing one is the user's error. */
static const char *arg_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) kiln_error("import: option %s needs a value (%s)", argv[*i], import_usage);
  return argv[++*i];
}

/* Contract: argv (after "import") as ImportArgs; misuse is a one-line user error. */
static ImportArgs parse_import_args(int argc, char **argv) {
  ImportArgs a = {0};
  for (int i = 0; i < argc; i++) {
    const char *s = argv[i];
    if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
      printf("%s\n(kiln --help lists the options; docs/onnx.md the supported ops)\n", import_usage);
      exit(0);
    }
    if (strcmp(s, "-o") == 0 || strcmp(s, "--out") == 0) a.outdir = arg_value(argc, argv, &i);
    else if (strcmp(s, "--name") == 0) a.name = arg_value(argc, argv, &i);
    else if (strcmp(s, "-D") == 0 || strcmp(s, "--freeze") == 0) {
      const char *v = arg_value(argc, argv, &i);
      if (!strchr(v, '=') || v[0] == '=') kiln_error("import: %s %s is not NAME=VALUE", s, v);
      const char **list = s[1] == 'D' ? a.defines : a.freeze;
      int *n = s[1] == 'D' ? &a.ndefines : &a.nfreeze;
      if (*n == 64) kiln_error("import: more than 64 %s options", s);
      list[(*n)++] = v;
    } else if (s[0] == '-') kiln_error("import: unknown option %s (%s)", s, import_usage);
    else if (a.file) kiln_error("import: two model files, %s and %s (%s)", a.file, s, import_usage);
    else a.file = s;
  }
  if (!a.file) kiln_error("import: no model file (%s)", import_usage);
  if (!a.outdir || !a.outdir[0]) kiln_error("import: no output directory (use -o DIR)");
  return a;
}

/* The model name: --name, else the file's base name without .onnx, made a C identifier
 * (other characters become '_', a leading digit gets an 'm'). */
static bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static const char *model_name(const ImportArgs *a) {
  if (a->name) {
    bool ok = a->name[0] && !(a->name[0] >= '0' && a->name[0] <= '9');
    for (const char *p = a->name; *p; p++) ok &= ident_char(*p);
    if (!ok) kiln_error("import: --name %s is not a C identifier", a->name);
    return a->name;
  }
  const char *base = strrchr(a->file, '/');
  base = base ? base + 1 : a->file;
  size_t n = strlen(base);
  if (n > 5 && strcmp(base + n - 5, ".onnx") == 0) n -= 5;
  char *s = kiln_alloc(n + 2), *p = s;
  if (!n || (base[0] >= '0' && base[0] <= '9')) *p++ = 'm';
  for (size_t i = 0; i < n; i++) *p++ = ident_char(base[i]) ? base[i] : '_';
  return s;
}

/* Pushes {NAME = VALUE} of NAME=VALUE strings (the last of a name wins). */
static void push_pairs(lua_State *L, const char *const *list, int n, OnnxModel *m, bool files) {
  lua_createtable(L, 0, n);
  for (int i = 0; i < n; i++) {
    const char *eq = strchr(list[i], '=');
    lua_pushlstring(L, list[i], (size_t)(eq - list[i]));
    if (files) onnx_push_tensor_file(L, m, eq + 1);
    else lua_pushstring(L, eq + 1);
    lua_settable(L, -3);
  }
}

/* The message of a translator error, marked by its first character: a table
 * {msg = "..."} is the user's error ('U': an unsupported op, a bad attribute); anything
 * else is a bug in onnx.lua ('B', with a traceback). */
static int on_error(lua_State *L) {
  if (lua_istable(L, 1)) {
    lua_getfield(L, 1, "msg");
    lua_pushfstring(L, "U%s", lua_tostring(L, -1));
    return 1;
  }
  luaL_traceback(L, L, lua_tostring(L, 1), 1);
  lua_pushfstring(L, "B%s", lua_tostring(L, -1));
  return 1;
}

/* Pushes the embedded Lua file path as a function named name; a failure is a Kiln bug. */
static void load_embedded(lua_State *L, const char *path, const char *name) {
  size_t len;
  const char *src = embedded_get(path, &len);
  if (!src) die("%s is not embedded", path);
  if (luaL_loadbufferx(L, src, len, name, "t") != LUA_OK) die("%s: %s", path, lua_tostring(L, -1));
}

/* Contract: runs onnx.lua (with the handlers of onnx_ops.lua, onnx_shape.lua and onnx_quant.lua) on the model; leaves the script text (string) and the weights
 * list ({{name=, id=, dims=}}) on the stack. Errors end the import with one line. */
void onnx_translate(lua_State *L, OnnxModel *m, const char *const *defines, int ndefines, const char *const *freeze,
                    int nfreeze, const char *name) {
  lua_pushcfunction(L, on_error);
  load_embedded(L, "gen/frontend/onnx.lua", "=[kiln] onnx.lua");
  onnx_push_model(L, m);
  lua_createtable(L, 0, 4);
  push_pairs(L, defines, ndefines, m, false);
  lua_setfield(L, -2, "defines");
  push_pairs(L, freeze, nfreeze, m, true);
  lua_setfield(L, -2, "freeze");
  lua_pushstring(L, name);
  lua_setfield(L, -2, "name");
  const char *base = strrchr(m->file, '/');
  lua_pushstring(L, base ? base + 1 : m->file);
  lua_setfield(L, -2, "file");
  load_embedded(L, "gen/frontend/onnx_ops.lua", "=[kiln] onnx_ops.lua");       /* the op handlers */
  load_embedded(L, "gen/frontend/onnx_shape.lua", "=[kiln] onnx_shape.lua");   /* shape and indexing ops */
  load_embedded(L, "gen/frontend/onnx_quant.lua", "=[kiln] onnx_quant.lua");   /* integer, quantized, training ops */
  if (lua_pcall(L, 5, 2, 1) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (msg && msg[0] == 'U') onnx_fail(m, "%s: %s", m->file, msg + 1);
    die("onnx.lua failed: %s", msg ? msg + 1 : "(no message)");
  }
}

/* Contract: writes the safetensors file of the weights list at the top of L's stack
 * (F32 tensors in list order, one contiguous data section) into dir/file. */
static void write_weights(lua_State *L, const OnnxModel *m, const char *dir, const char *file) {
  Buf head = {0}, data = {0};
  int n = (int)luaL_len(L, -1);
  buf_puts(&head, "{");
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, -1, i);
    lua_getfield(L, -1, "name");
    lua_getfield(L, -2, "id");
    lua_getfield(L, -3, "dims");
    const char *wname = lua_tostring(L, -3);
    int id = (int)lua_tointeger(L, -2);
    int64_t numel = onnx_tensor_numel(m, id);
    float *v = kiln_alloc(sizeof(float) * (size_t)(numel + 1));
    onnx_tensor_to_f32(m, id, v, numel);
    buf_puts(&head, i > 1 ? "," : "");
    esc_json(&head, wname);
    buf_puts(&head, ":{\"dtype\":\"F32\",\"shape\":[");
    int rank = (int)luaL_len(L, -1);
    for (int d = 1; d <= rank; d++) {
      lua_rawgeti(L, -1, d);
      buf_printf(&head, "%s%lld", d > 1 ? "," : "", (long long)lua_tointeger(L, -1));
      lua_pop(L, 1);
    }
    buf_printf(&head, "],\"data_offsets\":[%zu,%zu]}", data.len, data.len + sizeof(float) * (size_t)numel);
    for (int64_t k = 0; k < numel; k++) {   /* little-endian, whatever the host */
      uint32_t u;
      memcpy(&u, &v[k], 4);
      unsigned char b[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
      buf_put(&data, b, 4);
    }
    lua_pop(L, 4);
  }
  buf_puts(&head, "}");
  while (head.len % 8) buf_puts(&head, " ");
  Buf all = {0};
  unsigned char len8[8];
  for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)head.len >> (8 * k));
  buf_put(&all, len8, 8);
  buf_put(&all, head.data, head.len);
  if (data.len) buf_put(&all, data.data, data.len);
  kiln_write_file(dir, file, all.data, all.len);
  buf_free(&head);
  buf_free(&data);
  buf_free(&all);
}

/* The import in progress, released at exit on every path (kiln_error exits): run before
 * kiln_free_all, which main registered first, so nothing is left for a leak checker. */
static OnnxModel import_model;
static lua_State *import_lua;

static void import_cleanup(void) {
  if (import_lua) lua_close(import_lua);
  import_lua = NULL;
  onnx_free(&import_model);
}

/* `kiln import`: see the file comment. Returns 0; every failure is a one-line error. */
int onnx_import_main(int argc, char **argv) {
  ImportArgs a = parse_import_args(argc, argv);
  struct stat st;
  if (stat(a.outdir, &st) == 0 && !S_ISDIR(st.st_mode)) kiln_error("import: %s exists and is not a directory", a.outdir);
  atexit(import_cleanup);
  OnnxModel *mp = &import_model;
  mp->file = a.file;
  onnx_read(mp, a.file);
  const char *name = model_name(&a);
  lua_State *L = import_lua = luaL_newstate();
  if (!L) kiln_error("out of memory (creating a Lua state)");
  luaL_openlibs(L);
  onnx_translate(L, mp, a.defines, a.ndefines, a.freeze, a.nfreeze, name);
  static const char *const suffixes[] = {".lua", ".safetensors", NULL};
  Publish *pub = publish_begin(a.outdir, name);
  publish_set_owned(pub, suffixes);
  size_t len;
  const char *script = lua_tolstring(L, -2, &len);
  kiln_write_file(publish_staging(pub), kiln_fmt("%s.lua", name), script, len);
  if (luaL_len(L, -1) > 0) write_weights(L, mp, publish_staging(pub), kiln_fmt("%s.safetensors", name));
  publish_commit(pub);
  fprintf(stderr, "kiln: imported %s: %s/%s.lua (%lld weights)\n", esc_message(a.file), esc_message(a.outdir), name,
          (long long)luaL_len(L, -1));
  import_cleanup();
  return 0;
}
