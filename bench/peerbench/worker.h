/*
 * worker.h — the line protocol of the peer benchmark's C workers (kiln_worker.c,
 * blas_worker.c); the Python and Node workers speak the same (torch_worker.py,
 * ort_worker.js), and bench/peerbench/run.py drives them all.
 *
 * One command a line on stdin, one JSON object a line on stdout; the first line, unasked,
 * is the worker's "ready" object.
 *   load W        set up workload W from CACHE_DIR/data/W/ and run it once:
 *                 {"ok": true, "load_ms": .., "first_us": ..}
 *   save PATH     write the outputs of the last run, concatenated, raw little-endian:
 *                 {"ok": true}
 *   run WARM K    WARM untimed calls, then K calls, each timed alone in wall-clock time
 *                 (CLOCK_MONOTONIC) and in the process's CPU time (CLOCK_PROCESS_CPUTIME_ID,
 *                 all its threads): {"wall_us": [..], "cpu_us": [..]}
 *   quit          {"ok": true}, then the worker exits
 * A failed command answers {"error": "..."} and the worker keeps serving.
 *
 * The including file defines, before including this header, the four functions of its
 * workload (declared below) and then calls worker_serve from main.
 */
#ifndef PEERBENCH_WORKER_H
#define PEERBENCH_WORKER_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { WORKER_LINE_MAX = 4096, WORKER_RUN_MAX = 100000 };

/* Set up workload W (its files are under cache_dir/data/W/); 0 on success, else -1
 * after calling reply_error. */
static int worker_load(const char *cache_dir, const char *workload);
/* One call of the loaded workload. */
static void worker_call(void);
/* Writes the outputs of the last call to f; 0 on success. */
static int worker_save(FILE *f);
/* Frees what worker_load set up (also when nothing is loaded). */
static void worker_unload(void);

/* Prints one JSON line {"error": "<formatted message>"} (quotes and backslashes escaped). */
static void reply_error(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fputs("{\"error\": \"", stdout);
  for (const char *p = msg; *p; p++) {
    if (*p == '"' || *p == '\\') putchar('\\');
    putchar((unsigned char)*p < 0x20 ? ' ' : *p);
  }
  fputs("\"}\n", stdout);
}

/* The given clock in seconds. */
static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writes cache_dir/data/workload/file into buf[WORKER_LINE_MAX]; 0 on success, else -1
 * after reply_error (a path that does not fit). */
static int data_path(char *buf, const char *cache_dir, const char *workload, const char *file) {
  int n = snprintf(buf, WORKER_LINE_MAX, "%s/data/%s/%s", cache_dir, workload, file);
  if (n < 0 || n >= WORKER_LINE_MAX) {
    reply_error("path too long: %s/data/%s/%s", cache_dir, workload, file);
    return -1;
  }
  return 0;
}

/* Reads exactly n bytes of path into buf; 0 on success, else -1 after reply_error. */
static int read_exact(const char *path, void *buf, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    reply_error("cannot open %s", path);
    return -1;
  }
  size_t got = fread(buf, 1, n, f);
  int extra = fgetc(f) != EOF;
  fclose(f);
  if (got != n || extra) {
    reply_error("%s: expected exactly %zu bytes", path, n);
    return -1;
  }
  return 0;
}

/* `load W`: the workload's own set-up, then one call, both timed. */
static int cmd_load(const char *cache_dir, const char *workload) {
  worker_unload();
  double t0 = clock_s(CLOCK_MONOTONIC);
  if (worker_load(cache_dir, workload) != 0) return 0;
  double t1 = clock_s(CLOCK_MONOTONIC);
  worker_call();
  double t2 = clock_s(CLOCK_MONOTONIC);
  printf("{\"ok\": true, \"load_ms\": %.3f, \"first_us\": %.3f}\n", (t1 - t0) * 1e3, (t2 - t1) * 1e6);
  return 1;
}

/* `save PATH`. */
static void cmd_save(const char *path) {
  FILE *f = fopen(path, "wb");
  int ok = f && worker_save(f) == 0;
  if (f && fclose(f) != 0) ok = 0;
  if (ok)
    puts("{\"ok\": true}");
  else
    reply_error("cannot write %s", path);
}

/* `run WARM K`: each sample brackets exactly one call. */
static void cmd_run(long warm, long k) {
  static double wall[WORKER_RUN_MAX], cpu[WORKER_RUN_MAX];
  if (warm < 0 || k < 1 || k > WORKER_RUN_MAX) {
    reply_error("run: WARM >= 0 and 1 <= K <= %d expected", WORKER_RUN_MAX);
    return;
  }
  for (long i = 0; i < warm; i++) worker_call();
  for (long i = 0; i < k; i++) {
    double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    worker_call();
    double c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w1 = clock_s(CLOCK_MONOTONIC);
    wall[i] = (w1 - w0) * 1e6;
    cpu[i] = (c1 - c0) * 1e6;
  }
  fputs("{\"wall_us\": [", stdout);
  for (long i = 0; i < k; i++) printf("%s%.3f", i ? ", " : "", wall[i]);
  fputs("], \"cpu_us\": [", stdout);
  for (long i = 0; i < k; i++) printf("%s%.3f", i ? ", " : "", cpu[i]);
  fputs("]}\n", stdout);
}

/* Prints the ready line, then answers commands until `quit` or end of input. */
static int worker_serve(const char *cache_dir, const char *ready_json) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  puts(ready_json);
  char line[WORKER_LINE_MAX];
  int loaded = 0;
  while (fgets(line, sizeof line, stdin)) {
    char cmd[32] = "", arg[WORKER_LINE_MAX] = "";
    long warm = 0, k = 0;
    if (sscanf(line, "%31s", cmd) != 1) continue;
    if (strcmp(cmd, "quit") == 0) {
      puts("{\"ok\": true}");
      break;
    } else if (strcmp(cmd, "load") == 0 && sscanf(line, "%*s %4095s", arg) == 1) {
      loaded = cmd_load(cache_dir, arg);
    } else if (!loaded && (strcmp(cmd, "save") == 0 || strcmp(cmd, "run") == 0)) {
      reply_error("%s: nothing loaded", cmd);
    } else if (strcmp(cmd, "save") == 0 && sscanf(line, "%*s %4095s", arg) == 1) {
      cmd_save(arg);
    } else if (strcmp(cmd, "run") == 0 && sscanf(line, "%*s %ld %ld", &warm, &k) == 2) {
      cmd_run(warm, k);
    } else {
      reply_error("bad command: expected load W | save PATH | run WARM K | quit");
    }
  }
  worker_unload();
  return 0;
}

#endif
