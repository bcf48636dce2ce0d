/*
 * kiln_runtime.c — loading and validating weights, the arena, a timer.
 *
 * Validation order follows what a user most needs to hear: a file that is not
 * ours (magic), a format we do not know (version, header size), a file cut short
 * (truncated), a file that is damaged (checksum against its own header), and last
 * a healthy file that belongs to another model or build (size and checksum
 * against the values compiled into the model). The same header check serves the
 * file loader and embedded blobs, so both fail the same way.
 */
#if !defined(_POSIX_C_SOURCE) && !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L   /* clock_gettime; harmless where absent */
#endif
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE 1   /* madvise and MADV_HUGEPAGE next to a -D_POSIX_C_SOURCE */
#endif
#include "kiln_runtime.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__unix__) || defined(__APPLE__)
#define KILN_HAVE_MMAP 1
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

enum { HEADER_SIZE = 64, VERSION = 1, ALIGN = 64 };

/* A short static English description of st, for messages; "unknown status" for a value
 * outside the enum. */
const char *kiln_status_str(kiln_status st) {
  switch (st) {
  case KILN_OK: return "ok";
  case KILN_ERR_OPEN: return "cannot open";
  case KILN_ERR_READ: return "read error";
  case KILN_ERR_TRUNCATED: return "truncated";
  case KILN_ERR_MAGIC: return "bad magic: not a Kiln weights file";
  case KILN_ERR_VERSION: return "unsupported weights format version";
  case KILN_ERR_HEADER: return "malformed header";
  case KILN_ERR_CHECKSUM: return "checksum mismatch: the payload is corrupt";
  case KILN_ERR_MODEL: return "weights belong to a different model or build";
  case KILN_ERR_ALIGN: return "blob not 64-byte aligned";
  case KILN_ERR_NOMEM: return "out of memory";
  case KILN_ERR_ARG: return "invalid argument";
  }
  return "unknown status";
}

/* Sets w's status and a one-line message "<where>: <status>: <detail>". */
static kiln_status fail(kiln_weights *w, kiln_status st, const char *where, const char *fmt, ...) {
  char detail[160] = "";
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
  }
  snprintf(w->message, sizeof w->message, "%s: %s%s%s", where, kiln_status_str(st), *detail ? " (" : "",
           *detail ? detail : "");
  if (*detail) strncat(w->message, ")", sizeof w->message - strlen(w->message) - 1);
  w->status = st;
  w->payload = NULL;
  return st;
}

/* FNV-1a 64 of n bytes; must match gen/util.c's, which computed the checksum at build time. */
uint64_t kiln_fnv1a64(const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= s[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/* The n-byte little-endian unsigned integer at p (n <= 8), independent of host byte order. */
static uint64_t get_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Checks the fixed header fields; on success *payload_size gets the declared size. */
static kiln_status check_header(kiln_weights *w, const char *where, const unsigned char *h, uint64_t *payload_size) {
  if (memcmp(h, "KILNWGT1", 8) != 0) return fail(w, KILN_ERR_MAGIC, where, NULL);
  uint64_t version = get_le(h + 8, 4), hsize = get_le(h + 12, 4);
  if (version != VERSION) return fail(w, KILN_ERR_VERSION, where, "file has version %llu, runtime reads %d",
                                      (unsigned long long)version, VERSION);
  if (hsize != HEADER_SIZE) return fail(w, KILN_ERR_HEADER, where, "header size %llu, expected %d",
                                        (unsigned long long)hsize, HEADER_SIZE);
  for (int i = 32; i < HEADER_SIZE; i++)   /* reserved; the checksum does not cover them */
    if (h[i]) return fail(w, KILN_ERR_HEADER, where, "reserved header byte %d is %d, not 0", i, h[i]);
  *payload_size = get_le(h + 16, 8);
  return KILN_OK;
}

/* The bytes after the header (have) must be exactly the payload the header declares:
 * fewer is a truncated file ("file" or "blob" in the message), more a file of another
 * length, which is not this file either. */
static kiln_status check_length(kiln_weights *w, const char *where, const char *what, uint64_t have, uint64_t size) {
  if (have < size)
    return fail(w, KILN_ERR_TRUNCATED, where, "header promises %llu payload bytes, the %s has %llu", (unsigned long long)size,
                what, (unsigned long long)have);
  if (have > size)
    return fail(w, KILN_ERR_HEADER, where, "%llu bytes after the %llu-byte payload", (unsigned long long)(have - size),
                (unsigned long long)size);
  return KILN_OK;
}

/* The payload is in place: checks it against the header, then against the model. */
static kiln_status check_payload(kiln_weights *w, const char *where, const unsigned char *h, const void *payload,
                                 uint64_t size, uint64_t expect_size, uint64_t expect_checksum) {
  uint64_t declared = get_le(h + 24, 8), actual = kiln_fnv1a64(payload, (size_t)size);
  if (actual != declared)
    return fail(w, KILN_ERR_CHECKSUM, where, "payload hashes to %016llx, header says %016llx", (unsigned long long)actual,
                (unsigned long long)declared);
  if (size != expect_size)
    return fail(w, KILN_ERR_MODEL, where, "payload is %llu bytes, the model expects %llu", (unsigned long long)size,
                (unsigned long long)expect_size);
  if (actual != expect_checksum)
    return fail(w, KILN_ERR_MODEL, where, "checksum %016llx, the model expects %016llx", (unsigned long long)actual,
                (unsigned long long)expect_checksum);
  w->payload = payload;
  w->size = size;
  w->checksum = actual;
  w->status = KILN_OK;
  w->message[0] = 0;
  return KILN_OK;
}

/* Zeroed memory of size rounded up to 64 bytes, 64-byte aligned (never a zero-size request);
 * NULL when out of memory. Free with kiln_arena_free. From HUGE bytes on (weights, large
 * arenas), on Linux, whole 2 MiB pages aligned to them and advised as huge pages: the matrix
 * products stream a weight's panels once per call, and with 4 KiB pages every 4 KiB of them
 * cost a TLB miss (about 8 % of a Linear layer on 128 tokens here). */
void *kiln_arena_alloc(size_t size) {
  enum { HUGE = 2097152 };
  size_t n = (size + ALIGN - 1) / ALIGN * ALIGN;
  void *p = NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (n >= HUGE && n <= SIZE_MAX - HUGE) {
    n = (n + HUGE - 1) / HUGE * HUGE;
    p = aligned_alloc(HUGE, n);
    if (p) (void)madvise(p, n, MADV_HUGEPAGE);   /* only advice: without it, plain pages */
  }
#endif
  if (!p) p = aligned_alloc(ALIGN, n ? n : ALIGN);
  if (p) memset(p, 0, n ? n : ALIGN);
  return p;
}

/* Frees memory from kiln_arena_alloc; NULL is fine. */
void kiln_arena_free(void *arena) { free(arena); }

/* f's size in bytes, leaving it positioned at the start; -1 when f cannot seek (pipes). */
static long file_size(FILE *f) {
  if (fseek(f, 0, SEEK_END) != 0) return -1;
  long n = ftell(f);
  if (fseek(f, 0, SEEK_SET) != 0) return -1;
  return n;
}

/* Reads a weights file into fresh aligned memory owned by w, checking header, length,
 * checksum, and that size and checksum match the model's expect_*; on failure w holds the
 * status and a message and no memory is kept. NULL w gives KILN_ERR_ARG. */
kiln_status kiln_weights_load(kiln_weights *w, const char *path, uint64_t expect_size, uint64_t expect_checksum) {
  if (!w) return KILN_ERR_ARG;
  memset(w, 0, sizeof *w);
  if (!path) return fail(w, KILN_ERR_ARG, "(null)", "no path");
  FILE *f = fopen(path, "rb");
  if (!f) return fail(w, KILN_ERR_OPEN, path, "%s", strerror(errno));
  unsigned char h[HEADER_SIZE];
  long total = file_size(f);
  kiln_status st = KILN_OK;
  uint64_t size = 0;
  if (total < 0) st = fail(w, KILN_ERR_READ, path, "cannot seek");
  else if (total < HEADER_SIZE) st = fail(w, KILN_ERR_TRUNCATED, path, "%ld bytes, shorter than the %d-byte header", total, HEADER_SIZE);
  else if (fread(h, 1, HEADER_SIZE, f) != HEADER_SIZE) st = fail(w, KILN_ERR_READ, path, "cannot read the header");
  else st = check_header(w, path, h, &size);
  if (st == KILN_OK) st = check_length(w, path, "file", (uint64_t)(total - HEADER_SIZE), size);
  void *mem = NULL;
  if (st == KILN_OK && !(mem = kiln_arena_alloc((size_t)size)))
    st = fail(w, KILN_ERR_NOMEM, path, "%llu bytes", (unsigned long long)size);
  if (st == KILN_OK && size && fread(mem, 1, (size_t)size, f) != (size_t)size) st = fail(w, KILN_ERR_READ, path, NULL);
  fclose(f);
  if (st == KILN_OK) st = check_payload(w, path, h, mem, size, expect_size, expect_checksum);
  if (st != KILN_OK) {
    free(mem);
    return st;
  }
  w->owned = mem;
  return KILN_OK;
}

/* Like kiln_weights_load for a blob already in memory (--embed-weights): blob must be
 * 64-byte aligned and exactly header + payload; w borrows it, copying nothing. */
kiln_status kiln_weights_from_memory(kiln_weights *w, const void *blob, size_t blob_size, uint64_t expect_size,
                                     uint64_t expect_checksum) {
  if (!w) return KILN_ERR_ARG;
  memset(w, 0, sizeof *w);
  const char *where = "embedded weights";
  if (!blob) return fail(w, KILN_ERR_ARG, where, "NULL blob");
  if ((uintptr_t)blob % ALIGN) return fail(w, KILN_ERR_ALIGN, where, NULL);
  if (blob_size < HEADER_SIZE)
    return fail(w, KILN_ERR_TRUNCATED, where, "%zu bytes, shorter than the %d-byte header", blob_size, HEADER_SIZE);
  const unsigned char *h = blob;
  uint64_t size = 0;
  kiln_status st = check_header(w, where, h, &size);
  if (st != KILN_OK) return st;
  st = check_length(w, where, "blob", blob_size - HEADER_SIZE, size);   /* as for a file */
  if (st != KILN_OK) return st;
  return check_payload(w, where, h, h + HEADER_SIZE, size, expect_size, expect_checksum);
}

/* The header's own claims against the model, without hashing the payload: its size and
 * the checksum it declares must be the model's. */
static kiln_status check_declared(kiln_weights *w, const char *where, const unsigned char *h, const void *payload,
                                  uint64_t size, uint64_t expect_size, uint64_t expect_checksum) {
  uint64_t declared = get_le(h + 24, 8);
  if (size != expect_size)
    return fail(w, KILN_ERR_MODEL, where, "payload is %llu bytes, the model expects %llu", (unsigned long long)size,
                (unsigned long long)expect_size);
  if (declared != expect_checksum)
    return fail(w, KILN_ERR_MODEL, where, "checksum %016llx, the model expects %016llx", (unsigned long long)declared,
                (unsigned long long)expect_checksum);
  w->payload = payload;
  w->size = size;
  w->checksum = declared;
  w->status = KILN_OK;
  w->message[0] = 0;
  return KILN_OK;
}

/* Maps a weights file (see kiln_runtime.h): the same checks as kiln_weights_load, the
 * payload hash only with KILN_MAP_VERIFY. On failure nothing stays mapped. */
kiln_status kiln_weights_map(kiln_weights *w, const char *path, uint64_t expect_size, uint64_t expect_checksum,
                             unsigned flags) {
#ifndef KILN_HAVE_MMAP
  (void)flags;
  return kiln_weights_load(w, path, expect_size, expect_checksum);
#else
  if (!w) return KILN_ERR_ARG;
  memset(w, 0, sizeof *w);
  if (!path) return fail(w, KILN_ERR_ARG, "(null)", "no path");
  int fd = open(path, O_RDONLY);
  if (fd < 0) return fail(w, KILN_ERR_OPEN, path, "%s", strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail(w, KILN_ERR_READ, path, "not a regular file");
  }
  uint64_t total = (uint64_t)st.st_size, size = 0;
  if (total < HEADER_SIZE) {
    close(fd);
    return fail(w, KILN_ERR_TRUNCATED, path, "%llu bytes, shorter than the %d-byte header", (unsigned long long)total,
                HEADER_SIZE);
  }
  if (total > (uint64_t)SIZE_MAX) {
    close(fd);
    return fail(w, KILN_ERR_NOMEM, path, "%llu bytes do not fit this address space", (unsigned long long)total);
  }
  void *base = mmap(NULL, (size_t)total, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);   /* the mapping keeps the file */
  if (base == MAP_FAILED) return fail(w, KILN_ERR_NOMEM, path, "mmap: %s", strerror(errno));
  const unsigned char *h = base;
  kiln_status s = check_header(w, path, h, &size);
  if (s == KILN_OK) s = check_length(w, path, "file", total - HEADER_SIZE, size);
  if (s == KILN_OK)
    s = (flags & KILN_MAP_VERIFY) ? check_payload(w, path, h, h + HEADER_SIZE, size, expect_size, expect_checksum)
                                  : check_declared(w, path, h, h + HEADER_SIZE, size, expect_size, expect_checksum);
  if (s != KILN_OK) {
    munmap(base, (size_t)total);
    return s;
  }
  w->mapped = base;
  w->mapped_len = (size_t)total;
  return KILN_OK;
#endif
}

/* Frees what kiln_weights_load allocated (nothing for a borrowed blob); NULL w is fine.
 * After it, w holds no payload. */
void kiln_weights_free(kiln_weights *w) {
  if (!w) return;
  free(w->owned);
#ifdef KILN_HAVE_MMAP
  if (w->mapped) munmap(w->mapped, w->mapped_len);
#endif
  w->owned = NULL;
  w->mapped = NULL;
  w->mapped_len = 0;
  w->payload = NULL;
}

/* Microseconds from a monotonic clock when there is one (wall clock otherwise), for
 * timing runs; 0 if no clock answers. Only differences are meaningful. */
uint64_t kiln_time_us(void) {
  struct timespec ts;
#if defined(CLOCK_MONOTONIC)
  if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0) return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
#endif
  if (timespec_get(&ts, TIME_UTC) == 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}
