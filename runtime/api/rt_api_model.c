/* rt_api_model.c - ternion_model: the registry of generated models, loading a GGUF and
 * choosing the model it matches, the tokenizer, the streaming detokenizer and the chat
 * format (ternion.h).
 *
 * Choosing the generated model (ternion_model_params.builtin == NULL): every model of the
 * registry is checked against the file as the engine checks it at load
 * (rt_engine_check_model: general.architecture, the hyperparameters the YAML fixes, every
 * tensor's type and shape). One match: that one. Several (variants with the same shapes,
 * e.g. a different activation): the one whose name is the file's general.name, else an
 * error naming them. None: an error naming every built-in model and why it does not fit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/rt_api_priv.h"
#include "format/fmt_codec.h"
#include "tok/rt_chat.h"

int32_t ternion_builtin_count(void) { return (int32_t)rt_registry_count; }

const char *ternion_builtin_name(int32_t i)
{
    return i >= 0 && (unsigned)i < rt_registry_count ? rt_registry[i]->name : NULL;
}

const char *ternion_builtin_manifest(int32_t i)
{
    return i >= 0 && (unsigned)i < rt_registry_count ? rt_registry[i]->manifest : NULL;
}

ternion_model_params ternion_model_default_params(void)
{
    return (ternion_model_params){.builtin = NULL, .progress = NULL, .progress_user = NULL};
}

static const rt_model_desc *find_builtin(const char *name)
{
    for (unsigned i = 0; i < rt_registry_count; i++)
        if (!strcmp(rt_registry[i]->name, name))
            return rt_registry[i];
    return NULL;
}

/* "a, b, c" of every built-in model. */
static void builtin_list(char *out, size_t n)
{
    size_t k = 0;
    out[0] = 0;
    for (unsigned i = 0; i < rt_registry_count && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s%s", i ? ", " : "", rt_registry[i]->name);
}

/* The file's general.name ("" when absent). */
static void general_name(const rt_gguf *g, char *out, size_t n)
{
    rt_gguf_str s = {0};
    char kerr[RT_ERR_LEN];
    out[0] = 0;
    if (rt_gguf_get_str(g, "general.name", &s, kerr) == 0)
        snprintf(out, n, "%.*s", (int)(s.len < n ? s.len : n - 1), s.ptr);
}

/* Picks the model for g (see the header comment). 0 ok, else a status (error set). */
static int choose(ternion_model *m, const char *want)
{
    char err[RT_ERR_LEN], names[RT_ERR_LEN * 4]; /* every built-in model's name (over 30) */
    builtin_list(names, sizeof(names));
    if (want) {
        const rt_model_desc *d = find_builtin(want);
        if (!d)
            return rt_api_fail(TERNION_E_INVALID, "no generated model named '%s' is built in (built in: %s)", want,
                               names);
        if (rt_engine_check_model(d, m->g, &m->n_layer, &m->n_vocab, err))
            return rt_api_fail(TERNION_E_FORMAT, "%s", err);
        m->desc = d;
        return 0;
    }
    /* why each model does not fit: "name: reason; " (bounded, linear in the models) */
    enum { WHY = 4096 };
    char *why = malloc(WHY);
    const rt_model_desc *match[64];
    int nm = 0, layers[64], vocab[64];
    if (!why)
        return rt_api_fail(TERNION_E_NOMEM, "out of host memory");
    size_t k = 0, no = 0;
    char others[512] = "";
    why[0] = 0;
    for (unsigned i = 0; i < rt_registry_count; i++) {
        const rt_model_desc *d = rt_registry[i];
        int nl = 0, nv = 0;
        if (rt_engine_check_model(d, m->g, &nl, &nv, err) == 0) {
            if (nm < 64) {
                layers[nm] = nl;
                vocab[nm] = nv;
                match[nm++] = d;
            }
            continue;
        }
        bool same_arch = false; /* a model of another architecture: named in one line at the end */
        for (uint32_t j = 0; j < d->n_archs; j++)
            same_arch |= !strcmp(d->archs[j], m->g->arch);
        if (!same_arch) {
            no += (size_t)snprintf(others + no, no < sizeof others ? sizeof others - no : 0, "%s%s", no ? ", " : "", d->name);
            continue;
        }
        /* drop the "path: " prefix the engine puts in front of each reason */
        const char *r = err;
        size_t pl = strlen(m->g->path);
        if (!strncmp(r, m->g->path, pl) && r[pl] == ':')
            r += pl + 1 + (r[pl + 1] == ' ');
        if (k < WHY)
            k += (size_t)snprintf(why + k, WHY - k, "\n  %s: %s", d->name, r);
    }
    if (no && k < WHY) /* the models of the file's architecture first: their reasons are the useful ones */
        k += (size_t)snprintf(why + k, WHY - k, "\n  another architecture than '%s': %s", m->g->arch, others);
    int pick = nm == 1 ? 0 : -1;
    if (nm > 1) {
        char gname[128];
        general_name(m->g, gname, sizeof(gname));
        for (int i = 0; i < nm; i++)
            if (!strcmp(match[i]->name, gname))
                pick = i;
        if (pick < 0) {
            char list[RT_ERR_LEN];
            size_t q = 0;
            list[0] = 0;
            for (int i = 0; i < nm && q < sizeof(list); i++)
                q += (size_t)snprintf(list + q, sizeof(list) - q, "%s%s", i ? ", " : "", match[i]->name);
            free(why);
            return rt_api_fail(TERNION_E_FORMAT,
                               "%s fits several generated models (%s) and its general.name ('%s') names none of "
                               "them: choose one (ternion_model_params.builtin; on the command line "
                               "--model-type NAME, or run build/NAME)",
                               m->path, list, gname);
        }
    }
    if (pick < 0) {
        rt_api_fail(TERNION_E_FORMAT,
                    "%s (general.architecture '%s') matches none of the generated models built in (%s): draft "
                    "a description of it with `ternion-gen --from-gguf %s -o models/NAME.yaml` (it names what "
                    "it cannot express), then run `make gen && make`. Why each model does not fit:%s",
                    m->path, m->g->arch, names, m->path, why); /* the command first: a long list is cut */
        free(why);
        return TERNION_E_FORMAT;
    }
    free(why);
    m->desc = match[pick];
    m->n_layer = layers[pick];
    m->n_vocab = vocab[pick];
    return 0;
}

/* The context a file's RoPE scaling declares it reaches: <arch>.rope.scaling.type linear, yarn
 * or longrope with <arch>.rope.scaling.factor > 1, times .original_context_length (else the
 * training context); 0 when it declares none. */
static int rope_ctx_max(const rt_gguf *g, int n_ctx_train)
{
    char err[RT_ERR_LEN];
    rt_gguf_str type = {0};
    float factor = 0;
    uint32_t orig = 0;
    if (rt_gguf_get_str(g, "%s.rope.scaling.type", &type, err) || rt_gguf_get_f32(g, "%s.rope.scaling.factor", &factor,
                                                                                   err) ||
        !(factor > 1) || (type.len == 4 && !memcmp(type.ptr, "none", 4)))
        return 0;
    if (rt_gguf_get_u32(g, "%s.rope.scaling.original_context_length", &orig, err) || !orig)
        orig = (uint32_t)(n_ctx_train > 0 ? n_ctx_train : 0);
    const double max = (double)orig * factor;
    return max >= INT32_MAX ? INT32_MAX : (int)max;
}

/* The ternary format of the file's matrices and the one the generated model's YAML names
 * (the first ternary tensor's; "mixed" when the file's differ). */
static void weight_formats(ternion_model *m)
{
    const rt_model_desc *d = m->desc;
    char name[256];
    for (uint32_t t = 0; t < d->n_tensors; t++) {
        const uint8_t want = d->tensors[t].type;
        if (!fmt_is_ternary(fmt_codec_find(want)))
            continue;
        if (!m->weights_yaml)
            m->weights_yaml = fmt_type_name(want);
        for (int L = 0; L < (d->tensors[t].per_layer ? m->n_layer : 1); L++) {
            const char *g = d->tensors[t].gguf, *p = strstr(g, "{L}");
            if (p)
                snprintf(name, sizeof name, "%.*s%d%s", (int)(p - g), g, L, p + 3);
            else
                snprintf(name, sizeof name, "%s", g);
            const rt_gguf_tensor *gt = rt_gguf_tensor_find(m->g, name);
            const char *f = gt ? fmt_type_name(gt->type) : NULL;
            if (f && !m->weights)
                m->weights = f;
            else if (f && strcmp(f, m->weights))
                m->weights = "mixed";
        }
    }
}

/* The chat template: the one params.chat_template names, else the file's
 * (rt_chat_tmpl_for_file: a template not recognised gives one warning line on stderr). 0 ok,
 * else a status (error set). */
static int choose_chat(ternion_model *m)
{
    const char *want = m->params.chat_template;
    char names[512], warn[RT_ERR_LEN], err[RT_ERR_LEN];
    if (want && *want) {
        m->chat = rt_chat_tmpl_detect(want, strlen(want));
        rt_chat_tmpl_list(names, sizeof(names));
        if (!m->chat)
            return rt_api_fail(TERNION_E_INVALID, "chat template '%.80s%s' is not one Ternion has (%s)", want,
                               strlen(want) > 80 ? "..." : "", names);
    } else {
        rt_gguf_str s = {0};
        bool has = rt_gguf_get_str(m->g, "tokenizer.chat_template", &s, err) == 0;
        m->chat = rt_chat_tmpl_for_file(has ? s.ptr : NULL, has ? (size_t)s.len : 0, m->g->arch, warn);
        if (warn[0])
            fprintf(stderr, "ternion: warning: %s\n", warn);
    }
    rt_chat probe;
    m->chat_end = rt_chat_init_tmpl(&probe, m->tok, m->chat, err) ? -1 : probe.end_id;
    return 0;
}

int ternion_model_load(const char *path, const ternion_model_params *params, ternion_model **out)
{
    if (!out)
        return rt_api_fail(TERNION_E_INVALID, "ternion_model_load: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return rt_api_fail(TERNION_E_INVALID, "ternion_model_load: no model path given");
    struct stat st;
    if (stat(path, &st) != 0)
        return rt_api_fail(TERNION_E_IO, "model file '%s' not found (%s)", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return rt_api_fail(TERNION_E_IO, "model path '%s' is not a file", path);
    ternion_model *m = calloc(1, sizeof(*m));
    if (!m)
        return rt_api_fail(TERNION_E_NOMEM, "out of host memory");
    if (pthread_mutex_init(&m->gv_mu, NULL)) {
        free(m);
        return rt_api_fail(TERNION_E_NOMEM, "cannot make a mutex");
    }
    m->params = params ? *params : ternion_model_default_params();
    snprintf(m->path, sizeof(m->path), "%s", path);
    char err[RT_ERR_LEN] = "";
    int rc;
    if (rt_gguf_open(path, &m->g, err)) {
        rc = rt_api_fail(TERNION_E_FORMAT, "%s", err);
        goto fail;
    }
    rc = m->params.vocab_only ? 0 : choose(m, m->params.builtin);
    if (rc)
        goto fail;
    uint32_t ctx = 0;
    if (rt_gguf_get_u32(m->g, "%s.context_length", &ctx, err) == 0)
        m->n_ctx_train = ctx > INT32_MAX ? INT32_MAX : (int)ctx;
    m->n_ctx_max = rope_ctx_max(m->g, m->n_ctx_train);
    uint32_t pooling = 0;
    m->pooling_file = rt_gguf_get_u32(m->g, "%s.pooling_type", &pooling, err) == 0 && pooling < 256 ? (int)pooling
                      : -1;
    if (m->desc)
        weight_formats(m);
    if (rt_tok_load(m->g, &m->tok, err)) {
        rc = rt_api_fail(TERNION_E_FORMAT, "%s", err);
        goto fail;
    }
    rc = choose_chat(m);
    if (rc)
        goto fail;
    rt_gguf_drop_data(m->g); /* its checks read every weight; the contexts' engines map their own */
    *out = m;
    return 0;
fail:
    ternion_model_free(m);
    return rc;
}

void ternion_model_free(ternion_model *m)
{
    if (!m)
        return;
    rt_api_vocab_unref(m->gv);
    pthread_mutex_destroy(&m->gv_mu);
    rt_tok_free(m->tok);
    rt_gguf_close(m->g);
    free(m);
}

const char *ternion_model_builtin(const ternion_model *m) { return m && m->desc ? m->desc->name : NULL; }
const char *ternion_model_arch(const ternion_model *m) { return m ? m->g->arch : NULL; }
int32_t ternion_model_n_vocab(const ternion_model *m) { return rt_api_model_n_vocab(m); }
int32_t ternion_model_n_layer(const ternion_model *m) { return m ? m->n_layer : 0; }
int32_t ternion_model_n_ctx_train(const ternion_model *m) { return m ? m->n_ctx_train : 0; }

int32_t ternion_model_pooling(const ternion_model *m)
{
    /* llama.cpp's llama_pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank */
    static const int32_t of_llama[] = {-1, TERNION_POOLING_MEAN, TERNION_POOLING_CLS, TERNION_POOLING_LAST, -1};
    if (!m)
        return -1;
    if (m->pooling_file < 0)
        return TERNION_POOLING_MEAN;
    return m->pooling_file < 5 ? of_llama[m->pooling_file] : -1;
}
int32_t ternion_model_pooling_type(const ternion_model *m) { return m ? m->pooling_file : -1; }
int32_t ternion_model_n_ctx_max(const ternion_model *m) { return m ? m->n_ctx_max : 0; }

const char *ternion_model_weights(const ternion_model *m, const char **yaml_default)
{
    if (yaml_default)
        *yaml_default = m ? m->weights_yaml : NULL;
    return m ? m->weights : NULL;
}

/* ---- tokens ---- */

int32_t ternion_token_bos(const ternion_model *m) { return m ? rt_tok_bos(m->tok) : -1; }
int32_t ternion_token_eos(const ternion_model *m) { return m ? rt_tok_eos(m->tok) : -1; }
int32_t ternion_token_eot(const ternion_model *m) { return m ? rt_tok_eot(m->tok) : -1; }
bool ternion_add_bos(const ternion_model *m) { return m && rt_tok_add_bos(m->tok); }
bool ternion_token_is_eog(const ternion_model *m, int32_t t)
{
    return m && (rt_tok_is_eog(m->tok, t) || (t >= 0 && t == m->chat_end));
}
const char *ternion_model_chat_template(const ternion_model *m) { return m ? rt_chat_tmpl_name(m->chat) : NULL; }

int32_t ternion_tokenize(const ternion_model *m, const char *text, size_t len, int32_t *tokens, int32_t n_max,
                         bool add_bos, bool parse_special)
{
    if (!m || (!text && len) || n_max < 0 || (n_max > 0 && !tokens))
        return rt_api_fail(TERNION_E_INVALID, "ternion_tokenize: NULL model, text or tokens, or n_max < 0");
    rt_ids ids = {0};
    char err[RT_ERR_LEN] = "";
    int32_t bos = rt_tok_bos(m->tok);
    if ((add_bos && rt_tok_add_bos(m->tok) && bos >= 0 && rt_ids_push(&ids, bos)) ||
        rt_tok_encode(m->tok, text ? text : "", len, parse_special, &ids, err) ||
        (add_bos && rt_tok_add_sep(m->tok) && rt_ids_push(&ids, rt_tok_sep(m->tok))) ||
        (add_bos && rt_tok_add_eos(m->tok) && rt_ids_push(&ids, rt_tok_eos(m->tok)))) {
        rt_ids_free(&ids);
        return rt_api_fail(TERNION_E_NOMEM, "%s", err[0] ? err : "out of memory tokenizing");
    }
    if (ids.n > INT32_MAX) {
        rt_ids_free(&ids);
        return rt_api_fail(TERNION_E_INVALID, "ternion_tokenize: more than 2^31 tokens");
    }
    int32_t n = (int32_t)ids.n;
    if (n <= n_max && n > 0)
        memcpy(tokens, ids.v, (size_t)n * sizeof(int32_t));
    rt_ids_free(&ids);
    return n;
}

int32_t ternion_token_to_piece(const ternion_model *m, int32_t token, char *buf, int32_t size, bool special)
{
    if (!m || size < 0 || (size > 0 && !buf))
        return rt_api_fail(TERNION_E_INVALID, "ternion_token_to_piece: NULL model or buffer");
    if (token < 0 || token >= rt_tok_n_vocab(m->tok))
        return rt_api_fail(TERNION_E_INVALID, "token id %d is outside the vocabulary (0..%d)", token,
                           rt_tok_n_vocab(m->tok) - 1);
    size_t len = 0;
    const char *p = rt_tok_piece(m->tok, token, special, &len);
    if (len <= (size_t)size)
        memcpy(buf, p, len);
    return (int32_t)len;
}

int32_t ternion_detokenize(const ternion_model *m, const int32_t *tokens, int32_t n, char *buf, int32_t size,
                           bool special)
{
    if (!m || n < 0 || (n > 0 && !tokens) || size < 0 || (size > 0 && !buf))
        return rt_api_fail(TERNION_E_INVALID, "ternion_detokenize: NULL argument or negative count");
    int32_t nv = rt_tok_n_vocab(m->tok);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= nv)
            return rt_api_fail(TERNION_E_INVALID, "token id %d at index %d is outside the vocabulary (0..%d)",
                               tokens[i], i, nv - 1);
    char *s = NULL;
    size_t len = 0;
    char err[RT_ERR_LEN] = "";
    if (rt_tok_decode(m->tok, tokens, (size_t)n, special, &s, &len, err))
        return rt_api_fail(TERNION_E_NOMEM, "%s", err[0] ? err : "out of memory detokenizing");
    if (len > INT32_MAX - 1) {
        free(s);
        return rt_api_fail(TERNION_E_INVALID, "ternion_detokenize: text longer than 2^31 bytes");
    }
    if (len < (size_t)size) {
        memcpy(buf, s, len);
        buf[len] = 0;
    }
    free(s);
    return (int32_t)len;
}

/* ---- streaming detokenizer ---- */

struct ternion_detok {
    const ternion_model *m;
    rt_tok_stream s;
};

ternion_detok *ternion_detok_new(const ternion_model *m, bool special)
{
    if (!m) {
        rt_api_fail(TERNION_E_INVALID, "ternion_detok_new: NULL model");
        return NULL;
    }
    ternion_detok *d = calloc(1, sizeof(*d));
    if (!d || rt_tok_stream_init(&d->s, m->tok, special)) {
        free(d);
        rt_api_fail(TERNION_E_NOMEM, "out of memory for the detokenizer");
        return NULL;
    }
    d->m = m;
    return d;
}

void ternion_detok_free(ternion_detok *d)
{
    if (!d)
        return;
    rt_tok_stream_free(&d->s);
    free(d);
}

const char *ternion_detok_push(ternion_detok *d, int32_t token, size_t *out_len)
{
    size_t n = 0;
    const char *s = d ? rt_tok_stream_push(&d->s, token, &n) : "";
    if (out_len)
        *out_len = n;
    return s;
}

const char *ternion_detok_flush(ternion_detok *d, size_t *out_len)
{
    size_t n = 0;
    const char *s = d ? rt_tok_stream_flush(&d->s, &n) : "";
    if (out_len)
        *out_len = n;
    return s;
}

/* ---- chat ---- */

struct ternion_chat {
    rt_chat c;
    const ternion_model *m;
    rt_ids pending;   /* appended since the last take */
    rt_ids taken;     /* handed out by the last take */
    rt_chat mark, mark_prev; /* the state at the last take and at the one before */
};

static int chat_err(int rc, const char *err)
{
    return rc ? rt_api_fail(TERNION_E_INVALID, "%s", err[0] ? err : "chat: out of memory") : 0;
}

ternion_chat *ternion_chat_new(const ternion_model *m)
{
    if (!m) {
        rt_api_fail(TERNION_E_INVALID, "ternion_chat_new: NULL model");
        return NULL;
    }
    ternion_chat *c = calloc(1, sizeof(*c));
    if (!c) {
        rt_api_fail(TERNION_E_NOMEM, "out of host memory");
        return NULL;
    }
    c->m = m;
    char err[RT_ERR_LEN] = "";
    if (rt_chat_init_tmpl(&c->c, m->tok, m->chat, err)) {
        rt_api_fail(TERNION_E_FORMAT, "%s", err);
        free(c);
        return NULL;
    }
    c->mark = c->mark_prev = c->c;
    return c;
}

void ternion_chat_free(ternion_chat *c)
{
    if (!c)
        return;
    rt_ids_free(&c->pending);
    rt_ids_free(&c->taken);
    free(c);
}

int ternion_chat_reset(ternion_chat *c)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_chat_reset: NULL chat");
    char err[RT_ERR_LEN] = "";
    c->pending.n = 0;
    c->taken.n = 0;
    int rc = chat_err(rt_chat_init_tmpl(&c->c, c->m->tok, c->m->chat, err), err);
    c->mark = c->mark_prev = c->c;
    return rc;
}

int ternion_chat_add(ternion_chat *c, ternion_role role, const char *content)
{
    if (!c || !content || role < TERNION_ROLE_SYSTEM || role > TERNION_ROLE_TOOL)
        return rt_api_fail(TERNION_E_INVALID, "ternion_chat_add: NULL chat or content, or unknown role");
    char err[RT_ERR_LEN] = "";
    return chat_err(rt_chat_add(&c->c, (rt_chat_role)role, content, &c->pending, err), err);
}

int ternion_chat_end_reply(ternion_chat *c, bool eot_fed)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_chat_end_reply: NULL chat");
    char err[RT_ERR_LEN] = "";
    return chat_err(rt_chat_end_reply(&c->c, eot_fed, &c->pending, err), err);
}

int ternion_chat_user_turn(ternion_chat *c, const char *content)
{
    if (!c || !content)
        return rt_api_fail(TERNION_E_INVALID, "ternion_chat_user_turn: NULL chat or content");
    char err[RT_ERR_LEN] = "";
    return chat_err(rt_chat_user_turn(&c->c, content, &c->pending, err), err);
}

int ternion_chat_gen_prompt(ternion_chat *c)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_chat_gen_prompt: NULL chat");
    char err[RT_ERR_LEN] = "";
    return chat_err(rt_chat_gen_prompt(&c->c, &c->pending, err), err);
}

bool ternion_chat_started(const ternion_chat *c) { return c && c->c.started; }

const int32_t *ternion_chat_take(ternion_chat *c, int32_t *out_n)
{
    if (!c) {
        if (out_n)
            *out_n = 0;
        return NULL;
    }
    rt_ids t = c->taken;
    c->taken = c->pending;
    t.n = 0;
    c->pending = t;
    c->mark_prev = c->mark;
    c->mark = c->c;
    if (out_n)
        *out_n = (int32_t)c->taken.n;
    return c->taken.v;
}

int ternion_chat_rewind(ternion_chat *c)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_chat_rewind: NULL chat");
    c->c = c->mark = c->mark_prev;
    c->pending.n = 0;
    c->taken.n = 0;
    return 0;
}
