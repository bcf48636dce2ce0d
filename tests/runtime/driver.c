/*
 * driver.c — a generic command-line driver for any model Kiln compiled to C.
 *
 * Compiled once per model, naming the model with two macros (everything else comes
 * from the generated header's arrays of sizes and names):
 *
 *   cc -std=c11 -O2 -I OUT -I runtime -DKILN_MODEL=mlp -DKILN_MODEL_UPPER=MLP \
 *      tests/runtime/driver.c OUT/mlp.c runtime/kiln_runtime.c -lm -o mlp_driver
 *   (add -DKILN_EMBED and OUT/mlp_weights.c to use the embedded blob instead of a file)
 *
 *   mlp_driver [-w FILE.weights] [-o DIR] [-n N] [-c] INPUT...
 *     -w   the weights file (default: OUT's <m>.weights is not known here, so required
 *          unless built with -DKILN_EMBED)
 *     -c   only load and validate the weights; print "ok" or the runtime's one-line
 *          error and exit 0 / 1 (tests/t_runtime.sh)
 *     -o   write every output as DIR/<name>.bin (raw little-endian, C order; shapes
 *          and dtypes are in <m>.json)
 *     -n   run N times and print "us_per_run: <mean microseconds>"
 *     INPUT one file per model input, in declaration order: .npy (its data must be
 *          exactly the input's bytes; dtype is not checked) or raw bytes.
 *
 * A model with entry points (kiln.entry) or state (kiln.state): the driver runs one
 * entry, named at build time with -DKILN_ENTRY=decode (the function <m>_decode) and
 * -DKILN_ENTRY_UPPER=DECODE (its macro prefix; leave it out for a model without
 * kiln.entry, whose one entry is <m>_run with the model's plain macros), plus
 * -DKILN_STATE when the model has state. Then
 *     -s   the state block before the call: a file of exactly <M>_STATE_SIZE bytes
 *          (default: a fresh state, <m>_reset)
 *     -S   write the state block after the call to this file
 * and an entry that returns nonzero (<M>_E_RANGE) prints "status: N" and exits 3.
 *
 * Built with -DKILN_POOL, runtime/kiln_pool.c and -pthread, it takes -t N: the call goes
 * through the entry's _par function with a kiln_pool of N threads (tests/t_threads.sh).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_runtime.h"
#ifdef KILN_POOL
#include "kiln_pool.h"
#endif

#define STR_(x) #x
#define STR(x) STR_(x)
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#include STR(KILN_MODEL.h)

#define M_(suffix) CAT(KILN_MODEL_UPPER, suffix)
#ifdef KILN_ENTRY_UPPER   /* an entry's own macros: <M>_<ENTRY>_INPUT_SIZES ... */
#define IO_(suffix) CAT(M_(_), CAT(KILN_ENTRY_UPPER, suffix))
#else
#define IO_(suffix) M_(suffix)
#endif
#ifdef KILN_ENTRY
#define RUN_V_ CAT(KILN_MODEL, CAT(_, CAT(KILN_ENTRY, _v)))
#define RUN_PAR CAT(KILN_MODEL, CAT(_, CAT(KILN_ENTRY, _par)))
#else
#define RUN_V_ CAT(KILN_MODEL, _run_v)
#define RUN_PAR CAT(KILN_MODEL, _run_par)
#endif
#ifdef KILN_POOL
static kiln_pool *pool;   /* -t N */
#define RUN_V(...) (pool ? RUN_PAR(kiln_pool_for, pool, __VA_ARGS__) : RUN_V_(__VA_ARGS__))
#else
#define RUN_V RUN_V_
#endif

static const size_t in_sizes[] = IO_(_INPUT_SIZES), out_sizes[] = IO_(_OUTPUT_SIZES);
static const char *const out_names[] = IO_(_OUTPUT_NAMES);

static void *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)(n > 0 ? n : 1));
  if (p && n > 0 && fread(p, 1, (size_t)n, f) != (size_t)n) {
    free(p);
    p = NULL;
  }
  fclose(f);
  *len = (size_t)(n > 0 ? n : 0);
  return p;
}

/* Reads input i into a fresh 64-byte aligned buffer of exactly its size. */
static void *load_input(int i, const char *path) {
  size_t len;
  unsigned char *all = read_file(path, &len);
  if (!all) {
    fprintf(stderr, "driver: cannot read input %d from %s\n", i, path);
    exit(1);
  }
  size_t start = 0;
  if (len >= 10 && memcmp(all, "\x93NUMPY", 6) == 0)
    start = all[6] == 1 ? 10 + (size_t)(all[8] | all[9] << 8)
                        : 12 + (size_t)(all[8] | all[9] << 8 | all[10] << 16 | (size_t)all[11] << 24);
  if (start > len || len - start != in_sizes[i]) {
    fprintf(stderr, "driver: %s: input %d needs %zu bytes of data, the file has %zu\n", path, i, in_sizes[i],
            start > len ? 0 : len - start);
    exit(1);
  }
  void *buf = kiln_arena_alloc(in_sizes[i]);
  if (!buf) exit(1);
  memcpy(buf, all + start, in_sizes[i]);
  free(all);
  return buf;
}

int main(int argc, char **argv) {
  const char *wpath = NULL, *outdir = NULL, *state_in = NULL, *state_out = NULL;
  long repeat = 0;
  int check_only = 0, first_input = argc, map = 0;   /* map: 1 -m (mmap), 2 -M (mmap, verify) */
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) wpath = argv[++i];
    else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) outdir = argv[++i];
    else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) repeat = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "-c") == 0) check_only = 1;
#ifdef KILN_POOL
    else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
      pool = kiln_pool_new((int)strtol(argv[++i], NULL, 10));
      if (!pool) {
        fprintf(stderr, "cannot start the thread pool\n");
        return 1;
      }
    }
#endif
    else if (strcmp(argv[i], "-m") == 0) map = 1;
    else if (strcmp(argv[i], "-M") == 0) map = 2;
    else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) state_in = argv[++i];
    else if (strcmp(argv[i], "-S") == 0 && i + 1 < argc) state_out = argv[++i];
    else {
      first_input = i;
      break;
    }
  }
  kiln_weights w;
#ifdef KILN_EMBED
  (void)wpath;
  (void)map;
  kiln_weights_from_memory(&w, CAT(KILN_MODEL, _weights_blob), M_(_WEIGHTS_FILE_SIZE), M_(_WEIGHTS_SIZE),
                           M_(_WEIGHTS_CHECKSUM));
#else
  if (!wpath) {
    fprintf(stderr, "driver: -w FILE.weights is required\n");
    return 2;
  }
  if (map) kiln_weights_map(&w, wpath, M_(_WEIGHTS_SIZE), M_(_WEIGHTS_CHECKSUM), map == 2 ? KILN_MAP_VERIFY : 0);
  else kiln_weights_load(&w, wpath, M_(_WEIGHTS_SIZE), M_(_WEIGHTS_CHECKSUM));
#endif
  if (w.status != KILN_OK) {
    printf("error: %s\n", w.message);
    return 1;
  }
  if (check_only) {
    printf("ok: %llu payload bytes\n", (unsigned long long)w.size);
    kiln_weights_free(&w);
    return 0;
  }
  int nin = argc - first_input;
  if (nin != IO_(_NUM_INPUTS)) {
    fprintf(stderr, "driver: the model takes %d inputs, %d given\n", IO_(_NUM_INPUTS), nin);
    return 2;
  }
  void *ins[IO_(_NUM_INPUTS) + 1], *outs[IO_(_NUM_OUTPUTS) + 1];
  for (int i = 0; i < IO_(_NUM_INPUTS); i++) ins[i] = load_input(i, argv[first_input + i]);
  for (int i = 0; i < IO_(_NUM_OUTPUTS); i++) outs[i] = kiln_arena_alloc(out_sizes[i]);
  void *arena = kiln_arena_alloc(M_(_ARENA_SIZE));
#ifdef KILN_STATE
  void *state = kiln_arena_alloc(M_(_STATE_SIZE));
  CAT(KILN_MODEL, _reset)(state);
  if (state_in) {
    size_t len;
    void *p = read_file(state_in, &len);
    if (!p || len != M_(_STATE_SIZE)) {
      fprintf(stderr, "driver: %s: the state block is %u bytes\n", state_in, (unsigned)M_(_STATE_SIZE));
      return 1;
    }
    memcpy(state, p, len);
    free(p);
  }
  int status = RUN_V(w.payload, state, arena, (const void *const *)ins, outs);
  if (status != 0) {
    printf("status: %d\n", status);
    return 3;
  }
  if (state_out) {
    FILE *f = fopen(state_out, "wb");
    if (!f || fwrite(state, 1, M_(_STATE_SIZE), f) != M_(_STATE_SIZE) || fclose(f)) {
      fprintf(stderr, "driver: cannot write %s\n", state_out);
      return 1;
    }
  }
  (void)repeat;   /* every call would change the state: no timing loop */
  kiln_arena_free(state);
#else
  if (state_in || state_out) {
    fprintf(stderr, "driver: -s/-S: built without -DKILN_STATE\n");
    return 2;
  }
  RUN_V(w.payload, arena, (const void *const *)ins, outs);
  if (repeat > 0) {
    uint64_t t0 = kiln_time_us();
    for (long r = 0; r < repeat; r++) RUN_V(w.payload, arena, (const void *const *)ins, outs);
    printf("us_per_run: %.1f\n", (double)(kiln_time_us() - t0) / (double)repeat);
  }
#endif
  for (int i = 0; outdir && i < IO_(_NUM_OUTPUTS); i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", outdir, out_names[i]);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(outs[i], 1, out_sizes[i], f) != out_sizes[i]) {
      fprintf(stderr, "driver: cannot write %s\n", path);
      return 1;
    }
    fclose(f);
  }
  for (int i = 0; i < IO_(_NUM_INPUTS); i++) kiln_arena_free(ins[i]);
  for (int i = 0; i < IO_(_NUM_OUTPUTS); i++) kiln_arena_free(outs[i]);
  kiln_arena_free(arena);
  kiln_weights_free(&w);
  return 0;
}
