/* prompts_text.c — text prompts ("input") through a tokenizer: ids, labels, character
 * offsets, and character or substring spans turned into token spans. */
#include "text/prompts.h"
#include "text/tokenizer.h"

dfl_status dfl_prompt_file_tokenize(const char *in, const char *out, dfl_tokenizer *t, int special,
                                    int overwrite, dfl_error *err)
{
    (void)in; (void)out; (void)t; (void)special; (void)overwrite;
    return dfl__fail(err, DFL_ERR_USAGE, "not yet");
}
