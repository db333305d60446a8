/* rt_grammar.h - grammar-constrained sampling: GBNF grammars (llama.cpp's syntax), their
 * pushdown recognizer over UTF-8 code points, and the vocabulary mask.
 *
 * Owns: the compiled grammar (rt_grammar: rules as flat element arrays, rt_grammar_parse.c),
 * the recognizer state (rt_gmatch: a set of pushdown stacks plus a UTF-8 sequence in
 * progress, rt_grammar_match.c on the steps of rt_grammar_step.c) and the token table with the mask over it (rt_gvocab,
 * rt_grammar_vocab.c). Nothing here knows the tokenizer or the sampler: the API layer hands
 * in each token's bytes.
 *
 * Syntax (llama.cpp's grammars/README.md): `name ::= alternatives` rules (a name is
 * [a-zA-Z0-9-]+; a rule ends at a newline unless inside parentheses or after `|`), `|`
 * alternation, sequences, `( )` groups, `*` `+` `?` `{m}` `{m,}` `{m,n}` repetition, "..."
 * literals and [...] classes with escapes (\x.. \u.... \U........ \t \r \n \\ \" \[ \]),
 * ranges a-z and negation [^...], `.` any character, `#` comments. The start rule is
 * `root` unless named. Errors name the place: "grammar:LINE:COL: what" (columns count
 * characters from 1).
 *
 * Semantics (llama.cpp's): the recognizer holds every way the text so far can be parsed as
 * a stack of positions in the rules; a stack whose top is a character element waits for a
 * character, an empty stack means the text is a complete match. A token is allowed when
 * feeding its bytes leaves at least one stack (a token ending inside a UTF-8 sequence:
 * when some stack can still take a character that sequence starts); an end-of-generation
 * token when the text is complete.
 *
 * Limits (all inputs are untrusted): left recursion is an error at compile time; groups nest
 * at most RT_GRAMMAR_MAX_NEST deep; repetition counts are at most RT_GRAMMAR_MAX_REPEAT and
 * the rules at most RT_GRAMMAR_MAX_ELEMS elements after expanding them; a state holds at most
 * RT_GRAMMAR_MAX_STACKS stacks and one character expands at most RT_GRAMMAR_MAX_WORK rule
 * references (more is an error: the grammar is too ambiguous); a stack deeper than
 * RT_GRAMMAR_MAX_DEPTH positions is dropped (text nested that deep is not accepted). So
 * compiling is linear in the grammar text and each byte of input costs bounded time.
 */
#ifndef RT_GRAMMAR_H
#define RT_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RT_GRAMMAR_MAX_NEST 256
#define RT_GRAMMAR_MAX_REPEAT 100000
#define RT_GRAMMAR_MAX_ELEMS (1u << 21)
#define RT_GRAMMAR_MAX_STACKS 4096
#define RT_GRAMMAR_MAX_WORK 65536
#define RT_GRAMMAR_MAX_DEPTH 1024

/* Element kinds (llama.cpp's llama_gretype, same order). */
enum {
    RT_GE_END = 0,        /* end of a rule */
    RT_GE_ALT = 1,        /* start of the next alternative */
    RT_GE_RULE_REF = 2,   /* value: rule id */
    RT_GE_CHAR = 3,       /* value: code point; starts a class */
    RT_GE_CHAR_NOT = 4,   /* value: code point; starts a negated class */
    RT_GE_CHAR_RNG_UPPER = 5, /* value: upper end of a range begun by the element before */
    RT_GE_CHAR_ALT = 6,   /* value: another code point of the class */
    RT_GE_CHAR_ANY = 7,   /* any code point */
};

typedef struct {
    uint32_t type, value;
} rt_gelem;

typedef struct rt_grammar rt_grammar;

/* Compile src[0..len) with start rule `root` (NULL: "root"). 0 ok; -1 with err (RT_ERR_LEN)
 * "grammar:LINE:COL: ..." or "grammar: ..." and *out NULL. */
int rt_grammar_parse(const char *src, size_t len, const char *root, rt_grammar **out, char *err);
void rt_grammar_free(rt_grammar *g);
uint32_t rt_grammar_n_rules(const rt_grammar *g);
uint32_t rt_grammar_n_elems(const rt_grammar *g);

/* ---- recognizer ---- */

typedef struct rt_gmatch rt_gmatch;

/* A recognizer at the start of g (g must outlive it). 0 ok; -1 + err (out of memory, or the
 * start state exceeds a limit). */
int rt_gmatch_new(const rt_grammar *g, rt_gmatch **out, char *err);
void rt_gmatch_free(rt_gmatch *m);
/* Back to the start. 0 ok, -1 + err. */
int rt_gmatch_reset(rt_gmatch *m, char *err);
/* Feed s[0..n): 1 accepted (the state moved on), 0 rejected (the state is unchanged),
 * -1 a limit or out of memory (err; the state is unchanged). */
int rt_gmatch_accept(rt_gmatch *m, const char *s, size_t n, char *err);
/* The text so far is a complete match (and ends on a character boundary). */
bool rt_gmatch_complete(const rt_gmatch *m);
/* Some continuation of the text so far can still be accepted. */
bool rt_gmatch_more(const rt_gmatch *m);
/* Stacks in the current state (tests, diagnostics). */
uint32_t rt_gmatch_n_stacks(const rt_gmatch *m);

/* ---- tokens ---- */

typedef struct rt_gvocab rt_gvocab;

/* The token table: piece[i][0..len[i]) the bytes of token i, eog[i] non-zero for the tokens
 * that end generation (allowed exactly when the text is complete). A non-EOG token with no
 * bytes (control tokens) is never allowed. The bytes are copied. 0 ok, -1 + err. */
int rt_gvocab_new(int32_t n, const char *const *piece, const uint32_t *len, const uint8_t *eog, rt_gvocab **out,
                  char *err);
void rt_gvocab_free(rt_gvocab *v);
int32_t rt_gvocab_size(const rt_gvocab *v);
/* Token id's bytes (*len of them; an id out of range: none). */
const char *rt_gvocab_piece(const rt_gvocab *v, int32_t id, uint32_t *len);

/* Whether token id may come next: 1 yes, 0 no, -1 + err (a limit). */
int rt_gmatch_token_ok(rt_gmatch *m, const rt_gvocab *v, int32_t id, char *err);
/* Feed token id (an EOG token changes nothing): 1 accepted, 0 rejected (unchanged), -1 + err. */
int rt_gmatch_accept_token(rt_gmatch *m, const rt_gvocab *v, int32_t id, char *err);
/* allow[id] = 1 for every token that may come next, else 0 (allow has rt_gvocab_size
 * entries); *n_allowed their count. Tokens sharing a prefix share its work (the table is
 * sorted by bytes: a walk over an implicit trie, a dead prefix rejects the tokens under it
 * at once). 0 ok, -1 + err. */
int rt_gmatch_mask(rt_gmatch *m, const rt_gvocab *v, uint8_t *allow, int32_t *n_allowed, char *err);

/* ---- the token budget (rt_grammar_budget.c) ----
 * The shortest completion of the text so far in tokens of v: *n = the tokens of a
 * completion spelled one character at a time (an ASCII character by its one-byte token,
 * another by one token per UTF-8 byte), plus the end token when v has one; UINT32_MAX when
 * no completion can be spelled so. A safe bound: at least the true fewest, and reachable.
 * The first call for a vocabulary makes a table linear in the grammar. 0 ok, -1 + err. */
int rt_gmatch_shortest(rt_gmatch *m, const rt_gvocab *v, uint32_t *n, char *err);
/* The answer may have n more tokens, the end token included (n < 0: no budget; reset clears
 * it). With a budget, rt_gmatch_token_ok and rt_gmatch_mask allow a token only when it, the
 * shortest completion after it and the end token fit in what is left, and each accepted
 * token counts one: started with n >= rt_gmatch_shortest's answer, the text is complete and
 * the end token allowed by the time the budget runs out (tokens on a shortest completion
 * always fit, so the mask is never empty). */
void rt_gmatch_set_budget(rt_gmatch *m, int64_t n);
/* Tokens left (-1: no budget). */
int64_t rt_gmatch_budget(const rt_gmatch *m);

/* ---- internals shared by the rt_grammar_*.c files ---- */

struct rt_grammar {
    rt_gelem *el;        /* every rule's elements, each rule ending in RT_GE_END; then the start
                            element: a reference to the root rule and an END */
    uint32_t n_el;
    uint32_t n_rules;
    uint32_t *rule_off;  /* [n_rules] first element of each rule */
    uint32_t *alt_off;   /* [n_rules + 1] range of each rule's alternatives in alt_start */
    uint32_t *alt_start; /* first element of each alternative */
    uint32_t start;      /* index of the start element */
};

#endif
