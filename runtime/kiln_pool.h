/*
 * kiln_pool.h — a small thread pool for the _par functions of Kiln-generated C.
 *
 *   kiln_pool *pool = kiln_pool_new(4);            // 4 threads: 3 workers + the caller
 *   mlp_run_par(kiln_pool_for, pool, weights, arena, inputs, outputs);
 *   kiln_pool_free(pool);
 *
 * kiln_pool_for has the type kiln_parallel_for that the generated headers declare: it
 * runs task(arg, i) for every i in [0, n) on the pool's threads and the calling thread,
 * and returns when all are done. Each of the T threads first runs its own block of
 * consecutive indices (thread k the k-th of T blocks of n / T or n / T + 1), then helps
 * with the others' blocks.
 * One call at a time per pool (calls from several threads into one pool wait for each
 * other). Between calls a worker spins for up to 100 µs (KILN_POOL_SPIN_US when
 * kiln_pool.c is compiled; 0: never) for the next one, then sleeps on a condition
 * variable. pthreads and C11 atomics only; compile with -pthread.
 */
#ifndef KILN_POOL_H
#define KILN_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_pool kiln_pool;

/* A pool of threads - 1 workers (threads >= 1; 1: everything runs on the caller). NULL
 * when a thread cannot be started or memory runs out (nothing is left running). */
kiln_pool *kiln_pool_new(int threads);
/* Stops and joins the workers; NULL is ignored. */
void kiln_pool_free(kiln_pool *pool);
/* kiln_parallel_for over a kiln_pool (pool: a kiln_pool *; NULL runs the tasks in order). */
void kiln_pool_for(void *pool, int64_t n, void (*task)(void *arg, int64_t i), void *arg);

#ifdef __cplusplus
}
#endif

#endif /* KILN_POOL_H */
