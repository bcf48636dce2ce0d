/*
 * kiln_tok_internal.h — what the tokenizer files (kiln_tok.c, kiln_tok_bpe.c,
 * kiln_tok_pretok.c, kiln_tok_wordpiece.c, kiln_tok_unicode.c) share; not an API.
 */
#ifndef KILN_TOK_INTERNAL_H
#define KILN_TOK_INTERNAL_H

#include "kiln_tok.h"

#include <stdint.h>

/* Character classes of the generated tables (kiln_tok_unicode.c): the pre-tokenizers'
 * patterns tell letters, numbers and spaces from the rest; BERT also punctuation,
 * nonspacing marks and controls. */
enum {
  KILN_UC_OTHER = 0, KILN_UC_LETTER = 1, KILN_UC_NUMBER = 2, KILN_UC_SPACE = 3,
  KILN_UC_PUNCT = 4, KILN_UC_MARK = 5, KILN_UC_CONTROL = 6
};
int kiln_tok_uclass(uint32_t cp);
/* cp's simple lowercase mapping (cp itself when it has none). */
uint32_t kiln_tok_lower(uint32_t cp);
/* cp's canonical decomposition without its nonspacing marks into out: how many code
 * points (cp itself when it has no decomposition; Hangul syllables are not handled). */
int kiln_tok_strip_marks(uint32_t cp, uint32_t out[3]);

/* The UTF-8 character at s (n bytes left, n >= 1): its code point in *cp and its length;
 * an invalid or truncated sequence is one byte with *cp = 0xFFFFFFFF (class OTHER). */
int kiln_tok_utf8(const unsigned char *s, size_t n, uint32_t *cp);

/* The id of the piece s[0..len), or -1. */
int kiln_tok_lookup(const kiln_tok *t, const unsigned char *s, size_t len);

/* NFC (kiln_tok_nfc.c, tables in kiln_tok_nfc_table.c): canonical combining class of cp;
 * cp's full canonical decomposition into out (how many, 0 for none; not Hangul); the
 * primary composite of a then b (0 for none; not Hangul). */
int kiln_tok_ccc(uint32_t cp);
int kiln_tok_decompose(uint32_t cp, uint32_t out[4]);
uint32_t kiln_tok_compose(uint32_t a, uint32_t b);
/* The NFC form of s[0..len) into out (at most 3 * len bytes); its length. cps: scratch
 * for 2 * len + 8 code points. Bytes that are not UTF-8 are kept as they are. */
size_t kiln_tok_nfc(const unsigned char *s, size_t len, uint32_t *cps, unsigned char *out);
/* The bytes before the rest of the work area when the model normalizes to NFC: the NFC
 * text (3 per byte) and the code point scratch. */
#define KILN_TOK_NFC_AREA(len) ((3 * ((size_t)(len) + 8) + 7) / 8 * 8 + 4 * (2 * ((size_t)(len) + 8)))

/* The rank of the merge of ids a and b (its index), or -1. */
int kiln_tok_merge_rank(const kiln_tok *t, int a, int b);

/* The end of the pre-token that starts at i in s[0..n) (i < n), per pattern pretok. */
size_t kiln_tok_pretok_next(int pretok, const unsigned char *s, size_t n, size_t i);

/* The work area of kiln_tok_encode for a text of len bytes: the symbols (len+8 ints),
 * the merge scratch (two links per symbol and a heap of up to three candidates per
 * symbol: 8 ints per symbol), then bytes of normalized text (at most 3 per input byte,
 * plus room for WordPiece's "##" copy). */
#define KILN_TOK_TEXT_AT(len) ((size_t)9 * ((len) + 8) * sizeof(int) + 8)
#define KILN_TOK_WORK(len) (KILN_TOK_TEXT_AT(len) + 8 * ((len) + 8))

/* BPE of one word: sym[0..*nsym) initial ids, merged in place by rank; *nsym shrinks.
 * scratch: 8 ints per symbol, 8-byte aligned. */
void kiln_tok_bpe_merge(const kiln_tok *t, int *sym, int *nsym, void *scratch);

/* Encoders of one segment free of added tokens; each appends to ids[*n..max) and
 * returns -1 when that overflows. work holds at least kiln_tok_work_size bytes. */
int kiln_tok_encode_bytelevel(const kiln_tok *t, const unsigned char *s, size_t len, int *ids, int *n, int max, void *work);
/* first: the segment starts the text (no added token before it). */
int kiln_tok_encode_spm(const kiln_tok *t, const unsigned char *s, size_t len, int first, int *ids, int *n, int max, void *work);
int kiln_tok_encode_wordpiece(const kiln_tok *t, const unsigned char *s, size_t len, int *ids, int *n, int max, void *work);

#endif /* KILN_TOK_INTERNAL_H */
