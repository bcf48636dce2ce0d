/*
 * demo_main.c — the program `make demo` builds around Kiln's generated MLP.
 *
 * It shows the whole contract of a Kiln build from the caller's side: load and
 * validate the weights blob with the runtime, own the scratch arena (one 64-byte
 * aligned allocation of MLP_ARENA_SIZE bytes), and call mlp_run once per image.
 * The bundled samples are two .npy files (uint8 images [N, 28, 28], uint8 labels
 * [N]); a tiny .npy reader lives here because the runtime depends on libc only and
 * has no business knowing NumPy's format. Pixels are scaled to [0, 1] exactly as
 * scripts/train_mlp.py did when it trained the network.
 *
 * usage: demo WEIGHTS IMAGES.npy LABELS.npy
 */
#include "mlp.h"
#include "kiln_runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEMO_SHOW 8      /* predictions printed one per line */
#define DEMO_REPEAT 5    /* timed passes over all samples; the fastest is reported */

static const char *const demo_classes[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
};

/* Prints a one-line error and exits with status 1. */
static void demo_fail(const char *what, const char *path) {
  fprintf(stderr, "demo: %s: %s\n", path, what);
  exit(1);
}

/* Reads a whole file into a malloc'd buffer; sets *len. Exits on failure. */
static unsigned char *demo_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) demo_fail("cannot open", path);
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  if (!buf) demo_fail("out of memory", path);
  size_t got;
  while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      unsigned char *bigger = realloc(buf, cap *= 2);
      if (!bigger) demo_fail("out of memory", path);
      buf = bigger;
    }
  }
  fclose(f);
  *len = n;
  return buf;
}

/*
 * Loads a version 1 .npy file holding uint8 data in C order. Returns a pointer
 * to the data (inside *owner, which the caller frees) and its element count;
 * the header must declare descr '|u1' and fortran_order False. The shape is not
 * parsed: the caller checks the element count against what it expects.
 */
static const unsigned char *demo_load_npy_u8(const char *path, unsigned char **owner, size_t *count) {
  size_t len;
  unsigned char *buf = demo_read_file(path, &len);
  if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0 || buf[6] != 1) demo_fail("not a version 1 .npy file", path);
  size_t hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
  if (10 + hlen > len) demo_fail("truncated .npy header", path);
  char *header = malloc(hlen + 1);
  if (!header) demo_fail("out of memory", path);
  memcpy(header, buf + 10, hlen);
  header[hlen] = '\0';
  if (!strstr(header, "'descr': '|u1'") || !strstr(header, "'fortran_order': False"))
    demo_fail("expected uint8 data in C order", path);
  free(header);
  *owner = buf;
  *count = len - 10 - hlen;
  return buf + 10 + hlen;
}

/* Returns the index of the largest of n logits (the first on ties). */
static int demo_argmax(const float *v, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;
  return best;
}

/* Prints a 28x28 image as 14 lines of text, two pixel rows per line. */
static void demo_draw(const unsigned char *img) {
  static const char ramp[] = " .:-=+*#%@";
  for (int y = 0; y < 28; y += 2) {
    printf("    ");
    for (int x = 0; x < 28; x++) {
      int v = (img[y * 28 + x] + img[(y + 1) * 28 + x]) / 2;
      putchar(ramp[v * 9 / 255]);
    }
    putchar('\n');
  }
}

/* Scales one image's bytes to floats in [0, 1] (the training script's preprocessing). */
static void demo_to_float(const unsigned char *img, float *out) {
  for (unsigned i = 0; i < MLP_IMAGE_NUMEL; i++) out[i] = (float)img[i] / 255.0f;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s WEIGHTS IMAGES.npy LABELS.npy\n", argv[0]);
    return 2;
  }
  kiln_weights w;
  if (kiln_weights_load(&w, argv[1], MLP_WEIGHTS_SIZE, MLP_WEIGHTS_CHECKSUM) != KILN_OK) {
    fprintf(stderr, "demo: %s\n", w.message);
    return 1;
  }
  unsigned char *img_owner, *lab_owner;
  size_t nimg, nlab;
  const unsigned char *images = demo_load_npy_u8(argv[2], &img_owner, &nimg);
  const unsigned char *labels = demo_load_npy_u8(argv[3], &lab_owner, &nlab);
  if (nimg != nlab * MLP_IMAGE_NUMEL || nlab == 0) demo_fail("image and label counts disagree", argv[2]);
  int n = (int)nlab;

  void *arena = kiln_arena_alloc(MLP_ARENA_SIZE);
  float *x = kiln_arena_alloc(MLP_IMAGE_SIZE);
  float logits[MLP_LOGITS_NUMEL];
  int *pred = malloc(sizeof *pred * (size_t)n);
  if (!arena || !x || !pred) demo_fail("out of memory", "malloc");

  /* Classify every sample once, then time DEMO_REPEAT more passes (inference only). */
  int correct = 0;
  for (int i = 0; i < n; i++) {
    demo_to_float(images + (size_t)i * MLP_IMAGE_NUMEL, x);
    mlp_run(w.payload, arena, x, logits);
    pred[i] = demo_argmax(logits, (int)MLP_LOGITS_NUMEL);
    correct += pred[i] == labels[i];
  }
  double best_us = 0;
  for (int r = 0; r < DEMO_REPEAT; r++) {
    uint64_t t0 = kiln_time_us();
    for (int i = 0; i < n; i++) {
      demo_to_float(images + (size_t)i * MLP_IMAGE_NUMEL, x);
      mlp_run(w.payload, arena, x, logits);
    }
    double us = (double)(kiln_time_us() - t0) / n;
    if (r == 0 || us < best_us) best_us = us;
  }

  printf("Kiln demo: MLP 784-512-512-10 trained on Fashion-MNIST (models/mlp.lua)\n");
  printf("weights: %s (%u bytes, checksum ok)\n\n", argv[1], (unsigned)MLP_WEIGHTS_SIZE);
  printf("  sample 0, true class %s:\n", demo_classes[labels[0]]);
  demo_draw(images);
  printf("\n  %-6s %-12s %-12s\n", "sample", "predicted", "true");
  for (int i = 0; i < n && i < DEMO_SHOW; i++)
    printf("  %-6d %-12s %-12s %s\n", i, demo_classes[pred[i]], demo_classes[labels[i]],
           pred[i] == labels[i] ? "ok" : "WRONG");
  printf("\naccuracy on %d bundled test images: %d/%d = %.1f%%\n", n, correct, n, 100.0 * correct / n);
  printf("time per inference: %.1f us (generated C, 1 thread, fastest of %d passes over %d images)\n",
         best_us, DEMO_REPEAT, n);

  kiln_weights_free(&w);
  free(pred);
  kiln_arena_free(x);
  kiln_arena_free(arena);
  free(img_owner);
  free(lab_owner);
  return 0;
}
