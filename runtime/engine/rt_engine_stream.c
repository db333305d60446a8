/* rt_engine_stream.c - layer streaming under a device-memory budget (--vram-budget MiB; see
 * rt_engine_priv.h for how the engine is split).
 *
 * What stays resident: every global tensor, every per-layer 1-D tensor (the norms, which a
 * layer's last kernel also reads for the next layer: WEIGHT_NEXT), the KV caches and the
 * activations, and the matrices of the first `first` layers, as many as the budget holds
 * beside two layer slots. The matrices of layers first .. n_layers-1 live in one
 * host-visible buffer (system memory the device reads over the bus), a layer's matrices
 * contiguous at fixed offsets; on the device there are two slots of one layer each.
 *
 * Every recorded stream (decode, prompt steps, greedy chains: they all go through
 * rt_eng_record_schedule) carries the copies: at the start of a step the first two
 * streamed layers are copied into slots 0 and 1; streamed layer j waits (an event, not a
 * barrier) for its own copy only; right after its last dispatch the copy of layer j + 2
 * into its slot is recorded, ordered after the dispatches that read the slot. So the copy
 * of layer j + 1 runs while layer j computes (double buffering), and no dispatch waits for
 * a copy it does not need. The dispatches of streamed layer j bind slot j % 2 (the
 * engine's per-tensor views point there), so the recorded push constants need no change.
 *
 * How the copies are made and ordered against the dispatches (e->stats.stream_sync):
 *  - host copies (the default where the device has timeline semaphores and the slots can be
 *    device-local host-visible coherent memory: lavapipe, UMA GPUs, resizable BAR;
 *    TERNION_STREAM_SYNC=host insists, =timeline / =events choose the device copies below):
 *    the slots are mapped, and each copy is a host batch (rt_cmd_host_copy_batch): at
 *    rt_cmd_submit a host thread memcpy's layer j into slot j % 2 once the compute batch
 *    that ends with layer j - 2 is done (semaphore wait, no spinning) and layer j - 1's batch
 *    is on the queue, and layer j's batch is submitted only after that memcpy
 *    (runtime/vk/rt_vk_host.c). No DMA engine, no staging; on lavapipe the copy thread runs
 *    beside the driver's worker threads, so this is the path whose copies overlap compute.
 *  - timeline semaphores (Vulkan 1.2; the default where the device has them but the host
 *    cannot write the slots): the stream
 *    is cut into batches (rt_vk.h rt_cmd_copy_batch / rt_cmd_wait_batch): each copy is a
 *    batch of its own on the transfer-only queue where the device has one (a DMA engine:
 *    the copy takes no compute units), else on the compute queue; the compute batch of
 *    streamed layer j waits for copy j's semaphore value, copy j + 2 for the compute batch
 *    that ends with layer j. Slots and host buffer are shared by both queue families
 *    (VK_SHARING_MODE_CONCURRENT), so no ownership transfer is needed.
 *  - events (no timeline semaphores, or TERNION_STREAM_SYNC=events): one submission, the
 *    copies recorded in the compute stream, each layer waiting on its copy's event; a
 *    device may run a copy beside the dispatches that do not wait for it.
 * Either way the dispatches read the same bytes: streamed == resident bit for bit
 * (tests/test_stream.c runs both).
 */
#include "engine/rt_engine_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOT_ALIGN 256 /* each matrix in a slot starts 256-byte aligned (uvec4 loads and more) */

struct rt_eng_stream {
    int first, n;           /* first streamed layer, streamed layers */
    uint64_t layer_bytes;   /* one layer's matrices in a slot */
    uint64_t *off;          /* [n_tensors]: offset in the slot; UINT64_MAX if not streamed */
    rt_buf host;            /* n * layer_bytes, host-visible */
    rt_buf slot[2];
    VkEvent *ev;            /* [n]: copy of streamed layer j done (events) */
    int *copy_id;           /* [n]: the batch of copy j in the stream being recorded (timeline, host) */
    bool timeline;
    bool host_copy;         /* the slots are host-visible: the host memcpy's into them (rt_vk_host.c) */
    bool quiet;             /* recording without the streaming commands (rt_engine_stream_measure) */
};

static bool streamed_kind(const rt_tensor_desc *td) { return td->per_layer && td->n_dims == 2; }

/* Device bytes of every resident thing but the streamed matrices: global tensors, the
 * per-layer 1-D tensors, activations, KV caches, logits and counters. */
static uint64_t fixed_bytes(const rt_engine *e)
{
    const rt_model_desc *d = e->d;
    uint64_t b = 0;
    char name[160];
    for (uint32_t t = 0; t < d->n_tensors; t++)
        for (int L = 0; L < (d->tensors[t].per_layer ? e->n_layers : 1); L++)
            if (!streamed_kind(&d->tensors[t])) {
                rt_eng_tensor_name(e, t, L, name, sizeof(name));
                b += rt_eng_weight_nbytes(e, rt_gguf_tensor_find(e->g, name), t, L) + 4;
            }
    for (uint32_t i = 0; i < d->n_acts; i++)
        b += rt_eng_act_bytes(e, i);
    b += 2ull * e->n_layers * e->n_ctx * d->kv_dim * d->kv_elem_bytes;
    b += (uint64_t)e->n_batch * e->vocab * 4 + RT_SYNC_WORDS * 4;
    return b;
}

/* The matrices of layer L, slot-packed (offsets into off[] when not NULL). */
static uint64_t layer_bytes(const rt_engine *e, int L, uint64_t *off)
{
    uint64_t b = 0;
    char name[160];
    for (uint32_t t = 0; t < e->d->n_tensors; t++) {
        if (off)
            off[t] = UINT64_MAX;
        if (!streamed_kind(&e->d->tensors[t]))
            continue;
        rt_eng_tensor_name(e, t, L, name, sizeof(name));
        if (off)
            off[t] = b;
        b += (rt_eng_weight_nbytes(e, rt_gguf_tensor_find(e->g, name), t, L) + 4 + SLOT_ALIGN - 1) / SLOT_ALIGN *
             SLOT_ALIGN;
    }
    return b;
}

/* The two slots: host-visible device memory where the device has it and the host copies
 * (the default with timeline semaphores; TERNION_STREAM_SYNC=host insists, =timeline or
 * =events copy on the device), else device memory the device copies into. */
static int make_slots(rt_engine *e, struct rt_eng_stream *s, char *err)
{
    const char *sync = getenv("TERNION_STREAM_SYNC");
    const bool force = sync && !strcmp(sync, "host"), off = sync && *sync && !force;
    if (force && !s->timeline) {
        snprintf(err, RT_ERR_LEN, "TERNION_STREAM_SYNC=host: host copies need timeline semaphores, which %s lacks",
                 rt_vk_get_info(e->vk)->name);
        return -1;
    }
    if (s->timeline && !off) {
        s->host_copy = !rt_buf_create_xfer(e->vk, s->layer_bytes, RT_MEM_DEVICE_MAPPED, "layer slot 0", &s->slot[0], err) &&
                       !rt_buf_create_xfer(e->vk, s->layer_bytes, RT_MEM_DEVICE_MAPPED, "layer slot 1", &s->slot[1], err);
        if (s->host_copy)
            return 0;
        if (force) /* err: no such memory type, or too little of it */
            return -1;
        rt_buf_destroy(e->vk, &s->slot[0]);
        err[0] = 0;
    }
    return rt_buf_create_xfer(e->vk, s->layer_bytes, RT_MEM_DEVICE, "layer slot 0", &s->slot[0], err) ||
                   rt_buf_create_xfer(e->vk, s->layer_bytes, RT_MEM_DEVICE, "layer slot 1", &s->slot[1], err)
               ? -1
               : 0;
}

int rt_eng_stream_plan(rt_engine *e, int budget_mib, char *err)
{
    if (budget_mib == 0)
        return 0;
    const bool force = budget_mib < 0; /* every layer streamed, whatever fits (tests) */
    const uint64_t budget = force ? UINT64_MAX / 2 : (uint64_t)budget_mib << 20, fixed = fixed_bytes(e);
    uint64_t lb = 0;
    for (int L = 0; L < e->n_layers; L++) {
        uint64_t b = layer_bytes(e, L, NULL);
        lb = b > lb ? b : lb;
    }
    const int N = e->n_layers, slots = N < 2 ? N : 2;
    if (!force && fixed + (uint64_t)N * lb <= budget)
        return 0; /* everything fits */
    if (lb == 0 || fixed + slots * lb > budget) {
        const uint64_t need = fixed + slots * lb;
        snprintf(err, RT_ERR_LEN,
                 "--vram-budget %d MiB is too small: the resident tensors, KV cache and activations take %.1f MiB and "
                 "%d layer slot%s %.1f MiB; the least budget is %llu MiB (0: everything resident)", budget_mib,
                 fixed / 1048576.0, slots, slots > 1 ? "s" : "", slots * lb / 1048576.0,
                 (unsigned long long)((need + (1u << 20) - 1) >> 20));
        return -1;
    }
    int resident = force ? 0 : (int)((budget - fixed - slots * lb) / lb);
    if (resident > N - slots)
        resident = N - slots;
    struct rt_eng_stream *s = calloc(1, sizeof(*s));
    if (!s || !(s->off = calloc(e->d->n_tensors, sizeof(uint64_t))) ||
        !(s->ev = calloc((size_t)(N - resident), sizeof(VkEvent))) ||
        !(s->copy_id = calloc((size_t)(N - resident), sizeof(int)))) {
        if (s) {
            free(s->off);
            free(s->ev);
        }
        free(s);
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    e->stream = s;
    s->first = resident;
    s->n = N - resident;
    s->layer_bytes = layer_bytes(e, 0, s->off);
    if (layer_bytes(e, s->first, NULL) != s->layer_bytes) {
        snprintf(err, RT_ERR_LEN, "--vram-budget: the layers' matrices differ in size; streaming needs equal layers");
        return -1;
    }
    s->timeline = rt_vk_has_timeline(e->vk);
    if (rt_buf_create_xfer(e->vk, (uint64_t)s->n * s->layer_bytes, RT_MEM_HOST, "streamed layers", &s->host, err) ||
        make_slots(e, s, err))
        return -1;
    for (int j = 0; j < s->n && !s->timeline; j++)
        if (rt_vk_event_create(e->vk, &s->ev[j], err))
            return -1;
    e->stats.stream_sync = s->host_copy ? RT_STREAM_HOST : !s->timeline ? RT_STREAM_EVENTS
                           : rt_vk_has_transfer_queue(e->vk) ? RT_STREAM_TIMELINE_XFER : RT_STREAM_TIMELINE;
    e->stats.streamed_layers = s->n;
    e->stats.streamed_bytes = (uint64_t)s->n * s->layer_bytes;
    return 0;
}

bool rt_eng_stream_place(rt_engine *e, uint32_t t, int L, rt_buf *view, rt_buf **host, uint64_t *host_off)
{
    struct rt_eng_stream *s = e->stream;
    if (!s || L < s->first || s->off[t] == UINT64_MAX)
        return false;
    const int j = L - s->first;
    const rt_buf *slot = &s->slot[j % 2];
    *view = *slot; /* same VkBuffer, the tensor's place in it */
    view->addr = slot->addr + s->off[t];
    view->size = slot->size - s->off[t];
    view->mapped = NULL;
    *host = &s->host;
    *host_off = (uint64_t)j * s->layer_bytes + s->off[t];
    return true;
}

static void copy_layer(const struct rt_eng_stream *s, rt_cmd *c, int j)
{
    if (s->host_copy) /* a failure is kept in c and reported by rt_cmd_end */
        s->copy_id[j] =
            rt_cmd_host_copy_batch(c, &s->host, (uint64_t)j * s->layer_bytes, &s->slot[j % 2], 0, s->layer_bytes);
    else if (s->timeline)
        s->copy_id[j] = rt_cmd_copy_batch(c, &s->host, (uint64_t)j * s->layer_bytes, &s->slot[j % 2], 0, s->layer_bytes);
    else
        rt_cmd_copy_async(c, &s->host, (uint64_t)j * s->layer_bytes, &s->slot[j % 2], 0, s->layer_bytes, s->ev[j]);
}

void rt_eng_stream_step_begin(rt_engine *e, rt_cmd *c)
{
    const struct rt_eng_stream *s = e->stream;
    for (int j = 0; s && !s->quiet && j < s->n && j < 2; j++)
        copy_layer(s, c, j);
}

void rt_eng_stream_layer_begin(rt_engine *e, rt_cmd *c, int L)
{
    const struct rt_eng_stream *s = e->stream;
    if (!s || s->quiet || L < s->first)
        return;
    if (s->timeline)
        rt_cmd_wait_batch(c, s->copy_id[L - s->first]);
    else
        rt_cmd_wait_copy(c, s->ev[L - s->first], &s->slot[(L - s->first) % 2]);
}

void rt_eng_stream_layer_end(rt_engine *e, rt_cmd *c, int L)
{
    const struct rt_eng_stream *s = e->stream;
    if (s && !s->quiet && L >= s->first && L - s->first + 2 < s->n)
        copy_layer(s, c, L - s->first + 2);
}

void rt_eng_stream_step_end(rt_engine *e, rt_cmd *c)
{
    const struct rt_eng_stream *s = e->stream;
    for (int j = 0; s && !s->quiet && !s->timeline && j < s->n; j++)
        rt_cmd_reset_event(c, s->ev[j]);
}

void rt_eng_stream_free(rt_engine *e)
{
    struct rt_eng_stream *s = e->stream;
    if (!s)
        return;
    for (int j = 0; s->ev && j < s->n; j++)
        rt_vk_event_destroy(e->vk, s->ev[j]);
    rt_buf_destroy(e->vk, &s->host);
    rt_buf_destroy(e->vk, &s->slot[0]);
    rt_buf_destroy(e->vk, &s->slot[1]);
    free(s->ev);
    free(s->copy_id);
    free(s->off);
    free(s);
    e->stream = NULL;
}

/* The copies of one step alone, on the queue (or the host thread) a step's copies use
 * (rt_engine_stream_bench.c times them); *out_c NULL when nothing is streamed. */
int rt_eng_stream_record_copies(rt_engine *e, rt_cmd **out_c, char *err)
{
    struct rt_eng_stream *s = e->stream;
    *out_c = NULL;
    if (!s)
        return 0;
    rt_cmd *copies = NULL;
    int rc = rt_cmd_begin(e->vk, &copies, err);
    for (int j = 0; !rc && j < s->n; j++)
        if (s->host_copy)
            rt_cmd_host_copy_batch(copies, &s->host, (uint64_t)j * s->layer_bytes, &s->slot[j % 2], 0, s->layer_bytes);
        else if (s->timeline)
            rt_cmd_copy_batch(copies, &s->host, (uint64_t)j * s->layer_bytes, &s->slot[j % 2], 0, s->layer_bytes);
        else
            rt_cmd_copy(copies, &s->host, (uint64_t)j * s->layer_bytes, &s->slot[j % 2], 0, s->layer_bytes);
    rc = rc || rt_cmd_end(copies, err);
    if (rc) {
        rt_cmd_free(copies);
        return -1;
    }
    *out_c = copies;
    return 0;
}

/* Record without the copies (slots as they are: timing only) while quiet. */
void rt_eng_stream_quiet(rt_engine *e, bool quiet)
{
    if (e->stream)
        e->stream->quiet = quiet;
}
