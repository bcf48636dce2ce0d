/*
 * kiln_llm.c — the make-bench driver of a Kiln-built LLM with prefill and decode entries
 * (models/stories.lua, models/llm.lua): the same protocol as plain_llama.c.
 *
 *   kiln_llm WEIGHTS TOKENS_FILE POS REPS OUT_LOGITS      (POS, or pT for a prefill of T)
 *
 * Compile with the generated model and -DKM=<model> -DKMU=<MODEL>. The cache is filled
 * as an application would: prefill chunks at 0, 32, ... while whole chunks fit below
 * POS, then one decode per remaining position. The timed call is a decode of TOKENS[POS]
 * at POS (idempotent: it rewrites the same cache row), or a prefill of the first chunk at
 * position 0 (pT, T = the entry's chunk length). Prints "us <median wall> <median cpu>".
 * A model built with -D prefill_logits=last (models/llm.lua: the prefill takes the row
 * `last` and returns its logits alone) is asked for the chunk's last row.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

#include "kiln_runtime.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M_(s) CAT(KMU, s)
#define F_(s) CAT(KM, s)
#include MODEL_HEADER

enum { CHUNK = M_(_PREFILL_TOKENS_NUMEL), VOCAB = M_(_DECODE_LOGITS_NUMEL) };

#if M_(_PREFILL_NUM_INPUTS) == 3   /* prefill_logits=last: the logits of row CHUNK - 1, at 0 */
#define PREFILL(tok, p, out) F_(_prefill)(w.payload, state, arena, tok, p, CHUNK - 1, out)
enum { LAST_ROW = 0 };
#else
#define PREFILL(tok, p, out) F_(_prefill)(w.payload, state, arena, tok, p, out)
enum { LAST_ROW = CHUNK - 1 };
#endif

static void die(const char *msg) {
  fprintf(stderr, "kiln_llm: %s\n", msg);
  exit(1);
}


int main(int argc, char **argv) {
  if (argc != 6) die("usage: kiln_llm WEIGHTS TOKENS POS REPS OUT_LOGITS");
  kiln_weights w;
  if (kiln_weights_map(&w, argv[1], M_(_WEIGHTS_SIZE), M_(_WEIGHTS_CHECKSUM), 0) != KILN_OK) die(w.message);
  int prefill = argv[3][0] == 'p';
  int pos = atoi(argv[3] + prefill), reps = atoi(argv[4]);
  if (prefill && pos != CHUNK) die("a prefill is timed over the entry's chunk length");
  int need = prefill ? CHUNK : pos + 1;
  int *tokens = calloc((size_t)need + CHUNK, sizeof(int));
  FILE *tf = fopen(argv[2], "rb");
  if (!tf || fread(tokens, sizeof(int), (size_t)need, tf) != (size_t)need) die("short tokens file");
  fclose(tf);
  void *state = kiln_arena_alloc(M_(_STATE_SIZE)), *arena = kiln_arena_alloc(M_(_ARENA_SIZE));
  float *chunk_logits = malloc(sizeof(float) * (size_t)CHUNK * VOCAB), logits[VOCAB];
  int p = 0;
  if (!prefill) {
    for (; p + CHUNK <= pos; p += CHUNK)
      if (PREFILL(tokens + p, p, chunk_logits) != 0) die("prefill failed");
    for (; p < pos; p++)
      if (F_(_decode)(w.payload, state, arena, tokens + p, p, logits) != 0) die("decode failed");
  }
  double *t = malloc(sizeof(double) * (size_t)reps), *c = malloc(sizeof(double) * (size_t)reps);
  for (int r = 0; r < reps; r++) {
    double t0 = clock_us(CLOCK_MONOTONIC), c0 = clock_us(CLOCK_PROCESS_CPUTIME_ID);
    int st = prefill ? PREFILL(tokens, 0, chunk_logits)
                     : F_(_decode)(w.payload, state, arena, tokens + pos, pos, logits);
    t[r] = clock_us(CLOCK_MONOTONIC) - t0;
    c[r] = clock_us(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (st != 0) die("call failed");
  }
  if (prefill) memcpy(logits, chunk_logits + (size_t)LAST_ROW * VOCAB, sizeof logits);
  double wall = median(t, reps), cpu = median(c, reps);
  FILE *o = fopen(argv[5], "wb");
  if (!o || fwrite(logits, sizeof(float), VOCAB, o) != VOCAB) die("cannot write logits");
  fclose(o);
  printf("us %.3f %.3f\n", wall, cpu);
  kiln_weights_free(&w);
  return 0;
}
