/*
 * stories_main.c — greedy story generation with Kiln's generated TinyStories 260K
 * (models/stories.lua): one prefill, then a decode per token over the key/value cache.
 *
 * The model has two entry points over one weights file and one state block (the per-layer
 * key/value caches, STORIES_STATE_SIZE bytes, zero when fresh): stories_prefill runs 32
 * tokens at positions pos .. pos + 31, stories_decode one token at pos; each returns
 * STORIES_OK, or STORIES_E_RANGE (nothing touched) for a position past the cache. From BOS
 * (token 1): one prefill of the BOS chunk (BOS, then padding whose cache rows the decodes
 * overwrite before reading them), whose row 0 predicts the first token; then each decode
 * feeds the last token at the next position and predicts the one after. Greedy: the
 * arg-max every time, STORIES_GENERATE tokens, no stop token.
 *
 * Tokens are decoded with llama2.c's tok512.bin: int32 max_token_length, then per token a
 * float32 score, an int32 length and that many bytes. As in llama2.c's run.c, a piece after BOS
 * loses its leading space, byte-fallback pieces "<0xNN>" stand for the byte NN, and bytes that
 * are neither printable nor whitespace are not printed. Then prefill calls and whole
 * generations are repeated for about STORIES_TIME_US each, to report tokens per second.
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
#define STORIES_GENERATE 256         /* tokens generated after BOS */
#define STORIES_TIME_US 300000u      /* time spent on each tokens/s figure */

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
static void stories_decode_piece(const stories_vocab *v, int prev, int token, char *out, size_t cap) {
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

/* Exits with a message unless an entry returned STORIES_OK. */
static void stories_check(int status, const char *entry, int pos) {
  if (status == STORIES_OK) return;
  fprintf(stderr, "stories: %s at position %d returned %d (STORIES_E_RANGE = %d)\n", entry, pos, status, STORIES_E_RANGE);
  exit(1);
}

/* The buffers one generation needs. */
typedef struct {
  const void *weights;
  void *state, *arena;
  int32_t chunk[STORIES_PREFILL_TOKENS_NUMEL];
  float *chunk_logits;            /* [32, 512] */
  float logits[STORIES_DECODE_LOGITS_NUMEL];
} stories_run;

/* Greedy generation from BOS into tokens[0 .. n]: tokens[0] = BOS, then n tokens. The
 * state starts fresh: one prefill of the BOS chunk, then n - 1 decodes. */
static void stories_generate(stories_run *r, int32_t *tokens, int n) {
  stories_reset(r->state);
  memset(r->chunk, 0, sizeof r->chunk);
  r->chunk[0] = tokens[0] = STORIES_BOS;
  stories_check(stories_prefill(r->weights, r->state, r->arena, r->chunk, 0, r->chunk_logits), "prefill", 0);
  tokens[1] = stories_argmax(r->chunk_logits, STORIES_VOCAB);   /* row 0: after BOS at position 0 */
  for (int pos = 1; pos < n; pos++) {
    stories_check(stories_decode(r->weights, r->state, r->arena, &tokens[pos], pos, r->logits), "decode", pos);
    tokens[pos + 1] = stories_argmax(r->logits, STORIES_VOCAB);
  }
}

/* Calls f(r) until STORIES_TIME_US passed; returns the calls and *elapsed the microseconds. */
static long stories_repeat(void (*f)(stories_run *), stories_run *r, uint64_t *elapsed) {
  uint64_t start = kiln_time_us();
  long calls = 0;
  do {
    f(r);
    calls++;
    *elapsed = kiln_time_us() - start;
  } while (*elapsed < STORIES_TIME_US);
  return calls;
}

/* One prefill of a full chunk at position 0 (the timing unit of prefill). */
static void stories_one_prefill(stories_run *r) {
  stories_check(stories_prefill(r->weights, r->state, r->arena, r->chunk, 0, r->chunk_logits), "prefill", 0);
}

/* One whole generation (the timing unit of decode, less its one prefill). */
static void stories_one_generation(stories_run *r) {
  static int32_t tokens[STORIES_GENERATE + 1];
  stories_generate(r, tokens, STORIES_GENERATE);
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
  stories_run r = {.weights = w.payload};
  r.state = kiln_arena_alloc(STORIES_STATE_SIZE);
  r.arena = kiln_arena_alloc(STORIES_ARENA_SIZE);
  r.chunk_logits = malloc(STORIES_PREFILL_LOGITS_SIZE);
  if (!r.state || !r.arena || !r.chunk_logits) stories_fail(argv[1], "out of memory");

  int32_t tokens[STORIES_GENERATE + 1];
  stories_generate(&r, tokens, STORIES_GENERATE);
  char text[16384] = "";
  for (int i = 1; i <= STORIES_GENERATE; i++) stories_decode_piece(&vocab, tokens[i - 1], tokens[i], text, sizeof text);
  printf("TinyStories 260K (Llama, 5 layers), %d tokens greedily from BOS with a KV cache:\n%s\n", STORIES_GENERATE, text);
  printf("tokens:");
  for (int i = 0; i <= STORIES_GENERATE; i++) printf(" %d", (int)tokens[i]);
  printf("\n");

  uint64_t us;
  long calls = stories_repeat(stories_one_prefill, &r, &us);
  double prefill = (double)calls * STORIES_PREFILL_TOKENS_NUMEL * 1e6 / (double)(us ? us : 1);
  uint64_t prefill_us = us / (uint64_t)calls;
  calls = stories_repeat(stories_one_generation, &r, &us);
  double gen_us = (double)us / (double)calls - (double)prefill_us;   /* the decodes of one generation */
  double decode = (STORIES_GENERATE - 1) * 1e6 / (gen_us > 0 ? gen_us : 1);
  printf("prefill: %.0f tokens/s (%u-token chunks)\n", prefill, (unsigned)STORIES_PREFILL_TOKENS_NUMEL);
  printf("decode: %.0f tokens/s (one token a call, positions 1..%d of the KV cache)\n", decode, STORIES_GENERATE - 1);

  free(r.chunk_logits);
  kiln_arena_free(r.arena);
  kiln_arena_free(r.state);
  stories_vocab_free(&vocab);
  kiln_weights_free(&w);
  return 0;
}
