/*
 * fuzz_gen.h — what a fuzz harness of the compiler's own readers (gen/) needs besides
 * them: linking gen/util.c needs the table of embedded files that the build normally
 * generates (the readers use none, so it is empty here), and finding() reports a broken
 * promise loudly so the fuzzer keeps the input. Define FUZZ_NAME before including it.
 */
#include "kiln.h"

#include <stdlib.h>
#include <string.h>

const struct KilnEmbedded {
  const char *name;
  const unsigned char *text;
  size_t len;
} kiln_embedded[] = {{NULL, NULL, 0}};

/* Fails loudly: the fuzzer records the input that got here. */
static void finding(const char *what, const char *detail) {
  fprintf(stderr, "%s: %s: %s\n", FUZZ_NAME, what, detail ? detail : "");
  abort();
}
