/*
 * kiln_chat.c — see kiln_chat.h. The strings are those the models' published
 * tokenizer_config.json chat templates produce for plain text messages:
 *
 *   Llama 3   <|begin_of_text|> then per message
 *             <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
 *             and <|start_header_id|>assistant<|end_header_id|>\n\n to generate
 *   Qwen3     per message <|im_start|>ROLE\nCONTENT<|im_end|>\n, and <|im_start|>assistant\n
 *   Gemma 3   <bos>, then per message <start_of_turn>ROLE\nCONTENT<end_of_turn>\n with the
 *             assistant's role spelled "model" and a system message put in front of the
 *             first user message followed by a blank line; <start_of_turn>model\n to generate
 */
#include "kiln_chat.h"

#include <string.h>

typedef struct {
  char *buf;
  size_t cap, len;
} Out;

static void put(Out *o, const char *s) {
  size_t n = strlen(s);
  if (o->cap && o->len < o->cap - 1) {
    size_t room = o->cap - 1 - o->len, k = n < room ? n : room;
    memcpy(o->buf + o->len, s, k);
    o->buf[o->len + k] = 0;
  }
  o->len += n;
}

static int known(const char *role) { return !strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant"); }

size_t kiln_chat_format(kiln_chat_template t, const kiln_chat_message *m, int n, int add_generation_prompt, char *buf,
                        size_t cap) {
  Out o = {buf, cap, 0};
  if (cap) buf[0] = 0;
  for (int i = 0; i < n; i++)
    if (!known(m[i].role)) return 0;
  switch (t) {
  case KILN_CHAT_LLAMA3:
    put(&o, "<|begin_of_text|>");
    for (int i = 0; i < n; i++) {
      put(&o, "<|start_header_id|>"), put(&o, m[i].role), put(&o, "<|end_header_id|>\n\n");
      put(&o, m[i].content), put(&o, "<|eot_id|>");
    }
    if (add_generation_prompt) put(&o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    break;
  case KILN_CHAT_QWEN3:
    for (int i = 0; i < n; i++) put(&o, "<|im_start|>"), put(&o, m[i].role), put(&o, "\n"), put(&o, m[i].content), put(&o, "<|im_end|>\n");
    if (add_generation_prompt) put(&o, "<|im_start|>assistant\n");
    break;
  case KILN_CHAT_GEMMA3: {
    put(&o, "<bos>");
    const char *system = NULL;
    for (int i = 0; i < n; i++) {
      if (!strcmp(m[i].role, "system")) {
        system = m[i].content;
        continue;
      }
      put(&o, "<start_of_turn>"), put(&o, strcmp(m[i].role, "assistant") ? "user" : "model"), put(&o, "\n");
      if (system && !strcmp(m[i].role, "user")) put(&o, system), put(&o, "\n\n"), system = NULL;
      put(&o, m[i].content), put(&o, "<end_of_turn>\n");
    }
    if (add_generation_prompt) put(&o, "<start_of_turn>model\n");
    break;
  }
  default:
    return 0;
  }
  return o.len;
}

size_t kiln_stop_scan(const char *text, size_t len, const char *const *stops, int nstops, int *hit) {
  size_t safe = len;
  *hit = 0;
  for (int s = 0; s < nstops; s++) {
    size_t k = strlen(stops[s]);
    if (!k) continue;
    for (size_t i = 0; i + k <= len; i++)
      if (!memcmp(text + i, stops[s], k) && (!*hit || i < safe)) *hit = 1, safe = i;
    if (*hit) continue;
    for (size_t p = k - 1; p > 0; p--)          /* the longest tail that begins stop s */
      if (p <= len && !memcmp(text + len - p, stops[s], p)) {
        if (len - p < safe) safe = len - p;
        break;
      }
  }
  return safe;
}
