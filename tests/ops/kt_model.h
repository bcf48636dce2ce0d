/*
 * kt_model.h — what tests/ops/kt_driver.c knows of the model it runs: one record, which
 * tests/py/kt.py writes per model (or entry) as kt_cfg_<exe>.c from <m>.json, through the
 * model's own header macros. The driver is then compiled once per compiler and flags and
 * linked with each model, instead of compiled again with every one (half of t_ops' time).
 */
#ifndef KT_MODEL_H
#define KT_MODEL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
  /* The model's run (or entry's) function, through a wrapper of one signature: state is
   * NULL for a model without state; returns the entry's status, 0 for a run that has none. */
  int (*run)(const void *weights, void *state, void *arena, const void *const *inputs, void *const *outputs);
  size_t weights_size, arena_size, state_size;
  int num_inputs, num_outputs;
  const size_t *in_sizes, *out_sizes;   /* the header's <M>_<IO>_SIZE, in order */
  bool has_state;                      /* an entry of a model with kiln.state */
  bool has_status;                     /* returns <M>_OK or <M>_E_RANGE (state, or i64 inputs) */
} kt_model;

extern const kt_model kt_model_under_test;

#endif
