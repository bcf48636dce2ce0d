/*
 * kiln_tok.h — the tokenizers of Hugging Face tokenizer.json files, loaded from Kiln's
 * compact binary form (a "<model>.tok" file that `kiln tokenize --convert` or
 * `kiln build --tokenizer` writes from a tokenizer.json). libc only; everything is
 * allocated in one block at load, nothing afterwards.
 *
 *   kiln_tok t;
 *   if (kiln_tok_load(&t, bytes, size, err, sizeof err) != 0) { puts(err); ... }
 *   void *work = malloc(kiln_tok_work_size(&t, len));               // ids: 3 * len + 8 suffice
 *   int n = kiln_tok_encode(&t, text, len, ids, max_ids, work);       // no BOS; t.bos is it
 *   kiln_tok_stream s; kiln_tok_stream_init(&s);
 *   for each id: nbytes = kiln_tok_decode(&t, &s, id, out);          // whole code points only
 *   kiln_tok_free(&t);
 *
 * Three kinds:
 *   byte-level BPE (GPT-2, Llama-3, Qwen2/3): the text (NFC first for Qwen,
 *     kiln_tok_nfc.c) is split by the model's pre-tokenizer pattern (scanned by hand,
 *     kiln_tok_pretok.c), each piece's bytes are merged by rank (kiln_tok_bpe.c);
 *   SentencePiece BPE (Llama-2, Gemma): spaces become U+2581 (a dummy prefix first where the
 *     model adds one), UTF-8 characters are merged by rank, a character outside the
 *     vocabulary becomes its bytes' <0xNN> pieces (or UNK);
 *   WordPiece (BERT, kiln_tok_wordpiece.c): controls dropped, accents stripped and text
 *     lowercased when the model says so, split at spaces and punctuation (CJK ideographs
 *     alone), then greedy longest-match-first with "##" continuations.
 * Added tokens (special or not) are matched in the raw text first, leftmost-longest.
 *
 * The file (little-endian): a 32-byte header "KILNTOK1", u32 version, u32 header size
 * (32), u64 payload size, u64 FNV-1a 64 of the payload; the payload: 16 u32 fields (kind,
 * pre-tokenizer, flags, vocabulary size, merges, added tokens, BOS, EOS, UNK, the rest 0),
 * vocabulary+1 u32 piece offsets, per merge three u32 (left, right, merged id) in rank
 * order, per added token four u32 (id, flags: 1 special, 2 lstrip, 4 rstrip — it takes
 * the White_Space before, after it —, offset and length of its text), then
 * the text: the pieces (offsets relative to it), then the added tokens' texts (literal
 * text to match in the input; a piece is what decoding prints). Pieces are raw
 * bytes: byte-level pieces are decoded from GPT-2's byte-to-character alphabet, U+2581
 * is written as a space. An empty piece is an unused id.
 */
#ifndef KILN_TOK_H
#define KILN_TOK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { KILN_TOK_VERSION = 1, KILN_TOK_HEADER = 32, KILN_TOK_FIELDS = 16 };
/* kinds */
enum { KILN_TOK_BYTE_BPE = 1, KILN_TOK_SPM_BPE = 2, KILN_TOK_WORDPIECE = 3 };
/* pre-tokenizers of byte-level BPE: the split patterns Kiln knows */
enum { KILN_PRE_NONE = 0, KILN_PRE_GPT2 = 1, KILN_PRE_LLAMA3 = 2, KILN_PRE_QWEN2 = 3 };
/* flags */
enum {
  KILN_TOKF_IGNORE_MERGES = 1,   /* byte-level: a whole pre-token in the vocabulary is one id */
  KILN_TOKF_PREFIX_SPACE = 2,    /* SPM: a dummy U+2581 before each text segment */
  KILN_TOKF_BYTE_FALLBACK = 4,   /* SPM: unknown characters as <0xNN> pieces, else UNK */
  KILN_TOKF_STRIP_LEADING = 8,   /* SPM decode: drop the first space of the output */
  KILN_TOKF_LOWERCASE = 16,      /* WordPiece: lowercase ASCII/Latin first */
  KILN_TOKF_STRIP_ACCENTS = 32,  /* WordPiece: drop combining marks */
  KILN_TOKF_CJK_SPLIT = 64,      /* WordPiece: every CJK ideograph a word */
  KILN_TOKF_FUSE_UNK = 128,      /* SPM: consecutive UNKs become one */
  KILN_TOKF_PREFIX_FIRST = 256,  /* SPM: the dummy prefix only before the text's first segment */
  KILN_TOKF_PREFIX_UNLESS = 512, /* SPM: no dummy prefix before a segment that starts with one */
  KILN_TOKF_NFC = 1024           /* byte-level: text segments normalized to NFC first (Qwen) */
};

typedef struct {
  int kind, pretok, flags;
  int n;                      /* vocabulary size (ids 0..n-1; some may be unused) */
  int n_merges, n_added;
  int bos, eos, unk;          /* -1 where the model has none */
  const uint32_t *off;        /* piece of id i: text + off[i] .. text + off[i+1] */
  const unsigned char *text;
  const uint32_t *merges;     /* 3 per merge */
  const uint32_t *added;      /* 4 per added token, sorted by first byte then longest first */
  int added_at[257];          /* added tokens starting with byte b: added_at[b] .. added_at[b+1] */
  int32_t *piece_hash;        /* open addressing: id or -1; size hash_mask+1 */
  int32_t *merge_hash;        /* merge index or -1; size merge_mask+1 */
  uint32_t hash_mask, merge_mask;
  int byte_id[256];           /* SPM: id of <0xNN>; byte-level: id of the byte's piece; -1 */
  int max_piece;              /* longest piece, bytes */
  void *mem;
} kiln_tok;

/* Parses and validates a converted tokenizer held in memory (copied; data need not
 * outlive t); 0, or -1 with a one-line message naming the field. */
int kiln_tok_load(kiln_tok *t, const void *data, size_t size, char *err, size_t errlen);
void kiln_tok_free(kiln_tok *t);
/* kiln_tok_is: the first n bytes start with the binary's magic. */
int kiln_tok_is(const void *head, size_t n);

/* Bytes of scratch kiln_tok_encode needs for a text of len bytes (aligned as malloc's). */
size_t kiln_tok_work_size(const kiln_tok *t, size_t len);
/* The ids of the len bytes at text (no BOS/EOS), at most max_ids: returns how many, or -1
 * if more (3 * len + 8 ids always suffice). Any bytes are accepted: invalid UTF-8 goes
 * through byte pieces (or UNK). */
int kiln_tok_encode(const kiln_tok *t, const char *text, size_t len, int *ids, int max_ids, void *work);

/* Streaming decode: bytes of pieces held back until they complete a UTF-8 character. */
typedef struct {
  unsigned char pending[4];
  int npending;
  int emitted;                /* bytes emitted so far (for KILN_TOKF_STRIP_LEADING) */
} kiln_tok_stream;
void kiln_tok_stream_init(kiln_tok_stream *s);
/* Appends the text of id to out (room for kiln_tok_decode_max(t) bytes): whole UTF-8
 * characters only; bytes that cannot form one as U+FFFD, one per maximal subpart (a bad
 * byte, or a character's valid start cut short), as Python's and Rust's lossy decoding.
 * Returns the byte count, -1 for a bad id. */
int kiln_tok_decode(const kiln_tok *t, kiln_tok_stream *s, int id, char *out);
/* What is still held back at the end (a character's start cut short) as one U+FFFD;
 * returns the byte count. */
int kiln_tok_decode_flush(kiln_tok_stream *s, char *out);
size_t kiln_tok_decode_max(const kiln_tok *t);

#ifdef __cplusplus
}
#endif

#endif /* KILN_TOK_H */
