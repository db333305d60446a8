/* export_trained.c - writes a trained model as a GGUF in the official I2_S layout.
 *
 *   export_trained models/X.yaml WEIGHTS.bin VOCAB.gguf -o model.gguf [--ctx C] [--name N]
 *
 * Owns: turning the training dump (tools/train/train.py dump(): magic "TRNW", version 1,
 * tensors as float32 values or int8 ternary codes + one float32 scale, shapes in GGUF ne
 * order) into the model file the runtime loads. Every tensor the YAML names is looked up in
 * the dump for each layer and written with the YAML's type by that format's encoder
 * (format/fmt_codec.h): f32 as is, f16 rounded to nearest even, i2_s packed in the official
 * 128-element blocks with the scale after the codes. The shape and the kind (ternary for i2_s, values otherwise) must match
 * the YAML's; the layer count is the number of blk.N.attn_norm tensors in the dump; the
 * vocabulary size is token_embd's ne1 and must equal the vocabulary file's token count.
 * Metadata: general.architecture (the YAML's first), every gguf_checks key with the YAML's
 * value, vocab_size, block_count, context_length (--ctx, default 256: the trained length),
 * and the tokenizer.ggml.* keys copied from VOCAB.gguf (tools/vocabcut.c).
 */
#include "gen_model.h"
#include "format/fmt_codec.h"
#include "gguf/rt_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char name[96];
    uint32_t kind, n_dims;
    int64_t ne[4];
    float *val;    /* kind 0 */
    int8_t *codes; /* kind 1 */
    float scale;
    uint8_t *out;  /* converted bytes handed to the writer */
} dtensor;

static int rd(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n ? 0 : -1; }

static int read_dump(const char *path, dtensor **out_t, uint32_t *out_n)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "export_trained: cannot open '%s'\n", path); return -1; }
    char magic[4];
    uint32_t ver, n;
    if (rd(f, magic, 4) || memcmp(magic, "TRNW", 4) || rd(f, &ver, 4) || ver != 1 || rd(f, &n, 4) ||
        n == 0 || n > 100000) {
        fprintf(stderr, "export_trained: %s: not a version 1 training dump\n", path);
        fclose(f);
        return -1;
    }
    dtensor *t = calloc(n, sizeof *t);
    for (uint32_t i = 0; t && i < n; i++) {
        uint32_t len;
        uint64_t ne64, cnt = 1;
        if (rd(f, &len, 4) || len >= sizeof t[i].name || rd(f, t[i].name, len) ||
            rd(f, &t[i].kind, 4) || t[i].kind > 1 || rd(f, &t[i].n_dims, 4) ||
            t[i].n_dims < 1 || t[i].n_dims > 2)
            goto bad;
        for (int d = 0; d < 4; d++) t[i].ne[d] = 1;
        for (uint32_t d = 0; d < t[i].n_dims; d++) {
            if (rd(f, &ne64, 8) || ne64 == 0 || ne64 > (1u << 24)) goto bad;
            t[i].ne[d] = (int64_t)ne64;
            cnt *= ne64;
        }
        if (t[i].kind == 0) {
            t[i].val = malloc(cnt * sizeof(float));
            if (!t[i].val || rd(f, t[i].val, cnt * sizeof(float))) goto bad;
        } else {
            t[i].codes = malloc(cnt);
            if (!t[i].codes || rd(f, t[i].codes, cnt) || rd(f, &t[i].scale, 4)) goto bad;
            for (uint64_t e = 0; e < cnt; e++)
                if (t[i].codes[e] < -1 || t[i].codes[e] > 1) goto bad;
        }
    }
    fclose(f);
    *out_t = t;
    *out_n = n;
    return t ? 0 : -1;
bad:
    fprintf(stderr, "export_trained: %s: truncated or malformed tensor record\n", path);
    fclose(f);
    return -1;
}

static dtensor *find(dtensor *t, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    return NULL;
}

/* Copies the tokenizer keys of the vocabulary file (the ones tools/vocabcut.c writes). */
static int copy_tokenizer(rt_gguf_writer *w, const rt_gguf *v, uint32_t *n_vocab, char *err)
{
    const rt_gguf_kv *toks, *types, *scores, *merges;
    rt_gguf_str model, pre;
    if (rt_gguf_get_arr(v, "tokenizer.ggml.tokens", RT_GGUF_STRING, &toks, err) ||
        rt_gguf_get_arr(v, "tokenizer.ggml.merges", RT_GGUF_STRING, &merges, err) ||
        rt_gguf_get_arr(v, "tokenizer.ggml.token_type", RT_GGUF_I32, &types, err) ||
        rt_gguf_get_arr(v, "tokenizer.ggml.scores", RT_GGUF_F32, &scores, err) ||
        rt_gguf_get_str(v, "tokenizer.ggml.model", &model, err) ||
        rt_gguf_get_str(v, "tokenizer.ggml.pre", &pre, err))
        return -1;
    uint64_t n = toks->arr_len, nm = merges->arr_len;
    char **tx = calloc(n, sizeof *tx), **mg = calloc(nm, sizeof *mg);
    int32_t *ty = malloc(n * sizeof *ty);
    float *sc = malloc(n * sizeof *sc);
    if (!tx || !mg || !ty || !sc) return -1;
    for (uint64_t i = 0; i < n; i++) {
        rt_gguf_str s = rt_gguf_arr_str(toks, i);
        tx[i] = strndup(s.ptr, s.len);
        ty[i] = (int32_t)rt_gguf_arr_int(types, i);
        sc[i] = (float)rt_gguf_arr_float(scores, i);
    }
    for (uint64_t i = 0; i < nm; i++) {
        rt_gguf_str s = rt_gguf_arr_str(merges, i);
        mg[i] = strndup(s.ptr, s.len);
    }
    char *ms = strndup(model.ptr, model.len), *ps = strndup(pre.ptr, pre.len);
    rt_gguf_w_str(w, "tokenizer.ggml.model", ms);
    rt_gguf_w_str(w, "tokenizer.ggml.pre", ps);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tx, n);
    rt_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", ty, n);
    rt_gguf_w_arr_f32(w, "tokenizer.ggml.scores", sc, n);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)mg, nm);
    static const char *const ids[] = { "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                       "tokenizer.ggml.padding_token_id", "tokenizer.ggml.eot_token_id" };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        uint32_t id;
        if (rt_gguf_get_u32(v, ids[i], &id, err) == 0) rt_gguf_w_u32(w, ids[i], id);
    }
    bool add_bos;
    if (rt_gguf_get_bool(v, "tokenizer.ggml.add_bos_token", &add_bos, err) == 0)
        rt_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
    for (uint64_t i = 0; i < n; i++) free(tx[i]);
    for (uint64_t i = 0; i < nm; i++) free(mg[i]);
    free(tx); free(mg); free(ty); free(sc); free(ms); free(ps);
    *n_vocab = (uint32_t)n;
    return 0;
}

/* Converts dump tensor d to the YAML's type with that format's encoder (format/); 0 ok. */
static int convert(dtensor *d, const gen_tensor *t, int64_t n_vocab, uint32_t *type, uint64_t *nb)
{
    int64_t want[4] = { 1, 1, 1, 1 };
    for (int i = 0; i < t->n_dims; i++) want[i] = t->ne[i] == GEN_DIM_VOCAB ? n_vocab : t->ne[i];
    if ((int)d->n_dims != t->n_dims || memcmp(want, d->ne, sizeof want)) {
        fprintf(stderr, "export_trained: tensor %s: dump shape [%lld, %lld], the YAML wants [%lld, %lld]\n",
                d->name, (long long)d->ne[0], (long long)d->ne[1], (long long)want[0], (long long)want[1]);
        return -1;
    }
    char err[FMT_ERR_LEN];
    *type = t->type;
    const fmt_codec *c = fmt_codec_find(t->type);
    bool ternary = c && (c->uses & FMT_USE_TERNARY);
    if (!c || !c->encode || ternary != (d->kind == 1)) {
        fprintf(stderr, "export_trained: tensor %s: the YAML type %s does not fit the dump's %s\n", d->name,
                fmt_type_name(t->type), d->kind ? "ternary codes" : "values");
        return -1;
    }
    *nb = fmt_nbytes(t->type, want, err);
    d->out = *nb ? calloc(1, *nb) : NULL;
    if (!d->out) {
        fprintf(stderr, "export_trained: tensor %s: %s\n", d->name, *nb ? "out of memory" : err);
        return -1;
    }
    if (ternary) return fmt_encode_ternary(c, d->codes, want[0], want[1], d->scale, d->out) ? -1 : 0;
    c->encode(d->val, want[0] * want[1], d->out); /* f32 as is, f16 rounded to nearest even */
    return 0;
}

int main(int argc, char **argv)
{
    const char *pos[3] = { 0 }, *out = NULL, *name = NULL;
    int np = 0;
    long ctx = 256;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) ctx = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--name") && i + 1 < argc) name = argv[++i];
        else if (argv[i][0] != '-' && np < 3) pos[np++] = argv[i];
        else { fprintf(stderr, "export_trained: unexpected argument '%s'\n", argv[i]); return 2; }
    }
    if (np != 3 || !out || ctx < 1) {
        fprintf(stderr, "usage: export_trained models/X.yaml WEIGHTS.bin VOCAB.gguf -o model.gguf "
                        "[--ctx C] [--name N]\n");
        return 2;
    }
    static gen_model m;
    char err[RT_ERR_LEN > GEN_ERR_LEN ? RT_ERR_LEN : GEN_ERR_LEN];
    if (gen_model_load(pos[0], &m, err)) { fprintf(stderr, "export_trained: %s\n", err); return 1; }
    dtensor *dt;
    uint32_t nd;
    if (read_dump(pos[1], &dt, &nd)) return 1;
    rt_gguf *voc;
    if (rt_gguf_open(pos[2], &voc, err)) { fprintf(stderr, "export_trained: %s\n", err); return 1; }
    int layers = 0;
    char tn[160];
    for (;; layers++) {
        snprintf(tn, sizeof tn, "blk.%d.attn_norm.weight", layers);
        if (!find(dt, nd, tn)) break;
    }
    dtensor *emb = find(dt, nd, "token_embd.weight");
    if (!layers || !emb) { fprintf(stderr, "export_trained: the dump has no layers or no token_embd\n"); return 1; }

    const char *arch = m.archs[0];
    char key[160];
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_str(w, "general.architecture", arch);
    rt_gguf_w_str(w, "general.name", name ? name : m.name);
    rt_gguf_w_u32(w, "general.file_type", 40);
#define ARCH_KEY(k) (snprintf(key, sizeof(key), "%s.%s", arch, (k)), key)
    uint32_t n_vocab;
    if (copy_tokenizer(w, voc, &n_vocab, err)) { fprintf(stderr, "export_trained: %s: %s\n", pos[2], err); return 1; }
    if ((int64_t)n_vocab != emb->ne[1]) {
        fprintf(stderr, "export_trained: the vocabulary has %u tokens, token_embd %lld rows\n", n_vocab,
                (long long)emb->ne[1]);
        return 1;
    }
    rt_gguf_w_u32(w, ARCH_KEY("vocab_size"), n_vocab);
    rt_gguf_w_u32(w, ARCH_KEY("context_length"), (uint32_t)ctx);
    rt_gguf_w_u32(w, ARCH_KEY("block_count"), (uint32_t)layers);
    for (int i = 0; i < m.n_checks; i++) {
        if (m.checks[i].is_float) rt_gguf_w_f32(w, ARCH_KEY(m.checks[i].gguf_key), (float)m.checks[i].value);
        else rt_gguf_w_u32(w, ARCH_KEY(m.checks[i].gguf_key), (uint32_t)m.checks[i].value);
    }
    int nt = 0;
    uint64_t total = 0;
    for (int ti = 0; ti < m.n_tensors; ti++) {
        const gen_tensor *t = &m.tensors[ti];
        for (int L = 0; L < (t->per_layer ? layers : 1); L++) {
            gen_tensor_name(t, L, tn, sizeof tn);
            dtensor *d = find(dt, nd, tn);
            uint32_t type;
            uint64_t nb;
            if (!d) { fprintf(stderr, "export_trained: the dump has no tensor %s\n", tn); return 1; }
            if (convert(d, t, n_vocab, &type, &nb)) return 1;
            rt_gguf_w_tensor(w, tn, type, (uint32_t)t->n_dims, d->ne, d->out, nb);
            total += nb;
            nt++;
        }
    }
    int rc = rt_gguf_writer_save(w, out, err);
    if (rc) fprintf(stderr, "export_trained: %s\n", err);
    else fprintf(stderr, "export_trained: wrote %s (%s, %d layers, vocab %u, ctx %ld, %d tensors, %.2f MB of data)\n",
                 out, arch, layers, n_vocab, ctx, nt, total / 1e6);
    rt_gguf_writer_free(w);
    rt_gguf_close(voc);
    for (uint32_t i = 0; i < nd; i++) { free(dt[i].val); free(dt[i].codes); free(dt[i].out); }
    free(dt);
    return rc ? 1 : 0;
}
