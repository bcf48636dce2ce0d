/*
 * kiln_pool.c — the pool of kiln_pool.h. One job at a time: kiln_pool_for publishes it
 * under the mutex (a new generation number wakes the workers) and opens it; a worker that
 * wakes while the job is open joins it, and every thread, the caller included, takes task
 * indices from one atomic counter until they run out, so the tasks balance themselves over
 * threads that the machine may be slowing unevenly. Once the caller has run out of tasks it
 * closes the job and waits only for the workers that joined: a worker that the OS has not
 * scheduled yet (a busy machine) finds the job closed when it wakes and skips it, instead of
 * the caller sleeping until it runs. So the job's memory (on the caller's stack) is never
 * touched after kiln_pool_for returns.
 */
#include "kiln_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct kiln_pool {
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  pthread_mutex_t call;          /* one kiln_pool_for at a time */
  pthread_t *threads;
  int nthreads;                  /* workers */
  unsigned long generation;      /* bumped per job; a worker looks at each generation once */
  int open;                      /* the current job may still be joined */
  int joined;                    /* workers in the current job */
  int stop;
  int64_t n;                     /* the current job */
  void (*task)(void *, int64_t);
  void *arg;
  atomic_llong next;             /* its next task index */
};

/* Takes task indices of the current job until none is left. */
static void run_tasks(kiln_pool *p, int64_t n, void (*task)(void *, int64_t), void *arg) {
  for (int64_t i; (i = (int64_t)atomic_fetch_add(&p->next, 1)) < n;) task(arg, i);
}

static void *worker(void *arg) {
  kiln_pool *p = (kiln_pool *)arg;
  unsigned long seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
    if (p->stop) break;
    seen = p->generation;
    if (!p->open) continue;   /* woke after the caller finished the job without us */
    p->joined++;
    int64_t n = p->n;
    void (*task)(void *, int64_t) = p->task;
    void *targ = p->arg;
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, n, task, targ);
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
  if (!p->threads) {
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->call, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  atomic_init(&p->next, 0);
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
  p->n = n;
  p->task = task;
  p->arg = arg;
  atomic_store(&p->next, 0);
  p->open = 1;
  p->joined = 0;
  p->generation++;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  run_tasks(p, n, task, arg);
  pthread_mutex_lock(&p->mu);
  p->open = 0;   /* every task is taken: no one joins now; wait for those who did */
  while (p->joined > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->call);
}
