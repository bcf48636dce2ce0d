/*
 * drive.c — drives runtime/coreml/kiln_coreml.{h,m} through the fake Core ML of
 * mock_coreml.m, as an app would (tests/t_coreml.sh, "mock"). The mock logs every
 * Core ML call; this program checks what comes back: each output against the mock's
 * rule (element i = 1000 * n + sum of the call's inputs + i % 7, n = the calls the
 * state saw before), the state's contents, and the wrapper's error messages.
 *
 *   drive PACKAGE CACHE_DIR MODE
 *   MODE  shared | per-entry   tinystate: prefill, decode, decode, reset, prefill, errors
 *         shared-strict        the same, but Core ML refuses a foreign state: the first
 *                              decode must fail with the entry named, without a crash
 *         plain                a one-function stateless package (tiny.lua)
 *         main-state           a one-function stateful package (onefn.lua): three calls
 *         i64                  tests/coreml/models/i64.lua: int64 ids narrowed to the
 *                              package's int32 (the int32 limits), and values outside
 *                              int32 refused with KILN_COREML_E_RANGE, nothing run
 * Prints "ok ..." or "FAIL ..." lines; exits 1 on any FAIL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_coreml.h"

static int failures;

static void check(int ok, const char *what, const char *detail) {
  printf("%s %s%s%s\n", ok ? "ok" : "FAIL", what, ok || !detail ? "" : ": ", ok || !detail ? "" : detail);
  if (!ok) failures++;
}

/* Calls entry `name` with inputs x (float, filled with (k + 1) / 4) and pos, and
 * checks every output against the mock's rule with n earlier calls on the state. */
static int call(KilnCoreML *m, KilnCoreMLState *s, const char *name, int32_t pos, int n, char *err, size_t errlen) {
  int e = kiln_coreml_entry_index(m, name);
  float x[64];
  double sum = pos;
  int64_t nx = kiln_coreml_entry_input_numel(m, e, 0);
  for (int64_t k = 0; k < nx; k++) sum += x[k] = (float)(k + 1) / 4;
  const void *in[] = {x, &pos};
  float out[4][64];
  void *outs[] = {out[0], out[1], out[2], out[3]};
  if (kiln_coreml_call(m, e, s, in, outs, err, errlen) != 0) return -1;
  char what[128], detail[128] = "";
  int ok = 1;
  for (int o = 0; o < kiln_coreml_entry_num_outputs(m, e); o++)
    for (int64_t i = 0; i < kiln_coreml_entry_output_numel(m, e, o); i++) {
      float want = (float)(1000.0 * n + sum + (double)(i % 7));
      if (ok && out[o][i] != want) {
        ok = 0;
        snprintf(detail, sizeof detail, "%s[%lld] = %g, want %g", kiln_coreml_entry_output_name(m, e, o), (long long)i,
                 out[o][i], want);
      }
    }
  snprintf(what, sizeof what, "%s at pos %d: every output as the state's %d earlier calls give", name, pos, n);
  check(ok, what, detail);
  return 0;
}

/* Every element of state 0 must equal want. */
static void check_state(KilnCoreMLState *s, int64_t numel, float want, const char *what) {
  float v[256];
  char err[256] = "", detail[300] = "";
  int ok = numel <= 256 && kiln_coreml_state_read(s, 0, v, err, sizeof err) == 0;
  if (!ok) snprintf(detail, sizeof detail, "read failed: %s", err);
  for (int64_t i = 0; ok && i < numel; i++)
    if (v[i] != want) ok = 0, snprintf(detail, sizeof detail, "element %lld is %g", (long long)i, v[i]);
  check(ok, what, detail);
}

static void expect_error(int rc, const char *err, const char *want, const char *what) {
  char detail[512];
  snprintf(detail, sizeof detail, "rc %d, message '%s'", rc, err);
  check(rc != 0 && strstr(err, want) != NULL, what, detail);
  printf("   message: %s\n", err);
}

static void describe(KilnCoreML *m) {
  for (int e = 0; e < kiln_coreml_num_entries(m); e++) {
    printf("entry %d %s:", e, kiln_coreml_entry_name(m, e));
    for (int i = 0; i < kiln_coreml_entry_num_inputs(m, e); i++)
      printf(" in %s[%lld]", kiln_coreml_entry_input_name(m, e, i), (long long)kiln_coreml_entry_input_numel(m, e, i));
    for (int i = 0; i < kiln_coreml_entry_num_outputs(m, e); i++)
      printf(" out %s[%lld]", kiln_coreml_entry_output_name(m, e, i), (long long)kiln_coreml_entry_output_numel(m, e, i));
    printf("\n");
  }
  for (int i = 0; i < kiln_coreml_num_states(m); i++)
    printf("state %s[%lld]\n", kiln_coreml_state_name(m, i), (long long)kiln_coreml_state_numel(m, i));
}

static void run_plain(KilnCoreML *m) {
  char err[512] = "";
  float x[64], y[64];
  double sum = 0;
  for (int64_t k = 0; k < kiln_coreml_input_numel(m, 0); k++) sum += x[k] = (float)k / 8;
  const void *in[] = {x};
  void *out[] = {y};
  int rc = kiln_coreml_run_v(m, in, out, err, sizeof err);
  int ok = rc == 0;
  for (int64_t i = 0; ok && i < kiln_coreml_output_numel(m, 0); i++) ok = y[i] == (float)(sum + (double)(i % 7));
  check(ok, "plain run_v: the output through its padded strides", err);
  expect_error(kiln_coreml_state_new(m, KILN_COREML_STATE_SHARED, err, sizeof err) ? 0 : -1, err, "no states",
               "a stateless model makes no state");
}

/* tests/coreml/models/i64.lua (inputs ids: i64 [2, 3], x: f32 [2, 3]; outputs same,
 * big, y): the int32 limits pass through narrowed (the mock logs each int32 value in
 * full, and its outputs are sum(inputs) + i % 7, which is exact here); a value just
 * outside int32 at either end is KILN_COREML_E_RANGE naming input, element and value,
 * before any prediction (the expected log has one predict) and with the outputs
 * untouched. */
static void run_i64(KilnCoreML *m) {
  char err[512] = "";
  int64_t ids[6] = {INT32_MAX, INT32_MIN, 5, -7, 0, 1};
  float x[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  int32_t same[6];
  uint8_t big[6];
  float y[6];
  const void *in[] = {ids, x};
  void *out[] = {same, big, y};
  check(kiln_coreml_entry_input_is_i64(m, 0, 0) == 1 && kiln_coreml_entry_input_is_i64(m, 0, 1) == 0 &&
            kiln_coreml_entry_input_is_i64(m, 0, 2) == -1,
        "ids is the i64 input, x is not, there is no third", NULL);
  int rc = kiln_coreml_run_v(m, in, out, err, sizeof err);
  int ok = rc == KILN_COREML_OK;
  double sum = (double)INT32_MAX + INT32_MIN + 5 - 7 + 0 + 1 + 6 * 0.5;   /* 1: the narrowed values */
  for (int i = 0; ok && i < 6; i++) ok = same[i] == (int32_t)(sum + i % 7) && big[i] == 1 && y[i] == (float)(sum + i % 7);
  check(ok, "i64 run_v: the int32 limits narrowed, the outputs those of the narrowed values", err);
  static const struct { int at; int64_t v; const char *want; } bad[] = {
      {4, (int64_t)INT32_MAX + 1, "kiln_coreml: entry main: i64 input ids[4] = 2147483648 is outside the int32 range; nothing was run"},
      {1, (int64_t)INT32_MIN - 1, "kiln_coreml: entry main: i64 input ids[1] = -2147483649 is outside the int32 range; nothing was run"},
  };
  for (int b = 0; b < 2; b++) {
    int64_t ids2[6] = {0, 1, 2, 3, 4, 5};
    ids2[bad[b].at] = bad[b].v;
    const void *in2[] = {ids2, x};
    for (int i = 0; i < 6; i++) same[i] = -99, big[i] = 7, y[i] = -99.0f;
    rc = kiln_coreml_run_v(m, in2, out, err, sizeof err);
    char detail[600];
    snprintf(detail, sizeof detail, "rc %d, message '%s'", rc, err);
    check(rc == KILN_COREML_E_RANGE && strcmp(err, bad[b].want) == 0, "an i64 value outside int32: E_RANGE, the message", detail);
    printf("   message: %s\n", err);
    ok = 1;
    for (int i = 0; i < 6; i++) ok = ok && same[i] == -99 && big[i] == 7 && y[i] == -99.0f;
    check(ok, "an i64 value outside int32: the outputs untouched", NULL);
  }
}

/* A one-function stateful package (onefn.lua): entry 0 is `main`, with its state. */
static void run_main_state(KilnCoreML *m) {
  char err[512] = "";
  KilnCoreMLState *s = kiln_coreml_state_new(m, KILN_COREML_STATE_SHARED, err, sizeof err);
  check(s != NULL && strcmp(kiln_coreml_entry_name(m, 0), "main") == 0, "state_new on the one function, main", err);
  if (!s) return;
  for (int n = 0; n < 3; n++)
    if (call(m, s, "main", n, n, err, sizeof err) != 0) check(0, "main", err);
  check_state(s, kiln_coreml_state_numel(m, 0), 3, "after 3 calls every state element was updated 3 times");
  kiln_coreml_state_free(s);
}

static void run_stateful(KilnCoreML *m, KilnCoreMLStateMode mode, int strict) {
  char err[512] = "";
  KilnCoreMLState *s = kiln_coreml_state_new(m, mode, err, sizeof err);
  check(s != NULL, "state_new", err);
  if (!s) return;
  int64_t numel = kiln_coreml_state_numel(m, 0);
  check_state(s, numel, 0, "a new state is zero");
  if (call(m, s, "prefill", 0, 0, err, sizeof err) != 0) check(0, "prefill", err);
  int rc = call(m, s, "decode", 2, 1, err, sizeof err);
  if (strict) {
    expect_error(rc, err, "entry decode: Core ML prediction failed: state made by function prefill, not decode",
                 "a state Core ML refuses: one message naming the entry");
    kiln_coreml_state_free(s);
    return;
  }
  if (rc != 0) check(0, "decode", err);
  if (call(m, s, "decode", 3, 2, err, sizeof err) != 0) check(0, "decode", err);
  check_state(s, numel, 3, "after 3 calls every state element was updated 3 times (fp16 read back)");
  check(kiln_coreml_state_reset(s, err, sizeof err) == 0, "reset", err);
  check_state(s, numel, 0, "after reset the state is zero");
  if (call(m, s, "prefill", 4, 0, err, sizeof err) != 0) check(0, "prefill after reset", err);
  if (call(m, s, "prefill", 0, 1, err, sizeof err) != 0) check(0, "prefill twice", err);
  if (call(m, s, "decode", 2, 2, err, sizeof err) != 0) check(0, "decode after prefill", err);
  float x[8] = {0};
  int32_t pos = 0;
  const void *in[] = {x, &pos};
  float o1[64], o2[64];
  void *outs[] = {o1, o2};
  expect_error(kiln_coreml_call(m, 0, NULL, in, outs, err, sizeof err), err, "entry prefill: the model has states",
               "a stateful call without a state");
  expect_error(kiln_coreml_call(m, 7, s, in, outs, err, sizeof err), err, "no entry 7", "an entry out of range");
  expect_error(kiln_coreml_state_new(m, (KilnCoreMLStateMode)9, err, sizeof err) ? 0 : -1, err, "unknown state mode",
               "an unknown state mode");
  kiln_coreml_state_free(s);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: drive PACKAGE CACHE_DIR shared|per-entry|shared-strict|plain|main-state|i64\n");
    return 2;
  }
  char err[512] = "";
  KilnCoreML *m = kiln_coreml_open(argv[1], KILN_COREML_CPU_AND_NE, argv[2], err, sizeof err);
  if (!m) {
    printf("FAIL open: %s\n", err);
    return 1;
  }
  describe(m);
  const char *mode = argv[3];
  if (strcmp(mode, "plain") == 0) run_plain(m);
  else if (strcmp(mode, "main-state") == 0) run_main_state(m);
  else if (strcmp(mode, "i64") == 0) run_i64(m);
  else run_stateful(m, strcmp(mode, "per-entry") == 0 ? KILN_COREML_STATE_PER_ENTRY : KILN_COREML_STATE_SHARED,
                    strcmp(mode, "shared-strict") == 0);
  kiln_coreml_close(m);
  return failures ? 1 : 0;
}
