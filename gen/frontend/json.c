/*
 * json.c — a strict JSON parser (RFC 8259): no trailing commas, no comments, escapes
 * checked, valid UTF-8, duplicate keys refused, nesting bounded; nothing but whitespace
 * may follow the value. Used for safetensors headers (safetensors.c) and for the JSON
 * files a model script reads (kiln.json: Hugging Face config.json and index files).
 * Values live in the arena.
 */
#include "kiln.h"

#include <stdlib.h>
#include <string.h>



typedef struct {
  const unsigned char *p, *start, *end;
  char *err;                    /* message on failure, NULL while fine */
  int depth;
} JParse;

/* Records the first error with its byte offset in the header; returns false. */
static bool jfail(JParse *j, const char *what) {
  if (!j->err) j->err = kiln_fmt("bad JSON at byte %lld: %s", (long long)(j->p - j->start), what);
  return false;
}

/* Skips JSON whitespace. */
static void jspace(JParse *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

/* Consumes the literal word (true, false, null). */
static bool jlit(JParse *j, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return jfail(j, "unexpected character");
  j->p += n;
  return true;
}

/* The value of a hex digit, or -1. */
static int hexval(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Four hex digits of a \u escape. */
static bool jhex4(JParse *j, unsigned *out) {
  if (j->end - j->p < 4) return jfail(j, "short \\u escape");
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(j->p[i]);
    if (h < 0) return jfail(j, "bad \\u escape");
    v = v * 16 + (unsigned)h;
  }
  j->p += 4;
  *out = v;
  return true;
}

/* Appends code point cp (<= U+10FFFF, not a surrogate) as UTF-8. */
static void put_utf8(Buf *b, unsigned cp) {
  unsigned char s[4];
  size_t n;
  if (cp < 0x80) s[0] = (unsigned char)cp, n = 1;
  else if (cp < 0x800) s[0] = (unsigned char)(0xc0 | cp >> 6), s[1] = (unsigned char)(0x80 | (cp & 0x3f)), n = 2;
  else if (cp < 0x10000)
    s[0] = (unsigned char)(0xe0 | cp >> 12), s[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f)), s[2] = (unsigned char)(0x80 | (cp & 0x3f)), n = 3;
  else
    s[0] = (unsigned char)(0xf0 | cp >> 18), s[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f)),
    s[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f)), s[3] = (unsigned char)(0x80 | (cp & 0x3f)), n = 4;
  buf_put(b, s, n);
}

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), or 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
  size_t n = *p >= 0xf0 && *p <= 0xf4 ? 4 : *p >= 0xe0 ? 3 : *p >= 0xc2 && *p < 0xe0 ? 2 : 0;
  if (!n || (size_t)(end - p) < n) return 0;
  for (size_t i = 1; i < n; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if (n == 3 && ((*p == 0xe0 && p[1] < 0xa0) || (*p == 0xed && p[1] >= 0xa0))) return 0; /* overlong, surrogate */
  if (n == 4 && ((*p == 0xf0 && p[1] < 0x90) || (*p == 0xf4 && p[1] >= 0x90))) return 0; /* overlong, > U+10FFFF */
  return n;
}

/* A string at j->p (the opening quote); decoded into *out / *len (arena). */
static bool jstring(JParse *j, const char **out, size_t *len) {
  Buf b = {0};
  j->p++;
  for (;;) {
    if (j->p >= j->end) {
      buf_free(&b);
      return jfail(j, "unterminated string");
    }
    unsigned char c = *j->p;
    if (c == '"') break;
    if (c < 0x20) {
      buf_free(&b);
      return jfail(j, "control character in string");
    }
    if (c == '\\') {
      j->p++;
      if (j->p >= j->end) break;
      unsigned char e = *j->p++;
      const char *simple = strchr("\"\\/bfnrt", e);
      if (e && simple) {
        static const char map[] = "\"\\/\b\f\n\r\t";
        buf_put(&b, &map[simple - "\"\\/bfnrt"], 1);
        continue;
      }
      unsigned cp, lo;
      if (e != 'u' || !jhex4(j, &cp)) {
        buf_free(&b);
        return jfail(j, "bad escape in string");
      }
      if (cp >= 0xdc00 && cp <= 0xdfff) {
        buf_free(&b);
        return jfail(j, "lone low surrogate in string");
      }
      if (cp >= 0xd800 && cp <= 0xdbff) {
        if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u' || (j->p += 2, !jhex4(j, &lo)) || lo < 0xdc00 || lo > 0xdfff) {
          buf_free(&b);
          return jfail(j, "unpaired surrogate in string");
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      }
      put_utf8(&b, cp);
      continue;
    }
    size_t n = c < 0x80 ? 1 : utf8_len(j->p, j->end);
    if (!n) {
      buf_free(&b);
      return jfail(j, "invalid UTF-8 in string");
    }
    buf_put(&b, j->p, n);
    j->p += n;
  }
  j->p++;
  char *s = kiln_alloc(b.len + 1);
  if (b.len) memcpy(s, b.data, b.len);
  *out = s;
  *len = b.len;
  buf_free(&b);
  return true;
}

/* A number per RFC 8259's grammar; kept as text. */
static bool jnumber(JParse *j, JVal *v) {
  const unsigned char *s = j->p;
  if (j->p < j->end && *j->p == '-') j->p++;
  if (j->p >= j->end || *j->p < '0' || *j->p > '9') return jfail(j, "bad number");
  if (*j->p == '0') j->p++;
  else
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
  if (j->p < j->end && *j->p == '.') {
    j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return jfail(j, "bad number");
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return jfail(j, "bad number");
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
  }
  v->t = J_NUM;
  v->len = (size_t)(j->p - s);
  v->text = kiln_fmt("%.*s", (int)v->len, (const char *)s);
  return true;
}

static bool jvalue(JParse *j, JVal *v);

/* A copy of arena array old (n items of elem bytes) with room for cap (the old copy stays in the arena). */
static void *jresize(void *old, int n, int cap, size_t elem) {
  void *p = kiln_alloc(elem * (size_t)cap);
  if (n) memcpy(p, old, elem * (size_t)n);
  return p;
}

/* An array or object at j->p; close is ']' or '}'. */
/* Orders an object's keys by length, bytes, then position: equal keys end up adjacent. */
static const JVal *sort_obj;
static int key_cmp(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  size_t lx = sort_obj->keylens[x], ly = sort_obj->keylens[y];
  if (lx != ly) return lx < ly ? -1 : 1;
  int c = memcmp(sort_obj->keys[x], sort_obj->keys[y], lx);
  return c ? c : x - y;
}

/* Duplicate keys are an error, reported where the first repeated key ends (as a
 * one-pass parser would). Sorting keeps this O(n log n): a tokenizer.json vocabulary
 * has 150,000 keys. */
static bool no_duplicates(JParse *j, const JVal *v, const unsigned char *const *key_end) {
  if (v->n < 2) return true;
  int *order = kiln_alloc(sizeof(int) * (size_t)v->n);
  for (int i = 0; i < v->n; i++) order[i] = i;
  sort_obj = v;
  qsort(order, (size_t)v->n, sizeof *order, key_cmp);
  int first = -1;                       /* the earliest key that repeats an earlier one */
  for (int i = 1; i < v->n; i++) {
    int a = order[i - 1], b = order[i];
    if (v->keylens[a] == v->keylens[b] && memcmp(v->keys[a], v->keys[b], v->keylens[a]) == 0 && (first < 0 || b < first))
      first = b;
  }
  if (first < 0) return true;
  j->p = key_end[first];
  return jfail(j, kiln_fmt("duplicate key \"%s\"", esc_message(v->keys[first])));
}

static bool jcontainer(JParse *j, JVal *v, bool object) {
  if (++j->depth > 64) return jfail(j, "nested too deeply");
  v->t = object ? J_OBJ : J_ARR;
  j->p++;
  jspace(j);
  char close = object ? '}' : ']';
  if (j->p < j->end && *j->p == close) {
    j->p++;
    j->depth--;
    return true;
  }
  int cap = 0;
  const unsigned char **key_end = NULL;   /* where each key's string ends, for messages */
  for (;;) {
    if (v->n == cap) {
      cap = cap ? cap * 2 : 8;
      v->items = jresize(v->items, v->n, cap, sizeof(JVal));
      if (object) {
        v->keys = jresize(v->keys, v->n, cap, sizeof(char *));
        v->keylens = jresize(v->keylens, v->n, cap, sizeof(size_t));
        key_end = jresize(key_end, v->n, cap, sizeof *key_end);
      }
    }
    if (object) {
      jspace(j);
      if (j->p >= j->end || *j->p != '"') return jfail(j, "expected a string key");
      if (!jstring(j, &v->keys[v->n], &v->keylens[v->n])) return false;
      key_end[v->n] = j->p;
      jspace(j);
      if (j->p >= j->end || *j->p != ':') return jfail(j, "expected ':'");
      j->p++;
    }
    if (!jvalue(j, &v->items[v->n])) return false;
    v->n++;
    jspace(j);
    if (j->p < j->end && *j->p == ',') {
      j->p++;
      continue;
    }
    if (j->p < j->end && *j->p == close) {
      const unsigned char *after = j->p + 1;
      if (object && !no_duplicates(j, v, key_end)) return false;
      j->p = after;
      j->depth--;
      return true;
    }
    return jfail(j, object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

/* Any JSON value at j->p (after whitespace) into *v. */
static bool jvalue(JParse *j, JVal *v) {
  jspace(j);
  *v = (JVal){0};
  if (j->p >= j->end) return jfail(j, "unexpected end");
  switch (*j->p) {
  case '{': return jcontainer(j, v, true);
  case '[': return jcontainer(j, v, false);
  case '"': v->t = J_STR; return jstring(j, &v->text, &v->len);
  case 't': v->t = J_BOOL, v->b = true; return jlit(j, "true");
  case 'f': v->t = J_BOOL; return jlit(j, "false");
  case 'n': v->t = J_NULL; return jlit(j, "null");
  default: return jnumber(j, v);
  }
}

/* Parses the whole text as one value followed only by whitespace. */
bool json_parse(const unsigned char *s, size_t n, JVal *out, char **err) {
  JParse j = {s, s, s + n, NULL, 0};
  if (!jvalue(&j, out)) {
    *err = j.err;
    return false;
  }
  jspace(&j);
  if (j.p != j.end) {
    jfail(&j, "trailing characters after the JSON object");
    *err = j.err;
    return false;
  }
  return true;
}

/* A JSON number that is a non-negative integer without fraction or exponent, below 2^53. */
bool json_uint(const JVal *v, int64_t *out) {
  if (v->t != J_NUM || v->len == 0 || v->len > 16) return false;
  int64_t x = 0;
  for (size_t i = 0; i < v->len; i++) {
    if (v->text[i] < '0' || v->text[i] > '9') return false;
    x = x * 10 + (v->text[i] - '0');
  }
  if (x >= ((int64_t)1 << 53)) return false;
  *out = x;
  return true;
}
