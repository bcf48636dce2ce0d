/*
 * kiln_pool.c — the pool of kiln_pool.h. One job at a time: kiln_pool_for publishes it
 * under the mutex (a new generation number wakes the workers) and opens it; a worker that
 * wakes while the job is open joins it. Once the caller has run out of tasks it closes the
 * job and waits only for the workers that joined: a worker that the OS has not scheduled yet
 * (a busy machine) finds the job closed when it wakes and skips it, instead of the caller
 * sleeping until it runs. So the job's memory (on the caller's stack) is never touched
 * after kiln_pool_for returns.
 *
 * Which thread runs which task: the n tasks are cut into T blocks of consecutive indices
 * (n / T each, the first n % T blocks one more); thread k of T (the caller is 0) first takes
 * the tasks of block k in order, then helps the others with theirs.
 * Kiln numbers a kernel's tasks so that neighbouring indices work on neighbouring parts of
 * the image (pixel-major), so with blocks a thread keeps working on the same part from
 * one kernel to the next, and reads what it wrote itself from its own L2 cache. From one
 * shared counter, which thread got which task was chance: on ResNet-18 at 2 threads half
 * of every input then came from the other core's cache, and the 56 x 56 layers ran 1.1x
 * faster than at 1 thread instead of 1.8x (measured). Helping keeps the balance of one
 * counter when the machine slows one thread down.
 *
 * A worker that has finished a job spins for KILN_POOL_SPIN_US (watching the generation)
 * before it sleeps, and the caller spins as long for the workers that joined before it
 * sleeps: a model's products follow each other microseconds apart, and waking a sleeping
 * thread costs tens of microseconds here, as much as a batch-1 layer's whole product. A
 * pool left idle longer than that sleeps. The spin does not yield the CPU (sched_yield):
 * measured here, a worker that yielded between looks joined under 1 % of a batch-1 MLP's
 * jobs (the caller had run them all by the time it got the CPU back), one that only
 * pauses joined most of them.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* clock_gettime */
#endif
#include "kiln_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* How long a thread spins for the next job (a worker) or for the workers (the caller)
 * before it sleeps; 0 never spins. */
#ifndef KILN_POOL_SPIN_US
#define KILN_POOL_SPIN_US 100
#endif

struct kiln_pool {
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  pthread_mutex_t call;          /* one kiln_pool_for at a time */
  pthread_t *threads;
  int nthreads;                  /* workers */
  atomic_ulong generation;       /* bumped per job (under mu); a worker looks at each once */
  int open;                      /* the current job may still be joined */
  atomic_int joined;             /* workers in the current job (changed under mu) */
  int stop;
  void (*task)(void *, int64_t); /* the current job */
  void *arg;
  struct kiln_pool_block *block; /* the job's block of each thread (nthreads + 1) */
  void *block_mem;               /* block's allocation (block is it rounded up to a line) */
  atomic_int ids;                /* workers that have taken their number */
};

/* Thread k's block of the current job: the tasks [next, end) not yet taken. A cache line
 * each, so that taking a task does not slow down the other threads. */
enum { KILN_POOL_LINE = 64 };
struct kiln_pool_block {
  _Alignas(KILN_POOL_LINE) atomic_llong next;
  int64_t end;
};

/* Takes task indices from thread me's block, then from the others' (the next thread's
 * first), until none is left. Every index of every block is taken by one thread. */
static void run_tasks(kiln_pool *p, int me, void (*task)(void *, int64_t), void *arg) {
  const int threads = p->nthreads + 1;
  for (int k = 0; k < threads; k++) {
    struct kiln_pool_block *b = &p->block[(me + k) % threads];
    for (int64_t i; (i = (int64_t)atomic_fetch_add(&b->next, 1)) < b->end;) task(arg, i);
  }
}

/* A pause in a spin loop (frees the core's other hyperthread a little). */
static void spin_pause(void) {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
  __builtin_ia32_pause();
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* Spins up to KILN_POOL_SPIN_US while *v == was (the clock read every 64 pauses). */
static void spin_ulong(atomic_ulong *v, unsigned long was) {
  if (KILN_POOL_SPIN_US <= 0) return;
  const int64_t until = now_us() + KILN_POOL_SPIN_US;
  for (int i = 1; atomic_load_explicit(v, memory_order_acquire) == was; i++) {
    spin_pause();
    if (i % 64 == 0 && now_us() >= until) return;
  }
}
/* Spins up to KILN_POOL_SPIN_US while *v > 0. */
static void spin_busy(atomic_int *v) {
  if (KILN_POOL_SPIN_US <= 0) return;
  const int64_t until = now_us() + KILN_POOL_SPIN_US;
  for (int i = 1; atomic_load_explicit(v, memory_order_acquire) > 0; i++) {
    spin_pause();
    if (i % 64 == 0 && now_us() >= until) return;
  }
}

static void *worker(void *arg) {
  kiln_pool *p = (kiln_pool *)arg;
  const int me = atomic_fetch_add(&p->ids, 1) + 1;   /* the caller is 0 */
  unsigned long seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    if (!p->stop && atomic_load(&p->generation) == seen) {
      pthread_mutex_unlock(&p->mu);
      spin_ulong(&p->generation, seen);   /* the next job, often microseconds away */
      pthread_mutex_lock(&p->mu);
    }
    while (!p->stop && atomic_load(&p->generation) == seen) pthread_cond_wait(&p->wake, &p->mu);
    if (p->stop) break;
    seen = atomic_load(&p->generation);
    if (!p->open) continue;   /* woke after the caller finished the job without us */
    p->joined++;
    void (*task)(void *, int64_t) = p->task;
    void *targ = p->arg;
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, me, task, targ);
    pthread_mutex_lock(&p->mu);
    if (--p->joined == 0 && !p->open) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

kiln_pool *kiln_pool_new(int threads) {
  if (threads < 1) return NULL;
  kiln_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->threads = calloc((size_t)threads, sizeof *p->threads);
  /* aligned by hand: aligned_alloc is missing from the Windows CRT and older macOS */
  p->block_mem = malloc((size_t)threads * sizeof *p->block + KILN_POOL_LINE);
  if (!p->threads || !p->block_mem) {
    free(p->threads);
    free(p->block_mem);
    free(p);
    return NULL;
  }
  const uintptr_t at = ((uintptr_t)p->block_mem + KILN_POOL_LINE - 1) & ~(uintptr_t)(KILN_POOL_LINE - 1);
  p->block = (struct kiln_pool_block *)at;
  for (int k = 0; k < threads; k++) atomic_init(&p->block[k].next, 0), p->block[k].end = 0;
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->call, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  atomic_init(&p->ids, 0);
  atomic_init(&p->generation, 0);
  atomic_init(&p->joined, 0);
  for (int i = 0; i < threads - 1; i++) {
    if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
      kiln_pool_free(p);
      return NULL;
    }
    p->nthreads++;
  }
  return p;
}

void kiln_pool_free(kiln_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->call);
  free(p->threads);
  free(p->block_mem);
  free(p);
}

void kiln_pool_for(void *pool, int64_t n, void (*task)(void *arg, int64_t i), void *arg) {
  kiln_pool *p = (kiln_pool *)pool;
  if (!p || p->nthreads == 0 || n < 2) {
    for (int64_t i = 0; i < n; i++) task(arg, i);
    return;
  }
  pthread_mutex_lock(&p->call);
  pthread_mutex_lock(&p->mu);
  p->task = task;
  p->arg = arg;
  const int threads = p->nthreads + 1;
  for (int k = 0; k < threads; k++) {   /* n / threads each, the first n % threads one more */
    const int64_t q = n / threads, r = n % threads;
    atomic_store(&p->block[k].next, k * q + (k < r ? k : r));
    p->block[k].end = (k + 1) * q + (k + 1 < r ? k + 1 : r);
  }
  p->open = 1;
  p->joined = 0;
  p->generation++;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  run_tasks(p, 0, task, arg);
  pthread_mutex_lock(&p->mu);
  p->open = 0;   /* every task is taken: no one joins now; wait for those who did */
  if (p->joined > 0) {
    pthread_mutex_unlock(&p->mu);
    spin_busy(&p->joined);
    pthread_mutex_lock(&p->mu);
  }
  while (p->joined > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->call);
}
