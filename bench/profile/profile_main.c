/*
 * profile_main.c — runs a model built with `kiln build --profile` and prints its profile
 * (bench/profile/profile.py compiles and runs it; docs/output.md, "Profiling").
 *
 *   cc -I BUILD -Iruntime -DKILN_MODEL=m -DKILN_MODEL_UPPER=M bench/profile/profile_main.c \
 *      BUILD/m.c runtime/kiln_runtime.c runtime/kiln_pool.c -pthread -lm
 *   prof WEIGHTS CALLS THREADS IN_1 ... IN_n
 *
 * One warm-up call, the profile zeroed, then CALLS calls (THREADS > 1: through <m>_run_par
 * on a kiln_pool of that many threads; else <m>_run_v). Prints the wall time of the calls
 * as the driver saw it ("total NS CALLS"), then one line a kernel, tab-separated: name,
 * calls, nanoseconds, FLOPs a call, op, Lua lines. Nothing here judges the numbers.
 *
 * A model with entry points: compiled with -DKILN_PROF_ENTRIES and the prof_entries.h that
 * profile.py writes from <m>.json (its entries in declaration order: names, input and
 * output sizes, prof_call). A call is then a round, every entry once in that order, on one
 * state block that starts zeroed and carries over from entry to entry and round to round
 * (the same inputs every round: an entry that writes the state at a position from its
 * inputs writes the same rows each time); IN_1 ... IN_n are the entries' inputs in turn.
 */
#include "kiln_pool.h"
#include "kiln_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#include STR(KILN_MODEL.h)
#define M_(suffix) CAT(KILN_MODEL_UPPER, suffix)
#define F_(suffix) CAT(KILN_MODEL, suffix)

#ifdef KILN_PROF_ENTRIES
#include "prof_entries.h"
#else
/* A plain model: one "entry", the run function. */
enum { PROF_ENTRIES = 1, PROF_INPUTS = M_(_NUM_INPUTS), PROF_OUTPUTS = M_(_NUM_OUTPUTS), PROF_STATE_SIZE = 0 };
static const char *const prof_names[PROF_ENTRIES] = {"run"};
static const int prof_nin[PROF_ENTRIES] = {PROF_INPUTS}, prof_nout[PROF_ENTRIES] = {PROF_OUTPUTS};
static const size_t prof_in_size[] = M_(_INPUT_SIZES), prof_out_size[] = M_(_OUTPUT_SIZES);
static int prof_call(int e, kiln_pool *pool, const void *w, void *state, void *arena, const void *const *in,
                     void *const *out) {
  (void)e, (void)state;
  if (pool)
    F_(_run_par)(kiln_pool_for, pool, w, arena, in, out);
  else
    F_(_run_v)(w, arena, in, out);
  return 0;
}
#endif

/* Prints a one-line error and exits with status 1. */
static void prof_fail(const char *what, const char *arg) {
  fprintf(stderr, "profile: %s: %s\n", arg, what);
  exit(1);
}

/* Reads file path, which must hold exactly n bytes, into a fresh 64-byte aligned buffer. */
static void *prof_read(const char *path, size_t n) {
  void *p = kiln_arena_alloc(n ? n : 1);
  FILE *f = fopen(path, "rb");
  if (!p || !f) prof_fail("cannot read", path);
  if (fread(p, 1, n, f) != n || fgetc(f) != EOF) prof_fail("not the input's size", path);
  fclose(f);
  return p;
}

/* A fresh 64-byte aligned buffer of n bytes (at least 1), zeroed. */
static void *prof_alloc(size_t n, const char *what) {
  void *p = kiln_arena_alloc(n ? n : 1);
  if (!p) prof_fail("out of memory", what);
  memset(p, 0, n ? n : 1);
  return p;
}

int main(int argc, char **argv) {
  if (argc != 4 + PROF_INPUTS) {
    fprintf(stderr, "usage: %s WEIGHTS CALLS THREADS IN_1 ... IN_%d\n", argv[0], PROF_INPUTS);
    return 2;
  }
  const long calls = strtol(argv[2], NULL, 10), threads = strtol(argv[3], NULL, 10);
  if (calls < 1 || threads < 1) prof_fail("CALLS and THREADS must be 1 or more", argv[2]);
  kiln_weights w;
  if (kiln_weights_load(&w, argv[1], M_(_WEIGHTS_SIZE), M_(_WEIGHTS_CHECKSUM)) != KILN_OK) prof_fail(w.message, argv[1]);
  const void *inputs[PROF_INPUTS + 1];
  void *outputs[PROF_OUTPUTS + 1];
  for (int i = 0; i < PROF_INPUTS; i++) inputs[i] = prof_read(argv[4 + i], prof_in_size[i]);
  for (int i = 0; i < PROF_OUTPUTS; i++) outputs[i] = prof_alloc(prof_out_size[i], "outputs");
  void *arena = prof_alloc(M_(_ARENA_SIZE), "arena");
  void *state = prof_alloc(PROF_STATE_SIZE, "state");
  kiln_pool *pool = threads > 1 ? kiln_pool_new((int)threads) : NULL;
  if (threads > 1 && !pool) prof_fail("cannot start the threads", argv[3]);
  uint64_t t0 = 0;
  for (long c = -1; c < calls; c++) {
    if (c == 0) {   /* after the warm-up call */
      for (int k = 0; k < M_(_PROFILE_LEN); k++) M_(_PROFILE_TABLE)[k].calls = M_(_PROFILE_TABLE)[k].ns = 0;
      t0 = kiln_time_us();
    }
    for (int e = 0, in = 0, out = 0; e < PROF_ENTRIES; in += prof_nin[e], out += prof_nout[e], e++)
      if (prof_call(e, pool, w.payload, state, arena, inputs + in, outputs + out) != 0)
        prof_fail("returned an error (a run-time offset out of range?)", prof_names[e]);
  }
  printf("total\t%llu\t%ld\n", (unsigned long long)(kiln_time_us() - t0) * 1000u, calls);
  for (int k = 0; k < M_(_PROFILE_KERNELS); k++) {
    const M_(_PROFILE_ROW) *r = &M_(_PROFILE_TABLE)[k];
    printf("%s\t%llu\t%llu\t%.0f\t%s\t%s\n", r->name, (unsigned long long)r->calls, (unsigned long long)r->ns, r->flops,
           r->op, r->loc);
  }
  kiln_pool_free(pool);
  for (int i = 0; i < PROF_INPUTS; i++) kiln_arena_free((void *)inputs[i]);
  for (int i = 0; i < PROF_OUTPUTS; i++) kiln_arena_free(outputs[i]);
  kiln_arena_free(arena);
  kiln_arena_free(state);
  kiln_weights_free(&w);
  return 0;
}
