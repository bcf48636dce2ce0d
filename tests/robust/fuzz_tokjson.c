/*
 * fuzz_tokjson.c — libFuzzer target for the tokenizer.json converter (gen/tokjson.c:
 * tokjson_convert, what `kiln tokenize` and `kiln build --tokenizer` run on a user's file)
 * and the runtime's loader of the converted binary (runtime/llm/kiln_tok.c:
 * kiln_tok_load, what an app runs on the .tok it ships).
 *
 * The input is split at its first 0xFF 0xFE pair: before it a candidate file, after it a
 * text (none: a fixed text of every character class). A file starting with the binary's
 * magic goes to the loader (its payload size and checksum made to fit, so mutations reach
 * the fields), a GGUF file to the converter of its byte-level vocabulary (gguf_parse
 * first), a file whose first non-space byte is '{' to the tokenizer.json converter, any
 * other to the llama2.c tokenizer-file converter (tokllama2c_convert: tok512.bin's
 * format; its corpus tests/robust/tokjson/llama2c_* came from the retired
 * fuzz_tokenizer.c). The converter must refuse with one line naming the file and free of
 * control bytes, or write a binary the loader accepts; the loader must refuse with a
 * message or accept. A loaded tokenizer must encode the text into ids inside the
 * vocabulary, and decode each id into at most kiln_tok_decode_max bytes; neither may read
 * outside its input.
 *
 *   fuzz:   make fuzz   (clang -fsanitize=fuzzer,address,undefined; FUZZ_SECONDS=N each)
 *   replay: the same sources with -DKILN_FUZZ_MAIN and any compiler (tests/t_tok.sh).
 */
#define FUZZ_NAME "fuzz_tokjson"
#include "fuzz_gen.h"
#include "kiln_tok.h"

static const char FIXED_TEXT[] = "Hello  world's 12345 caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\xa4\x96\t\r x<|im_start|>\xff";

/* Encodes text with t and decodes the ids; findings for ids out of range or overlong. */
static void exercise(const kiln_tok *t, const char *text, size_t len) {
  int max = (int)(3 * len + 8), *ids = malloc(sizeof(int) * (size_t)max);
  void *work = malloc(kiln_tok_work_size(t, len));
  int n = kiln_tok_encode(t, text, len, ids, max, work);
  if (n < 0) finding("encode overflowed 3*len+8 ids", NULL);
  size_t cap = kiln_tok_decode_max(t);
  char *out = malloc(cap);
  kiln_tok_stream s;
  kiln_tok_stream_init(&s);
  for (int i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= t->n) finding("id outside the vocabulary", NULL);
    int w = kiln_tok_decode(t, &s, ids[i], out);
    if (w < 0 || (size_t)w > cap) finding("decode length", NULL);
  }
  if ((size_t)kiln_tok_decode_flush(&s, out) > cap) finding("flush length", NULL);
  free(out);
  free(work);
  free(ids);
}

/* A message: one line, no control bytes. */
static void check_message(const char *err, const char *prefix) {
  if (!err[0]) finding("refused without a message", NULL);
  for (const unsigned char *p = (const unsigned char *)err; *p; p++)
    if (*p < 0x20 || *p == 0x7f) finding("control byte in the message", err);
  if (prefix && strncmp(err, prefix, strlen(prefix)) != 0) finding("message does not name the file", err);
}

/* True when the first non-space byte of p[0..n) is '{' (what `kiln tokenize` reads as JSON). */
static bool looks_json(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) i++;
  return i < n && p[i] == '{';
}

/* The converter for the file's kind (see the top): true with the binary in out. */
static bool convert(const unsigned char *file, size_t n, Buf *out, char *err, size_t errlen) {
  if (gguf_is(file, n)) {
    SafeFile *f = gguf_parse("fuzz.json", file, n, err, errlen);
    return f && tokgguf_convert("fuzz.json", f, out, err, errlen);
  }
  if (looks_json(file, n)) return tokjson_convert("fuzz.json", file, n, out, err, errlen);
  return tokllama2c_convert("fuzz.json", file, n, out, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t cut = size;
  for (size_t i = 0; i + 1 < size; i++)
    if (data[i] == 0xff && data[i + 1] == 0xfe) {
      cut = i;
      break;
    }
  unsigned char *file = malloc(cut ? cut : 1);   /* exactly cut bytes: ASan sees any overrun */
  if (cut) memcpy(file, data, cut);
  const char *text = FIXED_TEXT;
  size_t tlen = sizeof FIXED_TEXT - 1;
  if (cut + 2 <= size) text = (const char *)data + cut + 2, tlen = size - cut - 2;
  char err[1024] = "";
  kiln_tok t;
  if (kiln_tok_is(file, cut)) {
    /* The payload's size and checksum rewritten to fit: mutations then reach the field
     * checks behind them (t_tok checks that a wrong size or checksum is refused). */
    if (cut >= 32) {
      uint64_t n = cut - 32, h = 0xcbf29ce484222325ULL;
      for (size_t i = 32; i < cut; i++) h = (h ^ file[i]) * 0x100000001b3ULL;
      for (int i = 0; i < 8; i++) file[16 + i] = (unsigned char)(n >> 8 * i), file[24 + i] = (unsigned char)(h >> 8 * i);
    }
    if (kiln_tok_load(&t, file, cut, err, sizeof err) == 0) exercise(&t, text, tlen), kiln_tok_free(&t);
    else check_message(err, "tokenizer: ");
  } else {
    Buf out = {0};
    if (convert(file, cut, &out, err, sizeof err)) {
      if (kiln_tok_load(&t, out.data, out.len, err, sizeof err) != 0) finding("converted binary refused", err);
      exercise(&t, text, tlen);
      kiln_tok_free(&t);
    } else {
      check_message(err, "fuzz.json: ");
      if (out.len) finding("refused but wrote", NULL);
    }
    buf_free(&out);
  }
  free(file);
  kiln_free_all();
  return 0;
}

#include "replay_main.h"
