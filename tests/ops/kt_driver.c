/*
 * kt_driver.c — the test harness's driver: runs one Kiln-generated C model on raw
 * input files and writes its outputs as raw files, checking on the way that the
 * generated code keeps the contract of docs (caller-owned memory, no writes outside
 * the output buffers, inputs untouched, no state carried between calls).
 *
 * It deliberately does not use runtime/: the tests of the generated code must not
 * depend on the code that loads it. It reads the weights file itself (64-byte header,
 * then the payload) and checks only what the driver needs (magic, payload size).
 *
 * Build (tests/py/kt.py does this): cc -std=c11 -c kt_driver.c once per compiler and flags,
 * then per model cc -std=c11 -I CASEDIR CASEDIR/kt_cfg_<exe>.c CASEDIR/<m>.c kt_driver.o -lm,
 * where kt_cfg_<exe>.c defines kt_model_under_test (kt_model.h) through <m>.h's macros: the
 * run function (a plain model's <m>_run_v, or one entry's <m>_<e>_v), the sizes, whether it
 * has state and whether it returns a status (an entry of a model with state; a model
 * without state whose run returns a status because it has i64 inputs).
 *
 * Usage: kt_driver WEIGHTS IN_1 .. IN_n OUT_1 .. OUT_m
 *        kt_driver WEIGHTS STATE_IN STATE_OUT IN_1 .. IN_n OUT_1 .. OUT_m   (with state)
 * STATE_IN is the state block before the call (exactly STATE_SIZE bytes, or "-" for a
 * fresh, all-zero state); STATE_OUT gets it after the call.
 * The model runs twice (the arena refilled with NaN bytes in between, the state reset to
 * STATE_IN); both runs must produce the same bytes. An entry that returns nonzero (a
 * run-time offset out of range) must have touched nothing: state, arena and outputs.
 * Exit status: 0 ok, 2 usage or I/O, 3 a write outside an output buffer or the state
 * block, 4 an input modified, 5 the two runs differ, 6 the entry returned nonzero and
 * touched nothing (it prints the status), 7 it returned nonzero after touching something.
 */
#include "kt_model.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GUARD = 64, GUARD_BYTE = 0xA5, FRESH_BYTE = 0x7F, ARENA_BYTE = 0xFF };

#define M kt_model_under_test

/* Prints a message and exits with the given status. */
static _Noreturn void fail(int status, const char *what, const char *detail) {
  fprintf(stderr, "kt_driver: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(status);
}

/* Reads a whole file into a malloc'd buffer of exactly its size (at least 1 byte). */
static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) fail(2, "cannot open", path);
  if (fseek(f, 0, SEEK_END) != 0) fail(2, "cannot seek", path);
  long n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) fail(2, "cannot size", path);
  unsigned char *p = malloc(n ? (size_t)n : 1);
  if (!p) fail(2, "out of memory reading", path);
  if (n && fread(p, 1, (size_t)n, f) != (size_t)n) fail(2, "cannot read", path);
  fclose(f);
  *len = (size_t)n;
  return p;
}

/* A 64-byte-aligned buffer of at least n bytes (and at least 64). */
static unsigned char *aligned(size_t n) {
  size_t r = (n + 63) / 64 * 64;
  unsigned char *p = aligned_alloc(64, r ? r : 64);
  if (!p) fail(2, "out of memory", NULL);
  return p;
}

/* Loads the weights payload into an aligned buffer; checks the magic and the size. */
static unsigned char *load_weights(const char *path) {
  size_t len;
  unsigned char *file = read_file(path, &len);
  if (len < 64 || memcmp(file, "KILNWGT1", 8) != 0) fail(2, "not a Kiln weights file", path);
  uint64_t payload = 0;
  for (int i = 7; i >= 0; i--) payload = payload << 8 | file[16 + i];
  if (payload != (uint64_t)M.weights_size || len != 64 + (size_t)payload)
    fail(2, "weights payload size disagrees with the header's WEIGHTS_SIZE", path);
  unsigned char *w = aligned((size_t)payload);
  if (payload) memcpy(w, file + 64, (size_t)payload);
  free(file);
  return w;
}

static bool guards_intact(const unsigned char *base, size_t n) {
  for (size_t i = 0; i < GUARD; i++)
    if (base[i] != GUARD_BYTE || base[GUARD + n + i] != GUARD_BYTE) return false;
  return true;
}

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) fail(2, "cannot write", path);
}

/* Whether every byte of p[0 .. n) is b. */
static bool all_bytes(const unsigned char *p, size_t n, unsigned char b) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != b) return false;
  return true;
}

/* malloc that exits on failure (n of at least 1 byte). */
static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) fail(2, "out of memory", NULL);
  return p;
}

int main(int argc, char **argv) {
  const int NI = M.num_inputs, NO = M.num_outputs, NS = M.has_state ? 2 : 0;   /* NS: STATE_IN, STATE_OUT */
  const size_t state_size = M.state_size, *in_sizes = M.in_sizes, *out_sizes = M.out_sizes;
  if (argc != 2 + NS + NI + NO) {
    fprintf(stderr, "usage: %s WEIGHTS%s IN x%d OUT x%d\n", argv[0], NS ? " STATE_IN STATE_OUT" : "", NI, NO);
    return 2;
  }
  unsigned char *weights = load_weights(argv[1]);
  const char *state_in_path = NS ? argv[2] : NULL, *state_out_path = NS ? argv[3] : NULL;
  argv += NS;   /* the inputs and outputs follow the state files */
  unsigned char *state_in = NULL, *state_base = NULL, *state = NULL, *state_first = NULL;
  if (M.has_state) {
    state_in = calloc(state_size ? state_size : 1, 1);
    state_base = aligned(state_size + 2 * GUARD), state = state_base + GUARD, state_first = xmalloc(state_size);
    if (!state_in) fail(2, "out of memory", NULL);
    if (strcmp(state_in_path, "-") != 0) {
      size_t len;
      unsigned char *p = read_file(state_in_path, &len);
      if (len != state_size) fail(2, "state file size differs from the header's STATE_SIZE", state_in_path);
      memcpy(state_in, p, len);
      free(p);
    }
  }
  const size_t arena_size = M.arena_size;
  unsigned char *arena = aligned(arena_size);

  const void **ins = xmalloc(sizeof *ins * (size_t)(NI + 1));
  unsigned char **in_copy = xmalloc(sizeof *in_copy * (size_t)(NI + 1));
  for (int i = 0; i < NI; i++) {
    size_t len;
    unsigned char *p = read_file(argv[2 + i], &len);   /* exact size: ASan sees over-reads */
    if (len != in_sizes[i]) fail(2, "input file size differs from the header's _SIZE", argv[2 + i]);
    in_copy[i] = xmalloc(len);
    memcpy(in_copy[i], p, len);
    ins[i] = p;
  }
  ins[NI] = NULL;

  unsigned char **out_base = xmalloc(sizeof *out_base * (size_t)(NO + 1)), **first = xmalloc(sizeof *first * (size_t)(NO + 1));
  void **outs = xmalloc(sizeof *outs * (size_t)(NO + 1));
  for (int i = 0; i < NO; i++) {
    out_base[i] = aligned(out_sizes[i] + 2 * GUARD);
    memset(out_base[i], GUARD_BYTE, out_sizes[i] + 2 * GUARD);
    memset(out_base[i] + GUARD, FRESH_BYTE, out_sizes[i]);
    outs[i] = out_base[i] + GUARD;
    first[i] = xmalloc(out_sizes[i]);
  }
  outs[NO] = NULL;

  int result = 0;
  for (int run = 0; run < 2; run++) {
    memset(arena, ARENA_BYTE, arena_size);
    if (M.has_state) {
      memset(state_base, GUARD_BYTE, state_size + 2 * GUARD);
      memcpy(state, state_in, state_size);
    }
    int status = M.run(weights, state, arena, (const void *const *)ins, outs);
    if (M.has_state && !guards_intact(state_base, state_size)) fail(3, "wrote outside the state block", NULL);
    if (status != 0) {   /* only an entry with a status returns nonzero: <M>_E_RANGE */
      bool untouched = all_bytes(arena, arena_size, ARENA_BYTE) && (!M.has_state || memcmp(state, state_in, state_size) == 0);
      for (int i = 0; i < NO; i++) untouched &= all_bytes(outs[i], out_sizes[i], FRESH_BYTE) && guards_intact(out_base[i], out_sizes[i]);
      printf("entry returned %d, %s\n", status, untouched ? "nothing touched" : "after touching its buffers");
      result = untouched ? 6 : 7;
      break;
    }
    if (M.has_state) {
      if (run == 0) memcpy(state_first, state, state_size);
      else if (memcmp(state_first, state, state_size) != 0) fail(5, "second run's state differs from the first's", NULL);
    }
    for (int i = 0; i < NO; i++) {
      if (!guards_intact(out_base[i], out_sizes[i])) fail(3, "wrote outside output buffer", argv[2 + NI + i]);
      if (run == 0) memcpy(first[i], outs[i], out_sizes[i]);
      else if (memcmp(first[i], outs[i], out_sizes[i]) != 0) fail(5, "second run differs from the first", argv[2 + NI + i]);
    }
    for (int i = 0; i < NI; i++)
      if (memcmp(in_copy[i], ins[i], in_sizes[i]) != 0) fail(4, "the model modified input", argv[2 + i]);
  }
  for (int i = 0; i < NO && result == 0; i++) write_file(argv[2 + NI + i], outs[i], out_sizes[i]);
  if (M.has_state && result == 0) write_file(state_out_path, state, state_size);
  free(state_in);
  free(state_base);
  free(state_first);

  for (int i = 0; i < NI; i++) {
    free((void *)ins[i]);
    free(in_copy[i]);
  }
  for (int i = 0; i < NO; i++) {
    free(out_base[i]);
    free(first[i]);
  }
  free(ins);
  free(in_copy);
  free(out_base);
  free(first);
  free(outs);
  free(arena);
  free(weights);
  return result;
}
