/*
 * kiln_runtime.h — the little a program needs around Kiln's generated C.
 *
 * Generated code never allocates and never touches files; this runtime does the
 * two things around it that need libc: getting a validated weights payload into
 * 64-byte aligned memory (from <m>.weights on disk, or from the array that
 * `kiln build --embed-weights` writes), and allocating the scratch arena. Plus a
 * monotonic microsecond timer for benchmarks. It depends on libc only (the timer
 * uses POSIX clock_gettime where available, C11 timespec_get otherwise).
 *
 *   kiln_weights w;
 *   kiln_status st = kiln_weights_load(&w, "mlp.weights", MLP_WEIGHTS_SIZE, MLP_WEIGHTS_CHECKSUM);
 *   if (st != KILN_OK) { fprintf(stderr, "%s\n", w.message); return 1; }
 *   void *arena = kiln_arena_alloc(MLP_ARENA_SIZE);
 *   mlp_run(w.payload, arena, image, logits);
 *   kiln_arena_free(arena);
 *   kiln_weights_free(&w);
 *
 * The weights file: a 64-byte little-endian header — magic "KILNWGT1", u32 version
 * 1, u32 header size 64, u64 payload size, u64 FNV-1a 64 checksum of the payload,
 * zeros — then the payload. Validation checks all of it against the file and
 * against the size and checksum the model was compiled with (<M>_WEIGHTS_SIZE,
 * <M>_WEIGHTS_CHECKSUM), so weights of another model or another build are refused.
 */
#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  KILN_OK = 0,
  KILN_ERR_OPEN,          /* the file cannot be opened */
  KILN_ERR_READ,          /* reading failed */
  KILN_ERR_TRUNCATED,     /* shorter than its header says (or than a header) */
  KILN_ERR_MAGIC,         /* not a Kiln weights file */
  KILN_ERR_VERSION,       /* a weights format this runtime does not know */
  KILN_ERR_HEADER,        /* header size field wrong, reserved bytes not 0, or trailing bytes */
  KILN_ERR_CHECKSUM,      /* payload does not match the header's checksum: corrupt */
  KILN_ERR_MODEL,         /* a valid file, but for a different model or build */
  KILN_ERR_ALIGN,         /* an in-memory blob not 64-byte aligned */
  KILN_ERR_NOMEM,         /* allocation failed */
  KILN_ERR_ARG            /* NULL argument */
} kiln_status;

/* A loaded or validated weights payload. */
typedef struct {
  const void *payload;    /* 64-byte aligned: pass as the run function's `weights` */
  uint64_t size;          /* payload bytes */
  uint64_t checksum;      /* FNV-1a 64 of the payload */
  void *owned;            /* memory kiln_weights_free releases (NULL for borrowed blobs) */
  void *mapped;           /* kiln_weights_map: the mapping kiln_weights_free unmaps, and its length */
  size_t mapped_len;
  kiln_status status;
  char message[256];      /* one line: what failed and where, or "" */
} kiln_weights;

/* Short fixed description of a status ("bad magic: not a Kiln weights file"). */
const char *kiln_status_str(kiln_status st);

/* Reads and validates path into fresh 64-byte aligned memory. On failure w->payload
 * is NULL, nothing stays allocated, and w->message names the file and the problem. */
kiln_status kiln_weights_load(kiln_weights *w, const char *path, uint64_t expect_size, uint64_t expect_checksum);

/* Maps path read-only instead of reading it (POSIX mmap; elsewhere it falls back to
 * kiln_weights_load): the payload is the file's pages, shared with the page cache and
 * read from disk as the model touches them, so a multi-gigabyte model starts at once
 * and costs no private memory. The header, the file's length and the size and checksum
 * the header declares are checked against the model as kiln_weights_load does; hashing
 * the payload itself reads every page, so it is done only with KILN_MAP_VERIFY. Without
 * it, a payload damaged after the build (the header intact) is not detected. */
enum { KILN_MAP_VERIFY = 1 };
kiln_status kiln_weights_map(kiln_weights *w, const char *path, uint64_t expect_size, uint64_t expect_checksum,
                             unsigned flags);

/* Validates a whole weights file held in memory (e.g. <m>_weights_blob, blob_size =
 * <M>_WEIGHTS_FILE_SIZE exactly: bytes past the payload are refused, as in a file)
 * without copying: w->payload points into blob. */
kiln_status kiln_weights_from_memory(kiln_weights *w, const void *blob, size_t blob_size, uint64_t expect_size,
                                     uint64_t expect_checksum);

void kiln_weights_free(kiln_weights *w);   /* frees or unmaps; NULL is fine */

/* size bytes (rounded up to 64), 64-byte aligned, zeroed; NULL when out of memory. On Linux,
 * 2 MiB or more come in whole 2 MiB pages advised as huge pages (fewer TLB misses when the
 * products stream the weights kiln_weights_load reads into such memory). */
void *kiln_arena_alloc(size_t size);
void kiln_arena_free(void *arena);

/* FNV-1a 64 as the weights header uses it. */
uint64_t kiln_fnv1a64(const void *p, size_t n);

/* Microseconds from an arbitrary fixed point, monotonic where the platform allows. */
uint64_t kiln_time_us(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_RUNTIME_H */
