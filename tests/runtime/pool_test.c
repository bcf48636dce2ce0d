/*
 * pool_test.c — runtime/kiln_pool.c: every task index of every job runs exactly once.
 *
 * For pools of 1 to 4 threads, jobs of 0 to 1000 tasks (fewer, as many and more tasks than
 * threads, and counts that do not divide evenly), many jobs in a row on one pool, with
 * tasks of uneven length so that threads help each other with their blocks. Prints one
 * line per pool size, "threads T: J jobs ok", or the first index run a wrong number of
 * times, and exits 1. tests/t_runtime.sh runs it under ThreadSanitizer and under ASan.
 */
#include "kiln_pool.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

enum { MAX_TASKS = 1000, ROUNDS = 40 };

typedef struct {
  atomic_int runs[MAX_TASKS];
  atomic_long spin;   /* busy work, so that task lengths differ */
} job;

static void task(void *arg, int64_t i) {
  job *j = (job *)arg;
  for (int64_t k = 0; k < (i % 7) * 200; k++) atomic_fetch_add_explicit(&j->spin, 1, memory_order_relaxed);
  atomic_fetch_add(&j->runs[i], 1);
}

int main(void) {
  static const int64_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 16, 17, 31, 64, 257, 1000};
  static job j;
  for (int threads = 1; threads <= 4; threads++) {
    kiln_pool *pool = kiln_pool_new(threads);
    if (!pool) {
      printf("threads %d: kiln_pool_new failed\n", threads);
      return 1;
    }
    int jobs = 0;
    for (int r = 0; r < ROUNDS; r++)
      for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++, jobs++) {
        const int64_t n = sizes[s];
        for (int64_t i = 0; i < MAX_TASKS; i++) atomic_store(&j.runs[i], 0);
        kiln_pool_for(pool, n, task, &j);
        for (int64_t i = 0; i < MAX_TASKS; i++) {
          const int want = i < n ? 1 : 0, got = atomic_load(&j.runs[i]);
          if (got != want) {
            printf("threads %d: job of %lld tasks ran task %lld %d times\n", threads, (long long)n, (long long)i, got);
            return 1;
          }
        }
      }
    kiln_pool_free(pool);
    printf("threads %d: %d jobs ok\n", threads, jobs);
  }
  kiln_pool_for(NULL, 3, task, &j);   /* no pool: in order on this thread */
  return 0;
}
