/*
 * replay_main.h — main() of a fuzz harness built without libFuzzer (-DKILN_FUZZ_MAIN),
 * shared by tests/robust/fuzz_*.c: runs LLVMFuzzerTestOneInput once on each file named
 * on the command line, then prints "<FUZZ_NAME>: N inputs replayed" (tests/t_robust.sh).
 * A finding aborts inside the harness; exit 2 when a file cannot be read. Define
 * FUZZ_NAME before including it.
 */
#ifdef KILN_FUZZ_MAIN
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen(argv[i], "rb");
    if (!f) {
      perror(argv[i]);
      return 2;
    }
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
      n += got;
      if (n == cap) {
        uint8_t *more = realloc(buf, cap *= 2);
        if (!more) free(buf);
        buf = more;
      }
    }
    fclose(f);
    if (!buf) return 2;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
  }
  printf("%s: %d inputs replayed\n", FUZZ_NAME, argc - 1);
  return 0;
}
#endif
