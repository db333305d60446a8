/* mkmodel.c - writes a random-weight GGUF for any models/NAME.yaml, in the official layout.
 *
 *   mkmodel models/X.yaml -o out.gguf [--layers N] [--vocab V] [--ctx C] [--seed S] [--arch NAME]
 *           [--pre NAME] [--tok spm|bert] [--pooling N] [--q2-twin] [--rope-scaling F,LOW,HIGH,ORIG]
 *
 * Owns: the tensor statistics of the fixtures (tools/fixtures/make_bitnet_fixture.py):
 * embeddings N(0,1)*emb_std (emb_std = 6.8/sqrt(dim), the fixtures' 0.3 at 512 and 0.134 at
 * 2560), 1-D norm weights 1+0.1*N(0,1), norm and linear biases 0.1*N(0,1), linear weights N(0,1)*gain/sqrt(fan_in) pre-ternarized per
 * tensor (I2_S codes round(W/mean|W|) clamped to [-1,1], drawn directly, scale = mean|W| = gain/sqrt(fan_in)
 * * sqrt(2/pi); a format with a scale per block, TQ1_0 / TQ2_0, carries that scale in every
 * block); gain 5.0 for a bitlinear whose output feeds an `add` (writes the residual stream),
 * 1.5 otherwise; a `linear` op's matrix (F16 / F32) N(0,1)*gain/sqrt(fan_in) as floats, the
 * same gains. Plus a byte-level GPT-2 style tokenizer (256 byte tokens, merges
 * spelling common English pieces, filler tokens, then <|begin_of_text|>, <|end_of_text|>,
 * <|eot_id|> as the last three ids) and every metadata key the YAML's gguf_checks name.
 * Tensor bytes are generated at save time through rt_gguf_w_tensor_cb, so the full 2B4T shape
 * (about 1.2 GB) never sits in RAM. Defaults: the YAML's known full shape (bitnet-b1.58-2b:
 * 30 layers, vocab 128256, ctx 4096), else 2 layers, vocab 512, ctx 256; seed 1.
 * --arch NAME writes general.architecture NAME (and NAME.* keys) instead of the YAML's first
 * architecture: the name another engine knows the same layout by (tests/data/oracle/README.md).
 * --q2-twin writes every q2_0_g128 tensor (PrismML's Q2_0, blocks of 128) as mainline llama.cpp's
 * Q2_0 (blocks of 64): each block split into two with the same d and codes, the same values, so
 * mainline can be the reference for a file of the 128 form (tools/oracle/make_case.sh TWIN=1).
 * An encoder (a YAML whose attention has causal: false) gets <arch>.attention.causal false and
 * <arch>.pooling_type (llama.cpp's enum: --pooling N, default 1 mean), and a YAML with a
 * token_types.weight tensor tokenizer.ggml.token_type_count (its rows), as llama.cpp's
 * converter writes a BertModel.
 * The tensor a YAML's rope.freq_factors names (Llama 3.1's rope_freqs.weight) holds the "llama3"
 * RoPE scaling factors as llama.cpp's converter computes them (conversion/llama.py,
 * LlamaModel.generate_extra_tensors: float32 freqs = 1 / base^(2i/dims), wavelen = 2 pi / freq;
 * 1 below ORIG/HIGH, F above ORIG/LOW, 1 / ((1 - s) / F + s) between, s = (ORIG / wavelen - LOW) /
 * (HIGH - LOW)) with --rope-scaling F,LOW,HIGH,ORIG, by default Llama 3.1's 8,1,4,8192.
 * --pre NAME writes tokenizer.ggml.pre NAME (none by default), as a converter does for a family.
 * --tok spm writes a SentencePiece vocabulary in the Llama 2 layout instead (tokenizer.ggml.model
 * `llama`: <unk> 0, <s> 1 (BOS), </s> 2 (EOS), the 256 byte-fallback tokens <0x00>..<0xFF>,
 * then U+2581 and the printable ASCII characters, the same English pieces spelt with U+2581 for
 * the space, scored by rank, and <unused_N> fillers), as llama.cpp's converters write for the
 * Llama 2 family (1bitLLM's BitNet b1.58 checkpoints among them).
 * --tok bert writes a WordPiece vocabulary in BERT's uncased layout (tokenizer.ggml.model
 * `bert`: [PAD] 0, [unused0..98], [UNK] 100, [CLS] 101 (BOS), [SEP] 102 (EOS and separator),
 * [MASK] 103, then U+2581 and each printable ASCII character, the lower-case letters and
 * digits as continuation pieces, the English words lower-cased after U+2581 with every
 * prefix and the suffixes as continuations, then [unusedN] fillers), as llama.cpp's
 * converter stores a BERT vocabulary (a "##piece" as "piece", a word's first piece after
 * U+2581), for encoder models.
 */
#include "gen_arch.h"
#include "gen_model.h"
#include "gen_param.h"
#include "gguf/rt_gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- deterministic normal stream ---- */

typedef struct {
    uint64_t s;
    double spare;
    int has_spare;
} rng;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double gauss(rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u = ((splitmix(&r->s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double v = (splitmix(&r->s) >> 11) * (1.0 / 9007199254740992.0);
    double m = sqrt(-2.0 * log(u));
    r->spare = m * sin(2 * M_PI * v);
    r->has_spare = 1;
    return m * cos(2 * M_PI * v);
}

static uint64_t hash_str(const char *s, uint64_t seed)
{
    uint64_t h = 1469598103934665603ull ^ seed;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* ---- tensor streams: bytes produced in increasing order, one unit at a time ---- */

enum { K_NORM, K_BIAS, K_EMB, K_TERN };

/* A unit is one block of the tensor's codec (format/fmt_codec.h), encoded by the codec. */
#define MAX_BLK 256

typedef struct {
    int kind;
    const fmt_codec *codec;
    uint64_t seed, n_elem, code_bytes; /* code_bytes: the blocks, before the codec's tail */
    double std;                        /* K_EMB: emb_std; K_TERN: scale (mean|W|) */
    rng r;
    int64_t unit;  /* index of the unit held in buf (-1: none) */
    uint64_t us;   /* bytes of a unit in the file: the codec's block, or two Q2_0 blocks (twin) */
    int twin;      /* --q2-twin: a 128-value Q2_0 block written as its two 64-value blocks */
    uint8_t buf[MAX_BLK], tail[MAX_BLK];
} stream;

static void next_unit(stream *st)
{
    st->unit++;
    float v[MAX_BLK];
    const int blk = (int)st->codec->blk;
    if (st->kind == K_TERN) {
        /* round(z*sqrt(pi/2)) clamped, z ~ N(0,1): 0 with probability erf(1/(2 sqrt(pi))),
         * else -1/+1 alike; drawn from one uniform per element (same distribution, no gauss). */
        const uint64_t p0 = (uint64_t)(erf(0.5 / sqrt(M_PI)) * 9007199254740992.0);
        for (int j = 0; j < blk; j++) {
            uint64_t u = splitmix(&st->r.s);
            v[j] = (u >> 11) < p0 ? 0.0f : (u & 1) ? 1.0f : -1.0f;
        }
        if (fmt_block_scaled(st->codec)) /* a scale per block (TQ1_0, TQ2_0): the encoder's d = amax */
            for (int j = 0; j < blk; j++)
                v[j] *= (float)st->std;
    } else {
        for (int j = 0; j < blk; j++)
            v[j] = st->kind == K_NORM   ? (float)(1.0 + 0.1 * gauss(&st->r))
                   : st->kind == K_BIAS ? (float)(0.1 * gauss(&st->r))
                                        : (float)(gauss(&st->r) * st->std);
    }
    st->codec->encode(v, blk, st->buf);
    if (st->twin) { /* d, 32 code bytes -> d, the first 16; d, the last 16: the same values */
        uint8_t b[36];
        memcpy(b, st->buf, 18);
        memcpy(b + 18, st->buf, 2);
        memcpy(b + 20, st->buf + 18, 16);
        memcpy(st->buf, b, 36);
    }
}

static void fill(void *ctx, uint8_t *dst, uint64_t off, uint64_t n)
{
    stream *st = ctx;
    const uint64_t us = st->us;
    if (off == 0 || st->unit < 0 || (int64_t)(off / us) < st->unit) { /* (re)start */
        st->r = (rng){st->seed, 0, 0};
        st->unit = -1;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t p = off + i;
        if (p >= st->code_bytes) { /* the codec's tail (I2_S: the f32 scale + 28 zero bytes) */
            dst[i] = st->tail[p - st->code_bytes];
            continue;
        }
        while (st->unit < (int64_t)(p / us)) next_unit(st);
        dst[i] = st->buf[p % us];
    }
}

/* ---- tokenizer ---- */

/* GPT-2 bytes_to_unicode: printable bytes map to themselves, the rest to 256, 257, ... */
static void byte_token(int b, char *out)
{
    int cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
        cp = b;
    } else {
        int k = 0;
        for (int c = 0; c < b; c++)
            if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) k++;
        cp = 256 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

static const char *const WORDS[] = {
    " the", " and", " of", " to", " in", " a", " is", " that", " for", " it", " was", " on",
    " with", " he", " as", " you", " be", " at", " by", " this", " have", " from", " or", " one",
    " had", " not", " but", " what", " all", " were", " when", " we", " there", " can", " an",
    " The", " Once", " upon", " time", " quick", " brown", " fox", " jumps", " over", " lazy",
    " dog", "ing", "ed", "er", "tion", "ly", "es", " story", " model", " language", " people",
    " world", " day", " said", " they", " she", " her", " his", " would", " could", " about",
    ".\n", ", ", " 1", " 2", " 10", " 100", " 2024",
};

typedef struct {
    char **text;
    int n, cap;
    char **merges;
    int n_merges;
} vocab;

static int vocab_find(const vocab *v, const char *s)
{
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->text[i], s)) return i;
    return -1;
}

/* Spells word w (raw bytes) left to right: merge (prefix, next byte) until the whole word is
 * a token; stops when `limit` tokens exist. */
static void add_word(vocab *v, const char *w, int limit)
{
    char pre[256] = "", b[4], joined[300];
    for (const char *c = w; *c && v->n < limit; c++) {
        byte_token((uint8_t)*c, b);
        if (!pre[0]) {
            snprintf(pre, sizeof(pre), "%s", b);
            continue;
        }
        snprintf(joined, sizeof(joined), "%s%s", pre, b);
        if (vocab_find(v, joined) < 0) {
            v->text[v->n++] = strdup(joined);
            size_t ml = strlen(pre) + strlen(b) + 2;
            v->merges[v->n_merges] = malloc(ml);
            snprintf(v->merges[v->n_merges++], ml, "%s %s", pre, b);
        }
        snprintf(pre, sizeof(pre), "%s", joined);
    }
}

static int build_vocab(vocab *v, int n_vocab)
{
    v->text = calloc((size_t)n_vocab, sizeof(char *));
    v->merges = calloc((size_t)n_vocab, sizeof(char *));
    if (!v->text || !v->merges) return -1;
    char b[4];
    for (int i = 0; i < 256; i++) {
        byte_token(i, b);
        v->text[v->n++] = strdup(b);
    }
    for (size_t i = 0; i < sizeof(WORDS) / sizeof(WORDS[0]); i++) add_word(v, WORDS[i], n_vocab - 3);
    for (int i = 0; v->n < n_vocab - 3; i++) {
        char f[48];
        snprintf(f, sizeof(f), "<|reserved_%d|>", i);
        v->text[v->n++] = strdup(f);
    }
    v->text[v->n++] = strdup("<|begin_of_text|>");
    v->text[v->n++] = strdup("<|end_of_text|>");
    v->text[v->n++] = strdup("<|eot_id|>");
    return 0;
}

static void free_vocab(vocab *v)
{
    for (int i = 0; i < v->n; i++) free(v->text[i]);
    for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->text);
    free(v->merges);
}

/* ---- SentencePiece (Llama 2 layout) tokenizer: --tok spm ---- */

#define SPM_SPACE "\xE2\x96\x81" /* U+2581, SentencePiece's space */

static void spm_add(vocab *v, const char *s, int limit)
{
    if (v->n < limit && vocab_find(v, s) < 0) v->text[v->n++] = strdup(s);
}

/* Returns the number of scored pieces (ids 259 .. 259 + n - 1), or -1 when out of memory. */
static int build_spm_vocab(vocab *v, int n_vocab)
{
    v->text = calloc((size_t)n_vocab, sizeof(char *));
    if (!v->text) return -1;
    const char *const special[3] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) v->text[v->n++] = strdup(special[i]);
    for (int i = 0; i < 256; i++) {
        char b[8];
        snprintf(b, sizeof(b), "<0x%02X>", i);
        v->text[v->n++] = strdup(b);
    }
    spm_add(v, SPM_SPACE, n_vocab);
    for (char c = 33; c < 127; c++) spm_add(v, (char[]){c, 0}, n_vocab);
    for (size_t i = 0; i < sizeof(WORDS) / sizeof(WORDS[0]); i++) {
        char piece[64] = "";
        size_t k = 0;
        for (const char *c = WORDS[i]; *c && k + 4 < sizeof(piece); c++) { /* every prefix is a piece */
            k += (size_t)snprintf(piece + k, sizeof(piece) - k, "%s", *c == ' ' ? SPM_SPACE : (char[]){*c, 0});
            if (*c != '\n') spm_add(v, piece, n_vocab);
        }
    }
    int n_scored = v->n - 259;
    for (int i = 0; v->n < n_vocab; i++) {
        char f[48];
        snprintf(f, sizeof(f), "<unused_%d>", i);
        v->text[v->n++] = strdup(f);
    }
    return n_scored;
}

static void write_spm_tokenizer(rt_gguf_writer *w, const vocab *v, int n_scored)
{
    int32_t *type = malloc(sizeof(int32_t) * (size_t)v->n);
    float *score = malloc(sizeof(float) * (size_t)v->n);
    for (int i = 0; type && score && i < v->n; i++) { /* unknown / control / byte / normal / unused */
        type[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : i < 259 + n_scored ? 1 : 5;
        score[i] = i >= 259 && i < 259 + n_scored ? (float)-(i - 259) : 0.0f;
    }
    rt_gguf_w_str(w, "tokenizer.ggml.model", "llama");
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->text, (uint64_t)v->n);
    if (score) rt_gguf_w_arr_f32(w, "tokenizer.ggml.scores", score, (uint64_t)v->n);
    if (type) rt_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, (uint64_t)v->n);
    rt_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    rt_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    rt_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    rt_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
    rt_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", false);
    free(type);
    free(score);
}

/* ---- WordPiece (BERT layout) tokenizer: --tok bert ---- */

/* Returns the number of normal pieces (ids 104 .. 104 + n - 1), or -1 when out of memory. */
static int build_wpm_vocab(vocab *v, int n_vocab)
{
    v->text = calloc((size_t)n_vocab, sizeof(char *));
    if (!v->text) return -1;
    char b[64];
    int n_unused = 0;
    v->text[v->n++] = strdup("[PAD]");
    while (v->n < 100) {
        snprintf(b, sizeof(b), "[unused%d]", n_unused++);
        v->text[v->n++] = strdup(b);
    }
    const char *const special[4] = {"[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int i = 0; i < 4; i++) v->text[v->n++] = strdup(special[i]);
    for (char c = 33; c < 127; c++) spm_add(v, (char[]){SPM_SPACE[0], SPM_SPACE[1], SPM_SPACE[2], c, 0}, n_vocab);
    for (char c = '0'; c <= 'z'; c++)
        if ((c >= '0' && c <= '9') || c >= 'a') spm_add(v, (char[]){c, 0}, n_vocab);
    for (size_t i = 0; i < sizeof(WORDS) / sizeof(WORDS[0]); i++) {
        const char *wd = WORDS[i] + (WORDS[i][0] == ' ');
        char piece[64];
        size_t k = WORDS[i][0] == ' ' ? (size_t)snprintf(piece, sizeof(piece), SPM_SPACE) : 0;
        for (const char *c = wd; *c && k + 2 < sizeof(piece); c++) { /* letters and digits only */
            if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9'))) break;
            piece[k++] = *c >= 'A' && *c <= 'Z' ? (char)(*c + 32) : *c;
            piece[k] = 0;
            if (WORDS[i][0] == ' ' || !c[1]) spm_add(v, piece, n_vocab); /* prefixes; whole suffixes */
        }
    }
    int n_normal = v->n - 104;
    while (v->n < n_vocab) {
        snprintf(b, sizeof(b), "[unused%d]", n_unused++);
        v->text[v->n++] = strdup(b);
    }
    return n_normal;
}

static void write_wpm_tokenizer(rt_gguf_writer *w, const vocab *v, int n_normal)
{
    int32_t *type = malloc(sizeof(int32_t) * (size_t)v->n);
    for (int i = 0; type && i < v->n; i++) /* control / unused / normal */
        type[i] = i == 0 || (i >= 100 && i < 104) ? 3 : i >= 104 && i < 104 + n_normal ? 1 : 5;
    rt_gguf_w_str(w, "tokenizer.ggml.model", "bert");
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->text, (uint64_t)v->n);
    if (type) rt_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, (uint64_t)v->n);
    rt_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 101);
    rt_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 102);
    rt_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 100);
    rt_gguf_w_u32(w, "tokenizer.ggml.seperator_token_id", 102);
    rt_gguf_w_u32(w, "tokenizer.ggml.padding_token_id", 0);
    rt_gguf_w_u32(w, "tokenizer.ggml.mask_token_id", 103);
    rt_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
    rt_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", true);
    free(type);
}

static void write_tokenizer(rt_gguf_writer *w, const vocab *v, int n_merge_tokens, const char *pre)
{
    int32_t *type = malloc(sizeof(int32_t) * (size_t)v->n);
    float *score = malloc(sizeof(float) * (size_t)v->n);
    for (int i = 0; type && score && i < v->n; i++) {
        type[i] = i >= v->n - 3 ? 3 : i >= 256 + n_merge_tokens ? 5 : 1; /* control / unused / normal */
        score[i] = 0.0f;
    }
    rt_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    if (pre)
        rt_gguf_w_str(w, "tokenizer.ggml.pre", pre);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->text, (uint64_t)v->n);
    if (type) rt_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, (uint64_t)v->n);
    if (score) rt_gguf_w_arr_f32(w, "tokenizer.ggml.scores", score, (uint64_t)v->n);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, (uint64_t)v->n_merges);
    rt_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(v->n - 3));
    rt_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(v->n - 2));
    rt_gguf_w_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)(v->n - 2));
    rt_gguf_w_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)(v->n - 1));
    rt_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
    free(type);
    free(score);
}

/* ---- model ---- */

/* A bitlinear or linear weight whose output value feeds an `add` writes the residual stream. */
static bool writes_residual(const gen_model *m, int ti)
{
    for (int i = 0; i < m->n_layer; i++) {
        if ((m->layer[i].kind != GEN_OP_BITLINEAR && m->layer[i].kind != GEN_OP_LINEAR) || m->layer[i].weight != ti)
            continue;
        for (int j = 0; j < m->n_layer; j++)
            if (m->layer[j].kind == GEN_OP_ADD &&
                (m->layer[j].in[0] == m->layer[i].out || m->layer[j].in[1] == m->layer[i].out))
                return true;
    }
    return false;
}

/* A tensor a `linear` op multiplies. */
static bool is_linear(const gen_model *m, int ti)
{
    const gen_op *lists[3] = {m->pre, m->layer, m->post};
    const int counts[3] = {m->n_pre, m->n_layer, m->n_post};
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < counts[l]; i++)
            if ((lists[l][i].kind == GEN_OP_LINEAR || lists[l][i].kind == GEN_OP_MOE) && lists[l][i].weight == ti)
                return true;
            else if (lists[l][i].kind == GEN_OP_MOE) /* its router above, its experts here */
                for (int x = 0; x < 3; x++)
                    if (lists[l][i].experts[x] == ti)
                        return true;
    return false;
}

/* A tensor some norm or linear op names as its bias (`bias:`). */
static bool is_bias(const gen_model *m, int ti)
{
    const gen_op *lists[3] = {m->pre, m->layer, m->post};
    const int counts[3] = {m->n_pre, m->n_layer, m->n_post};
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < counts[l]; i++)
            if (lists[l][i].bias == ti)
                return true;
    return false;
}

/* The llama3 RoPE factors of n = dims / 2 pairs (see the header; sc = {F, LOW, HIGH, ORIG}). */
static void llama3_factors(float base, int dims, const double sc[4], float *out)
{
    const double lo_wl = sc[3] / sc[1], hi_wl = sc[3] / sc[2];
    for (int i = 0; i < dims / 2; i++) {
        const float freq = 1.0f / powf(base, (float)(2 * i) / (float)dims);
        const double wl = 2 * M_PI / (double)freq;
        double f = 1;
        if (wl > lo_wl)
            f = sc[0];
        else if (wl >= hi_wl) {
            const double sm = (sc[3] / wl - sc[1]) / (sc[2] - sc[1]);
            f = 1 / ((1 - sm) / sc[0] + sm);
        }
        out[i] = (float)f;
    }
}

/* --rope-scaling F,LOW,HIGH,ORIG into sc; non-zero (with a message) when malformed. */
static int parse_rope_scaling(const char *val, double sc[4])
{
    char tail;
    if (sscanf(val, "%lf,%lf,%lf,%lf%c", &sc[0], &sc[1], &sc[2], &sc[3], &tail) != 4 || !(sc[0] > 0) ||
        !(sc[1] > 0) || !(sc[2] > sc[1]) || !(sc[3] > 0)) {
        fprintf(stderr, "mkmodel: --rope-scaling: want F,LOW,HIGH,ORIG (positive, HIGH > LOW), got '%s'\n", val);
        return -1;
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: mkmodel models/X.yaml -o out.gguf [--layers N] [--vocab V] [--ctx C] "
                    "[--seed S] [--arch NAME] [--pre NAME] [--tok spm|bert] [--pooling 0..4] "
                    "[--rope-scaling F,LOW,HIGH,ORIG]\n  defaults: bitnet-b1.58-2b: 30 layers, vocab 128256, ctx 4096; "
                    "other models: 2 layers, vocab 512, ctx 256; seed 1\n");
    return 2;
}

/* Tensor ti's random stream (its codec, seed and distribution: see the header). */
static int stream_init(stream *s, const gen_model *m, int ti, const int64_t ne[4], const char *name,
                       unsigned long long seed)
{
    const gen_tensor *t = &m->tensors[ti];
    s->codec = fmt_codec_find(t->type);
    if (!s->codec || !s->codec->encode || s->codec->blk > MAX_BLK || s->codec->blk_bytes > MAX_BLK ||
        s->codec->tail_bytes > MAX_BLK) {
        fprintf(stderr, "mkmodel: tensor %s: no encoder for type %s\n", name, gen_ttype_name(t->type));
        return 1;
    }
    s->seed = hash_str(name, seed);
    s->unit = -1;
    s->n_elem = (uint64_t)ne[0] * (uint64_t)ne[1] * (uint64_t)ne[2];
    s->us = s->twin ? 2u * fmt_codec_find(FMT_Q2_0)->blk_bytes : s->codec->blk_bytes;
    s->code_bytes = s->n_elem / s->codec->blk * s->us;
    if (s->codec->uses & FMT_USE_TERNARY) {
        double gain = writes_residual(m, ti) ? 5.0 : 1.5;
        s->kind = K_TERN;
        s->std = gain / sqrt((double)ne[0]) * sqrt(2.0 / M_PI);
        if (s->codec->encode_tail)
            s->codec->encode_tail((float)s->std, s->tail);
    } else if (is_linear(m, ti)) { /* floats drawn as the ternary ones' before rounding */
        s->kind = K_EMB;
        s->std = (writes_residual(m, ti) ? 5.0 : 1.5) / sqrt((double)ne[0]);
    } else {
        s->kind = t->n_dims == 1 ? (is_bias(m, ti) ? K_BIAS : K_NORM) : K_EMB;
        s->std = 6.8 / sqrt((double)m->hp.dim);
    }
    return 0;
}

/* The gguf_checks keys with the YAML's values: scalars, and per-layer arrays as llama.cpp's
 * converter writes Maple's sliding_window_pattern (bools, true: a sliding-window layer) and
 * swiglu_clamp_exp (floats); the pattern as one integer where the architecture's row says its
 * loader reads it so (gen_arch.h swa_pattern_int: gemma3). */
static void write_checks(rt_gguf_writer *w, const gen_model *m, const char *arch, int layers)
{
    char key[160];
#define ARCH_KEY(k) (snprintf(key, sizeof(key), "%s.%s", arch, (k)), key)
    for (int i = 0; i < m->n_checks; i++) {
        const gen_arch *row = gen_arch_find(arch);
        const bool scalar_pattern = row && row->swa_pattern_int;
        if ((!strcmp(m->checks[i].hparam, "swa_pattern") && !scalar_pattern) ||
            !strcmp(m->checks[i].hparam, "swiglu_limit")) {
            /* per-layer arrays, as llama.cpp's converter writes Maple's sliding_window_pattern
             * (bools, true: a sliding-window layer) and swiglu_clamp_exp (floats) */
            uint8_t on[4096];
            float lim[4096];
            for (int il = 0; il < layers && il < 4096; il++) {
                on[il] = (uint8_t)gen_swa_layer(&m->hp, il);
                lim[il] = (float)m->checks[i].value;
            }
            const bool pat = !strcmp(m->checks[i].hparam, "swa_pattern");
            rt_gguf_w_arr(w, ARCH_KEY(m->checks[i].gguf_key), pat ? RT_GGUF_BOOL : RT_GGUF_F32, pat ? (const void *)on
                          : (const void *)lim, (uint64_t)(layers < 4096 ? layers : 4096));
            continue;
        }
        if (m->checks[i].is_float) rt_gguf_w_f32(w, ARCH_KEY(m->checks[i].gguf_key), (float)m->checks[i].value);
        else rt_gguf_w_u32(w, ARCH_KEY(m->checks[i].gguf_key), (uint32_t)m->checks[i].value);
    }
#undef ARCH_KEY
}

typedef struct {
    long layers, n_vocab;
    unsigned long long seed;
    int q2_twin;
} tensor_args;

/* Every tensor of the table into w, in its order, each layer's own (streams st: one per tensor
 * and layer); the one rope.freq_factors names (F32 [rope_dims / 2], gen_model checks) holds ff.
 * Returns the tensors written (their bytes added to *total), -1 with a message. */
static int add_tensors(rt_gguf_writer *w, const gen_model *m, stream *st, const float *ff, const tensor_args *a,
                       uint64_t *total)
{
    char err[RT_ERR_LEN];
    int ns = 0;
    for (int ti = 0; ti < m->n_tensors; ti++) {
        const gen_tensor *t = &m->tensors[ti];
        if (m->hp.rope_ff_key[0] && ti == m->hp.rope_ff) {
            const int64_t ne[4] = {m->hp.rope_dims / 2, 1, 1, 1};
            rt_gguf_w_tensor(w, t->gguf, FMT_F32, 1, ne, ff, sizeof(float) * (size_t)ne[0]);
            *total += sizeof(float) * (uint64_t)ne[0];
            ns++;
            continue;
        }
        for (long L = 0; L < (t->per_layer ? a->layers : 1); L++) {
            stream *s = &st[ns++];
            char name[160];
            gen_tensor_name(t, (int)L, name, sizeof(name));
            int64_t ne[4] = {1, 1, 1, 1};
            for (int d = 0; d < t->n_dims; d++) ne[d] = t->ne[d] == GEN_DIM_VOCAB ? a->n_vocab : t->ne[d];
            s->twin = a->q2_twin && t->type == FMT_Q2_0_G128;
            if (stream_init(s, m, ti, ne, name, a->seed))
                return -1;
            const uint32_t type = s->twin ? FMT_Q2_0 : t->type;
            uint64_t nb = fmt_nbytes(type, ne, err);
            if (!nb) { fprintf(stderr, "mkmodel: tensor %s: %s\n", name, err); return -1; }
            *total += nb;
            rt_gguf_w_tensor_cb(w, name, type, (uint32_t)t->n_dims, ne, nb, fill, s);
        }
    }
    return ns;
}

int main(int argc, char **argv)
{
    const char *yaml = NULL, *out = NULL, *arch_opt = NULL, *pre = NULL, *tok = NULL;
    int q2_twin = 0; /* --q2-twin: Q2_0 with blocks of 128 written as mainline's blocks of 64 (the same values) */
    long layers = 0, n_vocab = 0, ctx = 0, pooling = -1; /* -1: mean (1) for an encoder */
    unsigned long long seed = 1;
    double rscale[4] = {8, 1, 4, 8192}; /* --rope-scaling: Llama 3.1's rope_scaling */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "-o") && val) { out = val; i++; continue; }
        if (!strcmp(a, "--arch") && val) { arch_opt = val; i++; continue; }
        if (!strcmp(a, "--pre") && val) { pre = val; i++; continue; }
        if (!strcmp(a, "--tok") && val) { tok = val; i++; continue; }
        if (!strcmp(a, "--q2-twin")) { q2_twin = 1; continue; }
        if (!strcmp(a, "--rope-scaling") && val) {
            if (parse_rope_scaling(val, rscale))
                return 2;
            i++;
            continue;
        }
        long *dst = !strcmp(a, "--layers") ? &layers : !strcmp(a, "--vocab") ? &n_vocab
                  : !strcmp(a, "--ctx") ? &ctx : !strcmp(a, "--pooling") ? &pooling : NULL;
        if (dst && val) {
            *dst = strtol(val, &end, 10);
            if (*end || *dst < (dst == &pooling ? 0 : 1) || (dst == &pooling && *dst > 4)) { fprintf(stderr, "mkmodel: %s: bad value '%s'\n", a, val); return 2; }
            i++;
            continue;
        }
        if (!strcmp(a, "--seed") && val) {
            seed = strtoull(val, &end, 10);
            if (*end) { fprintf(stderr, "mkmodel: --seed: bad value '%s'\n", val); return 2; }
            i++;
            continue;
        }
        if (a[0] == '-' || yaml) { fprintf(stderr, "mkmodel: unexpected argument '%s'\n", a); return usage(); }
        yaml = a;
    }
    if (!yaml || !out) return usage();
    bool bert = tok && !strcmp(tok, "bert");
    if (tok && ((strcmp(tok, "spm") && !bert) || pre)) {
        fprintf(stderr, "mkmodel: --tok %s%s: the values are spm and bert, which take no --pre\n", tok,
                pre ? " with --pre" : "");
        return 2;
    }
    static gen_model m;
    char err[RT_ERR_LEN > GEN_ERR_LEN ? RT_ERR_LEN : GEN_ERR_LEN];
    if (gen_model_load(yaml, &m, err)) { fprintf(stderr, "mkmodel: %s\n", err); return 1; }
    bool full = !strcmp(m.name, "bitnet-b1.58-2b");
    if (!layers) layers = full ? 30 : 2;
    if (!n_vocab) n_vocab = full ? 128256 : 512;
    if (!ctx) ctx = full ? 4096 : 256;
    if (n_vocab < 259 || n_vocab > 1 << 24 || layers > 4096) {
        fprintf(stderr, "mkmodel: --vocab %ld must be in [259, 16777216], --layers %ld at most 4096\n",
                n_vocab, layers);
        return 2;
    }
    const char *arch = arch_opt ? arch_opt : m.archs[0];
    if (!*arch || strlen(arch) > 100 || strspn(arch, "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(arch)) {
        fprintf(stderr, "mkmodel: --arch '%s': 1 to 100 of a-z 0-9 . _ -\n", arch);
        return 2;
    }
    char key[160];
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    if (!w) { fprintf(stderr, "mkmodel: out of memory\n"); return 1; }
    rt_gguf_w_str(w, "general.architecture", arch);
    rt_gguf_w_str(w, "general.name", m.name);
    rt_gguf_w_u32(w, "general.file_type", 40);
#define ARCH_KEY(k) (snprintf(key, sizeof(key), "%s.%s", arch, (k)), key)
    rt_gguf_w_u32(w, ARCH_KEY("vocab_size"), (uint32_t)n_vocab);
    rt_gguf_w_u32(w, ARCH_KEY("context_length"), (uint32_t)ctx);
    rt_gguf_w_u32(w, ARCH_KEY("block_count"), (uint32_t)layers);
    write_checks(w, &m, arch, layers);
    bool encoder = false;
    for (int i = 0; i < m.n_layer; i++)
        encoder |= m.layer[i].kind == GEN_OP_ATTENTION && m.layer[i].param.v[0] == 0.0f; /* causal: false */
    if (encoder) {
        rt_gguf_w_bool(w, ARCH_KEY("attention.causal"), false);
        rt_gguf_w_u32(w, ARCH_KEY("pooling_type"), (uint32_t)(pooling < 0 ? 1 : pooling));
    }
    for (int ti = 0; ti < m.n_tensors; ti++)
        if (!strcmp(m.tensors[ti].gguf, "token_types.weight"))
            rt_gguf_w_u32(w, "tokenizer.ggml.token_type_count", (uint32_t)m.tensors[ti].ne[1]);
    vocab v = {0};
    int n_scored = bert ? build_wpm_vocab(&v, (int)n_vocab) : tok ? build_spm_vocab(&v, (int)n_vocab)
                 : build_vocab(&v, (int)n_vocab);
    if (n_scored < 0) { fprintf(stderr, "mkmodel: out of memory\n"); return 1; }
    if (bert) write_wpm_tokenizer(w, &v, n_scored);
    else if (tok) write_spm_tokenizer(w, &v, n_scored);
    else write_tokenizer(w, &v, v.n_merges, pre);

    stream *st = calloc((size_t)m.n_tensors * (size_t)layers, sizeof(stream));
    float *ff = calloc((size_t)m.hp.rope_dims / 2 + 1, sizeof(float)); /* the writer reads it at save */
    if (!st || !ff) { fprintf(stderr, "mkmodel: out of memory\n"); return 1; }
    llama3_factors(m.hp.rope_base, m.hp.rope_dims, rscale, ff);
    uint64_t total = 0;
    const int ns = add_tensors(w, &m, st, ff, &(tensor_args){layers, n_vocab, seed, q2_twin}, &total);
    if (ns < 0)
        return 1;
    int rc = rt_gguf_writer_save(w, out, err);
    if (rc) fprintf(stderr, "mkmodel: %s\n", err);
    else
        fprintf(stderr, "mkmodel: wrote %s (%s, %ld layers, vocab %ld, ctx %ld, %d tensors, %.1f MB of data)\n",
                out, arch, layers, n_vocab, ctx, ns, total / 1e6);
    rt_gguf_writer_free(w);
    free(ff);
    free(st);
    free_vocab(&v);
    return rc ? 1 : 0;
}
