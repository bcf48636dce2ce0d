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
 * Build (tests/py/kt.py does this): cc -std=c11 -I CASEDIR kt_driver.c CASEDIR/<m>.c -lm
 * where CASEDIR/kt_cfg.h, written from <m>.json, includes <m>.h and defines
 *   KT_RUN_V            the model's <m>_run_v
 *   KT_ARENA_SIZE       <M>_ARENA_SIZE        KT_WEIGHTS_SIZE  <M>_WEIGHTS_SIZE
 *   KT_NUM_INPUTS       <M>_NUM_INPUTS        KT_NUM_OUTPUTS   <M>_NUM_OUTPUTS
 *   KT_IN_SIZES         0, <M>_<IN>_SIZE...   KT_OUT_SIZES     0, <M>_<OUT>_SIZE...
 * (the leading 0 keeps the arrays non-empty for a model without inputs).
 *
 * Usage: kt_driver WEIGHTS IN_1 .. IN_n OUT_1 .. OUT_m
 * The model runs twice (the arena refilled with NaN bytes in between); both runs must
 * produce the same bytes. Exit status: 0 ok, 2 usage or I/O, 3 a write outside an
 * output buffer, 4 an input modified, 5 the two runs differ.
 */
#include "kt_cfg.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GUARD = 64, GUARD_BYTE = 0xA5, FRESH_BYTE = 0x7F, ARENA_BYTE = 0xFF };

static const size_t in_sizes[] = {KT_IN_SIZES};
static const size_t out_sizes[] = {KT_OUT_SIZES};

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
  if (payload != (uint64_t)KT_WEIGHTS_SIZE || len != 64 + (size_t)payload)
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

int main(int argc, char **argv) {
  enum { NI = KT_NUM_INPUTS, NO = KT_NUM_OUTPUTS };
  if (argc != 2 + NI + NO) {
    fprintf(stderr, "usage: %s WEIGHTS IN x%d OUT x%d\n", argv[0], NI, NO);
    return 2;
  }
  unsigned char *weights = load_weights(argv[1]);
  const size_t arena_size = KT_ARENA_SIZE;   /* a variable: gcc warns on memset(p, c, 0u) */
  unsigned char *arena = aligned(arena_size);

  const void *ins[NI + 1];
  unsigned char *in_copy[NI + 1];
  for (int i = 0; i < NI; i++) {
    size_t len;
    unsigned char *p = read_file(argv[2 + i], &len);   /* exact size: ASan sees over-reads */
    if (len != in_sizes[1 + i]) fail(2, "input file size differs from the header's _SIZE", argv[2 + i]);
    in_copy[i] = malloc(len ? len : 1);
    if (!in_copy[i]) fail(2, "out of memory", NULL);
    memcpy(in_copy[i], p, len);
    ins[i] = p;
  }
  ins[NI] = NULL;

  unsigned char *out_base[NO + 1], *first[NO + 1];
  void *outs[NO + 1];
  for (int i = 0; i < NO; i++) {
    out_base[i] = aligned(out_sizes[1 + i] + 2 * GUARD);
    memset(out_base[i], GUARD_BYTE, out_sizes[1 + i] + 2 * GUARD);
    memset(out_base[i] + GUARD, FRESH_BYTE, out_sizes[1 + i]);
    outs[i] = out_base[i] + GUARD;
    first[i] = malloc(out_sizes[1 + i] ? out_sizes[1 + i] : 1);
    if (!first[i]) fail(2, "out of memory", NULL);
  }
  outs[NO] = NULL;

  for (int run = 0; run < 2; run++) {
    memset(arena, ARENA_BYTE, arena_size);
    KT_RUN_V(weights, arena, ins, outs);
    for (int i = 0; i < NO; i++) {
      if (!guards_intact(out_base[i], out_sizes[1 + i])) fail(3, "wrote outside output buffer", argv[2 + NI + i]);
      if (run == 0) memcpy(first[i], outs[i], out_sizes[1 + i]);
      else if (memcmp(first[i], outs[i], out_sizes[1 + i]) != 0) fail(5, "second run differs from the first", argv[2 + NI + i]);
    }
    for (int i = 0; i < NI; i++)
      if (memcmp(in_copy[i], ins[i], in_sizes[1 + i]) != 0) fail(4, "the model modified input", argv[2 + i]);
  }
  for (int i = 0; i < NO; i++) write_file(argv[2 + NI + i], outs[i], out_sizes[1 + i]);

  for (int i = 0; i < NI; i++) {
    free((void *)ins[i]);
    free(in_copy[i]);
  }
  for (int i = 0; i < NO; i++) {
    free(out_base[i]);
    free(first[i]);
  }
  free(arena);
  free(weights);
  return 0;
}
