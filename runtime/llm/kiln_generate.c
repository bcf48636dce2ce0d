/*
 * kiln_generate.c — see kiln_generate.h. BOS (unless the prompt's encoding starts with it)
 * and the prompt's ids are prefilled in chunks (a partial last chunk padded with 0, whose
 * cache rows the decodes overwrite before anything reads them), then: sample, append,
 * decode the id's text through kiln_tok's stream (whole UTF-8 characters only), hold back
 * what may still become a stop string, stream the rest, decode at the next position,
 * until a stop.
 */
#include "kiln_generate.h"

#include <string.h>

#include "kiln_chat.h"
#include "kiln_runtime.h"

enum { STOP_LIMIT, STOP_EOS, STOP_STRING, STOP_CACHE, STOP_CANCEL };

kiln_generate_opts kiln_generate_defaults(void) {
  kiln_generate_opts o = {0};
  o.max_tokens = 256;
  o.bos = KILN_GENERATE_TOKENIZER;
  o.eos = KILN_GENERATE_TOKENIZER;
  o.sampler = kiln_sampler_defaults();
  return o;
}

static size_t align8(size_t n) { return (n + 7) / 8 * 8; }

/* Ids a prompt of len bytes can encode to (kiln_tok.h: 3 * len + 8 always suffice). */
static size_t encode_cap(size_t prompt_len) { return prompt_len * 3 + 8; }

/* The text buffer holds every generated id's text (each at most kiln_tok_decode_max
 * bytes), the stream's flush (U+FFFD for up to 3 held bytes) and a NUL. */
kiln_generate_sizes kiln_generate_size(const kiln_llm_model *m, const kiln_tok *t, size_t prompt_len, int max_tokens) {
  kiln_generate_sizes s;
  s.state = m->state_size;
  s.arena = m->arena_size;
  s.logits = sizeof(float) * (size_t)(m->prefill_last ? 1 : m->chunk) * (size_t)m->vocab;
  s.ids = sizeof(int32_t) * (1 + encode_cap(prompt_len) + (size_t)max_tokens);
  s.text = (size_t)max_tokens * kiln_tok_decode_max(t) + 3 * 3 + 1;
  s.scratch = align8(kiln_sampler_scratch_size(m->vocab)) + align8(kiln_tok_work_size(t, prompt_len)) +
              sizeof(int) * encode_cap(prompt_len);
  return s;
}

size_t kiln_generate_total(const kiln_generate_sizes *z) { return z->state + z->arena + z->logits + z->ids + z->text + z->scratch; }

/* The end of the longest prefix of text[from..to) that holds only whole UTF-8 characters
 * (the stream emits whole characters; this keeps a stop-string cut from splitting one). */
static size_t whole_utf8(const char *text, size_t from, size_t to) {
  size_t end = to;
  for (size_t back = 1; back <= 3 && back <= to - from; back++) {
    unsigned char c = (unsigned char)text[to - back];
    if ((c & 0xc0) == 0x80) continue;               /* a continuation byte: look further back */
    size_t need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
    if (need > back) end = to - back;               /* the last character is not complete yet */
    break;
  }
  return end;
}

/* BOS (per o->bos) and the prompt's ids into ids; returns how many, or -1 if the
 * encoding does not fit (it always does in kiln_generate_size's buffers). */
static int prompt_ids(const kiln_tok *t, const kiln_generate_opts *o, const char *prompt, size_t plen, int32_t *ids,
                      int *enc, void *work) {
  int bos = o->bos == KILN_GENERATE_TOKENIZER ? t->bos : o->bos;
  int k = plen ? kiln_tok_encode(t, prompt, plen, enc, (int)encode_cap(plen), work) : 0;
  if (k < 0) return -1;
  int n = 0;
  if (bos >= 0 && !(k > 0 && enc[0] == bos)) ids[n++] = bos;
  for (int i = 0; i < k; i++) ids[n++] = enc[i];
  return n;
}

/* One prefill call of chunk `in` at pos (last: the row whose logits a prefill_last model
 * returns), on o's parallel-for when there is one. */
static int prefill_call(const kiln_llm_model *m, const kiln_generate_opts *o, const void *w,
                        const kiln_generate_buffers *b, const int32_t *in, int32_t pos, int32_t last) {
  if (o->pfor) {
    const void *ins[3] = {in, &pos, &last};
    void *outs[1] = {b->logits};
    return m->prefill_par(o->pfor, o->pool, w, b->state, b->arena, ins, outs);
  }
  return m->prefill_last ? m->prefill_last(w, b->state, b->arena, in, pos, last, b->logits)
                         : m->prefill(w, b->state, b->arena, in, pos, b->logits);
}

/* One decode call of token at pos, on o's parallel-for when there is one. */
static int decode_call(const kiln_llm_model *m, const kiln_generate_opts *o, const void *w,
                       const kiln_generate_buffers *b, const int32_t *token, int32_t pos) {
  if (o->pfor) {
    const void *ins[2] = {token, &pos};
    void *outs[1] = {b->logits};
    return m->decode_par(o->pfor, o->pool, w, b->state, b->arena, ins, outs);
  }
  return m->decode(w, b->state, b->arena, token, pos, b->logits);
}

/* Prefills ids[0..n) chunk by chunk; the last real row's logits go first in b->logits.
 * 0, or the entry's nonzero status. */
static int prefill(const kiln_llm_model *m, const kiln_generate_opts *o, const void *w, const kiln_generate_buffers *b,
                   const int32_t *ids, int n) {
  for (int p = 0; p < n; p += m->chunk) {
    int rows = n - p < m->chunk ? n - p : m->chunk;
    int32_t padded[4096];                           /* entries' chunks are small (32 or so) */
    const int32_t *in = ids + p;
    if (rows < m->chunk) {                          /* pad a partial chunk with id 0 */
      if (m->chunk > 4096) return -1;
      memset(padded, 0, sizeof(int32_t) * (size_t)m->chunk);
      memcpy(padded, ids + p, sizeof(int32_t) * (size_t)rows);
      in = padded;
    }
    int st = prefill_call(m, o, w, b, in, p, rows - 1);   /* prefill_last: only that row's logits */
    if (st) return st;
    if (!m->prefill_last && p + rows == n)   /* every row's logits: the last real row's first */
      memmove(b->logits, b->logits + (size_t)(rows - 1) * m->vocab, sizeof(float) * (size_t)m->vocab);
  }
  return 0;
}

int kiln_generate(const kiln_llm_model *m, const void *w, const kiln_tok *t, const char *prompt,
                  const kiln_generate_opts *o, const kiln_generate_buffers *b, kiln_text_fn on_text, void *user,
                  kiln_generate_result *r) {
  memset(r, 0, sizeof *r);
  memset(b->state, 0, m->state_size);             /* a fresh conversation */
  size_t plen = strlen(prompt);
  kiln_generate_sizes z = kiln_generate_size(m, t, plen, o->max_tokens);
  r->memory = kiln_generate_total(&z);
  char *scratch = b->scratch;
  kiln_sampler s;
  kiln_sampler_init(&s, m->vocab, scratch, &o->sampler, o->seed);
  void *work = scratch + align8(kiln_sampler_scratch_size(m->vocab));
  int *enc = (int *)((char *)work + align8(kiln_tok_work_size(t, plen)));
  int32_t *ids = b->ids;
  int n = prompt_ids(t, o, prompt, plen, ids, enc, work);
  if (n < 0) return -1;
  r->prompt_tokens = n;
  r->ids = ids;
  int eos = o->eos == KILN_GENERATE_TOKENIZER ? t->eos : o->eos;

  uint64_t t0 = kiln_time_us();
  int st = n ? prefill(m, o, w, b, ids, n) : -1;      /* nothing to condition on: an empty prompt without BOS */
  if (st) return st;
  uint64_t t1 = kiln_time_us();
  r->prefill_tok_s = t1 > t0 ? n * 1e6 / (double)(t1 - t0) : 0;

  kiln_tok_stream ts;
  kiln_tok_stream_init(&ts);
  ts.emitted = plen > 0;                           /* the prompt's text came first: keep a leading space */
  size_t tlen = 0, shown = 0;
  uint64_t decode_us = 0;
  int decodes = 0, hit = 0;
  r->stopped = STOP_LIMIT;
  while (r->generated < o->max_tokens) {
    int next = kiln_sample(&s, b->logits, ids, n);
    if (next == eos) {
      r->stopped = STOP_EOS;
      break;
    }
    ids[n++] = next;
    r->generated++;
    int k = kiln_tok_decode(t, &ts, next, b->text + tlen);
    if (k > 0) tlen += (size_t)k;                  /* -1: an id past the vocabulary, no text */
    b->text[tlen] = 0;
    size_t safe = whole_utf8(b->text, shown, kiln_stop_scan(b->text, tlen, o->stops, o->nstops, &hit));
    if (safe > shown && on_text && on_text(b->text + shown, safe - shown, user)) {
      r->stopped = STOP_CANCEL;
      break;
    }
    if (safe > shown) shown = safe;
    if (hit) {
      r->stopped = STOP_STRING;
      break;
    }
    if (r->generated == o->max_tokens) break;
    uint64_t d0 = kiln_time_us();
    st = decode_call(m, o, w, b, &ids[n - 1], n - 1);
    decode_us += kiln_time_us() - d0;
    if (st) {
      r->stopped = STOP_CACHE;
      break;
    }
    decodes++;
  }
  if (r->stopped != STOP_STRING && r->stopped != STOP_CANCEL) {
    tlen += (size_t)kiln_tok_decode_flush(&ts, b->text + tlen);   /* bytes of a character never completed */
    if (tlen > shown && on_text) on_text(b->text + shown, tlen - shown, user);   /* a held-back tail */
  }
  r->decode_tok_s = decode_us ? decodes * 1e6 / (double)decode_us : 0;
  return 0;
}
