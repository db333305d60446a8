/* srv_http.h - the HTTP front of the server (libmicrohttpd): routes, limits, auth, SSE.
 *
 * Owns: the MHD daemon (one thread per connection), the per-connection request state, the
 * streamed responses and the HTTP request counters. Routes: POST /v1/chat/completions,
 * POST /v1/completions, POST /v1/embeddings (also without the /v1 prefix), GET /v1/models,
 * GET /health, GET /metrics, and llama-server's POST /tokenize, POST /detokenize, GET /props,
 * GET /slots; OPTIONS on any of them answers 204 (a CORS preflight with --cors-origin). Bodies over SRV_MAX_BODY are refused with 413 without being kept; with an
 * API key every route but /health needs "Authorization: Bearer <key>" (401 otherwise).
 * A client that goes away while its request waits or streams cancels the request.
 */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include <stdint.h>

#include "srv_model.h"
#include "srv_sched.h"

#define SRV_MAX_BODY (1u << 20)

typedef struct srv_http srv_http;

typedef struct {
    const char *host;      /* numeric address or name to bind; "127.0.0.1" by default */
    int port;              /* 0: any free port (see srv_http_port) */
    const char *api_key;   /* NULL or "": no authentication */
    const char *cors_origin; /* Access-Control-Allow-Origin of every answer ("*" or an origin);
                              NULL: no CORS headers (OPTIONS still answers 204) */
    int max_connections;
} srv_http_opts;

int srv_http_start(const srv_http_opts *o, srv_model *m, srv_sched *s, srv_http **out, char *err);
int srv_http_port(const srv_http *h); /* the bound port */
/* Graceful shutdown: stop accepting connections (the listening socket is closed) and answer
 * any new request on an open one with a 503; requests in flight go on. */
void srv_http_quiesce(srv_http *h);
/* Requests begun and not yet completed (their answer fully sent or the client gone). */
int srv_http_active(srv_http *h);
void srv_http_stop(srv_http *h);

#endif
