/*
 * chat_test.c — runtime/llm/kiln_chat.c, exact expected prompts (t_llm, ASan+UBSan):
 * each template on a system + user + assistant + user conversation with the generation
 * prompt, written out here from the models' published chat templates; truncation to the
 * buffer and the returned full length; an unknown role; stop-string scanning (a complete
 * stop, a tail that may still become one, none).
 */
#include "kiln_chat.h"

#include <stdio.h>
#include <string.h>

static int failures;
static void check(int ok, const char *name, const char *got) {
  if (ok) printf("PASS chat/%s\n", name);
  else printf("FAIL chat/%s: got \"%s\"\n", name, got), failures++;
}

int main(void) {
  const kiln_chat_message m[] = {{"system", "Be brief."}, {"user", "Hi!"}, {"assistant", "Hello."}, {"user", "2+2?"}};
  char buf[1024];
  static const struct {
    kiln_chat_template t;
    const char *name, *want;
  } cases[] = {
      {KILN_CHAT_LLAMA3, "llama3",
       "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\n"},
      {KILN_CHAT_QWEN3, "qwen3",
       "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
       "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"},
      {KILN_CHAT_GEMMA3, "gemma3",
       "<bos><start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
       "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t n = kiln_chat_format(cases[i].t, m, 4, 1, buf, sizeof buf);
    check(n == strlen(cases[i].want) && !strcmp(buf, cases[i].want), cases[i].name, buf);
  }
  char small[8];
  size_t n = kiln_chat_format(KILN_CHAT_QWEN3, m + 1, 1, 0, small, sizeof small);
  check(n == strlen("<|im_start|>user\nHi!<|im_end|>\n") && !strcmp(small, "<|im_st"), "truncated", small);
  const kiln_chat_message bad[] = {{"tool", "x"}};
  check(kiln_chat_format(KILN_CHAT_LLAMA3, bad, 1, 1, buf, sizeof buf) == 0 && buf[0] == 0, "unknown-role", buf);

  const char *stops[] = {"</s>", "\n\nUser:"};
  int hit;
  size_t safe = kiln_stop_scan("Hello</s> more", 14, stops, 2, &hit);
  check(hit && safe == 5, "stop-hit", hit ? "hit" : "no hit");
  safe = kiln_stop_scan("Hello\n\nUs", 9, stops, 2, &hit);
  check(!hit && safe == 5, "stop-tail-held", "wrong safe length");
  safe = kiln_stop_scan("Hello world", 11, stops, 2, &hit);
  check(!hit && safe == 11, "stop-none", "wrong safe length");
  safe = kiln_stop_scan("a\n\nUser: x</s>", 14, stops, 2, &hit);
  check(hit && safe == 1, "stop-earliest", "not the earliest stop");
  return failures != 0;
}
