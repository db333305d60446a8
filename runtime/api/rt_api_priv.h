/* rt_api_priv.h - the handles behind ternion.h (runtime/api/rt_api_*.c only).
 *
 * Owns: the layout of ternion_model / ternion_context / ternion_sampler, the error plumbing
 * (every failing call sets the calling thread's message, and the context's when there is
 * one) and the table of generated models linked into the library (rt_registry, a list the
 * Makefile writes from generated/<model>/model.c: see rt_registry.h).
 *
 * Split: rt_api_model.c (registry, loading, tokens, chat, detok), rt_api_context.c
 * (contexts, batches, logits, KV cache), rt_api_sample.c (samplers and their grammar
 * stage), rt_api_grammar.c (grammars, JSON schemas), rt_api_misc.c (version, status,
 * devices, performance, profiles).
 */
#ifndef RT_API_PRIV_H
#define RT_API_PRIV_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/ternion.h"
#include "engine/rt_engine.h"
#include "sample/rt_grammar.h"
#include "sample/rt_sampler.h"
#include "schema/rt_schedule.h"
#include "gguf/rt_gguf.h"
#include "tok/rt_chat.h"
#include "tok/rt_tokenizer.h"

/* ---- errors ---- */

/* Sets the thread's last error to the formatted message and returns status. */
int rt_api_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, and copies the message into the context's error (ctx may be NULL). */
int rt_api_ctx_fail(ternion_context *ctx, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- handles ---- */

/* A model's token table for grammars (rt_grammar.h), made once, shared by its grammars. */
typedef struct {
    rt_gvocab *v;
    atomic_int refs;
} rt_api_vocab;

struct ternion_model {
    const rt_model_desc *desc; /* the generated model chosen */
    rt_gguf *g;                /* the file (mapped) */
    rt_tok *tok;
    char path[4096];
    int n_layer, n_vocab, n_ctx_train;
    int n_ctx_max;             /* what its declared RoPE scaling allows (0: it declares none) */
    int pooling_file;          /* <arch>.pooling_type (llama.cpp's enum), -1 when absent */
    const char *weights;       /* the file's ternary format ("I2_S", "TQ2_0", ...; "mixed"), or NULL */
    const char *weights_yaml;  /* the generated model's (its YAML's type:), or NULL */
    ternion_model_params params;
    pthread_mutex_t gv_mu;     /* guards gv: made on the first grammar (any thread) */
    rt_api_vocab *gv;          /* the token table of grammars (a reference), or NULL */
    const rt_chat_tmpl *chat;  /* the chat template (a row of rt_chat_tmpl.c) */
    int32_t chat_end;          /* the token that ends a reply in it (a stop token), or -1 */
};

/* The width of the model's logits rows (the tokenizer's vocabulary for a vocab_only model):
 * ternion_model_n_vocab's answer, here for the files below the model's (rt_api_grammar.c). */
static inline int32_t rt_api_model_n_vocab(const ternion_model *m)
{
    return m ? (m->desc ? m->n_vocab : rt_tok_n_vocab(m->tok)) : 0;
}

/* The model's token table, made on first use; one more reference (rt_api_vocab_unref). NULL +
 * err (out of memory). Thread-safe. */
rt_api_vocab *rt_api_model_vocab(const ternion_model *m, char *err);
void rt_api_vocab_unref(rt_api_vocab *v);

/* A compiled grammar with its model's token table; shared by the samplers it constrains
 * (each holds a reference; the last release frees it). */
struct ternion_grammar {
    rt_grammar *g;
    rt_api_vocab *voc;       /* the model's tokens (a reference; n_vocab of its logits rows) */
    atomic_int refs;
};
/* One more / one less reference (rt_api_grammar.c). */
void rt_api_grammar_ref(ternion_grammar *g);
void rt_api_grammar_unref(ternion_grammar *g);

/* Where the logits of one batch row are. */
enum { ROW_NONE = -1 };

typedef struct {
    double t_load_ms, t_prompt_ms, t_decode_ms, t_sample_ms;
    int32_t n_prompt, n_decode, n_sample;
} rt_api_perf;

struct ternion_context {
    ternion_model *m;
    rt_engine *e;
    int n_ctx, n_batch, n_seq;
    int32_t *seq_len;        /* [n_seq] positions held per sequence */
    int cur_seq;             /* sequence whose cache the engine's streams bind */
    /* logits of the last batch */
    int32_t n_rows, rows_cap;
    int32_t *row_slot;       /* [n_rows]: host slot of the row's logits, ROW_NONE if not kept */
    int32_t *want;           /* rows that kept logits, in row order (negative indices) */
    int32_t n_want;
    float *host;             /* [slots_cap][vocab] */
    bool *filled;            /* [slots_cap]: slot holds its row's logits */
    int32_t slots_cap;
    int32_t dev_row;         /* row whose logits are the engine's last row (not read yet), or -1 */
    bool dev_multi;          /* the last batch ran as one multi-row step: row i's logits are the
                                engine's LOGITS row i (rt_engine_use_row) until read */
    bool dev_kept;           /* ... as one rt_engine_decode_batch: the engine's LOGITS rows are
                                the kept rows in order (row_slot), not the batch's rows */
    /* scratch for one sequence's run of a batch */
    int32_t *run_tok, *run_row;
    float *run_logits;       /* [n_batch-sized run][vocab] when a run keeps inner rows */
    size_t run_logits_cap;   /* floats */
    rt_api_perf perf;
    char err[RT_ERR_LEN];
};

/* Host logits of batch row i (downloading the device row if needed); NULL + error. */
const float *rt_api_row_logits(ternion_context *ctx, int32_t i);
/* Resolve i (negative: from the end of the rows that kept logits) to a row, or -1 + error. */
int32_t rt_api_row(ternion_context *ctx, int32_t i);
/* The engine's LOGITS row (rt_engine_use_row) of batch row r after a multi-row step. */
int32_t rt_api_engine_row(const ternion_context *ctx, int32_t r);
double rt_api_now_ms(void);

/* ---- registry ---- */
#include "api/rt_registry.h"

#endif
