/*
 * blas_worker.c — OpenBLAS (Debian libopenblas-dev) as a peer-benchmark worker, for the
 * workloads that are one BLAS call (protocol: worker.h).
 *
 *   cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L bench/peerbench/blas_worker.c \
 *      $(pkg-config --cflags --libs openblas)
 *   blas_worker CACHE_DIR THREADS
 *
 * `load W` reads CACHE_DIR/data/W/blas.txt ("KIND M N K"), the matrix w (blas_w.bin,
 * row-major) and the input x (input_x.bin), all written by prepare.py from the PyTorch
 * twin, so the operands are the other peers' bytes:
 *   gemm    y[M, N] = x[M, K] @ w[K, N]       cblas_sgemm
 *   gemv_n  y[M]    = w[M, K] @ x[K]          cblas_sgemv, no transpose
 *   gemv_t  y[N]    = x[K] @ w[K, N]          cblas_sgemv, transposed
 * THREADS goes to openblas_set_num_threads.
 */
#include <cblas.h>

#include "worker.h"

static struct {
  enum { NONE, GEMM, GEMV_N, GEMV_T } kind;
  int m, n, k;
  float *w, *x, *y;
} S;

static void worker_unload(void) {
  free(S.w);
  free(S.x);
  free(S.y);
  memset(&S, 0, sizeof S);
}

/* Reads data/W/blas.txt into S.kind and the dims; 0 on success, else -1 after reply_error. */
static int read_kind(const char *cache_dir, const char *workload) {
  char path[WORKER_LINE_MAX], kind[16] = "";
  if (data_path(path, cache_dir, workload, "blas.txt") != 0) return -1;
  FILE *f = fopen(path, "r");
  int n = f ? fscanf(f, "%15s %d %d %d", kind, &S.m, &S.n, &S.k) : 0;
  if (f) fclose(f);
  S.kind = strcmp(kind, "gemm") == 0 ? GEMM : strcmp(kind, "gemv_n") == 0 ? GEMV_N
         : strcmp(kind, "gemv_t") == 0 ? GEMV_T : NONE;
  if (n != 4 || S.kind == NONE || S.m < 1 || S.n < 1 || S.k < 1 || S.m > 65536 || S.n > 65536 || S.k > 65536) {
    reply_error("%s: expected \"gemm|gemv_n|gemv_t M N K\"", path);
    return -1;
  }
  return 0;
}

static int worker_load(const char *cache_dir, const char *workload) {
  char wpath[WORKER_LINE_MAX], xpath[WORKER_LINE_MAX];
  if (read_kind(cache_dir, workload) != 0 || data_path(wpath, cache_dir, workload, "blas_w.bin") != 0 ||
      data_path(xpath, cache_dir, workload, "input_x.bin") != 0)
    return -1;
  size_t wn = S.kind == GEMM ? (size_t)S.k * (size_t)S.n : S.kind == GEMV_N ? (size_t)S.m * (size_t)S.k
                                                                            : (size_t)S.k * (size_t)S.n;
  size_t xn = S.kind == GEMM ? (size_t)S.m * (size_t)S.k : (size_t)S.k;
  size_t yn = (size_t)S.m * (size_t)S.n;
  S.w = aligned_alloc(64, (wn * sizeof(float) + 63) / 64 * 64);
  S.x = aligned_alloc(64, (xn * sizeof(float) + 63) / 64 * 64);
  S.y = aligned_alloc(64, (yn * sizeof(float) + 63) / 64 * 64);
  if (!S.w || !S.x || !S.y) {
    reply_error("out of memory");
    worker_unload();
    return -1;
  }
  if (read_exact(wpath, S.w, wn * sizeof(float)) != 0 || read_exact(xpath, S.x, xn * sizeof(float)) != 0) {
    worker_unload();
    return -1;
  }
  return 0;
}

static void worker_call(void) {
  if (S.kind == GEMM)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S.m, S.n, S.k, 1.0f, S.x, S.k, S.w, S.n, 0.0f, S.y, S.n);
  else if (S.kind == GEMV_N)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, S.m, S.k, 1.0f, S.w, S.k, S.x, 1, 0.0f, S.y, 1);
  else
    cblas_sgemv(CblasRowMajor, CblasTrans, S.k, S.n, 1.0f, S.w, S.n, S.x, 1, 0.0f, S.y, 1);
}

static int worker_save(FILE *f) {
  size_t n = (size_t)S.m * (size_t)S.n;
  return fwrite(S.y, sizeof(float), n, f) == n ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc != 3 || atoi(argv[2]) < 1) {
    fprintf(stderr, "usage: %s CACHE_DIR THREADS\n", argv[0]);
    return 2;
  }
  int threads = atoi(argv[2]);
  openblas_set_num_threads(threads);
  char ready[512];
  snprintf(ready, sizeof ready,
           "{\"ready\": true, \"runtime\": \"openblas\", \"threads\": %d, \"version\": \"%s\", \"core\": \"%s\"}",
           threads, openblas_get_config(), openblas_get_corename());
  return worker_serve(argv[1], ready);
}
