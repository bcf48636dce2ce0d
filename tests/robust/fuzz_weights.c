/*
 * fuzz_weights.c — libFuzzer target for the runtime's weights validator
 * (runtime/kiln_runtime.c: kiln_weights_from_memory and kiln_weights_load).
 *
 * Each input is a candidate weights file. It is validated three ways: from memory
 * (64-byte aligned copy) against the size and checksum its own header declares (so
 * the accepting path is reachable), from memory against other expectations, and
 * from a file through kiln_weights_load. The validator must never read outside the
 * input, must accept exactly the files whose header, size and checksum agree, must
 * give a one-line message naming the problem on refusal, and must leave nothing
 * allocated (LeakSanitizer) after kiln_weights_free.
 *
 *   fuzz:   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iruntime \
 *             tests/robust/fuzz_weights.c runtime/kiln_runtime.c -o fuzz_wt
 *   replay: the same with -DKILN_FUZZ_MAIN and any compiler (tests/t_robust.sh).
 */
#define _POSIX_C_SOURCE 200809L
#include "kiln_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void finding(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_weights: %s: %s\n", what, detail ? detail : "");
  abort();
}

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Whether the validator should accept data as a weights file expecting (size, sum). */
static int valid(const uint8_t *d, size_t n, uint64_t size, uint64_t sum) {
  if (n < 64 || memcmp(d, "KILNWGT1", 8) || le(d + 8, 4) != 1 || le(d + 12, 4) != 64) return 0;
  for (int i = 32; i < 64; i++)
    if (d[i]) return 0;
  uint64_t ps = le(d + 16, 8);
  if (ps != n - 64 || ps != size) return 0;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 64; i < n; i++) h = (h ^ d[i]) * 0x100000001b3ULL;
  return h == le(d + 24, 8) && h == sum;
}

/* One validation's outcome against the model: status, message, payload all agree. */
static void check(const kiln_weights *w, kiln_status st, int should, const uint8_t *base, size_t n) {
  if ((st == KILN_OK) != should) finding(st == KILN_OK ? "accepted a bad file" : "refused a good file", w->message);
  if (st != w->status) finding("returned status differs from w->status", w->message);
  if (st == KILN_OK) {
    if (!w->payload || w->message[0]) finding("accepted without payload, or with a message", w->message);
    if (base && (const uint8_t *)w->payload != base + 64) finding("payload does not point past the header", NULL);
    if (w->size != n - 64) finding("wrong payload size", NULL);
  } else {
    if (w->payload) finding("refused but payload set", w->message);
    if (!w->message[0] || strchr(w->message, '\n')) finding("refusal message empty or multi-line", w->message);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = aligned_alloc(64, (size + 64) / 64 * 64);
  if (!copy) return 0;
  if (size) memcpy(copy, data, size);
  uint64_t hs = size >= 24 ? le(data + 16, 8) : 0, hc = size >= 32 ? le(data + 24, 8) : 0;
  const uint64_t expect[3][2] = {{hs, hc}, {hs, hc ^ 1}, {size >= 64 ? size - 64 : 0, hc}};
  for (int e = 0; e < 3; e++) {
    kiln_weights w;
    kiln_status st = kiln_weights_from_memory(&w, copy, size, expect[e][0], expect[e][1]);
    check(&w, st, valid(data, size, expect[e][0], expect[e][1]), copy, size);
    kiln_weights_free(&w);
  }
  if (size > 1) {   /* a misaligned blob is refused, whatever it holds */
    kiln_weights w;
    if (kiln_weights_from_memory(&w, copy + 1, size - 1, hs, hc) != KILN_ERR_ALIGN) finding("misaligned blob accepted", NULL);
  }
  char path[64];
  snprintf(path, sizeof path, "/tmp/fuzz_weights.%ld", (long)getpid());
  FILE *f = fopen(path, "wb");
  if (f) {
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    kiln_weights w;
    kiln_status st = kiln_weights_load(&w, path, hs, hc);
    check(&w, st, valid(data, size, hs, hc), NULL, size);
    if (st == KILN_OK && size > 64 && memcmp(w.payload, data + 64, size - 64)) finding("loaded payload differs", NULL);
    kiln_weights_free(&w);
    remove(path);
  }
  free(copy);
  return 0;
}

#define FUZZ_NAME "fuzz_weights"
#include "replay_main.h"
