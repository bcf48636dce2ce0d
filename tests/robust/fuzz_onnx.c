/*
 * fuzz_onnx.c — libFuzzer target for `kiln import`'s reader and translator
 * (gen/frontend/onnx_read.c, onnx.lua, onnx_ops.lua): everything but writing files.
 *
 * Each input is a candidate .onnx file. The reader and the translator must never read
 * outside it or crash (a bug in the Lua translator dies, which aborts: a finding), and
 * must either produce a script or refuse with exactly one line naming the file.
 *
 *   fuzz:   make fuzz   (clang -fsanitize=fuzzer,address,undefined; FUZZ_SECONDS=N each)
 *   replay: the same sources with -DKILN_FUZZ_MAIN and any compiler (tests/t_robust.sh).
 * Unlike the other harnesses it links the build's build/embedded.c (the translator is
 * embedded Lua) and build/onnx.pb-c.c, so it needs `make` first.
 */
#define FUZZ_NAME "fuzz_onnx"
#include "frontend/onnx.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

/* Fails loudly: the fuzzer records the input that got here. */
static void finding(const char *what, const char *detail) {
  fprintf(stderr, "%s: %s: %s\n", FUZZ_NAME, what, detail ? detail : "");
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *copy = malloc(size ? size : 1);      /* exactly size bytes: ASan sees any overrun */
  if (size) memcpy(copy, data, size);
  char err[1024] = "";
  jmp_buf escape;
  /* On the heap: the longjmp back must not find it in a register holding stale fields. */
  OnnxModel *m = calloc(1, sizeof *m);
  lua_State *L = luaL_newstate();
  if (!m || !L) finding("out of memory", NULL);
  luaL_openlibs(L);
  m->file = "fuzz.onnx";
  m->escape = &escape;
  m->errbuf = err;
  m->errlen = sizeof err;
  if (setjmp(escape) == 0) {
    onnx_decode(m, copy, size);
    onnx_translate(L, m, NULL, 0, NULL, 0, "fuzz");
    if (!lua_isstring(L, -2) || !lua_istable(L, -1)) finding("no script and weights list", NULL);
  } else if (!err[0] || strchr(err, '\n') || strncmp(err, "fuzz.onnx: ", 11) != 0) {
    finding("refused without one line naming the file", err);
  }
  lua_close(L);
  onnx_free(m);
  free(m);
  free(copy);
  kiln_free_all();
  return 0;
}

#include "replay_main.h"
