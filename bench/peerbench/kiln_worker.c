/*
 * kiln_worker.c — Kiln's generated C as a peer-benchmark worker (protocol: worker.h).
 *
 * Compiled once per workload and per set of compiler flags, with the model named by two
 * macros; everything else comes from the generated header's sizes and names:
 *
 *   cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I KILN_OUT -I runtime \
 *      -DKILN_MODEL=mlp_b1 -DKILN_MODEL_UPPER=MLP_B1 \
 *      bench/peerbench/kiln_worker.c KILN_OUT/mlp_b1.c runtime/kiln_runtime.c -lm
 *
 *   kiln_worker CACHE_DIR WEIGHTS_FILE [THREADS]
 *
 * `load W` accepts only the compiled model's name; it loads WEIGHTS_FILE through the
 * runtime (which validates it against the model) and CACHE_DIR/data/W/input_<name>.bin
 * for each input in declaration order. With THREADS > 1 (compiled with runtime/kiln_pool.c
 * and -pthread) every call goes through <m>_run_par on a kiln_pool of that many threads.
 */
#include "kiln_pool.h"
#include "kiln_runtime.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#include STR(KILN_MODEL.h)

#define M_(suffix) CAT(KILN_MODEL_UPPER, suffix)
#define NUM_INPUTS M_(_NUM_INPUTS)
#define NUM_OUTPUTS M_(_NUM_OUTPUTS)

#include "worker.h"

static const size_t in_sizes[] = M_(_INPUT_SIZES), out_sizes[] = M_(_OUTPUT_SIZES);
static const char *const in_names[] = M_(_INPUT_NAMES);

static const char *weights_path;
static kiln_pool *pool;   /* THREADS > 1 */

/* What worker_load set up. */
static struct {
  kiln_weights weights;
  void *arena;
  void *inputs[NUM_INPUTS];
  void *outputs[NUM_OUTPUTS];
} S;

static void worker_unload(void) {
  for (int i = 0; i < NUM_INPUTS; i++) kiln_arena_free(S.inputs[i]);
  for (int i = 0; i < NUM_OUTPUTS; i++) kiln_arena_free(S.outputs[i]);
  kiln_arena_free(S.arena);
  if (S.weights.payload) kiln_weights_free(&S.weights);
  memset(&S, 0, sizeof S);
}

static int worker_load(const char *cache_dir, const char *workload) {
  if (strcmp(workload, STR(KILN_MODEL)) != 0) {
    reply_error("this worker runs %s, not %s", STR(KILN_MODEL), workload);
    return -1;
  }
  if (kiln_weights_load(&S.weights, weights_path, M_(_WEIGHTS_SIZE), M_(_WEIGHTS_CHECKSUM)) != KILN_OK) {
    reply_error("%s", S.weights.message);
    return -1;
  }
  int ok = (S.arena = kiln_arena_alloc(M_(_ARENA_SIZE))) != NULL;
  for (int i = 0; i < NUM_INPUTS; i++) ok = ok && (S.inputs[i] = kiln_arena_alloc(in_sizes[i])) != NULL;
  for (int i = 0; i < NUM_OUTPUTS; i++) ok = ok && (S.outputs[i] = kiln_arena_alloc(out_sizes[i])) != NULL;
  if (!ok) {
    reply_error("out of memory");
    worker_unload();
    return -1;
  }
  for (int i = 0; i < NUM_INPUTS; i++) {
    char file[WORKER_LINE_MAX], path[WORKER_LINE_MAX];
    snprintf(file, sizeof file, "input_%.255s.bin", in_names[i]);
    if (data_path(path, cache_dir, workload, file) != 0 || read_exact(path, S.inputs[i], in_sizes[i]) != 0) {
      worker_unload();
      return -1;
    }
  }
  return 0;
}

static void worker_call(void) {
  if (pool)
    CAT(KILN_MODEL, _run_par)(kiln_pool_for, pool, S.weights.payload, S.arena, (const void *const *)S.inputs, S.outputs);
  else
    CAT(KILN_MODEL, _run_v)(S.weights.payload, S.arena, (const void *const *)S.inputs, S.outputs);
}

static int worker_save(FILE *f) {
  for (int i = 0; i < NUM_OUTPUTS; i++)
    if (fwrite(S.outputs[i], 1, out_sizes[i], f) != out_sizes[i]) return -1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s CACHE_DIR WEIGHTS_FILE [THREADS]\n", argv[0]);
    return 2;
  }
  weights_path = argv[2];
  int threads = argc == 4 ? atoi(argv[3]) : 1;
  if (threads > 1 && !(pool = kiln_pool_new(threads))) {
    fprintf(stderr, "cannot start %d threads\n", threads);
    return 2;
  }
  char ready[160];
  snprintf(ready, sizeof ready, "{\"ready\": true, \"runtime\": \"kiln\", \"model\": \"%s\", \"threads\": %d}",
           STR(KILN_MODEL), threads > 1 ? threads : 1);
  int rc = worker_serve(argv[1], ready);
  kiln_pool_free(pool);
  return rc;
}
