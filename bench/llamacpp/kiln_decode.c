/*
 * kiln_decode.c — the benchmarks' driver of a Kiln-built LLM with a `decode` entry over a
 * key/value cache (models/stories.lua and its resized copies): token-by-token decode from
 * position 0 on 1 or more threads, the counterpart of llama.cpp's eval loop.
 *
 *   kiln_decode WEIGHTS THREADS N                    greedy: BOS (1) at position 0, then
 *                                                    each argmax, N decodes
 *   kiln_decode WEIGHTS THREADS N TOKENS OUT_LOGITS  teacher-forced: TOKENS (N int32) at
 *                                                    positions 0..N-1; writes the N rows
 *                                                    of logits (f32 [N, VOCAB]) to OUT_LOGITS
 *
 * Prints "ids: ..." (greedy: the N argmax ids, BOS not included) and "decode: T tokens/s
 * (S s)", T = N / the wall time of the N decode calls (monotonic clock; loading, the
 * greedy argmax and writing the logits are outside it). THREADS > 1 runs the entry's
 * _par function on runtime/kiln_pool.c's pool (compile with -DKILN_POOL -pthread and that
 * file); THREADS 1 the plain function. Compile with the generated model and -DKM=<model>
 * -DKMU=<MODEL> -DMODEL_HEADER='"<model>.h"'.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln_runtime.h"
#ifdef KILN_POOL
#include "kiln_pool.h"
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M_(s) CAT(KMU, s)
#define F_(s) CAT(KM, s)
#include MODEL_HEADER

enum { VOCAB = M_(_DECODE_LOGITS_NUMEL) };

static void die(const char *msg) {
  fprintf(stderr, "kiln_decode: %s\n", msg);
  exit(1);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 6) die("usage: kiln_decode WEIGHTS THREADS N [TOKENS OUT_LOGITS]");
  int threads = atoi(argv[2]), n = atoi(argv[3]);
  if (threads < 1 || n < 1) die("THREADS and N must be >= 1");
  kiln_weights w;
  if (kiln_weights_map(&w, argv[1], M_(_WEIGHTS_SIZE), M_(_WEIGHTS_CHECKSUM), 0) != KILN_OK) die(w.message);
  int32_t *tokens = calloc((size_t)n + 1, sizeof(int32_t));
  float *logits = malloc(sizeof(float) * (size_t)VOCAB * (size_t)n);
  if (!tokens || !logits) die("out of memory");
  bool forced = argc == 6;
  if (forced) {
    FILE *tf = fopen(argv[4], "rb");
    if (!tf || fread(tokens, sizeof(int32_t), (size_t)n, tf) != (size_t)n) die("short tokens file");
    fclose(tf);
  } else {
    tokens[0] = 1;   /* BOS */
  }
  void *state = kiln_arena_alloc(M_(_STATE_SIZE)), *arena = kiln_arena_alloc(M_(_ARENA_SIZE));
  if (!state || !arena) die("out of memory");
  memset(state, 0, M_(_STATE_SIZE));
#ifdef KILN_POOL
  kiln_pool *pool = threads > 1 ? kiln_pool_new(threads) : NULL;
#else
  if (threads > 1) die("built without -DKILN_POOL: 1 thread only");
#endif
  double busy = 0;
  for (int p = 0; p < n; p++) {
    float *row = logits + (size_t)p * VOCAB;
    double t0 = now_s();
    int st;
#ifdef KILN_POOL
    int32_t pos = p;
    const void *in[] = {tokens + p, &pos};   /* the entry's inputs in declaration order: token, pos */
    void *out[] = {row};
    if (pool) st = F_(_decode_par)(kiln_pool_for, pool, w.payload, state, arena, in, out);
    else
#endif
      st = F_(_decode)(w.payload, state, arena, tokens + p, p, row);
    busy += now_s() - t0;
    if (st != 0) die("decode failed");
    if (!forced) {
      int best = 0;
      for (int v = 1; v < VOCAB; v++)
        if (row[v] > row[best]) best = v;
      tokens[p + 1] = best;
    }
  }
  if (forced) {
    FILE *o = fopen(argv[5], "wb");
    if (!o || fwrite(logits, sizeof(float) * VOCAB, (size_t)n, o) != (size_t)n || fclose(o) != 0) die("cannot write logits");
  } else {
    printf("ids:");
    for (int p = 1; p <= n; p++) printf(" %d", tokens[p]);
    printf("\n");
  }
  printf("decode: %.1f tokens/s (%.4f s)\n", n / busy, busy);
#ifdef KILN_POOL
  if (pool) kiln_pool_free(pool);
#endif
  kiln_arena_free(state);
  kiln_arena_free(arena);
  free(tokens);
  free(logits);
  kiln_weights_free(&w);
  return 0;
}
