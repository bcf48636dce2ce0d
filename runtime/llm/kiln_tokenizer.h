/*
 * kiln_tokenizer.h — SentencePiece-style BPE over a scored vocabulary, the tokenizer of
 * Llama-2-family models: read from llama2.c's tokenizer file (tok512.bin and its larger
 * siblings). Text to ids and ids to text. libc only; the vocabulary is copied once at
 * load into memory the tokenizer owns, nothing is allocated afterwards.
 *
 *   kiln_spm t;
 *   if (kiln_spm_load(&t, bytes, size, err, sizeof err) != 0) { puts(err); ... }
 *   int n = kiln_spm_encode(&t, "Once upon a time", ids, max_ids, work);   // work: kiln_spm_work_size
 *   const char *piece = kiln_spm_piece(&t, prev_id, id);                    // text of one id
 *   kiln_spm_free(&t);
 *
 * The file: int32 max_token_length, then per token a float32 score, an int32 length and
 * that many bytes; ids are positions; 0 <unk>, 1 <s> (BOS), 2 </s> (EOS), and the 256
 * byte-fallback pieces <0x00>..<0xFF> at ids 3..258. Spaces are plain spaces (llama2.c
 * wrote SentencePiece's U+2581 back as ' ').
 */
#ifndef KILN_TOKENIZER_H
#define KILN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int n;                 /* vocabulary size */
  char **piece;          /* NUL-terminated texts (a piece never holds a NUL byte) */
  float *score;
  int *sorted;           /* ids ordered by piece text, for lookups */
  int max_len;           /* longest piece, bytes */
  int byte_base;         /* id of <0x00> (3 in Llama's vocabularies), -1 if absent */
  char bytes[256][2];    /* byte b as a one-byte string, for kiln_spm_piece */
  void *mem;             /* everything above, one block */
} kiln_spm;

/* Parses and validates a tokenizer file held in memory; 0, or -1 with a one-line message. */
int kiln_spm_load(kiln_spm *t, const void *data, size_t size, char *err, size_t errlen);
void kiln_spm_free(kiln_spm *t);

/* Bytes of scratch kiln_spm_encode needs for a text of text_len bytes (the scratch must be
 * aligned for int, as malloc's is). */
size_t kiln_spm_work_size(const kiln_spm *t, size_t text_len);
/* The ids of text (no BOS; SentencePiece's dummy prefix: a leading space is added), at
 * most max_ids of them: returns how many, or -1 if they would not fit. A character no
 * piece holds becomes its UTF-8 bytes' byte pieces; invalid UTF-8 bytes likewise. */
int kiln_spm_encode(const kiln_spm *t, const char *text, int *ids, int max_ids, void *work);
/* The text of id after prev (for display): the piece, its leading space dropped after
 * BOS, a byte piece as its single byte (a string of length 1, or 0 for the byte 0; the
 * caller streams bytes and may hold back an incomplete UTF-8 sequence). NULL for an id
 * out of range. The string lives as long as t. */
const char *kiln_spm_piece(const kiln_spm *t, int prev, int id);

#ifdef __cplusplus
}
#endif

#endif /* KILN_TOKENIZER_H */
