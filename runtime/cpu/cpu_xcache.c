/* cpu_xcache.c - the expert cache under a memory budget (cpu_xcache.h). */
#include "cpu/cpu_xcache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/rt_base.h" /* RT_ERR_LEN */
#include "cpu/cpu_mem.h"
#include "format/fmt_codec.h"

enum { S_EMPTY, S_LOADING, S_READY };

typedef struct {
    int key;          /* L * n_expert + expert, -1 none */
    int state;        /* S_* */
    bool pinned;      /* a layer of the running step reads it */
    bool by_prefetch; /* read by the prefetch thread and not pinned since */
    uint64_t used;    /* LRU stamp */
} slot_t;

struct cpu_xcache {
    cpu_xcache_desc d;
    uint64_t *file_off;   /* own copy of d.file_off */
    char path[512];
    int fd;
    uint64_t off[3];      /* part i's offset in a slot */
    uint8_t *mem;         /* [slots][slot_bytes] */
    slot_t *slot;
    int *map;             /* [n_layers * n_expert]: the slot holding it, -1 none */
    int *pinned;          /* the slots pinned this round */
    int n_pinned;
    int *guess;           /* [n_layers][k]: the last token's experts of each layer, -1 none */
    int *queue;           /* [2 k] keys the prefetch thread reads next */
    int q_n, q_pos;
    uint64_t clock;
    cpu_xcache_stats st;
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* a slot changed state, or the queue was filled */
    pthread_t thread;
    bool have_thread, quit;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static uint64_t al64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

static uint64_t slot_bytes(const cpu_xcache_desc *d)
{
    return al64(d->part_bytes[0]) + al64(d->part_bytes[1]) + al64(d->part_bytes[2]);
}

uint64_t cpu_xcache_min_bytes(const cpu_xcache_desc *d) { return (uint64_t)d->k * slot_bytes(d); }

/* Reads expert `key`'s three parts into slot s (no lock held). 0, or -1 with err. */
static int read_expert(cpu_xcache *x, int s, int key, char *err)
{
    const int L = key / x->d.n_expert, ex = key % x->d.n_expert;
    static const char *const part[3] = {"gate", "up", "down"};
    for (int i = 0; i < 3; i++) {
        const uint64_t n = x->d.part_bytes[i], at = x->file_off[L * 3 + i] + (uint64_t)ex * n;
        uint8_t *dst = x->mem + (uint64_t)s * x->st.slot_bytes + x->off[i];
        uint64_t done = 0;
        while (done < n) {
            const ssize_t r = pread(x->fd, dst + done, (size_t)(n - done), (off_t)(at + done));
            if (r > 0) {
                done += (uint64_t)r;
                continue;
            }
            if (r < 0 && errno == EINTR)
                continue;
            if (err) {
                struct stat fs;
                const long long size = fstat(x->fd, &fs) ? -1 : (long long)fs.st_size;
                if (r == 0)
                    snprintf(err, RT_ERR_LEN, "%s: reading expert %d of layer %d (%s rows, %llu bytes at offset %llu): "
                             "the file ends at %lld bytes (truncated while in use?)", x->path, ex, L, part[i],
                             (unsigned long long)n, (unsigned long long)at, size);
                else
                    snprintf(err, RT_ERR_LEN, "%s: reading expert %d of layer %d (%s rows at offset %llu): %s", x->path,
                             ex, L, part[i], (unsigned long long)(at + done), strerror(errno));
            }
            return -1;
        }
        const fmt_codec *fc = fmt_codec_find(x->d.type[i]);
        const int64_t ne[4] = {x->d.ne0[i], x->d.rows[i], 1, 1};
        char cerr[FMT_ERR_LEN];
        if (fc && fc->check && fc->check(dst, ne, cerr)) {
            if (err)
                snprintf(err, RT_ERR_LEN, "%s: expert %d of layer %d (%s rows at offset %llu, %s): %s", x->path, ex, L,
                         part[i], (unsigned long long)at, fc->name, cerr);
            return -1;
        }
    }
    return 0;
}

/* The least recently used slot that is neither pinned nor being read, -1 none (lock held). */
static int victim(const cpu_xcache *x)
{
    int best = -1;
    for (int s = 0; s < x->st.slots; s++)
        if (!x->slot[s].pinned && x->slot[s].state != S_LOADING &&
            (best < 0 || x->slot[s].state == S_EMPTY || x->slot[s].used < x->slot[best].used)) {
            best = s;
            if (x->slot[s].state == S_EMPTY)
                break;
        }
    return best;
}

/* Slot s now holds key, being read (lock held). */
static void take(cpu_xcache *x, int s, int key)
{
    if (x->slot[s].key >= 0)
        x->map[x->slot[s].key] = -1;
    x->slot[s] = (slot_t){.key = key, .state = S_LOADING, .used = ++x->clock};
    x->map[key] = s;
}

/* After a read of slot s (lock held): ready, or empty again on failure. */
static void loaded(cpu_xcache *x, int s, bool ok)
{
    if (ok) {
        x->slot[s].state = S_READY;
        x->st.bytes_read += x->d.part_bytes[0] + x->d.part_bytes[1] + x->d.part_bytes[2];
    } else {
        x->map[x->slot[s].key] = -1;
        x->slot[s] = (slot_t){.key = -1, .state = S_EMPTY};
    }
    pthread_cond_broadcast(&x->cv);
}

static void *prefetch_main(void *arg)
{
    cpu_xcache *x = arg;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (!x->quit && x->q_pos == x->q_n)
            pthread_cond_wait(&x->cv, &x->mu);
        if (x->quit)
            break;
        const int key = x->queue[x->q_pos++], s = x->map[key] >= 0 ? -1 : victim(x);
        if (s < 0)
            continue; /* cached or being read already, or every slot pinned: nothing to do */
        take(x, s, key);
        x->slot[s].by_prefetch = true;
        pthread_mutex_unlock(&x->mu);
        const bool ok = !read_expert(x, s, key, NULL);
        pthread_mutex_lock(&x->mu);
        x->st.prefetched += ok;
        loaded(x, s, ok);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

int cpu_xcache_open(const cpu_xcache_desc *d, cpu_xcache **out, char *err)
{
    *out = NULL;
    const uint64_t sb = slot_bytes(d), need = cpu_xcache_min_bytes(d);
    if (d->budget < need) {
        snprintf(err, RT_ERR_LEN, "--expert-cache %.1f MiB is below one layer's active experts: %d experts of %.2f MiB "
                 "= %.1f MiB (at least %llu MiB)", d->budget / 1048576.0, d->k, sb / 1048576.0, need / 1048576.0,
                 (unsigned long long)((need + (1u << 20) - 1) >> 20));
        return -1;
    }
    const int total = d->n_layers * d->n_expert;
    const uint64_t fit = d->budget / sb;
    cpu_xcache *x = calloc(1, sizeof(*x));
    if (!x) {
        snprintf(err, RT_ERR_LEN, "out of memory for the expert cache");
        return -1;
    }
    x->d = *d;
    x->fd = -1;
    snprintf(x->path, sizeof x->path, "%s", d->path);
    x->st = (cpu_xcache_stats){.slots = fit > (uint64_t)total ? total : (int)fit, .slot_bytes = sb};
    x->st.budget_bytes = (uint64_t)x->st.slots * sb;
    x->st.expert_bytes = (uint64_t)total * (d->part_bytes[0] + d->part_bytes[1] + d->part_bytes[2]);
    x->off[1] = al64(d->part_bytes[0]);
    x->off[2] = x->off[1] + al64(d->part_bytes[1]);
    x->file_off = malloc(sizeof(uint64_t) * 3 * (size_t)d->n_layers);
    x->slot = malloc(sizeof(slot_t) * (size_t)x->st.slots);
    x->map = malloc(sizeof(int) * (size_t)total);
    x->pinned = malloc(sizeof(int) * (size_t)x->st.slots);
    x->guess = malloc(sizeof(int) * (size_t)d->n_layers * (size_t)d->k);
    x->queue = malloc(sizeof(int) * 2 * (size_t)d->k);
    x->mem = cpu_alloc_huge((size_t)x->st.budget_bytes); /* slots read whole, as the arena's matrices */
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    *out = x; /* cpu_xcache_close frees what follows on failure */
    if (!x->file_off || !x->slot || !x->map || !x->pinned || !x->guess || !x->queue || !x->mem) {
        snprintf(err, RT_ERR_LEN, "out of memory for the expert cache (%.1f MiB of slots)", x->st.budget_bytes / 1048576.0);
        return -1;
    }
    memcpy(x->file_off, d->file_off, sizeof(uint64_t) * 3 * (size_t)d->n_layers);
    for (int s = 0; s < x->st.slots; s++)
        x->slot[s] = (slot_t){.key = -1, .state = S_EMPTY};
    for (int i = 0; i < total; i++)
        x->map[i] = -1;
    for (int i = 0; i < d->n_layers * d->k; i++)
        x->guess[i] = -1;
    if ((x->fd = open(d->path, O_RDONLY | O_CLOEXEC)) < 0) {
        snprintf(err, RT_ERR_LEN, "--expert-cache: cannot open %s for reading: %s", d->path, strerror(errno));
        return -1;
    }
    if (d->prefetch && pthread_create(&x->thread, NULL, prefetch_main, x) == 0)
        x->have_thread = true;
    return 0;
}

void cpu_xcache_close(cpu_xcache *x)
{
    if (!x)
        return;
    if (x->have_thread) {
        pthread_mutex_lock(&x->mu);
        x->quit = true;
        pthread_cond_broadcast(&x->cv);
        pthread_mutex_unlock(&x->mu);
        pthread_join(x->thread, NULL);
    }
    if (x->fd >= 0)
        close(x->fd);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    free(x->file_off);
    free(x->slot);
    free(x->map);
    free(x->pinned);
    free(x->guess);
    free(x->queue);
    free(x->mem);
    free(x);
}

static void pin(cpu_xcache *x, int s)
{
    x->slot[s].pinned = true;
    x->slot[s].used = ++x->clock;
    x->pinned[x->n_pinned++] = s;
}

/* Pins key (lock held; may drop it to read or wait): its slot, -1 when every slot is pinned,
 * -2 on a read error (err). */
static int pin_key(cpu_xcache *x, int key, char *err)
{
    for (;;) {
        const int s = x->map[key];
        if (s >= 0 && x->slot[s].state == S_READY) {
            if (!x->slot[s].pinned) {
                x->st.hits++;
                x->st.prefetch_used += x->slot[s].by_prefetch;
                x->slot[s].by_prefetch = false;
                pin(x, s);
            }
            return s;
        }
        if (s >= 0) { /* the prefetch thread is reading it */
            pthread_cond_wait(&x->cv, &x->mu);
            continue;
        }
        const int v = victim(x);
        if (v < 0) {
            bool reading = false; /* a prefetch read will free a slot: wait for it */
            for (int i = 0; i < x->st.slots && !reading; i++)
                reading = x->slot[i].state == S_LOADING;
            if (!reading)
                return -1;
            pthread_cond_wait(&x->cv, &x->mu);
            continue;
        }
        take(x, v, key);
        pin(x, v);
        x->st.misses++;
        pthread_mutex_unlock(&x->mu);
        const int rc = read_expert(x, v, key, err);
        pthread_mutex_lock(&x->mu);
        loaded(x, v, rc == 0);
        return rc ? -2 : v;
    }
}

static void unpin_all(cpu_xcache *x)
{
    for (int i = 0; i < x->n_pinned; i++)
        x->slot[x->pinned[i]].pinned = false;
    x->n_pinned = 0;
}

int cpu_xcache_acquire(cpu_xcache *x, int L, const int *sel, int n, int *slot, char *err)
{
    const double t0 = now_ms();
    int served = 0;
    pthread_mutex_lock(&x->mu);
    for (int j = 0; j < x->d.k && n >= x->d.k; j++) /* the last token's experts: layer L's guess */
        x->guess[L * x->d.k + j] = sel[n - x->d.k + j];
    for (int i = 0; i < n; i++) {
        if (slot[i] != -1)
            continue;
        const int s = pin_key(x, L * x->d.n_expert + sel[i], err);
        if (s == -2) {
            unpin_all(x);
            served = -1;
            break;
        }
        if (s >= 0) {
            slot[i] = s;
            served++;
        }
    }
    x->st.stall_ms += now_ms() - t0;
    pthread_mutex_unlock(&x->mu);
    return served;
}

void cpu_xcache_release(cpu_xcache *x)
{
    pthread_mutex_lock(&x->mu);
    unpin_all(x);
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

void cpu_xcache_prefetch(cpu_xcache *x, int L, const int *ahead, int n_ahead)
{
    if (!x->have_thread)
        return;
    pthread_mutex_lock(&x->mu);
    x->q_n = x->q_pos = 0;
    for (int j = 0; j < n_ahead && j < x->d.k; j++)
        x->queue[x->q_n++] = L * x->d.n_expert + ahead[j];
    for (int j = 0; j < x->d.k; j++)
        if (x->guess[L * x->d.k + j] >= 0)
            x->queue[x->q_n++] = L * x->d.n_expert + x->guess[L * x->d.k + j];
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

const uint8_t *cpu_xcache_part(const cpu_xcache *x, int slot, int part)
{
    return x->mem + (uint64_t)slot * x->st.slot_bytes + x->off[part];
}

void cpu_xcache_count_tokens(cpu_xcache *x, int n)
{
    pthread_mutex_lock(&x->mu);
    x->st.tokens += (uint64_t)n;
    pthread_mutex_unlock(&x->mu);
}

void cpu_xcache_get_stats(cpu_xcache *x, cpu_xcache_stats *out)
{
    pthread_mutex_lock(&x->mu);
    *out = x->st;
    pthread_mutex_unlock(&x->mu);
}
