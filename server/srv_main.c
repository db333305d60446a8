/* srv_main.c - `ternion-server`: the OpenAI-compatible HTTP server for any generated model.
 *
 * Owns: the command line, start-up order (model -> scheduler -> HTTP) and the graceful shutdown
 * on SIGINT / SIGTERM: no new connections (new requests on open ones get a 503), requests in
 * flight run on for up to --shutdown-grace seconds, then the ones still generating end as if
 * their length ran out (finish_reason "length", streams with their last chunk and [DONE]);
 * once their answers are sent (at most 5 s more) everything is freed and the exit status is 0.
 * A second signal skips the waiting.
 * Prints "listening on http://HOST:PORT" on stderr once requests are accepted.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/ternion.h"
#include "srv_http.h"
#include "srv_model_ternion.h"
#include "srv_sched.h"

typedef struct {
    srv_ternion_opts m;
    srv_http_opts h;
    int queue;
    int grace;          /* --shutdown-grace seconds */
    bool help;
} opts;

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s -m MODEL.gguf [options]\n"
            "OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions,\n"
            "POST /v1/embeddings, GET /v1/models, GET /health, GET /metrics; llama-server's\n"
            "POST /completion, POST /tokenize, POST /detokenize, GET /props, GET /slots.\n"
            "  -m, --model PATH      GGUF model file (required)\n"
            "  --host ADDR           address to listen on (default 127.0.0.1)\n"
            "  --port N              port (default 8080; 0: any free port)\n"
            "  -np, --parallel N     slots: requests generated at once, batched in each step (default 4)\n"
            "  -c, --ctx-size N      context per slot in tokens (default: the model's, at most 4096)\n"
            "  -b, --batch-size N    most prompt tokens per engine step (default 512)\n"
            "  --api-key KEY         require 'Authorization: Bearer KEY' (also $TERNION_API_KEY)\n"
            "  --alias NAME          model id answers name (default: the generated model's name); any\n"
            "                        \"model\" a request gives is served by this model\n"
            "  --cors-origin ORIGIN  allow browsers on ORIGIN (or *) to call the API: CORS headers on every\n"
            "                        answer, OPTIONS preflights answered (default: no CORS headers)\n"
            "  --queue N             requests that may wait for a slot before 503 (default 64)\n"
            "  --shutdown-grace S    on SIGTERM / SIGINT, seconds requests in flight may run on before\n"
            "                        they end with finish_reason \"length\" (default 10)\n"
            "  --device DEV          auto (default: a Vulkan GPU if there is one, else the native CPU\n"
            "                        backend), cpu, vulkan (lavapipe included), vulkan:N or N\n"
            "  -t, --threads N       CPU backend: threads of a decode step (default: the physical cores)\n"
            "  -tb, --threads-batch N  CPU backend: threads of a prompt step (default: -t)\n"
            "  --expert-cache MiB    CPU backend, mixture-of-experts models: experts stay in the file, the\n"
            "                        used ones in a cache of MiB (least recently used evicted, the next\n"
            "                        layer's read ahead); same answers (default 0: experts in place)\n"
            "  --mmap                CPU backend: the matrices in place in the file mapping, shared with\n"
            "                        other processes mapping the file (default: copied into 2 MiB pages)\n"
            "  --cpu-moe, -cmoe      Vulkan, mixture-of-experts models: every layer's experts stay in\n"
            "                        system memory and run on the CPU (-t threads), the router and the\n"
            "                        rest on the device (the CPU backend ignores it)\n"
            "  --n-cpu-moe, -ncmoe N the same for the first N layers only (default 0: none)\n"
            "  --lm-head q8|q6_k|f16 LM head table (default f16; q6_k: CPU backend)\n"
            "  --chat-template NAME  chat format instead of the file's: bitnet, llama3, chatml, qwen3,\n"
            "                        llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip, gemma, falcon3\n"
            "  -h, --help            this text\n",
            prog);
}

static int int_arg(const char *flag, const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "error: %s needs an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, v ? v : "");
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse(int argc, char **argv, opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        bool takes = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            o->help = true, takes = false;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            o->m.model_path = v;
        else if (!strcmp(a, "--host"))
            o->h.host = v;
        else if (!strcmp(a, "--port"))
            rc = int_arg(a, v, 0, 65535, &o->h.port);
        else if (!strcmp(a, "-np") || !strcmp(a, "--parallel"))
            rc = int_arg(a, v, 1, 255, &o->m.n_seq); /* + 1 sequence for embeddings: 256 at most */
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size"))
            rc = int_arg(a, v, 0, 1 << 20, &o->m.n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            rc = int_arg(a, v, 0, 1 << 16, &o->m.n_batch);
        else if (!strcmp(a, "--api-key"))
            o->h.api_key = v;
        else if (!strcmp(a, "--alias"))
            o->m.alias = v;
        else if (!strcmp(a, "--cors-origin"))
            o->h.cors_origin = v;
        else if (!strcmp(a, "--queue"))
            rc = int_arg(a, v, 0, 1 << 20, &o->queue);
        else if (!strcmp(a, "--shutdown-grace"))
            rc = int_arg(a, v, 0, 3600, &o->grace);
        else if (!strcmp(a, "--device")) {
            int32_t backend = 0, device = -1;
            if (v && ternion_parse_device(v, &backend, &device) != TERNION_OK) {
                fprintf(stderr, "error: --device: %s\n", ternion_last_error());
                return -1;
            }
            o->m.backend = backend;
            o->m.device = device;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            rc = int_arg(a, v, 1, 512, &o->m.n_threads);
        else if (!strcmp(a, "-tb") || !strcmp(a, "--threads-batch"))
            rc = int_arg(a, v, 1, 512, &o->m.n_threads_batch);
        else if (!strcmp(a, "--expert-cache"))
            rc = int_arg(a, v, 0, 1 << 30, &o->m.expert_cache_mib);
        else if (!strcmp(a, "--cpu-moe") || !strcmp(a, "-cmoe"))
            o->m.cpu_moe = true, takes = false;
        else if (!strcmp(a, "--mmap"))
            o->m.mmap_weights = true, takes = false;
        else if (!strcmp(a, "--n-cpu-moe") || !strcmp(a, "-ncmoe"))
            rc = int_arg(a, v, 0, 1 << 20, &o->m.n_cpu_moe);
        else if (!strcmp(a, "--chat-template"))
            o->m.chat_template = v;
        else if (!strcmp(a, "--lm-head")) {
            if (!v || (strcmp(v, "q8") && strcmp(v, "q6_k") && strcmp(v, "f16"))) {
                fprintf(stderr, "error: --lm-head takes q8, q6_k or f16\n");
                return -1;
            }
            o->m.lm_head_q8 = !strcmp(v, "q8");
            o->m.lm_head_q6k = !strcmp(v, "q6_k");
        } else {
            fprintf(stderr, "error: unknown option '%s' (see --help)\n", a);
            return -1;
        }
        if (rc)
            return -1;
        if (takes && !v) {
            fprintf(stderr, "error: %s needs a value\n", a);
            return -1;
        }
        i += takes;
    }
    if (!o->help && !o->m.model_path) {
        fprintf(stderr, "error: no model: pass -m MODEL.gguf (see --help)\n");
        return -1;
    }
    return 0;
}

/* Waits until the scheduler is idle (s) or every HTTP answer is sent (h), at most ms; false when
 * time ran out or another signal came. */
static bool wait_until(const sigset_t *sig, srv_sched *s, srv_http *h, int ms)
{
    for (int t = 0;; t += 50) {
        if (s ? srv_sched_pending(s) == 0 : srv_http_active(h) == 0)
            return true;
        const struct timespec step = {0, 50 * 1000000L};
        if (t >= ms || sigtimedwait(sig, NULL, &step) > 0)
            return false;
    }
}

int main(int argc, char **argv)
{
    opts o = {.m = {.n_seq = 4, .device = -1}, .h = {.host = "127.0.0.1", .port = 8080}, .queue = 64, .grace = 10};
    o.h.api_key = getenv("TERNION_API_KEY");
    if (parse(argc, argv, &o))
        return 2;
    if (o.help) {
        usage(stdout, argv[0]);
        return 0;
    }
    /* signals go to the main thread's sigwait only: block them before any thread starts */
    sigset_t sig;
    sigemptyset(&sig);
    sigaddset(&sig, SIGINT);
    sigaddset(&sig, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sig, NULL);
    signal(SIGPIPE, SIG_IGN);
    char err[SRV_ERR_LEN] = "";
    srv_model m = {0};
    srv_sched *s = NULL;
    srv_http *h = NULL;
    if (srv_model_ternion_open(&o.m, &m, err) || srv_sched_new(&m, o.queue, 0, &s, err) ||
        srv_http_start(&o.h, &m, s, &h, err)) {
        fprintf(stderr, "error: %s\n", err);
        srv_sched_free(s);
        srv_model_ternion_close(&m);
        return 1;
    }
    fprintf(stderr, "serving %s (%s weights): %d slots of %d tokens%s\nlistening on http://%s:%d\n", m.name,
            m.weights ? m.weights : "unknown", m.n_seq, m.n_ctx,
            o.h.api_key && o.h.api_key[0] ? ", API key required" : "", o.h.host, srv_http_port(h));
    int got = 0;
    sigwait(&sig, &got);
    fprintf(stderr, "%s: shutting down (requests in flight: %d)\n", got == SIGINT ? "SIGINT" : "SIGTERM",
            srv_sched_pending(s));
    srv_http_quiesce(h);
    if (!wait_until(&sig, s, NULL, o.grace * 1000)) {
        fprintf(stderr, "ending the %d requests still running\n", srv_sched_pending(s));
        srv_sched_end_all(s);
    }
    if (!wait_until(&sig, NULL, h, 5000))
        fprintf(stderr, "%d answers not sent completely\n", srv_http_active(h));
    srv_sched_stop(s);
    srv_http_stop(h);
    srv_sched_free(s);
    srv_model_ternion_close(&m);
    return 0;
}
