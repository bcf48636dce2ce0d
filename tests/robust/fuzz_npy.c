/*
 * fuzz_npy.c — libFuzzer target for the .npy reader (gen/npy.c: npy_parse), which
 * reads `kiln run --input` files.
 *
 * Each input is a candidate .npy file, checked against three expectations (f32 [2, 3],
 * i32 [4], bool scalar). The reader must never read outside the input, must accept a
 * file only when exactly the expected bytes of data follow its header (the returned
 * pointer then lies inside the input with exactly that many bytes after it), and must
 * refuse everything else with a one-line message naming the file, free of control
 * bytes (headers are copied into messages).
 *
 *   fuzz:   make fuzz   (clang -fsanitize=fuzzer,address,undefined; FUZZ_SECONDS=N each)
 *   replay: the same sources with -DKILN_FUZZ_MAIN and any compiler (tests/t_robust.sh).
 */
#define FUZZ_NAME "fuzz_npy"
#include "fuzz_gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const struct {
    DType t;
    Shape s;
  } want[] = {{DT_F32, {2, {2, 3}}}, {DT_I32, {1, {4}}}, {DT_BOOL, {0, {0}}}};
  unsigned char *copy = malloc(size ? size : 1);      /* exactly size bytes: ASan sees any overrun */
  if (size) memcpy(copy, data, size);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char err[1024] = "";
    unsigned char *got = npy_parse("fuzz.npy", "x", want[i].t, &want[i].s, copy, size, err, sizeof err);
    if (got) {
      int64_t bytes = shape_numel(&want[i].s) * dtype_size(want[i].t);
      if (got < copy || got > copy + size || (int64_t)(copy + size - got) != bytes) finding("data pointer or size wrong", NULL);
      if (bytes) {
        volatile unsigned char sink = got[0] + got[bytes - 1];
        (void)sink;
      }
    } else {
      if (!err[0]) finding("refused without a message", NULL);
      for (const unsigned char *p = (const unsigned char *)err; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0)) finding("control byte in the message", err);
      if (strncmp(err, "fuzz.npy: ", 10) != 0) finding("message does not name the file", err);
    }
  }
  free(copy);
  kiln_free_all();
  return 0;
}

#include "replay_main.h"
