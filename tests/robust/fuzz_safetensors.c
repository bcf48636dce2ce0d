/*
 * fuzz_safetensors.c — libFuzzer target for the safetensors parser (gen/frontend/safetensors.c).
 *
 * Every input must either be refused with a one-line message or yield tensors whose
 * fields keep the parser's promises: a known dtype, rank <= KILN_MAX_RANK, loads set for
 * exactly the dtypes Kiln loads (their bytes inside the input), and names that are unique, non-empty C strings.
 * Anything else — a crash, a sanitizer report, a refusal without a message, a
 * message spanning lines — is a finding.
 *
 *   fuzz:   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L \
 *             -Igen tests/robust/fuzz_safetensors.c gen/frontend/safetensors.c gen/util.c gen/ops.c \
 *             -o fuzz_st && ./fuzz_st -max_total_time=300 CORPUS_DIR tests/robust/st
 *   replay: the same sources with -DKILN_FUZZ_MAIN and any compiler (no libFuzzer): the
 *           program runs each file named on the command line once (tests/t_robust.sh).
 */
#define FUZZ_NAME "fuzz_safetensors"
#include "fuzz_gen.h"

/* The promises of a successful parse (see the file comment). */
static void check_file(const SafeFile *f) {
  for (int i = 0; i < f->ntensors; i++) {
    const SafeTensor *t = &f->tensors[i];
    if (!t->name || !t->name[0]) finding("tensor without a name", NULL);
    if (!t->file_dtype) finding("tensor without a dtype", t->name);
    if (t->shape.rank < 0 || t->shape.rank > KILN_MAX_RANK) finding("rank out of range", t->name);
    bool loads = !strcmp(t->file_dtype, "F32") || !strcmp(t->file_dtype, "F16") || !strcmp(t->file_dtype, "BF16");
    if (loads != t->loads) finding("loads set for exactly F32/F16/BF16 broken", t->name);
    int64_t n = 1;
    for (int k = 0; k < t->shape.rank; k++) {
      if (t->shape.dim[k] < 0) finding("negative dim", t->name);
      n *= t->shape.dim[k];
    }
    if (t->loads && n > 0) {   /* ASan: the tensor's bytes lie inside the input */
      int64_t size = strcmp(t->file_dtype, "F32") == 0 ? 4 : 2;
      volatile unsigned char sink = t->bytes[0] ^ t->bytes[n * size - 1];
      (void)sink;
    }
    for (int k = 0; k < i; k++)
      if (!strcmp(f->tensors[k].name, t->name)) finding("duplicate tensor name", t->name);
    if (safetensors_find((SafeFile *)f, t->name) != &f->tensors[i]) finding("safetensors_find disagrees", t->name);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[1024] = "";
  SafeFile *f = safetensors_parse("fuzz.safetensors", data, size, err, sizeof err);
  if (!f) {
    if (!err[0]) finding("refused without a message", NULL);
    if (strchr(err, '\n')) finding("message spans lines", err);
    if (strncmp(err, "fuzz.safetensors: ", 18) != 0) finding("message does not name the file", err);
  } else {
    check_file(f);
  }
  kiln_free_all();
  return 0;
}

#include "replay_main.h"
