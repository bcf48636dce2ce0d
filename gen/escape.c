/*
 * escape.c — the one place where text that Kiln did not write itself (names of
 * parameters and modules, Lua source file names, anything from a safetensors
 * header) is made safe for the language of the file it goes into.
 *
 * Names are data, not code: a parameter name holding a comment terminator must
 * stay inside its comment, and a `?` pair must not start a trigraph under
 * -std=c11. Every emitter
 * goes through these functions rather than its own ad-hoc escaping, so that one
 * adversarial-names test (tests/t_hardening.sh) covers every output:
 *   esc_comment   inside a C, ObjC or MSL comment, block or line
 *   esc_c_string  inside a C string literal (the Metal table's msl[] lines too)
 *   esc_json      a JSON string literal, quotes included
 *   esc_message   one line of a message on a terminal (an error quoting a file)
 * Core ML names are not escaped but checked: MIL identifiers must match
 * [A-Za-z_][A-Za-z0-9_]* (mil.c), and protobuf strings are length-delimited.
 */
#include "kiln.h"

#include <string.h>

/* Length of the valid UTF-8 sequence (2-4 bytes, no overlong forms, no surrogates,
 * at most U+10FFFF) starting at p, or 0 if p does not start one. */
static int utf8_len(const unsigned char *p) {
  int n = *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : *p >= 0xc2 ? 2 : 0;
  if (n == 0 || *p > 0xf4) return 0;
  for (int i = 1; i < n; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if (n == 3 && ((*p == 0xe0 && p[1] < 0xa0) || (*p == 0xed && p[1] >= 0xa0))) return 0;
  if (n == 4 && ((*p == 0xf0 && p[1] < 0x90) || (*p == 0xf4 && p[1] >= 0x90))) return 0;
  return n;
}

/* Contract: the result holds no newline or other control byte, no backslash (a
 * trailing one would continue a line comment), no star-slash or slash-star pair
 * (which would end a block comment or trip -Wcomment), no `?` pair (trigraphs), and only
 * valid UTF-8. Offending bytes become '?' or '|'; everything else is kept, so
 * ordinary names read unchanged. Arena string. */
char *esc_comment(const char *s) {
  Buf b = {0};
  char last = 0;
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
    int n = *p >= 0x80 ? utf8_len(p) : 1;
    char c = (char)*p;
    if (n > 1) {
      buf_put(&b, p, (size_t)n);
      p += n;
      last = 0;
      continue;
    }
    if (n == 0 || *p < 0x20 || *p == 0x7f || c == '\\') c = '?';
    if ((last == '*' && c == '/') || (last == '/' && c == '*')) c = '|';
    if (last == '?' && c == '?') c = '_';
    buf_put(&b, &c, 1);
    last = c;
    p++;
  }
  char *r = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return r;
}

/* Contract: the characters of a C string literal (no quotes) that reads back as s:
 * quote and backslash escaped, newline as \n, other control bytes and bytes that
 * are not valid UTF-8 as three-digit octal escapes, and every `?` that follows a
 * `?` as a backslash-escaped `?`, so no trigraph can form. Arena string. */
char *esc_c_string(const char *s) {
  Buf b = {0};
  bool after_q = false;
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
    int n = *p >= 0x80 ? utf8_len(p) : 1;
    if (n > 1) {
      buf_put(&b, p, (size_t)n);
      p += n;
      after_q = false;
      continue;
    }
    if (*p == '"' || *p == '\\') buf_printf(&b, "\\%c", *p);
    else if (*p == '\n') buf_puts(&b, "\\n");
    else if (n == 0 || *p < 0x20 || *p == 0x7f) buf_printf(&b, "\\%03o", *p);
    else if (*p == '?' && after_q) buf_puts(&b, "\\?");
    else buf_put(&b, p, 1);
    after_q = *p == '?';
    p++;
  }
  char *r = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return r;
}

/* Contract: appends s as a JSON string literal, quotes included (RFC 8259): quote
 * and backslash escaped, control bytes as \u00XX, bytes that are not valid UTF-8
 * as \ufffd (JSON text must be UTF-8; such a name cannot round-trip). */
void esc_json(Buf *b, const char *s) {
  buf_puts(b, "\"");
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
    int n = *p >= 0x80 ? utf8_len(p) : 1;
    if (n > 1) buf_put(b, p, (size_t)n);
    else if (n == 0) buf_puts(b, "\\ufffd");
    else if (*p == '"' || *p == '\\') buf_printf(b, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f) buf_printf(b, "\\u%04x", *p);
    else buf_put(b, p, 1);
    p += n ? n : 1;
  }
  buf_puts(b, "\"");
}

/* Contract: s as one line that is safe to print on a terminal: control bytes (C0,
 * DEL, and the C1 range U+0080..U+009F, whose CSI can drive a terminal like ESC),
 * and bytes that are not valid UTF-8 become '?'; other characters are kept. Arena
 * string. */
char *esc_message(const char *s) {
  Buf b = {0};
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
    int n = *p >= 0x80 ? utf8_len(p) : 1;
    bool c1 = n == 2 && p[0] == 0xc2 && p[1] < 0xa0;
    if (n == 0 || c1 || (n == 1 && (*p < 0x20 || *p == 0x7f))) buf_puts(&b, "?");
    else buf_put(&b, p, (size_t)n);
    p += n ? n : 1;
  }
  char *r = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return r;
}
