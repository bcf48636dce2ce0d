/*
 * util.c — memory, growable buffers, diagnostics, files and templates.
 *
 * All compile-time memory comes from one arena: blocks on a list, released by
 * kiln_free_all at exit. Diagnostics exit after removing the half-built output
 * directory, so a failed build leaves nothing in out/.
 */
#define _DEFAULT_SOURCE   /* madvise (glibc); -D_POSIX_C_SOURCE alone hides it */
#define _DARWIN_C_SOURCE  /* the same on macOS */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct Block {
  struct Block *next;
  max_align_t data[];
} Block;

static Block *blocks;

static _Noreturn void fail_exit(void);

/* Out of memory is reported like any error (one line, partial output removed): a model
 * that needs more memory than the machine has is the user's problem to hear about. */
void *kiln_alloc(size_t n) {
  Block *b = n < SIZE_MAX - sizeof(Block) ? calloc(1, sizeof(Block) + (n ? n : 1)) : NULL;
  if (!b) {
    fprintf(stderr, "kiln: error: out of memory (allocating %zu bytes)\n", n);
    fail_exit();
  }
  b->next = blocks;
  blocks = b;
  return b->data;
}

/* A copy of s in the arena (freed with everything else at exit); s must not be NULL. */
char *kiln_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(kiln_alloc(n), s, n);
}

/* vprintf into a fresh arena string of exactly the needed size; ap is left unused
 * (consumed on a copy), so the caller still owns and ends it. */
char *kiln_vfmt(const char *fmt, va_list ap) {
  va_list aq;
  va_copy(aq, ap);
  int n = vsnprintf(NULL, 0, fmt, aq);
  va_end(aq);
  char *s = kiln_alloc((size_t)n + 1);
  va_copy(aq, ap);
  vsnprintf(s, (size_t)n + 1, fmt, aq);
  va_end(aq);
  return s;
}

/* printf into a fresh arena string of exactly the needed size. */
char *kiln_fmt(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = kiln_vfmt(fmt, ap);
  va_end(ap);
  return s;
}

/* Frees every arena block at once (registered with atexit); no arena pointer is valid after. */
void kiln_free_all(void) {
  while (blocks) {
    Block *next = blocks->next;
    free(blocks);
    blocks = next;
  }
}

/* ---- Buf ---- */

/* Appends n bytes of p, growing with realloc (heap, not arena: free with buf_free); the data
 * stays NUL-terminated so it can be used as a string. Running out of memory is a
 * one-line user error, like kiln_alloc's. */
void buf_put(Buf *b, const void *p, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (b->len + n + 1 > cap) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) kiln_error("out of memory (growing a buffer to %zu bytes)", cap);
    b->data = d;
    b->cap = cap;
  }
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = 0;
}

/* Appends the string s without its NUL. */
void buf_puts(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

/* Appends printf output of any length (formatted twice: once to size it). */
void buf_printf(Buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *tmp = malloc((size_t)n + 1);
  if (!tmp) kiln_error("out of memory (formatting %d bytes)", n);
  va_start(ap, fmt);
  vsnprintf(tmp, (size_t)n + 1, fmt, ap);
  va_end(ap);
  buf_put(b, tmp, (size_t)n);
  free(tmp);
}

/* Releases b's heap memory and resets it to empty, ready for reuse. */
void buf_free(Buf *b) {
  free(b->data);
  *b = (Buf){0};
}

/* ---- string maps ---- */

/* The slot holding k, or the empty slot where it would go (the table is never more
 * than half full, so the probe ends). */
static size_t strmap_slot(const StrMap *m, const char *k) {
  size_t i = (size_t)kiln_fnv1a64(k, strlen(k)) & (m->cap - 1);
  while (m->key[i] && strcmp(m->key[i], k) != 0) i = (i + 1) & (m->cap - 1);
  return i;
}

int *strmap_get(const StrMap *m, const char *k) {
  if (!m->cap) return NULL;
  size_t i = strmap_slot(m, k);
  return m->key[i] ? &m->val[i] : NULL;
}

int *strmap_put(StrMap *m, const char *k) {
  if (2 * (m->n + 1) > m->cap) {          /* grow: rehash into a table twice the size */
    StrMap old = *m;
    m->cap = old.cap ? 2 * old.cap : 64;
    m->key = kiln_alloc(m->cap * sizeof *m->key);
    m->val = kiln_alloc(m->cap * sizeof *m->val);
    for (size_t i = 0; i < old.cap; i++)
      if (old.key[i]) {
        size_t j = strmap_slot(m, old.key[i]);
        m->key[j] = old.key[i];
        m->val[j] = old.val[i];
      }
  }
  size_t i = strmap_slot(m, k);
  if (!m->key[i]) {
    m->key[i] = k;
    m->n++;
  }
  return &m->val[i];
}

/* ---- diagnostics ---- */

static const char *cleanup_dir;

/* Names the temporary build directory to delete if the run fails (NULL once published).
 * The string must outlive the run. */
void kiln_set_cleanup_dir(const char *tmpdir) { cleanup_dir = tmpdir; }

/* Contract: removes the tree at path with rm -rf run directly (fork + execv, no
 * shell, so no quoting); async-signal-safe, so the signal handler can use it too.
 * Returns whether rm succeeded. */
bool kiln_remove_tree(const char *path) {
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    char *const argv[] = {"rm", "-rf", "--", (char *)path, NULL};
    execv("/bin/rm", argv);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return false;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Removes a directory tree we created; only ever called on our own temporary dir. */
static void remove_tree(const char *path) {
  if (!kiln_remove_tree(path)) fprintf(stderr, "kiln: could not remove %s\n", path);
}

/* Exit status 1 for a user error, after removing the temporary build directory if any. */
static _Noreturn void fail_exit(void) {
  if (cleanup_dir) remove_tree(cleanup_dir);
  exit(1);
}

/* A user error at the model's source: "file:line: error: msg" (or "file:" / "kiln:" when the
 * line or file is unknown) on stderr, then fail_exit. Does not return. */
void kiln_error_at(SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_progress_end();
  if (loc.file && loc.line > 0)
    fprintf(stderr, "%s:%d: error: ", loc.file, loc.line);
  else if (loc.file)
    fprintf(stderr, "%s: error: ", loc.file);
  else
    fprintf(stderr, "kiln: error: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fail_exit();
}

/* A user error with no source location (command line, files): "kiln: error: msg", exit 1. */
void kiln_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_progress_end();
  fprintf(stderr, "kiln: error: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fail_exit();
}

/* An internal Kiln bug (via die()): names the C file and line, removes the temp dir and
 * aborts, so a broken invariant is loud and never mistaken for a user error. */
void die_(const char *cfile, int cline, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kiln: internal error at %s:%d: ", cfile, cline);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  if (cleanup_dir) remove_tree(cleanup_dir);
  abort();
}

/* ---- files ---- */

/* Contract: reads the file at path into the arena (NUL-terminated) and sets *size,
 * reading at most max bytes: a regular file larger than max is refused before any
 * read, a stream (pipe, device) as soon as it delivers byte max + 1, so /dev/zero
 * cannot exhaust memory. On any problem returns NULL with "path: problem" in err. */
unsigned char *kiln_read_bounded(const char *path, size_t max, size_t *size, char *err, size_t errlen) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return snprintf(err, errlen, "%s: is a directory", path), NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno)), NULL;
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > max) {
    fclose(f);
    return snprintf(err, errlen, "%s: the file has %lld bytes, more than the %zu it can hold", path,
                    (long long)st.st_size, max), NULL;
  }
  Buf b = {0};
  char chunk[65536];
  size_t n;
  while (b.len <= max && (n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_put(&b, chunk, n);
  bool bad = ferror(f);
  fclose(f);
  if (bad || b.len > max) {
    buf_free(&b);
    if (bad) return snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno)), NULL;
    return snprintf(err, errlen, "%s: more than the %zu bytes it can hold (an endless stream?)", path, max), NULL;
  }
  unsigned char *data = kiln_alloc(b.len + 1);
  if (b.len) memcpy(data, b.data, b.len);
  *size = b.len;
  buf_free(&b);
  return data;
}

static char mapped_names[KILN_MAPPED_NAMES][KILN_MAPPED_NAME_MAX];
static volatile sig_atomic_t nmapped;

/* Contract in kiln.h. */
int kiln_mapped_count(void) { return nmapped; }
const char *kiln_mapped_name(int i) { return mapped_names[i]; }

/* Records path as mapped (its name only, cut to fit), before the mapping is read. */
static void note_mapped(const char *path) {
  if (nmapped == KILN_MAPPED_NAMES) return;
  snprintf(mapped_names[nmapped], sizeof mapped_names[0], "%s", path);
  nmapped = nmapped + 1;
}

/* Contract in kiln.h. The mapping lives until exit, like the arena. */
unsigned char *kiln_map_file(const char *path, size_t *size, bool *mapped, char *err, size_t errlen) {
  *mapped = false;
  struct stat st;
  int fd = open(path, O_RDONLY);
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size <= SIZE_MAX - 1) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p != MAP_FAILED) {
      note_mapped(path);
      *size = (size_t)st.st_size;
      *mapped = true;
      return p;
    }
  } else if (fd >= 0) {
    close(fd);
  }
  return kiln_read_bounded(path, SIZE_MAX - 1, size, err, errlen);
}

/* Contract in kiln.h: the whole pages inside the range, and the partial ones at its ends
 * too (they are read-only file pages: dropping a neighbour's costs at most a re-read). */
void kiln_drop_pages(const void *p, size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);   /* no static: threads quantizing call this too */
  if (!n || !page) return;
  uintptr_t lo = (uintptr_t)p / page * page, hi = ((uintptr_t)p + n + page - 1) / page * page;
  (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);   /* advice: failing to drop changes nothing */
}

/* Creates every missing directory on the way to dir/name. */
static void make_parents(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(path, 0777) != 0 && errno != EEXIST) kiln_error("cannot create %s: %s", path, strerror(errno));
    *p = '/';
  }
}

/* Writes n bytes to dir/name, creating parent directories; any I/O failure is a user error
 * naming the path. */
void kiln_write_file(const char *dir, const char *name, const void *data, size_t n) {
  char *path = kiln_fmt("%s/%s", dir, name);
  make_parents(path);
  FILE *f = fopen(path, "wb");
  if (!f) kiln_error("cannot write %s: %s", path, strerror(errno));
  if (n && fwrite(data, 1, n, f) != n) kiln_error("cannot write %s: %s", path, strerror(errno));
  if (fclose(f) != 0) kiln_error("cannot write %s: %s", path, strerror(errno));
}

/* FNV-1a 64 of n bytes: the weights checksum. Must match runtime/kiln_runtime.c's copy. */
uint64_t kiln_fnv1a64(const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= s[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/* ---- templates ---- */

extern const struct KilnEmbedded {
  const char *name;
  const unsigned char *text;
  size_t len;
} kiln_embedded[];

/* The embedded templates/<path> text (NUL-terminated); dies when the build did not embed it. */
const char *template_get(const char *path) {
  char *full = kiln_fmt("templates/%s", path);
  for (int i = 0; kiln_embedded[i].name; i++)
    if (strcmp(kiln_embedded[i].name, full) == 0) return (const char *)kiln_embedded[i].text;
  die("no embedded template %s", full);
}

/* Returns the embedded file at a repository path such as "gen/frontend/nn.lua", or NULL. */
const char *embedded_get(const char *path, size_t *len) {
  for (int i = 0; kiln_embedded[i].name; i++)
    if (strcmp(kiln_embedded[i].name, path) == 0) {
      if (len) *len = kiln_embedded[i].len;
      return (const char *)kiln_embedded[i].text;
    }
  return NULL;
}

/* Whether c may appear in a template $name: letters, '_', and digits except in first place. */
static bool is_ident(char c, bool first) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
}

/* Appends tmpl to out with each $name or ${name} replaced by its value from vars (NULL-
 * terminated name, value pairs) and "$$" by "$". Dies on a malformed or unbound name: the
 * templates are ours, so a mismatch is a Kiln bug. */
void template_expand(Buf *out, const char *tmpl, const char *const *vars) {
  const char *p = tmpl;
  while (*p) {
    const char *d = strchr(p, '$');
    if (!d) {
      buf_puts(out, p);
      return;
    }
    buf_put(out, p, (size_t)(d - p));
    if (d[1] == '$') {
      buf_puts(out, "$");
      p = d + 2;
      continue;
    }
    bool braced = d[1] == '{';
    const char *name = d + 1 + braced, *q = name;
    while (is_ident(*q, q == name)) q++;
    if (q == name || (braced && *q != '}')) die("template: bad $name near \"%.20s\"", d);
    size_t n = (size_t)(q - name);
    const char *val = NULL;
    for (int i = 0; vars[i]; i += 2)
      if (strlen(vars[i]) == n && memcmp(vars[i], name, n) == 0) {
        val = vars[i + 1];
        break;
      }
    if (!val) die("template: no value for $%.*s", (int)n, name);
    buf_puts(out, val);
    p = q + braced;
  }
}

/* ---- element conversion (readers of weights files) ---- */

/* The float whose IEEE bits are u (memcpy, not a pointer cast, to stay within aliasing rules). */
float kiln_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* IEEE half to float, exactly: normals rebias, subnormals normalise, inf/NaN keep payload. */
float kiln_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = h >> 10 & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return kiln_f32_from_bits(sign | 0x7f800000u | man << 13);
  if (exp == 0) {
    if (man == 0) return kiln_f32_from_bits(sign);
    int e = -1;
    do {
      man <<= 1;
      e++;
    } while (!(man & 0x400));
    return kiln_f32_from_bits(sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13);
  }
  return kiln_f32_from_bits(sign | (exp + 127 - 15) << 23 | man << 13);
}

/* The nearest half to x as a float: narrowed and widened again (kiln_f32_to_f16 rounds to
 * nearest even, overflow to inf); a NaN is returned as is. */
float kiln_round_f16(float x) {
  if (x != x) return x;   /* a NaN keeps its payload */
  return kiln_f16_to_f32(kiln_f32_to_f16(x));
}

/* bfloat16 is the top half of an f32, so widening is exact: shift into the high bits. */
float kiln_bf16_to_f32(uint16_t h) { return kiln_f32_from_bits((uint32_t)h << 16); }

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* Float to IEEE half, round to nearest even on the bits (no float arithmetic, so no
 * rounding mode or excess precision can change it): |f| >= 65520 becomes inf, NaN a
 * quiet NaN keeping the top payload bits, values below 2^-14 half subnormals. */
uint16_t kiln_f32_to_f16(float f) {
  uint32_t u = f32_bits(f), a = u & 0x7fffffffu;
  uint16_t sign = (uint16_t)(u >> 16 & 0x8000);
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | (a >> 13 & 0x1ff));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);          /* 65520 and up (and inf) */
  int e = (int)(a >> 23);
  if (a >= 0x38800000u) {                                           /* a normal half */
    uint32_t h = (uint32_t)(e - 112) << 10 | (a >> 13 & 0x3ff), rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;            /* a carry into the exponent is right */
    return (uint16_t)(sign | h);
  }
  if (e < 102) return sign;                                         /* below 2^-25: rounds to zero */
  uint32_t mant = (a & 0x7fffff) | 0x800000, shift = (uint32_t)(126 - e);   /* 14..24 */
  uint32_t m = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (m & 1))) m++;                  /* m == 0x400: the smallest normal */
  return (uint16_t)(sign | m);
}

/* Float to bfloat16, round to nearest even; NaN stays NaN (quiet bit set, since dropping
 * the low payload bits could otherwise leave an infinity). */
uint16_t kiln_f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x0040);
  return (uint16_t)((u + 0x7fffu + (u >> 16 & 1)) >> 16);
}

/* ---- progress on a terminal ---- */

/* A build's progress, one line rewritten in place on stderr, only when stderr is a
 * terminal (never in logs, pipes or tests) and only once the build has run for a
 * second: short builds stay silent. KILN_PROGRESS=0 turns it off, =1 forces it (tests). */
static struct {
  int on;                       /* -1 unknown, 0 off, 1 on */
  double start, last;
  bool shown;
} progress = {-1, 0, 0, false};

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void kiln_progress(const char *phase, int64_t done, int64_t total) {
  if (progress.on < 0) {
    const char *env = getenv("KILN_PROGRESS");
    progress.on = env && env[0] ? env[0] == '1' : isatty(2);
    progress.start = now_seconds();
  }
  if (!progress.on) return;
  double t = now_seconds();
  bool forced = getenv("KILN_PROGRESS") && getenv("KILN_PROGRESS")[0] == '1';
  if (!forced && (t - progress.start < 1.0 || t - progress.last < 0.1)) return;
  progress.last = t;
  progress.shown = true;
  if (total > 0) fprintf(stderr, "\rkiln: %s %3d%%\033[K", phase, (int)(100.0 * (double)done / (double)total));
  else fprintf(stderr, "\rkiln: %s...\033[K", phase);
  fflush(stderr);
}

void kiln_progress_end(void) {
  if (!progress.shown) return;
  fprintf(stderr, "\r\033[K");
  fflush(stderr);
  progress.shown = false;
}
