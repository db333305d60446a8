/* rt_pretok.h - pre-tokenizer splitters (internal to the tokenizer).
 *
 * Owns nothing: pure functions that cut a run of Unicode code points (one segment of text
 * between special tokens) into pre-tokens, as the regexes of llama.cpp / Hugging Face do.
 */
#ifndef RT_PRETOK_H
#define RT_PRETOK_H

#include <stddef.h>
#include <stdint.h>

#include "tok/rt_tokenizer.h"

/* Code point class bits (Unicode general category / White_Space), see rt_pretok_class. */
enum { RT_CP_L = 1, RT_CP_N = 2, RT_CP_P = 4, RT_CP_WS = 8 };

/* Piece lengths (in code points) are kept in an rt_ids vector. */
typedef rt_ids rt_pieces;

uint8_t rt_pretok_class(uint32_t cp);

/* Split cps[0..n) (whose classes are cls[0..n)) into pre-tokens; appends their lengths
 * (summing to n) to out. 0 ok, -1 out of memory. */
int rt_pretok_split(rt_tok_pre pre, const uint32_t *cps, const uint8_t *cls, size_t n,
                    rt_pieces *out);
/* Same, adding to *steps the number of positions the matchers inspected: at most a small
 * constant times n for any text (the linear-time guarantee the tests check). */
int rt_pretok_split_counted(rt_tok_pre pre, const uint32_t *cps, const uint8_t *cls, size_t n,
                            rt_pieces *out, size_t *steps);

#endif
