/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader (gen/frontend/gguf.c: gguf_parse),
 * which `kiln.load` uses for files that start with "GGUF".
 *
 * Each input is a candidate GGUF file. The reader must never read outside it, must
 * accept it only with tensors whose shapes are 1..4 dims of positive sizes, whose bytes
 * (when loadable) decode to numel floats from inside the input, and whose names are
 * unique; and must refuse everything else with a one-line message naming the file, free
 * of control bytes.
 *
 *   fuzz:   make fuzz   (clang -fsanitize=fuzzer,address,undefined; FUZZ_SECONDS=N each)
 *   replay: the same sources with -DKILN_FUZZ_MAIN and any compiler (tests/t_robust.sh).
 */
#define FUZZ_NAME "fuzz_gguf"
#include "fuzz_gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *copy = malloc(size ? size : 1);      /* exactly size bytes: ASan sees any overrun */
  if (size) memcpy(copy, data, size);
  char err[1024] = "";
  SafeFile *f = gguf_parse("fuzz.gguf", copy, size, err, sizeof err);
  if (f) {
    for (int i = 0; i < f->ntensors; i++) {
      const SafeTensor *t = &f->tensors[i];
      if (t->shape.rank < 1 || t->shape.rank > 4) finding("rank out of range", t->name);
      for (int d = 0; d < t->shape.rank; d++)
        if (t->shape.dim[d] < 1) finding("dim < 1", t->name);
      for (int j = 0; j < i; j++)
        if (strcmp(f->tensors[j].name, t->name) == 0) finding("duplicate name", t->name);
      if (t->loads) {   /* decoded from the input: ASan sees any read past the tensor's bytes */
        int64_t n = shape_numel(&t->shape);
        float *x = malloc(sizeof(float) * (size_t)n);
        gguf_to_f32(t->ggml_type, t->bytes, n, x);
        volatile float sink = x[0] + x[n - 1];
        (void)sink;
        free(x);
      }
    }
    for (int i = 0; i < f->nmeta; i++)
      if (!f->meta[i].key[0]) finding("empty key", NULL);
  } else {
    if (!err[0]) finding("refused without a message", NULL);
    for (const unsigned char *p = (const unsigned char *)err; *p; p++)
      if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0)) finding("control byte in the message", err);
    if (strncmp(err, "fuzz.gguf: ", 11) != 0) finding("message does not name the file", err);
  }
  free(copy);
  kiln_free_all();
  return 0;
}

#include "replay_main.h"
