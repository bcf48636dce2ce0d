/*
 * llm_main.c — text generation with any Kiln-built language model that has `prefill` and
 * `decode` entries over a key/value cache (models/stories.lua, models/llm.lua): a command
 * line over runtime/llm's kiln_generate (tokenizer, sampler, stop strings, streaming).
 *
 * Built per model, naming it: cc -DKM=stories -DKMU=STORIES -DMODEL_HEADER='"stories.h"'
 * scripts/llm_main.c out/stories/stories.c runtime/kiln_runtime.c runtime/kiln_pool.c runtime/llm/kiln_tok*.c
 * runtime/llm/kiln_sample.c runtime/llm/kiln_chat.c runtime/llm/kiln_generate.c -pthread -lm
 *
 *   llm_main WEIGHTS TOKENIZER.tok [--prompt TEXT] [--chat llama3|qwen3|gemma3] [--max-tokens N]
 *            [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]
 *            [--presence-penalty P] [--frequency-penalty F] [--penalty-last-n N] [--seed S]
 *            [--bos ID] [--eos ID] [--stop TEXT]... [--threads N] [--ids] [--speed]
 *
 * TOKENIZER is Kiln's tokenizer binary (`kiln build --tokenizer FILE` writes NAME.tok
 * beside the weights; `kiln tokenize FILE --convert OUT.tok` converts a tokenizer.json,
 * a GGUF vocabulary or llama2.c's tok512.bin). --chat puts the prompt in the template as
 * one user message with the assistant's turn opened. --bos/--eos override the
 * tokenizer's ids (-1: none). --threads N runs every call on N threads (runtime/kiln_pool.c:
 * the entries' _par functions), with the same ids as one.
 *
 * Prints the prompt, then the generated text as it comes; --ids adds a line "tokens: <id>
 * ..." (BOS and the prompt included); --speed the prefill and decode tokens/s (the prefill
 * rate measured over repeated calls of one chunk, as a single short prompt is too quick
 * to time) and the memory: the generation buffers (kiln_generate_result.memory) and the
 * process's peak resident set (getrusage's ru_maxrss: weights, tokenizer and all).
 *
 * A model built with `kiln build --profile` (llm_build.sh compiles this with
 * KILN_LLM_PROFILE then) also prints, after the text, where the generation's time went:
 * the kernels of both entries slowest first (docs/output.md, "Profiling").
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/resource.h>
#endif

#include "kiln_chat.h"
#include "kiln_generate.h"
#include "kiln_pool.h"
#include "kiln_runtime.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M_(s) CAT(KMU, s)
#define F_(s) CAT(KM, s)
#include MODEL_HEADER

/* A prefill with a third input, `last`, returns that row's logits alone (models/llm.lua
 * -D prefill_logits=last); otherwise every row's. */
#if M_(_PREFILL_NUM_INPUTS) == 3
#define MODEL KILN_LLM_MODEL_LAST(KM, KMU)
#else
#define MODEL KILN_LLM_MODEL(KM, KMU)
#endif

#define SPEED_TIME_US 300000u   /* how long the prefill rate is measured */

#ifdef KILN_LLM_PROFILE
enum { PROFILE_TOP = 20 };   /* kernels listed; the rest summed */

/* The model's profile (its kiln build --profile table), slowest kernel first. */
static void print_profile(void) {
  int order[M_(_PROFILE_KERNELS)], n = M_(_PROFILE_KERNELS);
  uint64_t total = 0, rest = 0;
  for (int k = 0; k < n; k++) order[k] = k, total += M_(_PROFILE_TABLE)[k].ns;
  for (int i = 1; i < n; i++)   /* insertion sort by time, slowest first */
    for (int j = i; j > 0 && M_(_PROFILE_TABLE)[order[j]].ns > M_(_PROFILE_TABLE)[order[j - 1]].ns; j--) {
      const int x = order[j];
      order[j] = order[j - 1], order[j - 1] = x;
    }
  printf("profile: %d kernels, %.3f ms in all\n       ms  share  calls  kernel (ops; Lua lines)\n", n, total / 1e6);
  for (int i = 0; i < n; i++) {
    const M_(_PROFILE_ROW) *r = &M_(_PROFILE_TABLE)[order[i]];
    if (i >= PROFILE_TOP) {
      rest += r->ns;
      continue;
    }
    printf("%9.3f %5.1f%% %6llu  %s (%s; %s)\n", r->ns / 1e6, total ? 100.0 * r->ns / total : 0.0,
           (unsigned long long)r->calls, r->name, r->op, r->loc);
  }
  if (n > PROFILE_TOP) printf("%9.3f %5.1f%%         (%d more)\n", rest / 1e6, total ? 100.0 * rest / total : 0.0, n - PROFILE_TOP);
}
#endif

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

static int print_text(const char *text, size_t len, void *user) {
  (void)user;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0;
}

/* The process's peak resident set in KiB, or -1 where getrusage is not there. */
static long peak_rss_kib(void) {
#if defined(__unix__) || defined(__APPLE__)
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return -1;
#ifdef __APPLE__
  return (long)(u.ru_maxrss / 1024);   /* bytes on macOS */
#else
  return (long)u.ru_maxrss;            /* KiB on Linux and the BSDs */
#endif
#else
  return -1;
#endif
}

/* The template named by --chat. */
static kiln_chat_template template_of(const char *name) {
  if (!strcmp(name, "llama3")) return KILN_CHAT_LLAMA3;
  if (!strcmp(name, "qwen3")) return KILN_CHAT_QWEN3;
  if (!strcmp(name, "gemma3")) return KILN_CHAT_GEMMA3;
  fail("--chat must be llama3, qwen3 or gemma3", name);
  return KILN_CHAT_LLAMA3;
}

/* The prompt in the chat template as one user message, the assistant's turn opened. */
static char *chat_prompt(const char *name, const char *text) {
  kiln_chat_message msg = {"user", text};
  kiln_chat_template tp = template_of(name);
  size_t n = kiln_chat_format(tp, &msg, 1, 1, NULL, 0);
  char *buf = malloc(n + 1);
  if (!buf) fail("out of memory", NULL);
  kiln_chat_format(tp, &msg, 1, 1, buf, n + 1);
  return buf;
}

int main(int argc, char **argv) {
  if (argc < 3) fail("usage: llm_main WEIGHTS TOKENIZER.tok [--prompt TEXT] [--chat llama3|qwen3|gemma3] [--max-tokens N] "
                     "[--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--presence-penalty P] "
                     "[--frequency-penalty F] [--penalty-last-n N] [--seed S] [--bos ID] [--eos ID] [--stop TEXT]... "
                     "[--threads N] [--ids] [--speed]", NULL);
  const char *prompt = "", *chat = NULL, *stops[16];
  int show_ids = 0, speed = 0, threads = 1;
  kiln_generate_opts o = kiln_generate_defaults();
  for (int i = 3; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--ids")) show_ids = 1;
    else if (!strcmp(a, "--speed")) speed = 1;
    else if (!v) fail("option needs a value", a);
    else if (!strcmp(a, "--prompt")) prompt = v, i++;
    else if (!strcmp(a, "--chat")) chat = v, i++;
    else if (!strcmp(a, "--max-tokens")) o.max_tokens = atoi(v), i++;
    else if (!strcmp(a, "--threads")) threads = atoi(v), i++;
    else if (!strcmp(a, "--temperature")) o.sampler.temperature = (float)atof(v), i++;
    else if (!strcmp(a, "--top-k")) o.sampler.top_k = atoi(v), i++;
    else if (!strcmp(a, "--top-p")) o.sampler.top_p = (float)atof(v), i++;
    else if (!strcmp(a, "--min-p")) o.sampler.min_p = (float)atof(v), i++;
    else if (!strcmp(a, "--repeat-penalty")) o.sampler.repetition_penalty = (float)atof(v), i++;
    else if (!strcmp(a, "--presence-penalty")) o.sampler.presence_penalty = (float)atof(v), i++;
    else if (!strcmp(a, "--frequency-penalty")) o.sampler.frequency_penalty = (float)atof(v), i++;
    else if (!strcmp(a, "--penalty-last-n")) o.sampler.penalty_last_n = atoi(v), i++;
    else if (!strcmp(a, "--seed")) o.seed = strtoull(v, NULL, 10), i++;
    else if (!strcmp(a, "--bos")) o.bos = atoi(v), i++;
    else if (!strcmp(a, "--eos")) o.eos = atoi(v), i++;
    else if (!strcmp(a, "--stop")) {
      if (o.nstops == 16) fail("too many --stop strings", NULL);
      stops[o.nstops++] = v, i++;
    } else fail("unknown option", a);
  }
  o.stops = stops;
  if (o.max_tokens < 0) fail("--max-tokens must be >= 0", NULL);
  if (threads < 1 || threads > 256) fail("--threads must be 1 to 256", NULL);
  kiln_pool *pool = NULL;
  if (threads > 1) {   /* the entries' _par functions on a pool: the same ids as one thread */
    if (!(pool = kiln_pool_new(threads))) fail("cannot start the threads", NULL);
    o.pfor = kiln_pool_for, o.pool = pool;
  }
  if (chat) prompt = chat_prompt(chat, prompt);
  kiln_weights w;
  if (kiln_weights_map(&w, argv[1], M_(_WEIGHTS_SIZE), M_(_WEIGHTS_CHECKSUM), 0) != KILN_OK) fail(w.message, NULL);
  size_t tn;
  char *tok = slurp(argv[2], &tn), err[256];
  if (!kiln_tok_is(tok, tn))
    fail(argv[2], "not a Kiln tokenizer binary (convert it: kiln tokenize FILE --convert OUT.tok, or kiln build --tokenizer FILE)");
  kiln_tok t;
  if (kiln_tok_load(&t, tok, tn, err, sizeof err) != 0) fail(argv[2], err);
  free(tok);
  kiln_llm_model m = MODEL;
  if (t.n > m.vocab) fail("the tokenizer has more ids than the model has logits", argv[2]);

  kiln_generate_sizes z = kiln_generate_size(&m, &t, strlen(prompt), o.max_tokens);
  kiln_generate_buffers b = {kiln_arena_alloc(z.state), kiln_arena_alloc(z.arena), malloc(z.logits), malloc(z.ids),
                             malloc(z.text), malloc(z.scratch)};
  if (!b.state || !b.arena || !b.logits || !b.ids || !b.text || !b.scratch) fail("out of memory", NULL);
  fputs(prompt, stdout);
  kiln_generate_result r;
  int st = kiln_generate(&m, w.payload, &t, prompt, &o, &b, print_text, NULL, &r);
  if (st) fprintf(stderr, "llm: prefill returned %d (a prompt longer than the cache, or empty without BOS?)\n", st), exit(1);
  printf("\n");
  if (show_ids) {
    printf("tokens:");
    for (int i = 0; i < r.prompt_tokens + r.generated; i++) printf(" %d", (int)r.ids[i]);
    printf("\n");
  }
#ifdef KILN_LLM_PROFILE
  print_profile();   /* the generation's calls alone: before --speed's own */
#endif
  if (speed) {
    long calls = 0;
    uint64_t start = kiln_time_us(), now = start;
    int32_t chunk[M_(_PREFILL_TOKENS_NUMEL)] = {0}, pos = 0, last = m.chunk - 1;
    chunk[0] = t.bos >= 0 ? t.bos : 0;
    const void *ins[3] = {chunk, &pos, &last};   /* `last` is read only by a prefill_logits=last build */
    void *outs[1] = {b.logits};
    while (now - start < SPEED_TIME_US) {
      if (m.prefill_par(o.pfor, o.pool, w.payload, b.state, b.arena, ins, outs) != 0) fail("prefill failed", NULL);
      calls++;
      now = kiln_time_us();
    }
    printf("prefill: %.0f tokens/s (%d-token chunks)\n", (double)calls * m.chunk * 1e6 / (double)(now - start), m.chunk);
    if (r.decode_tok_s > 0) printf("decode: %.0f tokens/s (one token a call, %d calls)\n", r.decode_tok_s, r.generated - 1);
    long rss = peak_rss_kib();
    printf("memory: %.1f KiB of generation buffers (state, arena, logits, ids, text, scratch)", r.memory / 1024.0);
    if (rss >= 0) printf("; peak resident set %ld KiB (getrusage)", rss);
    printf("\n");
  }
  kiln_pool_free(pool);
  kiln_tok_free(&t);
  kiln_weights_free(&w);
  kiln_arena_free(b.state), kiln_arena_free(b.arena), free(b.logits), free(b.ids), free(b.text), free(b.scratch);
  if (chat) free((char *)prompt);
  return 0;
}
