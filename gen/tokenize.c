/*
 * tokenize.c — `kiln tokenize FILE [--decode | --null | --convert OUT]`: the first tool to
 * reach for when a model's output looks wrong. Reads text on standard input and prints, per
 * input line (--null: per NUL-ended text), the token ids separated by spaces (no BOS); with
 * --decode, reads lines of ids and prints their text; with --convert, writes FILE as Kiln's
 * tokenizer binary and reads nothing. FILE is a Hugging Face tokenizer.json, Kiln's
 * tokenizer binary (.tok), a llama2.c tokenizer file (tok512.bin) or a GGUF file's
 * vocabulary (tokenizer.ggml.model "llama": SentencePiece; "gpt2": byte-level BPE; "bert":
 * WordPiece). Every one is converted to the binary first and then runs through the
 * runtime's own tokenizer (runtime/llm/kiln_tok.c), so what this prints is what an app gets.
 */
#include "kiln.h"
#include "kiln_tok.h"

#include <stdlib.h>
#include <string.h>

/* One text of stdin (up to sep, a newline or with --null a NUL byte, not kept) into *buf,
 * grown as needed; false at EOF. */
static bool read_line(char **buf, size_t *cap, char sep) {
  size_t n = 0;
  int c;
  while ((c = getchar()) != EOF && c != (unsigned char)sep) {
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

/* The metadata value of key in f, or NULL. */
static const MetaVal *meta(const SafeFile *f, const char *key) {
  for (int i = 0; i < f->nmeta; i++)
    if (strcmp(f->meta[i].key, key) == 0) return &f->meta[i].v;
  return NULL;
}

/* A GGUF file's SentencePiece vocabulary (tokenizer.ggml.model "llama": tokens and scores)
 * as the bytes of a llama2.c tokenizer file, U+2581 written back as a space, so that one
 * converter (tokllama2c_convert) reads both. */
static unsigned char *gguf_vocab(const char *path, const unsigned char *data, size_t size, size_t *out_size) {
  char err[1024];
  SafeFile *f = gguf_parse(path, data, size, err, sizeof err);
  if (!f) kiln_error("tokenize: %s", err);
  const MetaVal *model = meta(f, "tokenizer.ggml.model"), *tokens = meta(f, "tokenizer.ggml.tokens"),
                *scores = meta(f, "tokenizer.ggml.scores");
  if (!model || model->kind != MV_STR || strcmp(model->s, "llama") != 0)
    kiln_error("tokenize: %s: tokenizer.ggml.model is %s; Kiln reads SentencePiece (\"llama\") and byte-level (\"gpt2\") vocabularies", path,
               model && model->kind == MV_STR ? esc_message(model->s) : "missing");
  if (!tokens || tokens->kind != MV_ARR || !scores || scores->kind != MV_ARR || scores->n != tokens->n)
    kiln_error("tokenize: %s: tokenizer.ggml.tokens and .scores must be arrays of one length", path);
  Buf b = {0};
  int32_t max_len = 1;
  buf_put(&b, &max_len, 4);
  for (int64_t i = 0; i < tokens->n; i++) {
    const MetaVal *t = &tokens->items[i], *sc = &scores->items[i];
    if (t->kind != MV_STR || (sc->kind != MV_FLOAT && sc->kind != MV_INT))
      kiln_error("tokenize: %s: token %lld is not a string with a number score", path, (long long)i);
    Buf piece = {0};
    for (size_t k = 0; k < t->slen;) {
      if (k + 3 <= t->slen && memcmp(t->s + k, "\xe2\x96\x81", 3) == 0) buf_put(&piece, " ", 1), k += 3;
      else buf_put(&piece, t->s + k, 1), k++;
    }
    float score = sc->kind == MV_FLOAT ? (float)sc->f : (float)sc->i;
    int32_t len = (int32_t)piece.len;
    if (len > max_len) max_len = len;
    buf_put(&b, &score, 4);
    buf_put(&b, &len, 4);
    if (len) buf_put(&b, piece.data, piece.len);
    buf_free(&piece);
  }
  memcpy(b.data, &max_len, 4);   /* little-endian hosts only, as the llama2.c format itself */
  *out_size = b.len;
  unsigned char *out = kiln_alloc(b.len + 1);
  memcpy(out, b.data, b.len);
  buf_free(&b);
  return out;
}

/* True when the file looks like JSON (its first non-space byte is '{'). */
static bool looks_json(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) i++;
  return i < n && p[i] == '{';
}

/* The tokenizer.ggml.model of the GGUF file at data ("" when absent or not a string). */
static const char *gguf_model(const char *path, const unsigned char *data, size_t size) {
  char err[1024];
  SafeFile *f = gguf_parse(path, data, size, err, sizeof err);
  if (!f) kiln_error("tokenize: %s", err);
  const MetaVal *model = meta(f, "tokenizer.ggml.model");
  return model && model->kind == MV_STR ? model->s : "";
}

/* The tokenizer binary of the file read into data (see tokenizer_binary): a .tok checked
 * and copied; a GGUF byte-level or WordPiece vocabulary, a GGUF SentencePiece one (through the llama2.c
 * form) or a tokenizer.json converted; anything else read as a llama2.c file. */
static void binary_of(const char *path, const unsigned char *data, size_t size, Buf *out) {
  char err[1024];
  if (kiln_tok_is(data, size)) {
    kiln_tok t;
    if (kiln_tok_load(&t, data, size, err, sizeof err) != 0) kiln_error("%s: %s", path, err);
    kiln_tok_free(&t);
    buf_put(out, data, size);
  } else if (gguf_is(data, size) && (strcmp(gguf_model(path, data, size), "gpt2") == 0 ||
                                      strcmp(gguf_model(path, data, size), "bert") == 0)) {
    SafeFile *f = gguf_parse(path, data, size, err, sizeof err);
    if (!f) kiln_error("tokenize: %s", err);
    if (!tokgguf_convert(path, f, out, err, sizeof err)) kiln_error("%s", err);
  } else if (gguf_is(data, size)) {
    size_t n;
    const unsigned char *bin = gguf_vocab(path, data, size, &n);
    if (!tokllama2c_convert(path, bin, n, out, err, sizeof err)) kiln_error("%s", err);
  } else if (looks_json(data, size)) {
    if (!tokjson_convert(path, data, size, out, err, sizeof err)) kiln_error("%s", err);
  } else if (!tokllama2c_convert(path, data, size, out, err, sizeof err)) {
    kiln_error("%s (read as a llama2.c tokenizer file: not a tokenizer.json, GGUF or Kiln binary)", err);
  }
}

/* See kiln.h; a file of up to 1 GiB. */
void tokenizer_binary(const char *path, Buf *out) {
  char err[1024];
  size_t size;
  unsigned char *data = kiln_read_bounded(path, (size_t)1 << 30, &size, err, sizeof err);
  if (!data) kiln_error("tokenizer: %s", err);
  binary_of(path, data, size, out);
}

/* Texts of stdin (ended by sep) through t: ids per text, or with decode text per line of ids. */
static void tok_lines(const kiln_tok *t, bool decode, char sep) {
  char *line = NULL, *out = malloc(kiln_tok_decode_max(t) + 16);
  size_t cap = 0;
  for (int lineno = 1; read_line(&line, &cap, sep); lineno++) {
    if (decode) {
      kiln_tok_stream st;
      kiln_tok_stream_init(&st);
      for (char *p = line, *e;; p = e) {
        long id = strtol(p, &e, 10);
        if (e == p) {
          while (*e == ' ' || *e == '\t' || *e == '\r') e++;
          if (*e) kiln_error("tokenize --decode: line %d: '%s' is not a token id", lineno, esc_message(e));
          break;
        }
        int n = id < 0 || id >= t->n ? -1 : kiln_tok_decode(t, &st, (int)id, out);
        if (n < 0) kiln_error("tokenize --decode: line %d: id %ld is outside the vocabulary (0..%d)", lineno, id, t->n - 1);
        fwrite(out, 1, (size_t)n, stdout);
      }
      fwrite(out, 1, (size_t)kiln_tok_decode_flush(&st, out), stdout);
      putchar('\n');
      continue;
    }
    size_t len = strlen(line);
    int *ids = malloc(sizeof(int) * (3 * len + 8));   /* always enough (kiln_tok.h) */
    void *work = malloc(kiln_tok_work_size(t, len));
    if (!ids || !work) kiln_error("tokenize: line %d: out of memory", lineno);
    int n = kiln_tok_encode(t, line, len, ids, (int)(3 * len + 8), work);
    for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    putchar('\n');
    free(ids);
    free(work);
  }
  free(line);
  free(out);
}

/* `kiln tokenize`: every kind of file becomes the binary (binary_of), then kiln_tok
 * encodes or decodes, or --convert writes the binary. */
int cmd_tokenize(const char *path, bool decode, char sep, const char *convert) {
  if (!path) kiln_error("tokenize: no tokenizer file given (kiln tokenize FILE)");
  char err[1024];
  size_t size;
  unsigned char *data = kiln_read_bounded(path, (size_t)256 << 20, &size, err, sizeof err);
  if (!data) kiln_error("tokenize: %s", err);
  Buf bin = {0};
  binary_of(path, data, size, &bin);
  if (convert) {
    FILE *f = fopen(convert, "wb");
    if (!f || fwrite(bin.data, 1, bin.len, f) != bin.len || fclose(f) != 0) kiln_error("tokenize: cannot write %s", convert);
    buf_free(&bin);
    return 0;
  }
  kiln_tok t;
  if (kiln_tok_load(&t, bin.data, bin.len, err, sizeof err) != 0) kiln_error("%s: %s", path, err);
  buf_free(&bin);
  tok_lines(&t, decode, sep);
  kiln_tok_free(&t);
  return 0;
}
