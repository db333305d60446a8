/* rt_pretok.c - pre-tokenizer regexes as hand-written matchers over code points.
 *
 * Owns: the four split rules of rt_tok_pre (see rt_tokenizer.h), no state.
 *
 * A "regex" here is a matcher: given a start position inside a piece [s, e) it returns the
 * length of the leftmost-first (backtracking, Perl/ECMAScript/Oniguruma) match starting
 * exactly there, or 0. Splitting a piece with a regex works like llama.cpp's
 * unicode_regex_split_stl: scan left to right; every match becomes a piece, and each run of
 * positions where no match starts (a gap) becomes one piece too. The piece is the whole
 * subject string, so look-ahead at e sees the end of the text.
 *
 *   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
 *   Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *            | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   Qwen2:   the Llama 3 regex with \p{N} in place of \p{N}{1,3} (llama.cpp
 *            LLAMA_VOCAB_PRE_TYPE_QWEN2: every digit its own pre-token).
 *   default (llama.cpp LLAMA_VOCAB_PRE_TYPE_DEFAULT), applied in turn, each on every piece of
 *   the previous one: [\p{P}\$\+<=>\^~\|]+, then GPT-2, then \p{N}+, then [0-9][0-9][0-9].
 *
 * Classes: \p{L} = categories L*, \p{N} = N*, \p{P} = P* (libutf8proc), \s = Unicode
 * White_Space (what Rust regex, Oniguruma and llama.cpp's flags use).
 *
 * Time is linear in the text: a matcher only looks at the positions it returns (plus O(1)
 * look-ahead), and a bounded quantifier (\p{N}{1,3}) stops scanning at its bound. The
 * split counts every position a matcher inspects (rt_pretok_split_counted) so the tests
 * check this bound on adversarial inputs instead of timing them.
 */
#include "tok/rt_pretok.h"

#include <stdbool.h>
#include <stdlib.h>
#include <utf8proc.h>

static bool is_white_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

uint8_t rt_pretok_class(uint32_t cp)
{
    uint8_t f = is_white_space(cp) ? RT_CP_WS : 0;
    if (cp > 0x10FFFF)
        return f;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return f | RT_CP_L;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return f | RT_CP_N;
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return f | RT_CP_P;
    default:
        return f;
    }
}

/* The subject: code points and classes of the whole segment; a piece is [s, e). */
typedef struct {
    const uint32_t *cp;
    const uint8_t *cl;
    size_t *steps; /* positions inspected by the matchers (the linear-time check) */
} subj;

typedef size_t (*matcher)(const subj *t, size_t pos, size_t e);

#define IS(t, i, bit) (((t)->cl[i] & (bit)) != 0)
#define OTHER(t, i) (((t)->cl[i] & (RT_CP_L | RT_CP_N | RT_CP_WS)) == 0) /* [^\s\p{L}\p{N}] */

/* Length of the run of class `bits` at pos, at most max. */
static size_t run_max(const subj *t, size_t pos, size_t e, uint8_t bits, size_t max)
{
    size_t i = pos, end = e - pos > max ? pos + max : e;
    while (i < end && IS(t, i, bits))
        i++;
    *t->steps += i - pos + 1;
    return i - pos;
}

static size_t run_of(const subj *t, size_t pos, size_t e, uint8_t bits)
{
    return run_max(t, pos, e, bits, SIZE_MAX);
}

static size_t run_other(const subj *t, size_t pos, size_t e)
{
    size_t i = pos;
    while (i < e && OTHER(t, i))
        i++;
    *t->steps += i - pos + 1;
    return i - pos;
}

static uint32_t lower_ascii(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* 's|'t|'re|'ve|'m|'ll|'d, optionally ignoring (ASCII) case. */
static size_t contraction(const subj *t, size_t pos, size_t e, bool icase)
{
    if (t->cp[pos] != '\'' || pos + 1 >= e)
        return 0;
    uint32_t a = t->cp[pos + 1], b = pos + 2 < e ? t->cp[pos + 2] : 0;
    if (icase) {
        a = lower_ascii(a);
        b = lower_ascii(b);
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

/* \s+(?!\S) then optionally \s+ (with_plain). */
static size_t spaces_tail(const subj *t, size_t pos, size_t e, bool with_plain)
{
    size_t n = run_of(t, pos, e, RT_CP_WS);
    if (n == 0)
        return 0;
    if (pos + n == e || n >= 2)
        return pos + n == e ? n : n - 1;
    return with_plain ? n : 0;
}

static size_t m_gpt2(const subj *t, size_t pos, size_t e)
{
    size_t n = contraction(t, pos, e, false);
    if (n)
        return n;
    size_t sp = (t->cp[pos] == ' ' && pos + 1 < e) ? 1 : 0;
    /* ` ?X+`: with the space when X follows it, else X+ at pos itself. */
    for (size_t k = 0; k <= sp; k++) {
        size_t q = pos + sp - k;
        if ((n = run_of(t, q, e, RT_CP_L)) > 0)
            return sp - k + n;
        if ((n = run_of(t, q, e, RT_CP_N)) > 0)
            return sp - k + n;
        if ((n = run_other(t, q, e)) > 0)
            return sp - k + n;
    }
    return spaces_tail(t, pos, e, false);
}

/* The Llama 3 regex with digit runs of at most max_digits (3: Llama 3, 1: Qwen2). */
static size_t m_llama3_n(const subj *t, size_t pos, size_t e, size_t max_digits)
{
    size_t n = contraction(t, pos, e, true);
    if (n)
        return n;
    uint32_t c = t->cp[pos];
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (!IS(t, pos, RT_CP_L | RT_CP_N) && c != '\r' && c != '\n' && pos + 1 < e &&
        (n = run_of(t, pos + 1, e, RT_CP_L)) > 0)
        return 1 + n;
    if ((n = run_of(t, pos, e, RT_CP_L)) > 0)
        return n;
    /* \p{N}{1,3}: scanning the whole run here made digit runs quadratic */
    if ((n = run_max(t, pos, e, RT_CP_N, max_digits)) > 0)
        return n;
    /* ` ?[^\s\p{L}\p{N}]+[\r\n]*` */
    size_t sp = (c == ' ' && pos + 1 < e && OTHER(t, pos + 1)) ? 1 : 0;
    if ((n = run_other(t, pos + sp, e)) > 0) {
        size_t i = pos + sp + n;
        while (i < e && (t->cp[i] == '\r' || t->cp[i] == '\n'))
            i++;
        return i - pos;
    }
    /* \s*[\r\n]+ : up to and including the last CR/LF of the whitespace run */
    n = run_of(t, pos, e, RT_CP_WS);
    for (size_t i = pos + n; i > pos; i--) {
        ++*t->steps;
        if (t->cp[i - 1] == '\r' || t->cp[i - 1] == '\n')
            return i - pos;
    }
    /* \s+(?!\S)|\s+ */
    return spaces_tail(t, pos, e, true);
}

static size_t m_llama3(const subj *t, size_t pos, size_t e) { return m_llama3_n(t, pos, e, 3); }
static size_t m_qwen2(const subj *t, size_t pos, size_t e) { return m_llama3_n(t, pos, e, 1); }

static bool punct_class(const subj *t, size_t i)
{
    uint32_t c = t->cp[i];
    return IS(t, i, RT_CP_P) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
           c == '^' || c == '~' || c == '|';
}

static size_t m_punct(const subj *t, size_t pos, size_t e)
{
    size_t i = pos;
    while (i < e && punct_class(t, i))
        i++;
    *t->steps += i - pos + 1;
    return i - pos;
}

static size_t m_numbers(const subj *t, size_t pos, size_t e) { return run_of(t, pos, e, RT_CP_N); }

static size_t m_digits3(const subj *t, size_t pos, size_t e)
{
    if (pos + 3 > e)
        return 0;
    for (size_t i = pos; i < pos + 3; i++)
        if (t->cp[i] < '0' || t->cp[i] > '9')
            return 0;
    return 3;
}

static int push(rt_pieces *p, size_t len) { return rt_ids_push(p, (int32_t)len); }

/* Split every piece of `in` (lengths over the subject from 0) with m, appending to out. */
static int split_pieces(const subj *t, const rt_pieces *in, matcher m, rt_pieces *out)
{
    size_t s = 0;
    for (size_t k = 0; k < in->n; k++) {
        size_t e = s + (size_t)in->v[k], gap = s, pos = s;
        while (pos < e) {
            ++*t->steps;
            size_t n = m(t, pos, e);
            if (n == 0) {
                pos++;
                continue;
            }
            if (pos > gap && push(out, pos - gap))
                return -1;
            if (push(out, n))
                return -1;
            pos += n;
            gap = pos;
        }
        if (e > gap && push(out, e - gap))
            return -1;
        s = e;
    }
    return 0;
}

int rt_pretok_split(rt_tok_pre pre, const uint32_t *cps, const uint8_t *cls, size_t n,
                    rt_pieces *out)
{
    size_t steps = 0;
    return rt_pretok_split_counted(pre, cps, cls, n, out, &steps);
}

int rt_pretok_split_counted(rt_tok_pre pre, const uint32_t *cps, const uint8_t *cls, size_t n,
                            rt_pieces *out, size_t *steps)
{
    if (n == 0)
        return 0;
    subj t = { cps, cls, steps };
    int32_t whole = (int32_t)n;
    rt_pieces all = { &whole, 1, 1 };
    if (pre == RT_PRE_LLAMA3)
        return split_pieces(&t, &all, m_llama3, out);
    if (pre == RT_PRE_QWEN2)
        return split_pieces(&t, &all, m_qwen2, out);
    if (pre == RT_PRE_GPT2)
        return split_pieces(&t, &all, m_gpt2, out);
    static const matcher chain[4] = { m_punct, m_gpt2, m_numbers, m_digits3 };
    rt_pieces a = { 0 }, b = { 0 };
    int rc = 0;
    const rt_pieces *cur = &all;
    for (int i = 0; i < 4 && rc == 0; i++) {
        rt_pieces *dst = (i % 2 == 0) ? &a : &b;
        dst->n = 0;
        rc = split_pieces(&t, cur, chain[i], i == 3 ? out : dst);
        cur = dst;
    }
    rt_ids_free(&a);
    rt_ids_free(&b);
    return rc;
}
