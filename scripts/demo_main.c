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
#define DEMO_MISTAKES 3  /* misclassified samples named */
#define DEMO_REPEAT 3    /* timed passes over all samples */

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

static int demo_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Prints a 28x28 image as text, two pixel rows per line, leaving out blank lines. */
static void demo_draw(const unsigned char *img) {
  static const char ramp[] = " .:-=+*#%@";
  for (int y = 0; y < 28; y += 2) {
    char line[29];
    int ink = 0;
    for (int x = 0; x < 28; x++) {
      int v = (img[y * 28 + x] + img[(y + 1) * 28 + x]) / 2;
      line[x] = ramp[v * 9 / 255];
      ink |= line[x] != ' ';
    }
    line[28] = '\0';
    if (ink) printf("    |%s|\n", line);
  }
}

/* Scales one image's bytes to floats in [0, 1] (the training script's preprocessing). */
static void demo_to_float(const unsigned char *img, float *out) {
  for (unsigned i = 0; i < MLP_IMAGE_NUMEL; i++) out[i] = (float)img[i] / 255.0f;
}

/* The model's arg-max class for each of n images; returns how many equal labels. */
static int demo_classify(const void *weights, void *arena, float *x, const unsigned char *images,
                         const unsigned char *labels, int n, int *pred) {
  float logits[MLP_LOGITS_NUMEL];
  int correct = 0;
  for (int i = 0; i < n; i++) {
    demo_to_float(images + (size_t)i * MLP_IMAGE_NUMEL, x);
    mlp_run(weights, arena, x, logits);
    pred[i] = demo_argmax(logits, (int)MLP_LOGITS_NUMEL);
    correct += pred[i] == labels[i];
  }
  return correct;
}

/* Median microseconds of one mlp_run over DEMO_REPEAT passes through the n images,
 * each call timed on its own: the median shrugs off the odd preemption on a busy
 * machine. Only the model's run is timed, not the pixel scaling. */
static uint64_t demo_median_us(const void *weights, void *arena, float *x, const unsigned char *images, int n) {
  size_t total = (size_t)n * DEMO_REPEAT;
  uint64_t *times = malloc(sizeof *times * total);
  if (!times) demo_fail("out of memory", "malloc");
  float logits[MLP_LOGITS_NUMEL];
  for (size_t k = 0; k < total; k++) {
    demo_to_float(images + (k % (size_t)n) * MLP_IMAGE_NUMEL, x);
    uint64_t t0 = kiln_time_us();
    mlp_run(weights, arena, x, logits);
    times[k] = kiln_time_us() - t0;
  }
  qsort(times, total, sizeof *times, demo_cmp_u64);
  uint64_t median = times[total / 2];
  free(times);
  return median;
}

/* Prints sample 0, the first predictions, the first mistakes, accuracy and speed. */
static void demo_report(const char *weights_path, const unsigned char *images, const unsigned char *labels,
                        const int *pred, int n, int correct, uint64_t median_us) {
  printf("Kiln demo: MLP 784-512-512-10 trained on Fashion-MNIST (models/mlp.lua)\n");
  printf("weights: %s (%u bytes, checksum ok)\n\n", weights_path, (unsigned)MLP_WEIGHTS_SIZE);
  printf("  sample 0, true class %s:\n", demo_classes[labels[0]]);
  demo_draw(images);
  printf("\n  %-6s %-12s %-12s\n", "sample", "predicted", "true");
  for (int i = 0; i < n && i < DEMO_SHOW; i++)
    printf("  %-6d %-12s %-12s %s\n", i, demo_classes[pred[i]], demo_classes[labels[i]],
           pred[i] == labels[i] ? "ok" : "WRONG");
  printf("  ...\n  first mistakes:");
  for (int i = 0, shown = 0; i < n && shown < DEMO_MISTAKES; i++)
    if (pred[i] != labels[i]) {
      printf("%s #%d %s (true %s)", shown ? "," : "", i, demo_classes[pred[i]], demo_classes[labels[i]]);
      shown++;
    }
  printf("\n\naccuracy on %d bundled test images: %d/%d = %.1f%%\n", n, correct, n, 100.0 * correct / n);
  printf("time per inference: %llu us (generated C, 1 thread; median of %d runs)\n",
         (unsigned long long)median_us, n * DEMO_REPEAT);
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
  if (nlab == 0 || nlab > 1000000 || nimg != nlab * MLP_IMAGE_NUMEL)
    demo_fail("image and label counts disagree", argv[2]);
  for (size_t i = 0; i < nlab; i++)
    if (labels[i] >= 10) demo_fail("a label is not a class 0..9", argv[3]);
  int n = (int)nlab;

  void *arena = kiln_arena_alloc(MLP_ARENA_SIZE);
  float *x = kiln_arena_alloc(MLP_IMAGE_SIZE);
  int *pred = malloc(sizeof *pred * nlab);
  if (!arena || !x || !pred) demo_fail("out of memory", "malloc");

  int correct = demo_classify(w.payload, arena, x, images, labels, n, pred);
  uint64_t median_us = demo_median_us(w.payload, arena, x, images, n);
  demo_report(argv[1], images, labels, pred, n, correct, median_us);

  kiln_weights_free(&w);
  free(pred);
  kiln_arena_free(x);
  kiln_arena_free(arena);
  free(img_owner);
  free(lab_owner);
  return 0;
}
