/* srv_text.c - generated text: stop sequences, UTF-8 boundaries and cleaning (srv_text.h). */
#include "srv_text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int srv_text_append(srv_text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *b = realloc(t->buf, cap);
        if (!b)
            return -1;
        t->buf = b;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = 0;
    return 0;
}

void srv_text_free(srv_text *t)
{
    free(t->buf);
    memset(t, 0, sizeof(*t));
}

/* Length of the valid UTF-8 sequence starting at s[0] (1..4), 0 when invalid, -k when it is
 * a valid beginning cut off after the n available bytes. */
static int utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    int len;
    unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 0;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n)
            return -i;
        unsigned b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            return 0;
    }
    return len;
}

/* Bytes of s[0..n) without a trailing character that is valid so far but incomplete. */
static size_t complete_len(const char *s, size_t from, size_t n)
{
    size_t start = n > 3 && n - 3 > from ? n - 3 : from;
    for (size_t i = start; i < n; i++) {
        int l = utf8_seq((const unsigned char *)s + i, n - i);
        if (l < 0)
            return i;
    }
    return n;
}

static const char *find(const char *h, size_t hn, const char *nd, size_t nn)
{
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0)
            return h + i;
    return NULL;
}

size_t srv_text_ready(const srv_text *t, char *const *stops, int n_stops, bool final, bool *out_stopped)
{
    *out_stopped = false;
    size_t end = t->len, best = t->len;
    for (int i = 0; i < n_stops; i++) {
        size_t sl = strlen(stops[i]);
        if (sl == 0 || sl > t->len - t->sent)
            continue;
        const char *hit = find(t->buf + t->sent, t->len - t->sent, stops[i], sl);
        if (hit && (size_t)(hit - t->buf) < best) {
            best = (size_t)(hit - t->buf);
            *out_stopped = true;
        }
    }
    if (*out_stopped)
        return best;
    if (final)
        return end;
    /* hold back the longest tail that a stop sequence begins with */
    for (int i = 0; i < n_stops; i++) {
        size_t sl = strlen(stops[i]);
        for (size_t k = sl - 1; k > 0; k--) {
            if (k > t->len - t->sent)
                continue;
            if (memcmp(t->buf + t->len - k, stops[i], k) == 0) {
                if (t->len - k < end)
                    end = t->len - k;
                break;
            }
        }
    }
    return complete_len(t->buf, t->sent, end);
}

char *srv_utf8_clean(const char *s, size_t n)
{
    char *o = malloc(n * 3 + 1); /* each bad byte becomes 3 bytes at most */
    if (!o)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        int l = utf8_seq((const unsigned char *)s + i, n - i);
        if (l > 0 && !(l == 1 && s[i] == 0)) {
            memcpy(o + j, s + i, (size_t)l);
            j += (size_t)l;
            i += (size_t)l;
        } else {
            memcpy(o + j, "\xEF\xBF\xBD", 3); /* U+FFFD; a NUL byte too (C strings end there) */
            j += 3;
            i++;
        }
    }
    o[j] = 0;
    return o;
}

bool srv_json_has_nul(const char *json, size_t len)
{
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        const char c = json[i];
        if (!c && in_str)
            return true; /* a raw NUL byte inside a string */
        if (!in_str) {
            in_str = c == '"';
            continue;
        }
        if (c == '"') {
            in_str = false;
        } else if (c == '\\' && i + 1 < len) {
            if (json[i + 1] == 'u' && i + 5 < len && json[i + 2] == '0' && json[i + 3] == '0' && json[i + 4] == '0' &&
                json[i + 5] == '0')
                return true;
            i++; /* the escaped character (a quote or backslash does not end anything) */
        }
    }
    return false;
}
