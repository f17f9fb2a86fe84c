/* dump_generated.h — a generating sample's tokens as its maps hold them (probe
 * --generate): the prompt's tokens followed by the generated tokens that have a row,
 * for readers that draw or show the maps of generated rows (attnmap, view).
 */
#ifndef DFL_DUMP_GENERATED_H
#define DFL_DUMP_GENERATED_H

#include <stdint.h>

#include "dump/dump_read.h"
#include "dump/dump_sample.h"

/* The in-memory segment code of generated tokens (the dump's segments stop at 5). */
#define DFL_SEG_GENERATED 6

/* When sample s has generated/tokens and its attn/map1 has more keys than t->T tokens:
 * append the first (keys − T) generated tokens to t (dfl_dump_tokens_read's), with
 * segment DFL_SEG_GENERATED and, when t has text, their generated/token_text (without
 * one: the prompt's label of the same id, else "#ID"). *prompt_T gets the prompt's length (t->T before), or -1 when
 * nothing was appended. DFL_ERR_FORMAT when the maps have more keys than the
 * generation explains; statuses of dfl_dump_read, DFL_ERR_NOMEM (t is then unchanged). */
dfl_status dfl_dump_tokens_join_generated(const dfl_dump_reader *r, const dfl_dump_sample *s, dfl_dump_tokens *t,
                                          int64_t *prompt_T, dfl_error *err);

/* The key count of sample s's maps: T (its tokens), or more when they hold generated
 * rows (probe --generate: attn/map1's key axis, with generated/tokens present). */
int64_t dfl_dump_sample_keys(const dfl_dump_reader *r, const dfl_dump_sample *s, int64_t T);

#endif
