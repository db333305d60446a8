/* rt_api_grammar.c - ternion_grammar: GBNF text (or a JSON schema's) compiled against a
 * model's vocabulary (runtime/sample/rt_grammar.h, rt_json_schema.h), shared by reference
 * counting between the caller and the samplers it constrains (rt_api_sample.c); and the
 * model's token table the grammars share (made on the first grammar, kept by reference).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/rt_api_priv.h"
#include "sample/rt_json_schema.h"

/* The model's token table: each token's text as the detokenizer prints it (control tokens
 * empty: never allowed), end-of-generation tokens flagged. */
static int vocab_of(const ternion_model *m, rt_gvocab **out, char *err)
{
    int32_t n = rt_api_model_n_vocab(m); /* the logits' width (the tokenizer's for vocab_only) */
    const char **piece = malloc(((size_t)n + 1) * sizeof *piece);
    uint32_t *len = malloc(((size_t)n + 1) * sizeof *len);
    uint8_t *eog = malloc((size_t)n + 1);
    int rc = -1;
    if (piece && len && eog) {
        for (int32_t i = 0; i < n; i++) {
            size_t l = 0;
            piece[i] = rt_tok_piece(m->tok, i, false, &l);
            len[i] = (uint32_t)l;
            eog[i] = rt_tok_is_eog(m->tok, i);
        }
        rc = rt_gvocab_new(n, piece, len, eog, out, err);
    } else {
        snprintf(err, RT_ERR_LEN, "out of host memory");
    }
    free(piece);
    free(len);
    free(eog);
    return rc;
}

rt_api_vocab *rt_api_model_vocab(const ternion_model *cm, char *err)
{
    ternion_model *m = (ternion_model *)cm; /* only gv changes, under its mutex */
    pthread_mutex_lock(&m->gv_mu);
    if (!m->gv) {
        rt_api_vocab *a = calloc(1, sizeof *a);
        if (a && vocab_of(m, &a->v, err) == 0) {
            atomic_init(&a->refs, 1);
            m->gv = a;
        } else {
            if (!a)
                snprintf(err, RT_ERR_LEN, "out of host memory");
            free(a);
        }
    }
    rt_api_vocab *v = m->gv;
    if (v)
        atomic_fetch_add(&v->refs, 1);
    pthread_mutex_unlock(&m->gv_mu);
    return v;
}

void rt_api_vocab_unref(rt_api_vocab *v)
{
    if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
        return;
    rt_gvocab_free(v->v);
    free(v);
}

int ternion_grammar_new(const ternion_model *model, const char *gbnf, const char *root, ternion_grammar **out)
{
    if (!out)
        return rt_api_fail(TERNION_E_INVALID, "ternion_grammar_new: out is NULL");
    *out = NULL;
    if (!model || !gbnf)
        return rt_api_fail(TERNION_E_INVALID, "ternion_grammar_new: NULL model or grammar text");
    char err[RT_ERR_LEN] = "";
    ternion_grammar *g = calloc(1, sizeof *g);
    if (!g)
        return rt_api_fail(TERNION_E_NOMEM, "out of host memory");
    if (rt_grammar_parse(gbnf, strlen(gbnf), root, &g->g, err)) {
        free(g);
        return rt_api_fail(strstr(err, "out of memory") ? TERNION_E_NOMEM : TERNION_E_INVALID, "%s", err);
    }
    /* the start state is checked now, so a grammar too ambiguous to start fails here */
    rt_gmatch *probe = NULL;
    if (rt_gmatch_new(g->g, &probe, err) || !(g->voc = rt_api_model_vocab(model, err))) {
        rt_gmatch_free(probe);
        rt_grammar_free(g->g);
        free(g);
        return rt_api_fail(strstr(err, "out of memory") ? TERNION_E_NOMEM : TERNION_E_INVALID, "%s", err);
    }
    rt_gmatch_free(probe);
    atomic_init(&g->refs, 1);
    *out = g;
    return 0;
}

int ternion_grammar_new_json_schema(const ternion_model *model, const char *schema, ternion_grammar **out)
{
    if (!out)
        return rt_api_fail(TERNION_E_INVALID, "ternion_grammar_new_json_schema: out is NULL");
    *out = NULL;
    if (!model || !schema)
        return rt_api_fail(TERNION_E_INVALID, "ternion_grammar_new_json_schema: NULL model or schema");
    char *gbnf = NULL, err[RT_ERR_LEN] = "";
    if (rt_json_schema_to_gbnf(schema, strlen(schema), &gbnf, err))
        return rt_api_fail(strstr(err, "out of memory") ? TERNION_E_NOMEM : TERNION_E_INVALID, "%s", err);
    int rc = ternion_grammar_new(model, gbnf, "root", out);
    free(gbnf);
    return rc;
}

void rt_api_grammar_ref(ternion_grammar *g) { atomic_fetch_add(&g->refs, 1); }

void rt_api_grammar_unref(ternion_grammar *g)
{
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1)
        return;
    rt_grammar_free(g->g);
    rt_api_vocab_unref(g->voc);
    free(g);
}

void ternion_grammar_free(ternion_grammar *g) { rt_api_grammar_unref(g); }

int ternion_grammar_min_tokens(const ternion_grammar *g, int32_t *out)
{
    if (!g || !out)
        return rt_api_fail(TERNION_E_INVALID, "ternion_grammar_min_tokens: NULL grammar or out");
    rt_gmatch *m = NULL;
    uint32_t n = 0;
    char err[RT_ERR_LEN] = "";
    int rc = rt_gmatch_new(g->g, &m, err) || rt_gmatch_shortest(m, g->voc->v, &n, err);
    rt_gmatch_free(m);
    if (rc)
        return rt_api_fail(strstr(err, "out of memory") ? TERNION_E_NOMEM : TERNION_E_INVALID, "%s", err);
    if (n > INT32_MAX)
        return rt_api_fail(TERNION_E_INVALID, "grammar: the vocabulary cannot spell a completion one character at "
                                              "a time (a character's bytes are not one-byte tokens)");
    *out = (int32_t)n;
    return 0;
}

int32_t ternion_json_schema_to_gbnf(const char *schema, char *buf, int32_t size)
{
    if (!schema || size < 0 || (size > 0 && !buf))
        return rt_api_fail(TERNION_E_INVALID, "ternion_json_schema_to_gbnf: NULL schema or buffer");
    char *gbnf = NULL, err[RT_ERR_LEN] = "";
    if (rt_json_schema_to_gbnf(schema, strlen(schema), &gbnf, err))
        return rt_api_fail(strstr(err, "out of memory") ? TERNION_E_NOMEM : TERNION_E_INVALID, "%s", err);
    size_t n = strlen(gbnf);
    if (n > INT32_MAX - 1) {
        free(gbnf);
        return rt_api_fail(TERNION_E_INVALID, "json schema: the grammar is longer than 2^31 bytes");
    }
    if ((int32_t)n < size)
        memcpy(buf, gbnf, n + 1);
    free(gbnf);
    return (int32_t)n;
}

const char *ternion_grammar_json_object(void) { return rt_json_object_gbnf(); }
