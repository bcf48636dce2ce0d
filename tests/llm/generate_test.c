/*
 * generate_test.c — runtime/llm/kiln_generate.c with the generated stories260K (t_llm,
 * ASan+UBSan): greedy from BOS gives the reference's first 20 ids (Kiln's C, PyTorch's
 * KV-cache decode and llama.cpp all agree on them: t_state, bench/llamacpp); a callback
 * that returns nonzero cancels at once; a stop string ends generation and is never
 * streamed; max_tokens 0 generates nothing; the streamed text equals the ids decoded
 * through a fresh kiln_tok stream; the prompt is BOS and its encoding (no BOS with bos
 * -1); an eos id stops before it is appended; the memory reported is kiln_generate_size's;
 * through a parallel-for that runs every job's tasks in reverse order, the same ids.
 *
 *   generate_test WEIGHTS STORIES.TOK      (tok512.bin converted: kiln build --tokenizer;
 *                                           built with -DKM=stories -DKMU=STORIES)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_generate.h"
#include "kiln_runtime.h"
#include "stories.h"

static int failures;
static void check(int ok, const char *name, const char *why) {
  if (ok) printf("PASS generate/%s\n", name);
  else printf("FAIL generate/%s: %s\n", name, why), failures++;
}

typedef struct {
  char text[8192];
  size_t len;
  int calls, cancel_after;
} Sink;

static int sink(const char *text, size_t len, void *user) {
  Sink *s = user;
  if (s->len + len < sizeof s->text) memcpy(s->text + s->len, text, len), s->len += len, s->text[s->len] = 0;
  return ++s->calls == s->cancel_after;
}

/* A parallel-for that runs a job's tasks one after another in reverse order, counting the
 * jobs and tasks: kiln_generate's _par path is taken (jobs), the generated code really
 * splits them (tasks > jobs: t_llm compiles with tiny KILN_TASK_FMAS), and the results do
 * not depend on which task runs first. */
typedef struct {
  long jobs, tasks;
} Counts;

static void reverse_for(void *pool, int64_t n, void (*task)(void *, int64_t), void *arg) {
  Counts *c = pool;
  c->jobs++, c->tasks += n;
  for (int64_t i = n - 1; i >= 0; i--) task(arg, i);
}

int main(int argc, char **argv) {
  if (argc != 3) return fprintf(stderr, "usage: generate_test WEIGHTS TOK\n"), 2;
  kiln_weights w;
  if (kiln_weights_load(&w, argv[1], STORIES_WEIGHTS_SIZE, STORIES_WEIGHTS_CHECKSUM) != KILN_OK) return puts(w.message), 2;
  FILE *f = fopen(argv[2], "rb");
  static char tokbuf[1 << 16];
  size_t tn = f ? fread(tokbuf, 1, sizeof tokbuf, f) : 0;
  if (f) fclose(f);
  kiln_tok t;
  char err[256];
  if (kiln_tok_load(&t, tokbuf, tn, err, sizeof err) != 0) return puts(err), 2;
  kiln_llm_model m = KILN_LLM_MODEL(stories, STORIES);
  kiln_generate_sizes z = kiln_generate_size(&m, &t, 64, 40);
  kiln_generate_buffers b = {kiln_arena_alloc(z.state), kiln_arena_alloc(z.arena), malloc(z.logits), malloc(z.ids),
                             malloc(z.text), malloc(z.scratch)};
  static const int32_t want[20] = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298,
                                   315, 421, 395, 317, 426, 338, 401, 396, 267, 337};
  kiln_generate_opts o = kiln_generate_defaults();
  o.max_tokens = 20;
  kiln_generate_result r;
  Sink s = {{0}, 0, 0, 0};
  int st = kiln_generate(&m, w.payload, &t, "", &o, &b, sink, &s, &r);
  check(st == 0 && r.prompt_tokens == 1 && r.generated == 20 && r.stopped == 0 && !memcmp(r.ids + 1, want, sizeof want),
        "greedy-ids", "the first 20 greedy ids differ from the reference's");
  {
    Counts c = {0, 0};
    kiln_generate_opts op = o;
    op.pfor = reverse_for, op.pool = &c;
    Sink sp = {{0}, 0, 0, 0};
    kiln_generate_result rp;
    st = kiln_generate(&m, w.payload, &t, "", &op, &b, sink, &sp, &rp);
    check(st == 0 && rp.generated == 20 && !memcmp(rp.ids + 1, want, sizeof want) && c.jobs > 0 && c.tasks > c.jobs,
          "par-reverse", "through the _par functions, tasks in reverse: other ids, or no job was split");
  }
  char pieces[8192];
  size_t pl = 0;
  kiln_tok_stream ts;
  kiln_tok_stream_init(&ts);
  for (int i = 1; i <= 20; i++) pl += (size_t)kiln_tok_decode(&t, &ts, r.ids[i], pieces + pl);
  pieces[pl] = 0;
  check(!strcmp(pieces, s.text) && !strncmp(s.text, "Once upon a time, there was", 27), "streamed-text", s.text);
  kiln_generate_sizes z20 = kiln_generate_size(&m, &t, 0, 20);
  check(r.prefill_tok_s > 0 && r.decode_tok_s > 0 && r.memory == kiln_generate_total(&z20) && r.memory > z20.state,
        "metrics", "no speeds, or memory is not the buffers' sizes");

  Sink c = {{0}, 0, 0, 3};
  kiln_generate(&m, w.payload, &t, "", &o, &b, sink, &c, &r);
  check(r.stopped == 4 && c.calls == 3 && r.generated == 3, "cancel", "the callback's nonzero return did not stop it");

  const char *stops[] = {" girl"};
  o.stops = stops, o.nstops = 1;
  Sink p = {{0}, 0, 0, 0};
  kiln_generate(&m, w.payload, &t, "", &o, &b, sink, &p, &r);
  check(r.stopped == 2 && !strstr(p.text, "girl") && !strcmp(p.text, "Once upon a time, there was a little"), "stop-string",
        p.text);
  o.nstops = 0;

  o.max_tokens = 0;
  Sink q = {{0}, 0, 0, 0};
  kiln_generate(&m, w.payload, &t, "Once upon", &o, &b, sink, &q, &r);
  check(r.generated == 0 && q.calls == 0 && r.prompt_tokens > 1, "max-tokens-0", "generated something");

  o.max_tokens = 10;
  kiln_generate(&m, w.payload, &t, "Once upon a time", &o, &b, NULL, NULL, &r);
  check(r.prompt_tokens == 5 && r.ids[0] == 1 && r.ids[1] == 403 && r.ids[4] == 378 && r.ids[5] == 432, "prompt",
        "the prompt's ids are not BOS + its encoding");
  o.bos = -1;
  kiln_generate(&m, w.payload, &t, "Once upon a time", &o, &b, NULL, NULL, &r);
  check(r.prompt_tokens == 4 && r.ids[0] == 403 && r.ids[3] == 378, "no-bos", "bos -1 still added one");
  o.bos = KILN_GENERATE_TOKENIZER;

  o.eos = 286;                                     /* the 7th greedy id from BOS */
  Sink e = {{0}, 0, 0, 0};
  kiln_generate(&m, w.payload, &t, "", &o, &b, sink, &e, &r);
  check(r.stopped == 1 && r.generated == 6 && r.ids[6] == 383 && !strcmp(e.text, "Once upon a time, there"), "eos",
        e.text);
  kiln_tok_free(&t);
  kiln_weights_free(&w);
  kiln_arena_free(b.state), kiln_arena_free(b.arena), free(b.logits), free(b.ids), free(b.text), free(b.scratch);
  return failures != 0;
}
