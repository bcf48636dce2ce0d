/*
 * llm_main.c — text generation with any Kiln-built language model that has `prefill` and
 * `decode` entries over a key/value cache (models/stories.lua, models/llm.lua), the
 * runtime's tokenizer (runtime/llm/kiln_tokenizer.c) and sampler (kiln_sample.c).
 *
 * Built per model, naming it: cc -DKM=stories -DKMU=STORIES -DMODEL_HEADER='"stories.h"'
 * scripts/llm_main.c out/stories/stories.c runtime/kiln_runtime.c runtime/llm/kiln_tokenizer.c runtime/llm/kiln_sample.c runtime/llm/kiln_chat.c -lm
 *
 *   llm_main WEIGHTS TOKENIZER [--prompt TEXT] [--max-tokens N] [--temperature T]
 *            [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S]
 *            [--stop TEXT]... [--ids] [--speed]
 *
 * BOS, then the prompt's ids, go through prefill in chunks of the entry's length (a
 * partial last chunk is padded; the decodes overwrite the padding's cache rows before
 * anything reads them); then one decode per generated token, until --max-tokens, EOS or
 * the end of the cache, or until the text contains a --stop string (not printed). Text
 * streams as it is made (bytes held back until a UTF-8 character is whole, and while the
 * end of the text could still become a stop string). --ids adds a line "tokens: <id> <id> ..." (BOS and prompt
 * included); --speed adds the prefill and decode tokens/s (wall clock).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_chat.h"
#include "kiln_runtime.h"
#include "kiln_sample.h"
#include "kiln_tokenizer.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M_(s) CAT(KMU, s)
#define F_(s) CAT(KM, s)
#include MODEL_HEADER

enum { CHUNK = M_(_PREFILL_TOKENS_NUMEL), VOCAB = M_(_DECODE_LOGITS_NUMEL), BOS = 1, EOS = 2, MAX_IDS = 1 << 16 };
#define SPEED_TIME_US 300000u   /* how long the prefill rate is measured */

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "llm: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(1);
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) fail("cannot open", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)len + 1);
  if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) fail("cannot read", path);
  fclose(f);
  *n = (size_t)len;
  return b;
}

/* Streams text, holding back the bytes of an incomplete UTF-8 character. */
typedef struct {
  char pend[4];
  int npend;
} Utf8Out;

static int utf8_need(unsigned char c) { return c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1; }

static void utf8_put(Utf8Out *o, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (o->npend && (c & 0xc0) != 0x80) {   /* a new lead byte: what was pending was never whole */
      o->npend = 0;
    }
    o->pend[o->npend++] = (char)c;
    if (o->npend == utf8_need((unsigned char)o->pend[0])) {
      fwrite(o->pend, 1, (size_t)o->npend, stdout);
      o->npend = 0;
    }
  }
  fflush(stdout);
}

typedef struct {
  const void *w;
  void *state, *arena;
  float *chunk_logits;
} Model;

static void check(int status, const char *entry, int pos) {
  if (status != 0) fprintf(stderr, "llm: %s at position %d returned %d\n", entry, pos, status), exit(1);
}

/* Prefills ids[0..n) from position 0; logits gets the last one's row. */
static void prefill(Model *m, const int32_t *ids, int n, float *logits) {
  int32_t chunk[CHUNK];
  for (int p = 0; p < n; p += CHUNK) {
    int k = n - p < CHUNK ? n - p : CHUNK;
    memset(chunk, 0, sizeof chunk);
    memcpy(chunk, ids + p, sizeof(int32_t) * (size_t)k);
    check(F_(_prefill)(m->w, m->state, m->arena, chunk, p, m->chunk_logits), "prefill", p);
    if (p + k == n) memcpy(logits, m->chunk_logits + (size_t)(k - 1) * VOCAB, sizeof(float) * VOCAB);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) fail("usage: llm_main WEIGHTS TOKENIZER [--prompt TEXT] [--max-tokens N] [--temperature T] "
                     "[--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S] [--ids] [--speed]", NULL);
  const char *prompt = "", *stops[16];
  int nstops = 0;
  int max_tokens = 256, show_ids = 0, speed = 0;
  uint64_t seed = 0;
  kiln_sampler_params sp = kiln_sampler_defaults();
  for (int i = 3; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--ids")) show_ids = 1;
    else if (!strcmp(a, "--speed")) speed = 1;
    else if (!v) fail("option needs a value", a);
    else if (!strcmp(a, "--prompt")) prompt = v, i++;
    else if (!strcmp(a, "--max-tokens")) max_tokens = atoi(v), i++;
    else if (!strcmp(a, "--temperature")) sp.temperature = (float)atof(v), i++;
    else if (!strcmp(a, "--top-k")) sp.top_k = atoi(v), i++;
    else if (!strcmp(a, "--top-p")) sp.top_p = (float)atof(v), i++;
    else if (!strcmp(a, "--min-p")) sp.min_p = (float)atof(v), i++;
    else if (!strcmp(a, "--repeat-penalty")) sp.repetition_penalty = (float)atof(v), i++;
    else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10), i++;
    else if (!strcmp(a, "--stop")) {
      if (nstops == 16) fail("too many --stop strings", NULL);
      stops[nstops++] = v, i++;
    }
    else fail("unknown option", a);
  }
  kiln_weights w;
  if (kiln_weights_map(&w, argv[1], M_(_WEIGHTS_SIZE), M_(_WEIGHTS_CHECKSUM), 0) != KILN_OK) fail(w.message, NULL);
  size_t tn;
  char *tok = slurp(argv[2], &tn), err[256];
  kiln_spm t;
  if (kiln_spm_load(&t, tok, tn, err, sizeof err) != 0) fail(argv[2], err);
  if (t.n != VOCAB) fail("the tokenizer's vocabulary does not match the model's logits", argv[2]);

  static int32_t ids[MAX_IDS];
  int n = 0;
  ids[n++] = BOS;
  if (prompt[0]) {
    void *work = malloc(kiln_spm_work_size(&t, strlen(prompt)));
    int *enc = malloc(sizeof(int) * (strlen(prompt) * 4 + 8));
    int k = kiln_spm_encode(&t, prompt, enc, (int)(strlen(prompt) * 4 + 8), work);
    for (int i = 0; i < k && n < MAX_IDS; i++) ids[n++] = enc[i];
    free(work), free(enc);
  }
  Model m = {w.payload, kiln_arena_alloc(M_(_STATE_SIZE)), kiln_arena_alloc(M_(_ARENA_SIZE)),
             malloc(sizeof(float) * (size_t)CHUNK * VOCAB)};
  if (!m.state || !m.arena || !m.chunk_logits) fail("out of memory", NULL);
  static float logits[VOCAB];
  kiln_sampler s;
  kiln_sampler_init(&s, VOCAB, malloc(kiln_sampler_scratch_size(VOCAB)), &sp, seed);
  Utf8Out out = {{0}, 0};
  for (int i = 1; i < n; i++) utf8_put(&out, kiln_spm_piece(&t, ids[i - 1], ids[i]));   /* echo the prompt */

  prefill(&m, ids, n, logits);
  static char text[1 << 20];   /* the generated text, for the stop strings */
  size_t tlen = 0, shown = 0;
  int generated = 0, decodes = 0, stopped = 0;
  uint64_t decode_us = 0;
  while (generated < max_tokens && n < MAX_IDS) {
    int next = kiln_sample(&s, logits, ids, n);
    if (next == EOS) break;
    ids[n] = next;
    const char *piece = kiln_spm_piece(&t, ids[n - 1], next);
    size_t pl = strlen(piece);
    if (tlen + pl >= sizeof text) fail("generated text too long", NULL);
    memcpy(text + tlen, piece, pl + 1);
    tlen += pl;
    size_t safe = kiln_stop_scan(text, tlen, stops, nstops, &stopped);
    if (safe > shown) {
      char keep = text[safe];
      text[safe] = 0;
      utf8_put(&out, text + shown);
      text[safe] = keep;
      shown = safe;
    }
    generated++;
    if (stopped) {
      n++;
      break;
    }
    if (generated == max_tokens) {
      n++;
      break;
    }
    uint64_t d0 = kiln_time_us();
    int st = F_(_decode)(m.w, m.state, m.arena, &ids[n], n, logits);
    decode_us += kiln_time_us() - d0;
    n++;
    if (st != 0) break;   /* the end of the cache */
    decodes++;
  }
  if (!stopped && tlen > shown) utf8_put(&out, text + shown);   /* a held-back tail that never became a stop */
  printf("\n");
  if (show_ids) {
    printf("tokens:");
    for (int i = 0; i < n; i++) printf(" %d", (int)ids[i]);
    printf("\n");
  }
  if (speed) {
    long calls = 0;
    uint64_t start = kiln_time_us(), now = start;
    int32_t chunk[CHUNK] = {BOS};
    while (now - start < SPEED_TIME_US) {
      check(F_(_prefill)(m.w, m.state, m.arena, chunk, 0, m.chunk_logits), "prefill", 0);
      calls++;
      now = kiln_time_us();
    }
    printf("prefill: %.0f tokens/s (%d-token chunks)\n", (double)calls * CHUNK * 1e6 / (double)(now - start), CHUNK);
    if (decodes)
      printf("decode: %.0f tokens/s (one token a call, %d calls)\n", (double)decodes * 1e6 / (double)decode_us, decodes);
  }
  kiln_spm_free(&t);
  kiln_weights_free(&w);
  return 0;
}
