/* rt_grammar_priv.h - what rt_grammar_step.c, _match.c, _memo.c, _vocab.c and _budget.c share: the stack set
 * and the recognizer's layout (see rt_grammar.h for what they mean).
 *
 * (rt_grammar_parse.c uses the check below.)
 * Owns: rt_gset (stacks back to back as [length, element index bottom .. top], the offsets
 * of each, and the UTF-8 sequence in progress) and struct rt_gmatch (the committed set, the
 * per-depth sets of a token walk, the work list of the expansion and its dedup table).
 */
#ifndef RT_GRAMMAR_PRIV_H
#define RT_GRAMMAR_PRIV_H

#include "base/rt_base.h"
#include "sample/rt_grammar.h"

typedef struct {
    uint32_t *w;       /* stacks back to back: length, then the element indexes bottom .. top */
    size_t nw, capw;
    uint32_t *off;     /* where each stack starts in w */
    uint32_t n, capn;
    uint32_t pval;     /* UTF-8 sequence in progress: the value of its bytes so far, */
    uint32_t prem;     /* the bytes still to come (0: none in progress), */
    uint32_t plen;     /* and its whole length */
} rt_gset;

/* States met while masking, interned by content, and the byte transitions between them
 * (rt_grammar_memo.c): a mask steps each (state, byte) pair once, and later masks reuse
 * them; cleared when it outgrows RT_GMEMO_MAX_WORDS / _MAX_STATES / _MAX_TRANS. */
#define RT_GMEMO_MAX_WORDS (1u << 22)
#define RT_GMEMO_MAX_STATES (1u << 20)
#define RT_GMEMO_MAX_TRANS (1u << 21)
#define RT_GMEMO_HOT 64          /* lookups from a state before it gets a direct table */
#define RT_GMEMO_MAX_DIRECT 4096 /* direct tables (1 KiB each) at most */

typedef struct {
    size_t wbase, obase; /* its words and stack offsets in the memo's arrays */
    uint32_t nw, n, pval, prem, plen;
    uint64_t hash;
    uint64_t lead[4];    /* bytes that may come next (a superset; computed on first use) */
    bool lead_known;
    uint32_t steps;      /* transitions looked up from it */
    uint32_t *direct;    /* a hot state's transitions by byte (id + 1, 0: not known yet), or NULL */
    uint32_t cost;       /* its shortest completion in tokens (rt_grammar_budget.c), */
    bool cost_known;     /* once computed */
} rt_gmstate;

typedef struct {
    uint64_t key;        /* (from << 8 | byte) + 1; 0: empty */
    uint32_t to;
} rt_gmtrans;

typedef struct {
    uint32_t *words, *offs;
    size_t n_words, cap_words, n_offs, cap_offs;
    rt_gmstate *st;
    uint32_t n_st, cap_st;
    uint32_t *sh, cap_sh;   /* state table: id + 1, 0 empty */
    rt_gmtrans *tr;
    uint32_t n_tr, cap_tr;
    uint32_t *path, cap_path; /* the state id per depth of a mask walk */
    uint32_t n_direct;        /* states with a direct table */
    uint32_t gen;             /* bumped when cleared (ids of an earlier generation are void) */
    rt_gset scratch;
} rt_gmemo;

struct rt_gmatch {
    const rt_grammar *g;
    rt_gset cur;        /* the committed state */
    rt_gset *lv;        /* lv[d]: the state after d bytes of the token being walked (d >= 1) */
    uint32_t n_lv;
    rt_gset work;       /* expansion work list */
    uint32_t *tmp, cap_tmp, *seed, cap_seed;
    uint32_t *hslot, *hstamp, stamp; /* dedup table of the set being built */
    uint32_t work_done; /* expansions for the current character */
    rt_gmemo memo;      /* the mask's states and transitions */
    uint32_t cur_id, cur_gen; /* the committed state's id in the memo, valid when cur_gen == memo.gen */
    uint32_t *rest;     /* [n_el] the budget's cost to the end of an alternative (rt_grammar_budget.c), */
    const void *rest_for; /* for this vocabulary (NULL: not made) */
    bool cont_ok;       /* every UTF-8 continuation byte is a one-byte token of it */
    int64_t left;       /* tokens the answer may still have, the end token included; -1: no budget */
    char err[RT_ERR_LEN];
};

/* rt_grammar_budget.c: the shortest completion in tokens (a safe bound; RT_GCOST_NONE: none
 * that it counts on). Make m->rest for a vocabulary whose one-byte tokens are byte_tok[256]
 * (non-zero: byte b is a token): 0 ok, -1 + err (out of memory). */
#define RT_GCOST_NONE 0x3FFFFFFFu
int rt_gbudget_prepare(rt_gmatch *m, const uint8_t *byte_tok, char *err);
/* The cost of the stack st[0..len) (bottom .. top), prem bytes of a character to come. */
uint32_t rt_gbudget_stack(const rt_gmatch *m, const uint32_t *st, uint32_t len, uint32_t prem);
/* The cost of memo state id (computed once, kept in the state). */
uint32_t rt_gbudget_cost(rt_gmatch *m, uint32_t id);

/* Whether a rule of g is left-recursive: 1 with *bad_rule one of them, 0 no, -1 out of memory
 * (rt_grammar_check.c). */
int rt_grammar_left_recursive(const rt_grammar *g, uint32_t *bad_rule);

/* rt_grammar_step.c: stack sets and their steps */
void rt_gset_free(rt_gset *s);
int rt_gset_copy(rt_gset *dst, const rt_gset *src);
/* out = the stacks the start rule expands to. 0 ok, -1 + err (out empty). */
int rt_gset_start(rt_gmatch *m, rt_gset *out, char *err);
/* out = in after code point c (any UTF-8 sequence in progress in `in` is ignored: callers
 * step bytes). 0 ok (out may be empty: rejected), -1 + m->err. */
int rt_gset_step_cp(rt_gmatch *m, const rt_gset *in, rt_gset *out, uint32_t c);
/* out = in after byte b (UTF-8 decoded on the way; invalid UTF-8 leaves out empty). */
int rt_gset_step_byte(rt_gmatch *m, const rt_gset *in, rt_gset *out, uint8_t b);
bool rt_gset_complete(const rt_gset *s);
/* rt_grammar_match.c: the recognizer. m->lv has at least n sets. 0 ok, -1 + m->err. */
int rt_gmatch_levels(rt_gmatch *m, uint32_t n);
/* Walk s[0..n) from the committed state through lv[1..n]: the depth reached (n: all taken),
 * -1 + m->err. */
long rt_gmatch_walk(rt_gmatch *m, const uint8_t *s, size_t n);
/* After a complete walk of n bytes, its last set becomes the committed state. */
void rt_gmatch_commit(rt_gmatch *m, size_t n);

/* The memo (rt_grammar_memo.c). Before a mask: clear it when too large; ensure n path
 * entries. 0 ok, -1 + m->err. */
int rt_gmemo_begin(rt_gmatch *m, uint32_t n);
/* The id of a state equal to s (added when new); UINT32_MAX + m->err on failure. */
uint32_t rt_gmemo_intern(rt_gmatch *m, const rt_gset *s);
/* The id of the state after byte b from state `from`; UINT32_MAX + m->err. */
uint32_t rt_gmemo_step(rt_gmatch *m, uint32_t from, uint8_t b);
/* The committed state's id (interned when not known); UINT32_MAX + m->err. */
uint32_t rt_gmemo_cur(rt_gmatch *m);
/* State id becomes the committed state. 0 ok, -1 + m->err. */
int rt_gmemo_load(rt_gmatch *m, uint32_t id);
/* Whether state id has no stacks (nothing can follow). */
bool rt_gmemo_dead(const rt_gmatch *m, uint32_t id);
/* false: byte b certainly leaves no stack from state id (without stepping); true: it may. */
bool rt_gmemo_may_take(rt_gmatch *m, uint32_t id, uint8_t b);
void rt_gmemo_free(rt_gmemo *g);

#endif
