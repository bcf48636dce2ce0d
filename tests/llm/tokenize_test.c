/*
 * tokenize_test.c — runtime/llm/kiln_tokenizer.c against reference ids (t_llm, ASan+UBSan).
 *
 *   tokenize_test TOK.bin TEXTS IDS
 * TEXTS holds one UTF-8 text per line, IDS the reference's ids for the same line (space-
 * separated, no BOS). For each line: the encoding equals the reference ids, and decoding
 * the ids (pieces concatenated, the dummy prefix's space dropped) gives the line back
 * byte for byte. Prints "PASS tokenize/..." lines: one per file, with counts, and one
 * FAIL per line that differs (at most 5 shown). Then refusals of damaged tokenizer files.
 */
#include "kiln_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(int argc, char **argv) {
  if (argc != 4) return fprintf(stderr, "usage: tokenize_test TOK.bin TEXTS IDS\n"), 2;
  size_t tn, xn, in;
  char *tok = slurp(argv[1], &tn), *texts = slurp(argv[2], &xn), *ref = slurp(argv[3], &in);
  if (!tok || !texts || !ref) return fprintf(stderr, "tokenize_test: cannot read the inputs\n"), 2;
  kiln_spm t;
  char err[256];
  if (kiln_spm_load(&t, tok, tn, err, sizeof err) != 0) return printf("FAIL tokenize/load: %s\n", err), 1;
  int lines = 0, enc_bad = 0, dec_bad = 0, shown = 0, total_ids = 0;
  char *tsave, *isave;
  char *text = strtok_r(texts, "\n", &tsave), *ids_line = strtok_r(ref, "\n", &isave);
  void *work = NULL;
  while (text && ids_line) {
    lines++;
    int want[4096], nw = 0, got[4096];
    for (char *p = ids_line, *e; nw < 4096; p = e) {
      long v = strtol(p, &e, 10);
      if (e == p) break;
      want[nw++] = (int)v;
    }
    free(work);
    work = malloc(kiln_spm_work_size(&t, strlen(text)));
    int ng = kiln_spm_encode(&t, text, got, 4096, work);
    total_ids += ng;
    if (ng != nw || memcmp(got, want, sizeof(int) * (size_t)nw) != 0) {
      enc_bad++;
      if (shown++ < 5) printf("FAIL tokenize/line-%d: \"%.40s\": %d ids, the reference %d\n", lines, text, ng, nw);
    }
    char back[8192] = "";
    size_t bl = 0;
    for (int i = 0; i < ng; i++) {
      const char *pc = kiln_spm_piece(&t, i == 0 ? 1 : got[i - 1], got[i]);   /* the dummy space goes as after BOS */
      size_t pl = strlen(pc);
      if (bl + pl < sizeof back) memcpy(back + bl, pc, pl), bl += pl;
    }
    back[bl] = 0;
    if (strcmp(back, text) != 0) {
      dec_bad++;
      if (shown++ < 5) printf("FAIL tokenize/roundtrip-%d: \"%.40s\" came back as \"%.40s\"\n", lines, text, back);
    }
    text = strtok_r(NULL, "\n", &tsave);
    ids_line = strtok_r(NULL, "\n", &isave);
  }
  free(work);
  if (text || ids_line) printf("FAIL tokenize/files: the texts and the ids have different line counts\n");
  else {
    printf("%s tokenize/encode: %d of %d lines equal the reference ids (%d ids)\n", enc_bad ? "FAIL" : "PASS",
           lines - enc_bad, lines, total_ids);
    printf("%s tokenize/roundtrip: %d of %d lines decode to their text\n", dec_bad ? "FAIL" : "PASS", lines - dec_bad, lines);
  }
  /* damaged files: one message each, never a crash */
  static const struct { const char *name; size_t cut; } bad[] = {{"truncated-header", 2}, {"truncated-record", 11}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    kiln_spm d;
    int rc = kiln_spm_load(&d, tok, bad[i].cut, err, sizeof err);
    if (rc != 0) printf("PASS tokenize/refuses-%s (%s)\n", bad[i].name, err);
    else printf("FAIL tokenize/refuses-%s: it loaded\n", bad[i].name), kiln_spm_free(&d);
  }
  kiln_spm_free(&t);
  free(tok), free(texts), free(ref);
  return enc_bad || dec_bad;
}
