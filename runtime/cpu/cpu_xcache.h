/* cpu_xcache.h - experts streamed from the GGUF under a memory budget (--expert-cache MiB).
 *
 * Owns: the expert cache of the native backend. The stacked expert tensors of a mixture-of-
 * experts model (3-D ffn_{gate,up,down}_exps) stay in the file: they are neither read at load
 * nor touched through the mapping. RAM holds a fixed number of slots, each one (layer, expert)'s
 * gate, up and down rows, filled by pread from the file. Eviction is least recently used (LRU):
 * consecutive tokens pick overlapping experts, so the experts of the last tokens are the likely
 * next ones; LRU keeps exactly those with no constant to tune, and agrees with the prefetch's
 * own guess (a frequency count would keep experts that were hot many tokens ago and evict the
 * ones the prefetch just read).
 *
 * Prefetch: one thread of its own reads, while layer L computes, the experts layer L + 1 chose
 * for the last token of the previous step (the last layer prefetches layer 0's for the next
 * token), optionally (CPU_XPF_AHEAD) after those layer L + 1 would choose for the current token
 * judged from layer L's input (the caller runs layer L + 1's router on it). It only fills slots
 * nobody has pinned, so it never evicts what a running layer reads.
 * The forward pass pins a layer's chosen experts (cpu_xcache_acquire), computes them from the
 * slots, and unpins them (cpu_xcache_release); a miss is read by the forward pass itself, and an
 * expert the prefetch is still reading is waited for. When one step needs more distinct experts
 * in a layer than there are slots (a long prompt), the layer runs in rounds: as many experts as
 * fit are pinned, their (token, expert) pairs computed, the slots released, the next round
 * pinned. Every pair is computed by the same kernel on the same bytes whatever the round, so a
 * cache-bounded run gives the unbounded run's logits bit for bit.
 *
 * Errors: a short read or an I/O error (a file truncated or failing under a running model), or
 * bytes the codec's check refuses (the reader's check of the experts happens here, at read,
 * so that opening the file reads none of them), is reported by the forward pass that needed
 * the expert, naming the expert, layer and offset (and the file's size); the slot is left empty
 * (never half-filled and marked valid). A prefetch that
 * fails leaves its slot empty and says nothing: the read is tried again when needed.
 */
#ifndef CPU_XCACHE_H
#define CPU_XCACHE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cpu_xcache cpu_xcache;

typedef struct {
    const char *path;        /* the GGUF, opened again for reading */
    int n_layers, n_expert, k; /* layers with the moe op, experts per layer, experts per token */
    uint64_t part_bytes[3];  /* one expert's gate, up and down rows (equal in every layer) */
    uint32_t type[3];        /* their formats, and one expert's shape of each: every part read is */
    int64_t ne0[3], rows[3]; /* checked by its codec (finite scales) before use: the GGUF reader
                                left the experts unchecked (RT_GGUF_DEFER_3D) */
    const uint64_t *file_off; /* [n_layers * 3]: file offset of layer L's stacked tensor i */
    uint64_t budget;         /* bytes of slots at most */
    bool prefetch;           /* the prefetch thread (TERNION_XCACHE_PREFETCH=0: off, to measure it) */
} cpu_xcache_desc;

typedef struct {
    int slots;                  /* (layer, expert) slots the budget holds */
    uint64_t slot_bytes;        /* one slot (an expert's three parts, 64-byte aligned) */
    uint64_t budget_bytes;      /* slots x slot_bytes */
    uint64_t expert_bytes;      /* every expert of every layer (what an unbounded cache would hold) */
    uint64_t hits, misses;      /* distinct experts a layer pinned: already in a slot / read then */
    uint64_t prefetched;        /* experts the prefetch thread read */
    uint64_t prefetch_used;     /* ... of which a layer then pinned before they were evicted */
    uint64_t bytes_read;        /* bytes read from the file (demand and prefetch) */
    uint64_t tokens;            /* tokens the forward pass ran through the cache */
    double stall_ms;            /* time the forward pass waited on expert reads (its own and the
                                   prefetch's in flight) */
} cpu_xcache_stats;

/* The least budget: k experts of one layer (one slot each). */
uint64_t cpu_xcache_min_bytes(const cpu_xcache_desc *d);
/* 0, or -1 with err (RT_ERR_LEN): a budget below one layer's k experts (naming both), the file
 * cannot be opened, out of memory. */
int cpu_xcache_open(const cpu_xcache_desc *d, cpu_xcache **out, char *err);
void cpu_xcache_close(cpu_xcache *x);

/* One round of layer L over n (token, slot) pairs choosing experts sel[0..n): pairs with
 * slot[i] == -1 are served as far as the slots hold (slot[i] set to the slot), others are left
 * alone (the caller marks computed pairs -2). Returns the pairs served (>= 1 while any is -1),
 * or -1 with err on a read error (nothing stays pinned). The slots stay pinned until
 * cpu_xcache_release. The last token's experts are kept as layer L's guess for the next step. */
int cpu_xcache_acquire(cpu_xcache *x, int L, const int *sel, int n, int *slot, char *err);
void cpu_xcache_release(cpu_xcache *x);
/* Queues the prefetch of layer L's experts ahead[0 .. n_ahead) (n_ahead <= k), then of the
 * experts layer L chose for the last token of the previous step; replaces what was queued
 * (no-op without the thread). */
void cpu_xcache_prefetch(cpu_xcache *x, int L, const int *ahead, int n_ahead);
/* Part i (0 gate, 1 up, 2 down) of a pinned slot. */
const uint8_t *cpu_xcache_part(const cpu_xcache *x, int slot, int part);
void cpu_xcache_count_tokens(cpu_xcache *x, int n);
void cpu_xcache_get_stats(cpu_xcache *x, cpu_xcache_stats *out);

#endif
