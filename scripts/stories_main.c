/*
 * stories_main.c — greedy story generation with Kiln's generated TinyStories 260K (models/stories.lua).
 *
 * The generated model has a fixed length: stories_run maps tokens [T] to logits [T, 512], row
 * p predicting the token after position p, and causal attention makes row p depend only on
 * tokens 0..p. So this program generates the way a model without a KV cache must: start from
 * BOS (token 1), run the whole fixed-length forward with the unfilled positions padded (with
 * token 0; they cannot influence earlier rows), append the arg-max of the row of the last
 * filled position, repeat until T positions are filled or the model emits BOS/EOS. That costs
 * one full T-token forward per generated token — honest for a demo, wasteful for a product.
 *
 * Tokens are decoded with llama2.c's tok512.bin: int32 max_token_length, then per token a
 * float32 score, an int32 length and that many bytes. As in llama2.c's run.c, a piece after BOS
 * loses its leading space, byte-fallback pieces "<0xNN>" stand for the byte NN, and bytes that
 * are neither printable nor whitespace are not printed. Then the generation is repeated until
 * about STORIES_TIME_US has passed, to report tokens per second (each token = one forward).
 *
 * usage: stories_main WEIGHTS TOK512.BIN
 */
#include "stories.h"
#include "kiln_runtime.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STORIES_VOCAB 512
#define STORIES_BOS 1
#define STORIES_EOS 2
#define STORIES_TIME_US 300000u   /* time spent on repeated generations for the tokens/s figure */

typedef struct {
  char *piece[STORIES_VOCAB];     /* NUL-terminated token texts */
} stories_vocab;

/* Prints a one-line error and exits with status 1. */
static void stories_fail(const char *path, const char *what) {
  fprintf(stderr, "stories: %s: %s\n", path, what);
  exit(1);
}

/* Reads one little-endian 4-byte field of tok512.bin into *out; exits on a short file. */
static void stories_read4(FILE *f, const char *path, void *out) {
  unsigned char b[4];
  if (fread(b, 1, 4, f) != 4) stories_fail(path, "truncated tokenizer file");
  uint32_t v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
  memcpy(out, &v, 4);
}

/* Loads the 512 token pieces of tok512.bin (scores are read and ignored: decoding needs none). */
static void stories_vocab_load(stories_vocab *v, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) stories_fail(path, "cannot open");
  int32_t max_len, len;
  float score;
  stories_read4(f, path, &max_len);
  for (int i = 0; i < STORIES_VOCAB; i++) {
    stories_read4(f, path, &score);
    stories_read4(f, path, &len);
    if (len < 0 || len > max_len) stories_fail(path, "token length out of range");
    v->piece[i] = malloc((size_t)len + 1);
    if (!v->piece[i]) stories_fail(path, "out of memory");
    if (fread(v->piece[i], 1, (size_t)len, f) != (size_t)len) stories_fail(path, "truncated tokenizer file");
    v->piece[i][len] = '\0';
  }
  fclose(f);
}

static void stories_vocab_free(stories_vocab *v) {
  for (int i = 0; i < STORIES_VOCAB; i++) free(v->piece[i]);
}

/* Appends the text of `token` (following `prev`) to out (capacity cap, kept NUL-terminated). */
static void stories_decode(const stories_vocab *v, int prev, int token, char *out, size_t cap) {
  const char *p = v->piece[token];
  char byte[2] = {0, 0};
  unsigned hex;
  if (prev == STORIES_BOS && p[0] == ' ') p++;
  if (strlen(p) == 6 && sscanf(p, "<0x%02X>", &hex) == 1) {
    byte[0] = (char)hex;
    p = byte;
  }
  size_t n = strlen(out);
  for (; *p && n + 1 < cap; p++) {
    unsigned char c = (unsigned char)*p;
    if (isprint(c) || isspace(c) || c >= 0x80) out[n++] = (char)c;   /* UTF-8 bytes pass */
  }
  out[n] = '\0';
}

/* Index of the largest of n logits (the first one on ties). */
static int stories_argmax(const float *x, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

/* Greedy generation from BOS: fills tokens[0..], returns how many positions are filled. */
static int stories_generate(const void *weights, void *arena, int32_t *tokens, float *logits) {
  int n = 1;
  memset(tokens, 0, STORIES_TOKENS_SIZE);
  tokens[0] = STORIES_BOS;
  while (n < (int)STORIES_TOKENS_NUMEL) {
    stories_run(weights, arena, tokens, logits);
    int next = stories_argmax(logits + (size_t)(n - 1) * STORIES_VOCAB, STORIES_VOCAB);
    if (next == STORIES_BOS || next == STORIES_EOS) break;
    tokens[n++] = next;
  }
  return n;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s WEIGHTS TOK512.BIN\n", argv[0]);
    return 2;
  }
  kiln_weights w;
  if (kiln_weights_load(&w, argv[1], STORIES_WEIGHTS_SIZE, STORIES_WEIGHTS_CHECKSUM) != KILN_OK) {
    fprintf(stderr, "stories: %s\n", w.message);
    return 1;
  }
  stories_vocab vocab;
  stories_vocab_load(&vocab, argv[2]);
  void *arena = kiln_arena_alloc(STORIES_ARENA_SIZE);
  int32_t *tokens = malloc(STORIES_TOKENS_SIZE);
  float *logits = malloc(STORIES_LOGITS_SIZE);
  if (!arena || !tokens || !logits) stories_fail(argv[1], "out of memory");

  int n = stories_generate(w.payload, arena, tokens, logits);
  char text[4096] = "";
  for (int i = 1; i < n; i++) stories_decode(&vocab, tokens[i - 1], tokens[i], text, sizeof text);
  printf("TinyStories 260K (Llama, 5 layers) greedy story: %s\n", text);
  printf("tokens:");
  for (int i = 0; i < n; i++) printf(" %d", (int)tokens[i]);
  printf("\n");

  uint64_t start = kiln_time_us(), elapsed = 0;
  long generated = 0;
  do {
    generated += stories_generate(w.payload, arena, tokens, logits) - 1;
    elapsed = kiln_time_us() - start;
  } while (elapsed < STORIES_TIME_US);
  printf("%ld tokens in %.3f s: %.0f tokens/s (each token one %u-position forward pass, no KV cache)\n",
         generated, (double)elapsed / 1e6, (double)generated * 1e6 / (double)(elapsed ? elapsed : 1),
         (unsigned)STORIES_TOKENS_NUMEL);

  free(logits);
  free(tokens);
  kiln_arena_free(arena);
  stories_vocab_free(&vocab);
  kiln_weights_free(&w);
  return 0;
}
