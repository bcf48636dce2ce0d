/*
 * tok_test.c — runtime/llm/kiln_tok.c on a converted tokenizer (t_tok, ASan+UBSan).
 *
 *   tok_test NAME FILE.tok TEXTS IDS [exact]
 * For each line of TEXTS: the ids equal the reference's line of IDS; with "exact", decoding
 * them one id at a time through a stream gives the line back byte for byte (its NFC form
 * for a model that normalizes to NFC; but for a
 * line holding an added token when the model adds a dummy prefix, or starting with a space
 * under Metaspace: those do not round-trip in Hugging Face's tokenizers either) and every
 * chunk the stream emits is whole UTF-8 characters. Then text that is not UTF-8 encodes to
 * ids inside the vocabulary and decodes to U+FFFD where it was broken; too small an id
 * buffer is refused; damaged copies of the file are refused, each with a message naming
 * the field. Prints PASS/FAIL lines named tok/NAME-...
 */
#include "kiln_tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *name;

/* The whole file, NUL-terminated, or NULL. */
static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)len + 1);
  if (fread(b, 1, (size_t)len, f) != (size_t)len) len = 0;
  b[len] = 0;
  fclose(f);
  *n = (size_t)len;
  return b;
}

/* The next line of *p (newline dropped, NUL-terminated in place), or NULL at the end. */
static char *next_line(char **p) {
  if (!**p) return NULL;
  char *s = *p, *nl = strchr(s, '\n');
  if (nl) *nl = 0, *p = nl + 1;
  else *p = s + strlen(s);
  return s;
}

/* True when s[0..n) is whole, valid UTF-8. */
static int valid_utf8(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    int len = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
    if (!len || i + (size_t)len > n) return 0;
    for (int k = 1; k < len; k++)
      if ((s[i + (size_t)k] & 0xc0) != 0x80) return 0;
    i += (size_t)len;
  }
  return 1;
}

/* Decodes ids[0..n) one at a time into out; 0 when a chunk was not whole UTF-8. */
static int stream_decode(const kiln_tok *t, const int *ids, int n, char *out, size_t *len) {
  kiln_tok_stream s;
  kiln_tok_stream_init(&s);
  char *chunk = malloc(kiln_tok_decode_max(t));
  int whole = 1;
  *len = 0;
  for (int i = 0; i < n; i++) {
    int w = kiln_tok_decode(t, &s, ids[i], chunk);
    if (w < 0) whole = 0;
    if (w <= 0) continue;
    if (!valid_utf8((unsigned char *)chunk, (size_t)w)) whole = 0;
    memcpy(out + *len, chunk, (size_t)w), *len += (size_t)w;
  }
  *len += (size_t)kiln_tok_decode_flush(&s, out + *len);
  free(chunk);
  return whole;
}

/* Parity (and with exact, the streamed round trip) over every line. */
static void parity(const kiln_tok *t, char *texts, char *ids_text, int exact) {
  int lines = 0, bad = 0, bad_rt = 0, shown = 0, skipped = 0;
  char *line, *ref;
  while ((line = next_line(&texts)) && (ref = next_line(&ids_text))) {
    size_t len = strlen(line);
    size_t cap = 1;
    for (const char *p = ref; *p; p++) cap += *p == ' ';
    int *ids = malloc(sizeof(int) * (3 * len + 8)), *want = malloc(sizeof(int) * cap), nwant = 0;
    void *work = malloc(kiln_tok_work_size(t, len));
    for (char *p = ref, *e;; p = e) {
      long v = strtol(p, &e, 10);
      if (e == p || (size_t)nwant == cap) break;
      want[nwant++] = (int)v;
    }
    int n = kiln_tok_encode(t, line, len, ids, (int)(3 * len + 8), work);
    lines++;
    if (n != nwant || memcmp(ids, want, sizeof(int) * (size_t)(n > 0 ? n : 0)) != 0) {
      if (shown++ < 3) printf("FAIL tok/%s-encode: line %d: %d ids, the reference %d\n", name, lines, n, nwant);
      bad++;
    }
    /* not expected back: SentencePiece with a dummy prefix puts one after every added token
     * too; an added token that strips (lstrip, rstrip) drops the spaces beside it */
    int added = 0;
    for (int i = 0; i < nwant; i++)
      for (int k = 0; k < t->n_added; k++)
        added |= t->added[4 * k] == (uint32_t)want[i] && ((t->flags & KILN_TOKF_PREFIX_SPACE) || (t->added[4 * k + 1] & 6));
    /* Metaspace adds no prefix before a leading space, yet decoding drops the first space */
    if ((t->flags & KILN_TOKF_PREFIX_UNLESS) && (t->flags & KILN_TOKF_STRIP_LEADING) && line[0] == ' ') added = 1;
    skipped += exact && added;
    if (exact && !added) {
      char *out = malloc(3 * (len + 8) + kiln_tok_decode_max(t) * (size_t)(nwant + 1));
      size_t olen;
      int whole = stream_decode(t, want, nwant, out, &olen);
      /* a model that normalizes to NFC gives back the NFC form (kiln_tok_nfc: t_tok checks
       * it against Python's) */
      char *back = line;
      size_t blen = len;
      uint32_t *cps = malloc(sizeof(uint32_t) * (2 * len + 8));
      unsigned char *nfc = malloc(3 * len + 8);
      if (t->flags & KILN_TOKF_NFC) blen = kiln_tok_nfc((const unsigned char *)line, len, cps, nfc), back = (char *)nfc;
      if (!whole || olen != blen || memcmp(out, back, blen) != 0) {
        if (bad_rt++ < 3) printf("FAIL tok/%s-decode: line %d does not decode back%s\n", name, lines, whole ? "" : " (a chunk split a character)");
      }
      free(out);
      free(cps);
      free(nfc);
    }
    free(ids);
    free(want);
    free(work);
  }
  if (!bad && lines) printf("PASS tok/%s-encode (%d lines, the reference's ids)\n", name, lines);
  if (exact && !bad_rt && lines)
    printf("PASS tok/%s-stream-decode (%d lines back byte for byte, whole characters per chunk; %d skipped: with added "
           "tokens that gain a dummy prefix or strip spaces, or, under Metaspace, a leading space decoding drops)\n", name, lines - skipped, skipped);
}

/* Bytes that are not UTF-8: ids in the vocabulary, U+FFFD in the decoded text. */
static void invalid_utf8(const kiln_tok *t) {
  static const char *const texts[] = {"\xff", "ab\xc3", "\xe2\x82 x", "\xed\xa0\x80", "\xf4\x90\x80\x80!", "\xc0\xaf", "ok \x80\x80 ok"};
  int fine = 1;
  for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
    size_t len = strlen(texts[k]);
    int ids[64];
    void *work = malloc(kiln_tok_work_size(t, len));
    int n = kiln_tok_encode(t, texts[k], len, ids, 64, work);
    free(work);
    if (n <= 0) fine = 0;
    for (int i = 0; i < n; i++)
      if (ids[i] < 0 || ids[i] >= t->n) fine = 0;
    char *out = malloc(kiln_tok_decode_max(t) * 80);
    size_t olen;
    stream_decode(t, ids, n > 0 ? n : 0, out, &olen);
    out[olen] = 0;
    if (t->kind != KILN_TOK_WORDPIECE && (!valid_utf8((unsigned char *)out, olen) || !strstr(out, "\xef\xbf\xbd"))) fine = 0;
    free(out);
  }
  int ids[2];
  char work[4096];
  if (kiln_tok_encode(t, "hello world and more", 20, ids, 2, work) != -1) fine = 0;
  printf("%s tok/%s-invalid-utf8\n", fine ? "PASS" : "FAIL", name);
}

/* FNV-1a 64, the binary's checksum, written again here. */
static uint64_t fnv(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

/* Loading copy must fail with a message holding want. */
static int refused(const unsigned char *copy, size_t n, const char *want, const char *what) {
  kiln_tok t;
  char err[256] = "";
  if (kiln_tok_load(&t, copy, n, err, sizeof err) == 0) {
    kiln_tok_free(&t);
    printf("FAIL tok/%s-damaged: %s was accepted\n", name, what);
    return 0;
  }
  if (!strstr(err, want) || strchr(err, '\n')) {
    printf("FAIL tok/%s-damaged: %s: message '%s' lacks '%s'\n", name, what, err, want);
    return 0;
  }
  return 1;
}

/* Damaged copies: cut short, one payload byte changed, a bad version, a merge naming an
 * id outside the vocabulary (checksum recomputed, so the field check must catch it). */
static void damaged(const unsigned char *file, size_t size) {
  unsigned char *c = malloc(size);
  int ok = 1;
  size_t cuts[] = {0, 7, 31, 32, 90, size / 2, size - 1};
  for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
    memcpy(c, file, cuts[k]);
    ok &= refused(c, cuts[k], cuts[k] < 32 ? "header" : "truncated", "a cut copy");
  }
  memcpy(c, file, size);
  c[size - 3] ^= 0x20;
  ok &= refused(c, size, "checksum", "a changed byte");
  memcpy(c, file, size);
  c[8] = 9;
  ok &= refused(c, size, "version", "version 9");
  memcpy(c, file, size);
  uint32_t n = (uint32_t)c[44] | (uint32_t)c[45] << 8 | (uint32_t)c[46] << 16 | (uint32_t)c[47] << 24;
  uint32_t merges = (uint32_t)c[48] | (uint32_t)c[49] << 8;
  if (merges) {
    size_t at = 32 + 64 + 4 * ((size_t)n + 1);
    c[at] = 0xff, c[at + 1] = 0xff, c[at + 2] = 0xff, c[at + 3] = 0x00;
    uint64_t h = fnv(c + 32, size - 32);
    for (int i = 0; i < 8; i++) c[24 + i] = (unsigned char)(h >> 8 * i);
    ok &= refused(c, size, "merge: id out of range", "a merge id out of range");
  }
  free(c);
  printf("%s tok/%s-damaged\n", ok ? "PASS" : "FAIL", name);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: tok_test NAME FILE.tok TEXTS IDS [exact]\n");
    return 2;
  }
  name = argv[1];
  size_t size, tn, in;
  char *file = slurp(argv[2], &size), *texts = slurp(argv[3], &tn), *ids = slurp(argv[4], &in);
  if (!file || !texts || !ids) {
    printf("FAIL tok/%s-files: cannot read the inputs\n", name);
    return 1;
  }
  kiln_tok t;
  char err[256];
  if (kiln_tok_load(&t, file, size, err, sizeof err) != 0) {
    printf("FAIL tok/%s-load: %s\n", name, err);
    return 1;
  }
  parity(&t, texts, ids, argc > 5 && strcmp(argv[5], "exact") == 0);
  invalid_utf8(&t);
  damaged((unsigned char *)file, size);
  kiln_tok_free(&t);
  free(file);
  free(texts);
  free(ids);
  return 0;
}
