/*
 * nfc_test.c — runtime/llm/kiln_tok_nfc.c as a filter (t_tok, ASan+UBSan): each line of
 * stdin, normalized to NFC, on stdout. t_tok compares the output with Python's
 * unicodedata.normalize("NFC", ...) on random strings of decomposable characters,
 * combining marks in every order, Hangul syllables and jamo.
 */
#include "kiln_tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  static char line[1 << 16];
  while (fgets(line, sizeof line, stdin)) {
    size_t len = strcspn(line, "\n");
    uint32_t *cps = malloc(sizeof(uint32_t) * (2 * len + 8));
    unsigned char *out = malloc(3 * len + 8);
    size_t m = kiln_tok_nfc((const unsigned char *)line, len, cps, out);
    fwrite(out, 1, m, stdout);
    putchar('\n');
    free(cps);
    free(out);
  }
  return 0;
}
