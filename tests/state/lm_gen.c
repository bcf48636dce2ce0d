/*
 * lm_gen.c — t_state's driver for models/stories.lua's generated C: greedy generation
 * from BOS through the prefill and decode entries, every logits row kept.
 *
 * It reads the weights file itself (the tests of generated code do not depend on
 * runtime/), starts from a fresh state, prefills the BOS chunk (BOS, then token 0) at
 * position 0 and takes its row 0, then decodes one token a call at positions 1 .. N - 1,
 * always the arg-max. Every entry must return STORIES_OK.
 *
 * usage: lm_gen WEIGHTS N LOGITS TOKENS
 *   LOGITS gets N rows of STORIES_DECODE_LOGITS_NUMEL floats: row p predicts the token at
 *   position p + 1; TOKENS gets N + 1 int32: BOS, then the N generated tokens.
 * Build: cc -std=c11 -I OUTDIR lm_gen.c OUTDIR/stories.c -lm
 */
#include "stories.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { VOCAB = STORIES_DECODE_LOGITS_NUMEL, BOS = 1 };

/* Prints a message and exits with status 2. */
static void fail(const char *what, const char *detail) {
  fprintf(stderr, "lm_gen: %s: %s\n", what, detail);
  exit(2);
}

/* The weights payload of the file at path, in 64-byte aligned memory (size checked). */
static void *load_weights(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) fail("cannot open", path);
  unsigned char *file = malloc(STORIES_WEIGHTS_FILE_SIZE + 1);
  if (!file) fail("out of memory", path);
  size_t n = fread(file, 1, STORIES_WEIGHTS_FILE_SIZE + 1, f);
  fclose(f);
  if (n != STORIES_WEIGHTS_FILE_SIZE || memcmp(file, "KILNWGT1", 8) != 0) fail("not this model's weights file", path);
  void *w = aligned_alloc(64, STORIES_WEIGHTS_SIZE);
  if (!w) fail("out of memory", path);
  memcpy(w, file + 64, STORIES_WEIGHTS_SIZE);
  free(file);
  return w;
}

/* Index of the largest of the VOCAB logits (the first on ties). */
static int argmax(const float *x) {
  int best = 0;
  for (int i = 1; i < VOCAB; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

/* Exits unless an entry returned STORIES_OK. */
static void check(int status, const char *entry, int pos) {
  if (status == STORIES_OK) return;
  char detail[64];
  snprintf(detail, sizeof detail, "returned %d at position %d", status, pos);
  fail(entry, detail);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s WEIGHTS N LOGITS TOKENS\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[2]);
  if (n < 1 || n > 511) fail("N must be 1..511", argv[2]);
  void *w = load_weights(argv[1]);
  void *state = aligned_alloc(64, STORIES_STATE_SIZE), *arena = aligned_alloc(64, STORIES_ARENA_SIZE);
  float *chunk_logits = malloc(STORIES_PREFILL_LOGITS_SIZE), *logits = malloc(sizeof(float) * VOCAB * (size_t)n);
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)(n + 1)), chunk[STORIES_PREFILL_TOKENS_NUMEL] = {BOS};
  if (!state || !arena || !chunk_logits || !logits || !tokens) fail("out of memory", "buffers");
  stories_reset(state);
  tokens[0] = BOS;
  check(stories_prefill(w, state, arena, chunk, 0, chunk_logits), "prefill", 0);
  memcpy(logits, chunk_logits, sizeof(float) * VOCAB);
  tokens[1] = argmax(logits);
  for (int pos = 1; pos < n; pos++) {
    float *row = logits + (size_t)pos * VOCAB;
    check(stories_decode(w, state, arena, &tokens[pos], pos, row), "decode", pos);
    tokens[pos + 1] = argmax(row);
  }
  FILE *f = fopen(argv[3], "wb");
  if (!f || fwrite(logits, sizeof(float) * VOCAB, (size_t)n, f) != (size_t)n || fclose(f)) fail("cannot write", argv[3]);
  f = fopen(argv[4], "wb");
  if (!f || fwrite(tokens, sizeof(int32_t), (size_t)n + 1, f) != (size_t)n + 1 || fclose(f)) fail("cannot write", argv[4]);
  free(tokens);
  free(logits);
  free(chunk_logits);
  free(arena);
  free(state);
  free(w);
  return 0;
}
