/*
 * fuzz_tokenizer.c — libFuzzer target for the runtime's tokenizer loader and encoder
 * (runtime/llm/kiln_tokenizer.c), which reads llama2.c tokenizer files that an app ships
 * or a user passes to `kiln tokenize`.
 *
 * The input is split at its first 0xFF 0xFE pair: before it a candidate tokenizer file,
 * after it a text. The loader must never read outside the file and must accept it only
 * with a vocabulary whose pieces are NUL-free strings; then encoding the text must give ids
 * inside the vocabulary, and decoding them must never crash. A refusal needs a one-line
 * message.
 *
 *   fuzz:   make fuzz   (clang -fsanitize=fuzzer,address,undefined; FUZZ_SECONDS=N each)
 *   replay: the same sources with -DKILN_FUZZ_MAIN and any compiler (tests/t_robust.sh).
 */
#include "kiln_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_tokenizer"

static void finding(const char *what) {
  fprintf(stderr, "%s: %s\n", FUZZ_NAME, what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t cut = size;
  for (size_t i = 0; i + 1 < size; i++)
    if (data[i] == 0xff && data[i + 1] == 0xfe) {
      cut = i;
      break;
    }
  unsigned char *file = malloc(cut ? cut : 1);          /* exactly cut bytes: ASan sees any overrun */
  if (cut) memcpy(file, data, cut);
  size_t tlen = cut + 2 <= size ? size - cut - 2 : 0;
  char *text = malloc(tlen + 1);
  if (tlen) memcpy(text, data + cut + 2, tlen);
  text[tlen] = 0;
  kiln_spm t;
  char err[256] = "";
  if (kiln_spm_load(&t, file, cut, err, sizeof err) == 0) {
    free(file);                                       /* nothing may point into the input now */
    for (int i = 0; i < t.n; i++)
      if (!t.piece[i]) finding("a NULL piece");
    size_t n = strlen(text);
    void *work = malloc(kiln_spm_work_size(&t, n));
    int cap = (int)(n * 4 + 8), *ids = malloc(sizeof(int) * (size_t)cap);
    int k = kiln_spm_encode(&t, text, ids, cap, work);
    if (k < 0) finding("the encoding did not fit 4 ids a byte");
    for (int i = 0; i < k; i++) {
      if (ids[i] < 0 || ids[i] >= t.n) finding("an id outside the vocabulary");
      if (!kiln_spm_piece(&t, i ? ids[i - 1] : 1, ids[i])) finding("no text for a valid id");
    }
    free(work);
    free(ids);
    kiln_spm_free(&t);
  } else {
    free(file);
    if (!err[0] || strchr(err, '\n')) finding("a refusal without a one-line message");
  }
  free(text);
  return 0;
}

#include "replay_main.h"
