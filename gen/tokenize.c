/*
 * tokenize.c — `kiln tokenize FILE [--decode]`: the first tool to reach for when a model's
 * output looks wrong. Reads text on standard input and prints, per input line, the token
 * ids separated by spaces (no BOS); with --decode, reads lines of ids and prints their
 * text. FILE is a llama2.c tokenizer file (tok512.bin); the work is the runtime's own
 * tokenizer (runtime/llm/kiln_tokenizer.c), so what this prints is what an app gets.
 */
#include "kiln.h"
#include "kiln_tokenizer.h"

#include <stdlib.h>
#include <string.h>

/* One line of stdin (without its newline) into *buf, grown as needed; false at EOF. */
static bool read_line(char **buf, size_t *cap) {
  size_t n = 0;
  int c;
  while ((c = getchar()) != EOF && c != '\n') {
    if (n + 2 > *cap) {
      *cap = *cap ? 2 * *cap : 256;
      *buf = realloc(*buf, *cap);
      if (!*buf) kiln_error("tokenize: out of memory");
    }
    (*buf)[n++] = (char)c;
  }
  if (c == EOF && n == 0) return false;
  if (!*buf) *buf = calloc(1, 1);
  (*buf)[n] = 0;
  return true;
}

int cmd_tokenize(const char *path, bool decode) {
  if (!path) kiln_error("tokenize: no tokenizer file given (kiln tokenize FILE)");
  char err[1024];
  size_t size;
  unsigned char *data = kiln_read_bounded(path, (size_t)256 << 20, &size, err, sizeof err);
  if (!data) kiln_error("tokenize: %s", err);
  kiln_spm t;
  if (kiln_spm_load(&t, data, size, err, sizeof err) != 0) kiln_error("%s: %s", path, err);
  char *line = NULL;
  size_t cap = 0;
  for (int lineno = 1; read_line(&line, &cap); lineno++) {
    if (decode) {
      int prev = 1;   /* the first piece loses the dummy prefix's space, as after BOS */
      for (char *p = line, *e;; p = e) {
        long id = strtol(p, &e, 10);
        if (e == p) {
          while (*e == ' ' || *e == '\t' || *e == '\r') e++;
          if (*e) kiln_error("tokenize --decode: line %d: '%s' is not a token id", lineno, esc_message(e));
          break;
        }
        const char *piece = kiln_spm_piece(&t, prev, (int)id);
        if (!piece) kiln_error("tokenize --decode: line %d: id %ld is outside the vocabulary (0..%d)", lineno, id, t.n - 1);
        fputs(piece, stdout);
        prev = (int)id;
      }
      putchar('\n');
      continue;
    }
    size_t len = strlen(line);
    int *ids = malloc(sizeof(int) * (len * 4 + 8));
    void *work = malloc(kiln_spm_work_size(&t, len));
    int n = kiln_spm_encode(&t, line, ids, (int)(len * 4 + 8), work);
    for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    putchar('\n');
    free(ids);
    free(work);
  }
  free(line);
  kiln_spm_free(&t);
  return 0;
}
