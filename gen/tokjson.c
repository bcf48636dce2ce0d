/*
 * tokjson.c — converts a Hugging Face tokenizer.json into Kiln's tokenizer binary
 * (runtime/llm/kiln_tok.h describes the format): the build-time half of the tokenizers,
 * so the runtime never parses JSON. What the runtime cannot reproduce exactly is refused
 * here with a one-line message naming the file and the field (a Unigram model, an
 * unknown pre-tokenizer pattern, a normalizer it does not implement), and nothing is
 * written.
 *
 * Kinds recognised: BPE with a ByteLevel pre-tokenizer (GPT-2; Llama-3 and Qwen2/3 with
 * their Split pattern first), BPE over SentencePiece pieces (Replace " " -> U+2581, with
 * or without Prepend; Llama-2, Gemma), WordPiece (BertNormalizer, BertPreTokenizer).
 */
#include "kiln.h"
#include "kiln_tok.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *path;
  char *err;
  size_t errlen;
  bool failed;
} Conv;

/* Records the first error: "<path>: tokenizer.json: <field>: <what>"; returns false. */
static bool cfail(Conv *c, const char *field, const char *what) {
  if (!c->failed) snprintf(c->err, c->errlen, "%s: %s: %s", c->path, field, what);
  c->failed = true;
  return false;
}

/* Member key of object o, or NULL (also when o is not an object). */
static const JVal *jget(const JVal *o, const char *key) {
  if (!o || o->t != J_OBJ) return NULL;
  for (int i = 0; i < o->n; i++)
    if (strcmp(o->keys[i], key) == 0) return &o->items[i];
  return NULL;
}

/* The string member key of o, or NULL. */
static const char *jstr(const JVal *o, const char *key) {
  const JVal *v = jget(o, key);
  return v && v->t == J_STR ? v->text : NULL;
}

/* True when member key of o is the JSON value true. */
static bool jtrue(const JVal *o, const char *key) {
  const JVal *v = jget(o, key);
  return v && v->t == J_BOOL && v->b;
}

/* ---- GPT-2's byte alphabet ---- */

/* The byte that code point cp spells in GPT-2's byte-to-unicode alphabet, or -1: printable
 * Latin-1 bytes stand for themselves, the other 68 bytes for U+0100.. in byte order. */
static int byte_of_char(uint32_t cp) {
  static int table[324];
  static bool ready;
  if (!ready) {
    int next = 256;
    for (int b = 0; b < 324; b++) table[b] = -1;
    for (int b = 0; b < 256; b++) {
      bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      table[self ? b : next++] = b;
    }
    ready = true;
  }
  return cp < 324 ? table[cp] : -1;
}

/* The UTF-8 code point at s (n bytes left), its length in *len; 0xFFFFFFFF for bytes that
 * are not UTF-8 (a GGUF string need not be). */
static uint32_t utf8_at(const unsigned char *s, size_t n, int *len) {
  int k = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : s[0] >= 0xe0 && s[0] < 0xf0 ? 3 : s[0] >= 0xf0 && s[0] < 0xf5 ? 4 : 0;
  *len = 1;
  if (k == 0 || (size_t)k > n) return 0xFFFFFFFFu;
  uint32_t v = k == 1 ? s[0] : s[0] & (0x7f >> k);
  for (int i = 1; i < k; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0xFFFFFFFFu;
    v = v << 6 | (s[i] & 0x3f);
  }
  *len = k;
  return v;
}

/* A vocabulary piece as the runtime holds it: byte-level pieces decoded to bytes, U+2581
 * as a space for SentencePiece, WordPiece pieces as they are. */
static bool piece_bytes(Conv *c, int kind, const JVal *s, Buf *out) {
  const unsigned char *p = (const unsigned char *)s->text;
  for (size_t i = 0; i < s->len;) {
    int len;
    uint32_t cp = utf8_at(p + i, s->len - i, &len);
    if (cp == 0xFFFFFFFFu) return cfail(c, "model.vocab", "a piece is not UTF-8");
    if (kind == KILN_TOK_BYTE_BPE) {
      int b = byte_of_char(cp);
      if (b < 0) return cfail(c, "model.vocab", kiln_fmt("piece '%s' is not in the byte-level alphabet", esc_message(s->text)));
      unsigned char ch = (unsigned char)b;
      buf_put(out, &ch, 1);
    } else if (kind == KILN_TOK_SPM_BPE && cp == 0x2581) buf_put(out, " ", 1);
    else buf_put(out, p + i, (size_t)len);
    i += (size_t)len;
  }
  if (s->len == 0) return cfail(c, "model.vocab", "an empty piece");
  return true;
}

/* ---- the model's kind, pre-tokenizer and flags ---- */

static const char *const PATTERN_LLAMA3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const PATTERN_QWEN2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const PATTERN_GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* One pre-tokenizer of a byte-level model: ByteLevel (with its own GPT-2 split when
 * use_regex) or a Split with a known pattern. */
static bool bytelevel_step(Conv *c, const JVal *p, int *pretok, bool *bytelevel) {
  const char *type = jstr(p, "type");
  if (type && strcmp(type, "ByteLevel") == 0) {
    if (jtrue(p, "add_prefix_space")) return cfail(c, "pre_tokenizer.add_prefix_space", "true is not supported");
    if (jtrue(p, "use_regex")) *pretok = KILN_PRE_GPT2;
    *bytelevel = true;
    return true;
  }
  if (type && strcmp(type, "Split") == 0) {
    const char *re = jstr(jget(p, "pattern"), "Regex"), *behavior = jstr(p, "behavior");
    if (!behavior || strcmp(behavior, "Isolated") != 0 || jtrue(p, "invert")) return cfail(c, "pre_tokenizer.behavior", "only Isolated splits are supported");
    *pretok = !re ? -1 : strcmp(re, PATTERN_LLAMA3) == 0 ? KILN_PRE_LLAMA3 : strcmp(re, PATTERN_QWEN2) == 0 ? KILN_PRE_QWEN2
            : strcmp(re, PATTERN_GPT2) == 0 ? KILN_PRE_GPT2 : -1;
    if (*pretok < 0) return cfail(c, "pre_tokenizer.pattern", "not a split pattern Kiln implements (GPT-2, Llama-3, Qwen2)");
    return true;
  }
  return cfail(c, "pre_tokenizer.type", kiln_fmt("'%s' is not supported for byte-level BPE", type ? esc_message(type) : "?"));
}

/* True when the pre-tokenizer is byte-level (ByteLevel alone or in a Sequence); its
 * split pattern in *pretok. */
static bool is_bytelevel(Conv *c, const JVal *pre, int *pretok) {
  bool bytelevel = false;
  const char *type = jstr(pre, "type");
  const JVal *seq = jget(pre, "pretokenizers");
  bool has = false;
  if (type && strcmp(type, "ByteLevel") == 0) has = true;
  for (int i = 0; seq && seq->t == J_ARR && i < seq->n; i++)
    if (jstr(&seq->items[i], "type") && strcmp(jstr(&seq->items[i], "type"), "ByteLevel") == 0) has = true;
  if (!has) return false;
  if (type && strcmp(type, "Sequence") == 0) {
    for (int i = 0; i < seq->n; i++)
      if (!bytelevel_step(c, &seq->items[i], pretok, &bytelevel)) return false;
  } else if (!bytelevel_step(c, pre, pretok, &bytelevel)) return false;
  return true;
}

/* SentencePiece normalizer: Replace " " -> U+2581, optionally after Prepend U+2581. */
static bool spm_normalizer(Conv *c, const JVal *norm, int *flags) {
  const char *type = jstr(norm, "type");
  const JVal *seq = jget(norm, "normalizers");
  bool is_seq = type && strcmp(type, "Sequence") == 0;
  if (is_seq && (!seq || seq->t != J_ARR)) return cfail(c, "normalizer.normalizers", "not an array");
  int n = is_seq ? seq->n : 1;
  bool replace = false;
  for (int i = 0; i < n; i++) {
    const JVal *s = is_seq ? &seq->items[i] : norm;
    const char *t = jstr(s, "type");
    if (t && strcmp(t, "Prepend") == 0 && jstr(s, "prepend") && strcmp(jstr(s, "prepend"), "\xe2\x96\x81") == 0) *flags |= KILN_TOKF_PREFIX_SPACE;
    else if (t && strcmp(t, "Replace") == 0 && jstr(jget(s, "pattern"), "String") && strcmp(jstr(jget(s, "pattern"), "String"), " ") == 0 &&
             jstr(s, "content") && strcmp(jstr(s, "content"), "\xe2\x96\x81") == 0) replace = true;
    else return cfail(c, "normalizer", kiln_fmt("'%s' is not supported for SentencePiece BPE", t ? esc_message(t) : "?"));
  }
  if (!replace) return cfail(c, "normalizer", "SentencePiece BPE needs Replace ' ' -> U+2581");
  return true;
}

/* A Metaspace pre-tokenizer (spaces as U+2581, a dummy one first per prepend_scheme, or
 * add_prefix_space in files older than it); Kiln implements split false only. */
static bool metaspace(Conv *c, const JVal *pre, int *flags) {
  const char *rep = jstr(pre, "replacement"), *scheme = jstr(pre, "prepend_scheme");
  const JVal *split = jget(pre, "split");
  if (!rep || strcmp(rep, "\xe2\x96\x81") != 0) return cfail(c, "pre_tokenizer.replacement", "only U+2581 is supported");
  if (!split || split->t != J_BOOL || split->b) return cfail(c, "pre_tokenizer.split", "only false is supported (a missing split means true)");
  bool prefix = scheme ? strcmp(scheme, "never") != 0 : jtrue(pre, "add_prefix_space");
  if (scheme && strcmp(scheme, "always") != 0 && strcmp(scheme, "first") != 0 && strcmp(scheme, "never") != 0)
    return cfail(c, "pre_tokenizer.prepend_scheme", kiln_fmt("'%s' is not always, first or never", esc_message(scheme)));
  if (prefix) *flags |= KILN_TOKF_PREFIX_SPACE | KILN_TOKF_PREFIX_UNLESS;
  if (prefix && scheme && strcmp(scheme, "first") == 0) *flags |= KILN_TOKF_PREFIX_FIRST;
  return true;
}

/* The kind, pre-tokenizer and flags of a tokenizer.json. */
static bool model_kind(Conv *c, const JVal *root, int *kind, int *pretok, int *flags) {
  const JVal *model = jget(root, "model"), *pre = jget(root, "pre_tokenizer"), *norm = jget(root, "normalizer");
  const char *type = jstr(model, "type");
  if (!type) return cfail(c, "model.type", "missing");
  *pretok = KILN_PRE_NONE, *flags = 0;
  if (strcmp(type, "WordPiece") == 0) {
    *kind = KILN_TOK_WORDPIECE;
    const char *nt = jstr(norm, "type");
    if (nt && strcmp(nt, "BertNormalizer") != 0) return cfail(c, "normalizer", "WordPiece needs BertNormalizer");
    if (jtrue(norm, "lowercase")) *flags |= KILN_TOKF_LOWERCASE;
    const JVal *sa = jget(norm, "strip_accents");
    if (jtrue(norm, "strip_accents") || ((!sa || sa->t == J_NULL) && jtrue(norm, "lowercase"))) *flags |= KILN_TOKF_STRIP_ACCENTS;
    if (jtrue(norm, "handle_chinese_chars")) *flags |= KILN_TOKF_CJK_SPLIT;
    return true;
  }
  if (strcmp(type, "BPE") != 0) return cfail(c, "model.type", kiln_fmt("'%s' is not supported (BPE, WordPiece)", esc_message(type)));
  if (jtrue(model, "ignore_merges")) *flags |= KILN_TOKF_IGNORE_MERGES;
  if (jtrue(model, "byte_fallback")) *flags |= KILN_TOKF_BYTE_FALLBACK;
  if (jtrue(model, "fuse_unk")) *flags |= KILN_TOKF_FUSE_UNK;
  if (pre && pre->t != J_NULL && is_bytelevel(c, pre, pretok)) {
    const char *nt = jstr(norm, "type");
    if (norm && norm->t != J_NULL && !(nt && strcmp(nt, "NFC") == 0)) return cfail(c, "normalizer", "byte-level BPE with a normalizer other than NFC");
    if (nt) *flags |= KILN_TOKF_NFC;
    *kind = KILN_TOK_BYTE_BPE;
    return !c->failed;
  }
  if (c->failed) return false;
  *kind = KILN_TOK_SPM_BPE;
  const char *pt = jstr(pre, "type");
  if (pt && strcmp(pt, "Metaspace") == 0) {
    if (norm && norm->t != J_NULL) return cfail(c, "normalizer", "SentencePiece BPE with a Metaspace pre-tokenizer needs none");
    if (!metaspace(c, pre, flags)) return false;
  } else {
    if (pre && pre->t != J_NULL && !(pt && strcmp(pt, "Split") == 0 && jstr(jget(pre, "pattern"), "String") &&
                                     strcmp(jstr(jget(pre, "pattern"), "String"), " ") == 0))
      return cfail(c, "pre_tokenizer", "SentencePiece BPE supports none, Split ' ' or Metaspace");
    if (!spm_normalizer(c, norm, flags)) return false;
  }
  const JVal *dec = jget(root, "decoder"), *decs = jget(dec, "decoders");
  for (int i = 0; decs && decs->t == J_ARR && i < decs->n; i++)
    if (jstr(&decs->items[i], "type") && strcmp(jstr(&decs->items[i], "type"), "Strip") == 0) *flags |= KILN_TOKF_STRIP_LEADING;
  /* a Metaspace decoder drops the space its pre-tokenizer put first */
  if (jstr(dec, "type") && strcmp(jstr(dec, "type"), "Metaspace") == 0 && (*flags & KILN_TOKF_PREFIX_SPACE)) *flags |= KILN_TOKF_STRIP_LEADING;
  return true;
}

/* ---- vocabulary, merges, added tokens ---- */

typedef struct {
  int kind, pretok, flags;
  int n;                  /* ids 0..n-1 */
  Buf *piece;             /* per id, its runtime bytes (empty: unused) */
  StrMap ids;             /* tokenizer.json spelling of a piece -> id */
  Buf merges, added;      /* u32 triples / (id, special, text offset, length), little-endian */
  Buf added_text;         /* the added tokens' literal texts */
  int n_merges, n_added;
  int bos, eos, unk;
} Tok;

/* v little-endian, whatever the host (the binary's byte order). */
static void put_u32(Buf *b, uint32_t v) {
  unsigned char p[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
  buf_put(b, p, 4);
}

/* v little-endian, 8 bytes. */
static void put_u64(Buf *b, uint64_t v) {
  put_u32(b, (uint32_t)v);
  put_u32(b, (uint32_t)(v >> 32));
}

/* An id of a JSON number: 0 .. 2^24-1. */
static bool json_id(Conv *c, const JVal *v, const char *field, int *id) {
  int64_t x;
  if (!v || !json_uint(v, &x) || x >= (1 << 24)) return cfail(c, field, "id is not an integer in 0..16777215");
  *id = (int)x;
  return true;
}

/* The highest id of the vocabulary and the added tokens, plus one. */
static bool count_ids(Conv *c, const JVal *vocab, const JVal *added, int *n) {
  *n = 0;
  for (int i = 0; i < vocab->n; i++) {
    int id = 0;
    if (!json_id(c, &vocab->items[i], "model.vocab", &id)) return false;
    if (id >= *n) *n = id + 1;
  }
  for (int i = 0; added && i < added->n; i++) {
    int id = 0;
    if (!json_id(c, jget(&added->items[i], "id"), "added_tokens.id", &id)) return false;
    if (id >= *n) *n = id + 1;
  }
  return true;
}

/* The vocabulary: pieces by id, and the map from their JSON spelling. */
static bool read_vocab(Conv *c, Tok *t, const JVal *vocab) {
  for (int i = 0; i < vocab->n; i++) {
    int id = 0;
    json_id(c, &vocab->items[i], "model.vocab", &id);
    if (strlen(vocab->keys[i]) != vocab->keylens[i]) return cfail(c, "model.vocab", "a piece holds a NUL character");
    if (t->piece[id].len) return cfail(c, "model.vocab", kiln_fmt("id %d is given twice", id));
    JVal s = {.t = J_STR, .text = vocab->keys[i], .len = vocab->keylens[i]};
    if (!piece_bytes(c, t->kind, &s, &t->piece[id])) return false;
    *strmap_put(&t->ids, vocab->keys[i]) = id + 1;
  }
  return true;
}

/* Added tokens: their text is literal (not in the byte alphabet); ids the vocabulary
 * lacks get it as their piece. */
static bool read_added(Conv *c, Tok *t, const JVal *added) {
  for (int i = 0; added && i < added->n; i++) {
    const JVal *a = &added->items[i];
    const JVal *content = jget(a, "content");
    int id = 0;
    json_id(c, jget(a, "id"), "added_tokens.id", &id);
    if (!content || content->t != J_STR || content->len == 0 || strlen(content->text) != content->len)
      return cfail(c, "added_tokens.content", "not a non-empty string");
    if (jtrue(a, "single_word"))
      return cfail(c, "added_tokens", kiln_fmt("'%s': single_word is not supported", esc_message(content->text)));
    if (!t->piece[id].len) buf_put(&t->piece[id], content->text, content->len);
    put_u32(&t->added, (uint32_t)id);
    put_u32(&t->added, (jtrue(a, "special") ? 1 : 0) | (jtrue(a, "lstrip") ? 2 : 0) | (jtrue(a, "rstrip") ? 4 : 0));
    put_u32(&t->added, (uint32_t)t->added_text.len);   /* relative to the added texts, rebased on writing */
    put_u32(&t->added, (uint32_t)content->len);
    buf_put(&t->added_text, content->text, content->len);
    t->n_added++;
  }
  return true;
}

/* The id of a piece by its JSON spelling, or -1. */
static int piece_id(const Tok *t, const char *s) {
  int *v = strmap_get(&t->ids, s);
  return v ? *v - 1 : -1;
}

/* Merges: "a b" strings or [a, b] pairs, in rank order; both parts and their join must
 * be pieces. */
static bool read_merges(Conv *c, Tok *t, const JVal *merges) {
  if (!merges) return true;
  if (merges->t != J_ARR) return cfail(c, "model.merges", "not an array");
  for (int i = 0; i < merges->n; i++) {
    const JVal *m = &merges->items[i];
    const char *a, *b;
    if (m->t == J_STR) {
      const char *sp = strchr(m->text, ' ');
      if (!sp || strchr(sp + 1, ' ')) return cfail(c, "model.merges", kiln_fmt("entry %d is not 'a b'", i));
      a = kiln_fmt("%.*s", (int)(sp - m->text), m->text), b = sp + 1;
    } else if (m->t == J_ARR && m->n == 2 && m->items[0].t == J_STR && m->items[1].t == J_STR) {
      a = m->items[0].text, b = m->items[1].text;
    } else return cfail(c, "model.merges", kiln_fmt("entry %d is neither 'a b' nor [a, b]", i));
    int ia = piece_id(t, a), ib = piece_id(t, b), ir = piece_id(t, kiln_fmt("%s%s", a, b));
    if (ia < 0 || ib < 0 || ir < 0) return cfail(c, "model.merges", kiln_fmt("entry %d names a piece the vocabulary lacks", i));
    put_u32(&t->merges, (uint32_t)ia);
    put_u32(&t->merges, (uint32_t)ib);
    put_u32(&t->merges, (uint32_t)ir);
    t->n_merges++;
  }
  return true;
}

/* The id of the first of names that is a piece, or -1. */
static int first_piece(const Tok *t, const char *const *names) {
  for (; *names; names++) {
    for (int id = 0; id < t->n; id++)
      if (t->piece[id].len == strlen(*names) && memcmp(t->piece[id].data, *names, t->piece[id].len) == 0) return id;
  }
  return -1;
}

/* BOS: the special token the post-processor puts first, else a conventional name; EOS
 * and UNK likewise (tokenizer.json does not say which token ends a text). */
static void read_specials(const JVal *root, Tok *t) {
  static const char *const bos[] = {"<|begin_of_text|>", "<s>", "<bos>", "[CLS]", NULL};
  static const char *const eos[] = {"<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>", "[SEP]", NULL};
  const JVal *single = jget(jget(root, "post_processor"), "single");
  const char *first = single && single->t == J_ARR && single->n ? jstr(jget(&single->items[0], "SpecialToken"), "id") : NULL;
  const char *unk = jstr(jget(root, "model"), "unk_token");
  const char *const one[] = {first, NULL}, *const unk1[] = {unk, NULL};
  t->bos = first ? first_piece(t, one) : -1;
  if (t->bos < 0) t->bos = first_piece(t, bos);
  t->eos = first_piece(t, eos);
  t->unk = unk ? first_piece(t, unk1) : -1;
}

/* The binary: header, fields, offsets, merges, added tokens, piece bytes. */
static void write_binary(const Tok *t, Buf *out) {
  Buf p = {0}, text = {0};
  uint32_t fields[KILN_TOK_FIELDS] = {(uint32_t)t->kind, (uint32_t)t->pretok, (uint32_t)t->flags, (uint32_t)t->n,
                                      (uint32_t)t->n_merges, (uint32_t)t->n_added, (uint32_t)t->bos, (uint32_t)t->eos, (uint32_t)t->unk};
  for (int k = 0; k < KILN_TOK_FIELDS; k++) put_u32(&p, fields[k]);
  for (int id = 0; id <= t->n; id++) {
    put_u32(&p, (uint32_t)text.len);
    if (id < t->n && t->piece[id].len) buf_put(&text, t->piece[id].data, t->piece[id].len);
  }
  if (t->merges.len) buf_put(&p, t->merges.data, t->merges.len);
  for (int k = 0; k < t->n_added; k++) {
    const unsigned char *a = (const unsigned char *)t->added.data + 16 * k;
    uint32_t rel = (uint32_t)a[8] | (uint32_t)a[9] << 8 | (uint32_t)a[10] << 16 | (uint32_t)a[11] << 24;
    buf_put(&p, a, 8);
    put_u32(&p, (uint32_t)text.len + rel);
    buf_put(&p, a + 12, 4);
  }
  if (t->added_text.len) buf_put(&text, t->added_text.data, t->added_text.len);
  if (text.len) buf_put(&p, text.data, text.len);
  buf_put(out, "KILNTOK1", 8);
  put_u32(out, KILN_TOK_VERSION);
  put_u32(out, KILN_TOK_HEADER);
  put_u64(out, p.len);
  put_u64(out, kiln_fnv1a64(p.data, p.len));
  buf_put(out, p.data, p.len);
  buf_free(&p);
  buf_free(&text);
}

/* The binary of t appended to out when ok and the runtime loads it (what Kiln writes, its
 * runtime must load: checked here, not at the app's first run); frees t's buffers. */
static bool finish(Conv *c, Tok *t, bool ok, Buf *out) {
  if (ok) {
    Buf bin = {0};
    write_binary(t, &bin);
    kiln_tok rt;
    char lerr[256];
    if (kiln_tok_load(&rt, bin.data, bin.len, lerr, sizeof lerr) != 0) ok = cfail(c, "converted tokenizer", lerr);
    else kiln_tok_free(&rt), buf_put(out, bin.data, bin.len);
    buf_free(&bin);
  }
  for (int id = 0; id < t->n; id++) buf_free(&t->piece[id]);
  buf_free(&t->merges);
  buf_free(&t->added);
  buf_free(&t->added_text);
  return ok;
}

/* See kiln.h: parse, classify (model_kind), read vocabulary, added tokens and merges,
 * specials; finish writes and checks the binary. */
bool tokjson_convert(const char *path, const unsigned char *data, size_t size, Buf *out, char *err, size_t errlen) {
  Conv c = {path, err, errlen, false};
  JVal root;
  char *jerr = NULL;
  if (!json_parse(data, size, &root, &jerr)) return cfail(&c, "tokenizer.json", jerr);
  if (root.t != J_OBJ) return cfail(&c, "tokenizer.json", "not an object");
  Tok t = {0};
  if (!model_kind(&c, &root, &t.kind, &t.pretok, &t.flags)) return false;
  const JVal *vocab = jget(jget(&root, "model"), "vocab"), *added = jget(&root, "added_tokens");
  if (!vocab || vocab->t != J_OBJ || vocab->n == 0) return cfail(&c, "model.vocab", "missing or not a non-empty object");
  if (added && added->t != J_ARR && added->t != J_NULL) return cfail(&c, "added_tokens", "not an array");
  if (added && added->t == J_NULL) added = NULL;
  if (!count_ids(&c, vocab, added, &t.n)) return false;
  t.piece = kiln_alloc(sizeof(Buf) * (size_t)t.n);
  bool ok = read_vocab(&c, &t, vocab) && read_added(&c, &t, added) &&
            (t.kind == KILN_TOK_WORDPIECE || read_merges(&c, &t, jget(jget(&root, "model"), "merges")));
  if (ok) {
    read_specials(&root, &t);
    if (t.kind != KILN_TOK_BYTE_BPE && t.unk < 0 && !(t.flags & KILN_TOKF_BYTE_FALLBACK)) ok = cfail(&c, "model.unk_token", "missing (needed without byte_fallback)");
  }
  return finish(&c, &t, ok, out);
}

/* ---- GGUF's byte-level vocabularies ---- */

/* The metadata value of key in f, or NULL. */
static const MetaVal *gguf_meta(const SafeFile *f, const char *key) {
  for (int i = 0; i < f->nmeta; i++)
    if (strcmp(f->meta[i].key, key) == 0) return &f->meta[i].v;
  return NULL;
}

/* An id of the metadata key (an integer in 0..n-1), or -1 when absent. */
static int gguf_id(const SafeFile *f, const char *key, int n) {
  const MetaVal *v = gguf_meta(f, key);
  return v && v->kind == MV_INT && v->i >= 0 && v->i < n ? (int)v->i : -1;
}

/* llama.cpp's names of the pre-tokenizers Kiln implements (tokenizer.ggml.pre). */
static bool gguf_pretok(Conv *c, const MetaVal *pre, int *pretok, int *flags) {
  const char *name = pre && pre->kind == MV_STR ? pre->s : "default";
  if (strcmp(name, "llama-bpe") == 0 || strcmp(name, "llama3") == 0) *pretok = KILN_PRE_LLAMA3, *flags |= KILN_TOKF_IGNORE_MERGES;
  else if (strcmp(name, "qwen2") == 0) *pretok = KILN_PRE_QWEN2, *flags |= KILN_TOKF_NFC;   /* as Qwen's tokenizer.json */
  else if (strcmp(name, "gpt-2") == 0 || strcmp(name, "default") == 0) *pretok = KILN_PRE_GPT2;
  else return cfail(c, "tokenizer.ggml.pre", kiln_fmt("'%s' is not a pre-tokenizer Kiln implements (llama-bpe, qwen2, gpt-2)", esc_message(name)));
  return true;
}

/* Tokens with their types: control (3) and user-defined (4) tokens are added tokens, their
 * text literal; the rest are byte-level pieces. */
static bool gguf_tokens(Conv *c, Tok *t, const MetaVal *tokens, const MetaVal *types) {
  for (int i = 0; i < t->n; i++) {
    const MetaVal *tok = &tokens->items[i];
    int64_t type = types && types->items[i].kind == MV_INT ? types->items[i].i : 1;
    if (tok->kind != MV_STR || tok->slen == 0 || strlen(tok->s) != tok->slen)
      return cfail(c, "tokenizer.ggml.tokens", kiln_fmt("token %d is not a non-empty string", i));
    if (type == 3 || type == 4) {
      buf_put(&t->piece[i], tok->s, tok->slen);
      put_u32(&t->added, (uint32_t)i);
      put_u32(&t->added, type == 3);
      put_u32(&t->added, (uint32_t)t->added_text.len);
      put_u32(&t->added, (uint32_t)tok->slen);
      buf_put(&t->added_text, tok->s, tok->slen);
      t->n_added++;
    } else if (t->kind == KILN_TOK_WORDPIECE) {
      /* llama.cpp's converter gives a word-initial piece a U+2581 prefix and drops the "##"
       * of a continuation piece; "[...]" tokens stay as they are. Undone here, so the
       * runtime's WordPiece sees Hugging Face's spelling. */
      if (tok->slen > 3 && memcmp(tok->s, "\xe2\x96\x81", 3) == 0) buf_put(&t->piece[i], tok->s + 3, tok->slen - 3);
      else if (tok->s[0] == '[' && tok->s[tok->slen - 1] == ']') buf_put(&t->piece[i], tok->s, tok->slen);
      else buf_put(&t->piece[i], "##", 2), buf_put(&t->piece[i], tok->s, tok->slen);
    } else {
      JVal s = {.t = J_STR, .text = tok->s, .len = tok->slen};
      if (!piece_bytes(c, t->kind, &s, &t->piece[i])) return false;
    }
    if (!strmap_get(&t->ids, tok->s)) *strmap_put(&t->ids, tok->s) = i + 1;
  }
  return true;
}

/* See kiln.h: the GGUF metadata read into the same Tok as a tokenizer.json's. Byte-level
 * BPE ("gpt2", with its pre-tokenizer) or WordPiece ("bert": as BertNormalizer's defaults,
 * lowercase, accents stripped, CJK ideographs split, which is what llama.cpp applies). */
bool tokgguf_convert(const char *path, const SafeFile *f, Buf *out, char *err, size_t errlen) {
  Conv c = {path, err, errlen, false};
  const MetaVal *model = gguf_meta(f, "tokenizer.ggml.model"), *tokens = gguf_meta(f, "tokenizer.ggml.tokens"),
                *types = gguf_meta(f, "tokenizer.ggml.token_type"), *merges = gguf_meta(f, "tokenizer.ggml.merges");
  bool bert = model && model->kind == MV_STR && strcmp(model->s, "bert") == 0;
  if (!bert && (!model || model->kind != MV_STR || strcmp(model->s, "gpt2") != 0)) return cfail(&c, "tokenizer.ggml.model", "not gpt2 or bert");
  Tok t = {.kind = bert ? KILN_TOK_WORDPIECE : KILN_TOK_BYTE_BPE};
  if (bert) t.flags = KILN_TOKF_LOWERCASE | KILN_TOKF_STRIP_ACCENTS | KILN_TOKF_CJK_SPLIT;
  else if (!gguf_pretok(&c, gguf_meta(f, "tokenizer.ggml.pre"), &t.pretok, &t.flags)) return false;
  if (!tokens || tokens->kind != MV_ARR || tokens->n < 1 || tokens->n > (1 << 24)) return cfail(&c, "tokenizer.ggml.tokens", "missing or not a non-empty array");
  if (types && (types->kind != MV_ARR || types->n != tokens->n)) return cfail(&c, "tokenizer.ggml.token_type", "not an array as long as the tokens");
  if (!bert && (!merges || merges->kind != MV_ARR || merges->n > (1 << 24))) return cfail(&c, "tokenizer.ggml.merges", "missing or not an array");
  t.n = (int)tokens->n;
  t.piece = kiln_alloc(sizeof(Buf) * (size_t)t.n);
  bool ok = gguf_tokens(&c, &t, tokens, types);
  if (!bert) {
    JVal arr = {.t = J_ARR, .n = (int)merges->n, .items = kiln_alloc(sizeof(JVal) * (size_t)(merges->n + 1))};
    for (int i = 0; ok && i < arr.n; i++) {
      const MetaVal *m = &merges->items[i];
      if (m->kind != MV_STR || strlen(m->s) != m->slen) ok = cfail(&c, "tokenizer.ggml.merges", kiln_fmt("entry %d is not a string", i));
      else arr.items[i] = (JVal){.t = J_STR, .text = m->s, .len = m->slen};
    }
    ok = ok && read_merges(&c, &t, &arr);
  }
  t.bos = gguf_id(f, bert ? "tokenizer.ggml.cls_token_id" : "tokenizer.ggml.bos_token_id", t.n);
  t.eos = gguf_id(f, bert ? "tokenizer.ggml.seperator_token_id" : "tokenizer.ggml.eos_token_id", t.n);
  t.unk = gguf_id(f, "tokenizer.ggml.unknown_token_id", t.n);
  if (ok && bert && t.unk < 0) ok = cfail(&c, "tokenizer.ggml.unknown_token_id", "missing (WordPiece needs one)");
  return finish(&c, &t, ok, out);
}

/* ---- llama2.c tokenizer files (tok512.bin): scored SentencePiece pieces ---- */

/* The little-endian u32 at p. */
static uint32_t get_u32le(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* True for the 6 bytes of a byte piece "<0xNN>" (N uppercase hex, as SentencePiece spells it). */
static bool byte_piece(const Buf *b) {
  const char *s = (const char *)b->data;
  if (b->len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return false;
  for (int i = 3; i < 5; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'F'))) return false;
  return true;
}

/* One merge derived from the scores: pieces left + right join into merged. */
typedef struct {
  float score;            /* the merged piece's */
  int merged, split;      /* its id, and the byte where left ends */
  int left, right;
} ScoredMerge;

/* The merge applied first before the other: the higher score, then the lower id, then
 * the shorter left part (a total order, so the binary is the same on every host). */
static int scored_before(const void *x, const void *y) {
  const ScoredMerge *a = x, *b = y;
  if (a->score != b->score) return a->score > b->score ? -1 : 1;
  if (a->merged != b->merged) return a->merged < b->merged ? -1 : 1;
  return a->split < b->split ? -1 : a->split > b->split;
}

/* The file's records into t (pieces) and scores: int32 max length, then per token f32
 * score, int32 length, bytes; every length checked as the runtime's old loader did. */
static bool llama2c_records(Conv *c, const unsigned char *p, size_t size, Tok *t, float **scores) {
  if (size < 4) return cfail(c, "tokenizer", "shorter than its 4-byte header (at byte 0)");
  int32_t max_len = (int32_t)get_u32le(p);
  if (max_len < 1 || max_len > 4096) return cfail(c, "tokenizer", "max_token_length out of range (at byte 0)");
  size_t n = 0;
  for (size_t q = 4; q < size; n++) {
    if (size - q < 8) return cfail(c, "tokenizer", kiln_fmt("truncated token record (at byte %zu)", q));
    int32_t len = (int32_t)get_u32le(p + q + 4);
    if (len < 0 || len > max_len || size - q - 8 < (size_t)len) return cfail(c, "tokenizer", kiln_fmt("bad token length (at byte %zu)", q));
    if (memchr(p + q + 8, 0, (size_t)len)) return cfail(c, "tokenizer", kiln_fmt("a piece holds a NUL byte (at byte %zu)", q));
    q += 8 + (size_t)len;
  }
  if (n < 3 || n > 1000000) return cfail(c, "tokenizer", kiln_fmt("vocabulary size out of range (at byte %zu)", size));
  t->n = (int)n;
  t->piece = kiln_alloc(sizeof(Buf) * n);
  *scores = kiln_alloc(sizeof(float) * n);
  size_t q = 4;
  for (size_t i = 0; i < n; i++) {
    uint32_t bits = get_u32le(p + q);
    memcpy(&(*scores)[i], &bits, 4);
    if ((*scores)[i] != (*scores)[i]) return cfail(c, "tokenizer", kiln_fmt("score of token %zu is not a number", i));
    size_t len = get_u32le(p + q + 4);
    if (len) buf_put(&t->piece[i], p + q + 8, len);
    q += 8 + len;
  }
  return true;
}

/* The merges SentencePiece's scores imply: every split of a piece into two pieces (at a
 * UTF-8 character boundary) merges into it, ranked by the merged piece's score, highest
 * first. Merging by these ranks, lowest first and leftmost on a tie, is llama2.c's and
 * llama.cpp's "merge the adjacent pair whose join scores best", except where one piece
 * has two splits both present at once (then the split ranked first wins, not the
 * leftmost). The special tokens (ids 0..2) and byte pieces neither merge nor result. */
static void llama2c_merges(Tok *t, const float *scores, const bool *skip) {
  StrMap ids = {0};
  for (int id = 0; id < t->n; id++) {
    if (skip[id] || !t->piece[id].len) continue;
    const char *k = kiln_fmt("%.*s", (int)t->piece[id].len, (const char *)t->piece[id].data);
    if (!strmap_get(&ids, k)) *strmap_put(&ids, k) = id + 1;
  }
  size_t cap = 0, n = 0;
  for (int id = 0; id < t->n; id++) cap += skip[id] ? 0 : t->piece[id].len;
  ScoredMerge *m = kiln_alloc(sizeof(ScoredMerge) * (cap + 1));
  for (int id = 0; id < t->n; id++) {
    const char *s = (const char *)t->piece[id].data;
    size_t len = t->piece[id].len;
    if (skip[id] || len < 2) continue;
    for (size_t j = 1; j < len; j++) {
      if (((unsigned char)s[j] & 0xc0) == 0x80) continue;   /* inside a character */
      int *l = strmap_get(&ids, kiln_fmt("%.*s", (int)j, s)), *r = strmap_get(&ids, kiln_fmt("%.*s", (int)(len - j), s + j));
      if (l && r) m[n++] = (ScoredMerge){scores[id], id, (int)j, *l - 1, *r - 1};
    }
  }
  qsort(m, n, sizeof *m, scored_before);
  for (size_t i = 0; i < n; i++) {
    put_u32(&t->merges, (uint32_t)m[i].left);
    put_u32(&t->merges, (uint32_t)m[i].right);
    put_u32(&t->merges, (uint32_t)m[i].merged);
  }
  t->n_merges = (int)n;
}

/* See kiln.h: Llama-2's settings (a dummy space before the text, byte fallback when the
 * vocabulary has all 256 <0xNN> pieces, the first space of the output dropped), ids 0
 * UNK, 1 BOS, 2 EOS as llama2.c has them. */
bool tokllama2c_convert(const char *path, const unsigned char *data, size_t size, Buf *out, char *err, size_t errlen) {
  Conv c = {path, err, errlen, false};
  Tok t = {.kind = KILN_TOK_SPM_BPE, .flags = KILN_TOKF_PREFIX_SPACE | KILN_TOKF_STRIP_LEADING, .bos = 1, .eos = 2, .unk = 0};
  float *scores = NULL;
  if (!llama2c_records(&c, data, size, &t, &scores)) {
    for (int id = 0; id < t.n && t.piece; id++) buf_free(&t.piece[id]);
    return false;
  }
  bool *skip = kiln_alloc((size_t)t.n);
  skip[0] = skip[1] = skip[2] = true;
  int bytes = 0;
  for (int id = 3; id < t.n; id++) {
    if (byte_piece(&t.piece[id])) skip[id] = true, bytes++;
  }
  if (bytes >= 256) t.flags |= KILN_TOKF_BYTE_FALLBACK;
  llama2c_merges(&t, scores, skip);
  return finish(&c, &t, true, out);
}
