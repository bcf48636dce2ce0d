/*
 * kiln_chat.h — the default chat templates of Llama 3, Qwen3 and Gemma 3, written out in C
 * (no template engine): a conversation of (role, content) messages to the prompt text the
 * model was trained on, ending with the assistant's turn opened when asked. libc only; the
 * caller gives the output buffer.
 *
 *   kiln_chat_message m[] = {{"system", "Be brief."}, {"user", "Hi!"}};
 *   size_t n = kiln_chat_format(KILN_CHAT_QWEN3, m, 2, 1, buf, sizeof buf);   // needed size, even if > cap
 */
#ifndef KILN_CHAT_H
#define KILN_CHAT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KILN_CHAT_LLAMA3, KILN_CHAT_QWEN3, KILN_CHAT_GEMMA3 } kiln_chat_template;

typedef struct {
  const char *role;      /* "system", "user" or "assistant" */
  const char *content;
} kiln_chat_message;

/* Writes the prompt (NUL-terminated, truncated to cap - 1 bytes) and returns its full
 * length; 0 with an empty buf for a role the template does not know. add_generation_prompt
 * opens the assistant's turn at the end. Llama 3 starts with <|begin_of_text|> and Gemma 3
 * with <bos> (as their templates write them: do not add BOS again when tokenizing). Qwen3's
 * is with thinking left to the model (no empty <think> block). */
size_t kiln_chat_format(kiln_chat_template t, const kiln_chat_message *m, int n, int add_generation_prompt, char *buf,
                        size_t cap);

/* Stop strings: the length of text that may be emitted safely, text_len minus any tail that
 * could still grow into one of the stops; *hit is set when a stop string occurs completely,
 * and then the safe length is where it begins. */
size_t kiln_stop_scan(const char *text, size_t text_len, const char *const *stops, int nstops, int *hit);

#ifdef __cplusplus
}
#endif

#endif /* KILN_CHAT_H */
