/* srv_http_client.h - a minimal blocking HTTP/1.1 client for the server's tests (header-only):
 * one request per connection (Connection: close), the whole answer read until the server
 * closes, chunked bodies (server-sent events) joined. Enough to send malformed, oversized
 * and half-sent requests that ordinary clients refuse to make.
 */
#ifndef SRV_HTTP_CLIENT_H
#define SRV_HTTP_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int hc_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

static int hc_send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Send the request head (+ extra header lines, each ending in \r\n) and the body. */
static int hc_start(int port, const char *method, const char *path, const char *extra, const char *body, size_t blen)
{
    int fd = hc_connect(port);
    if (fd < 0) return -1;
    char head[1024];
    int n = snprintf(head, sizeof(head),
                     "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "%sContent-Length: %zu\r\n\r\n", method, path, extra ? extra : "", blen);
    if (hc_send_all(fd, head, (size_t)n) || (blen && hc_send_all(fd, body, blen))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Undo chunked transfer coding in place (body after the head); returns the new length. */
static size_t hc_dechunk(char *b, size_t n)
{
    size_t r = 0, w = 0;
    while (r < n) {
        char *end;
        unsigned long k = strtoul(b + r, &end, 16);
        char *nl = strstr(end, "\r\n");
        if (!nl || k == 0) break;
        r = (size_t)(nl - b) + 2;
        if (r + k > n) k = n - r;
        memmove(b + w, b + r, k);
        w += k;
        r += k + 2;
    }
    b[w] = 0;
    return w;
}

/* Read the whole answer; *body (malloc'd, NUL-terminated) gets the dechunked body. Status or -1. */
static int hc_finish(int fd, char **body)
{
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (n + 2048 > cap) b = realloc(b, cap *= 2);
        ssize_t r = recv(fd, b + n, cap - n - 1, 0);
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    b[n] = 0;
    int status = -1;
    if (sscanf(b, "HTTP/1.%*d %d", &status) != 1) status = -1;
    char *sep = strstr(b, "\r\n\r\n");
    size_t off = sep ? (size_t)(sep - b) + 4 : n;
    bool chunked = sep && strstr(b, "chunked") && strstr(b, "chunked") < sep;
    memmove(b, b + off, n - off + 1);
    if (chunked) hc_dechunk(b, n - off);
    *body = b;
    return status;
}

static int hc_request(int port, const char *method, const char *path, const char *extra, const char *body,
                      char **out_body)
{
    int fd = hc_start(port, method, path, extra, body, body ? strlen(body) : 0);
    if (fd < 0) {
        *out_body = calloc(1, 1);
        return -1;
    }
    return hc_finish(fd, out_body);
}

#endif
