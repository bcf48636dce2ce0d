/*
 * kiln_generate.h — text generation over any Kiln-built language model with `prefill` and
 * `decode` entries (models/stories.lua, models/llm.lua): encode the prompt, prefill it in
 * chunks, decode token by token with a sampler, stream the text to a callback that may
 * cancel, stop on EOS, a stop string, the token limit or the end of the cache; report
 * speeds and memory. Any vocabulary kiln_tok.h loads (byte-level BPE, SentencePiece BPE,
 * WordPiece; llama2.c's tok512.bin converted by `kiln tokenize --convert` or `kiln build
 * --tokenizer`). libc only; the caller owns every buffer (kiln_generate_size says how much).
 *
 *   kiln_llm_model model = KILN_LLM_MODEL(stories, STORIES);
 *   kiln_generate_opts o = kiln_generate_defaults();   o.max_tokens = 200;
 *   kiln_generate_sizes z = kiln_generate_size(&model, &tok, strlen(prompt), o.max_tokens);
 *   ... allocate kiln_generate_buffers b of those sizes ...
 *   kiln_generate_result r;
 *   kiln_generate(&model, weights.payload, &tok, prompt, &o, &b, on_text, NULL, &r);
 */
#ifndef KILN_GENERATE_H
#define KILN_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_sample.h"
#include "kiln_tok.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef KILN_PARALLEL_FOR_DEFINED   /* as the generated headers declare it */
#define KILN_PARALLEL_FOR_DEFINED
typedef void kiln_parallel_for(void *pool, int64_t n, void (*task)(void *arg, int64_t i), void *arg);
#endif

/* An entry's _par function: inputs and outputs as arrays of pointers in declaration order,
 * its products split into tasks run by pfor(pool, ...) (one thread when pfor is NULL). */
typedef int kiln_llm_par_fn(kiln_parallel_for *pfor, void *pool, const void *weights, void *state, void *arena,
                            const void *const *inputs, void *const *outputs);

/* The model as the generated header defines it; KILN_LLM_MODEL(stories, STORIES) fills it.
 * Its prefill returns the logits of every row of a chunk (prefill), or of one row, `last`
 * (prefill_last: models/llm.lua built with -D prefill_logits=last, whose classifier then
 * runs on that row alone; KILN_LLM_MODEL_LAST fills it). One of the two is NULL.
 * prefill_par and decode_par are the same entries' _par functions (kiln_generate_opts.pfor);
 * prefill_par takes `last` as a third input where prefill_last is set. */
typedef struct {
  int (*prefill)(const void *weights, void *state, void *arena, const int32_t *tokens, int32_t pos, float *logits);
  int (*decode)(const void *weights, void *state, void *arena, const int32_t *token, int32_t pos, float *logits);
  int chunk;            /* tokens of one prefill call */
  int vocab;
  size_t state_size, arena_size;
  int (*prefill_last)(const void *weights, void *state, void *arena, const int32_t *tokens, int32_t pos, int32_t last,
                      float *logits);
  kiln_llm_par_fn *prefill_par, *decode_par;
} kiln_llm_model;

#define KILN_LLM_MODEL(m, M) KILN_LLM_MODEL_(m, M)   /* one level more: m and M may be macros */
#define KILN_LLM_MODEL_(m, M)                                                                               \
  {m##_prefill, m##_decode, M##_PREFILL_TOKENS_NUMEL, M##_DECODE_LOGITS_NUMEL, M##_STATE_SIZE, M##_ARENA_SIZE, \
   NULL, m##_prefill_par, m##_decode_par}
#define KILN_LLM_MODEL_LAST(m, M) KILN_LLM_MODEL_LAST_(m, M)
#define KILN_LLM_MODEL_LAST_(m, M)                                                                       \
  {NULL, m##_decode, M##_PREFILL_TOKENS_NUMEL, M##_DECODE_LOGITS_NUMEL, M##_STATE_SIZE, M##_ARENA_SIZE, \
   m##_prefill, m##_prefill_par, m##_decode_par}

/* bos / eos: the tokenizer's own (its t->bos, t->eos; the default). */
#define KILN_GENERATE_TOKENIZER (-2)

typedef struct {
  int max_tokens;                 /* tokens to generate at most */
  int bos, eos;                   /* ids; KILN_GENERATE_TOKENIZER: the tokenizer's; -1: none (no BOS added, */
                                  /* never stop on an id). BOS is not added when the prompt's */
                                  /* encoding already starts with it (a chat template writes it). */
  kiln_sampler_params sampler;
  uint64_t seed;
  const char *const *stops;       /* stop strings (not passed to the callback) */
  int nstops;
  kiln_parallel_for *pfor;        /* NULL: every call on the calling thread; else the entries' */
  void *pool;                     /* _par functions over pfor(pool, ...) (kiln_pool_for and a */
                                  /* kiln_pool from runtime/kiln_pool.h): the same ids */
} kiln_generate_opts;

kiln_generate_opts kiln_generate_defaults(void);   /* 256 tokens, the tokenizer's BOS/EOS, greedy, no stops */

typedef struct {
  int prompt_tokens, generated;   /* BOS included in prompt_tokens */
  int stopped;                    /* 0 limit, 1 EOS, 2 stop string, 3 end of the cache, 4 cancelled */
  double prefill_tok_s, decode_tok_s;
  size_t memory;                  /* bytes of the buffers this call used: the sum of */
                                  /* kiln_generate_size's for its prompt and max_tokens (not the */
                                  /* weights, the tokenizer, or the process: see llm_main for RSS) */
  const int32_t *ids;             /* every id, BOS first if added (in the caller's ids buffer) */
} kiln_generate_result;

/* Bytes of the buffers kiln_generate needs for a prompt of prompt_len bytes. */
typedef struct {
  size_t state, arena, logits, ids, text, scratch;
} kiln_generate_sizes;
kiln_generate_sizes kiln_generate_size(const kiln_llm_model *m, const kiln_tok *t, size_t prompt_len, int max_tokens);
size_t kiln_generate_total(const kiln_generate_sizes *z);   /* the six sizes' sum */

/* The buffers, each at least the size above (state and arena 64-byte aligned). */
typedef struct {
  void *state, *arena;
  float *logits;
  int32_t *ids;
  char *text;
  void *scratch;
} kiln_generate_buffers;

/* Called with each new piece of text (never part of a stop string, never half a UTF-8
 * character); a nonzero return cancels. */
typedef int (*kiln_text_fn)(const char *text, size_t len, void *user);

/* Runs one generation from a fresh state; 0, or the first nonzero status an entry returned
 * on a prefill (a prompt longer than the cache), or -1 for a prefill chunk over 4096 tokens
 * or an empty prompt with no BOS (nothing to start from).
 * The prompt is encoded as the tokenizer does it (added tokens such as <|im_start|> are
 * single ids); an id the model samples past the tokenizer's vocabulary (padded rows of the
 * head) has no text. */
int kiln_generate(const kiln_llm_model *m, const void *weights, const kiln_tok *t, const char *prompt,
                  const kiln_generate_opts *o, const kiln_generate_buffers *b, kiln_text_fn on_text, void *user,
                  kiln_generate_result *r);

#ifdef __cplusplus
}
#endif

#endif /* KILN_GENERATE_H */
