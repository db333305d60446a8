/* srv_text.h - the generated text on its way to a client: stop sequences, UTF-8 boundaries.
 *
 * Owns: srv_text, the bytes generated so far for one request and how many were sent. Each
 * new token's bytes are appended; srv_text_ready then says how much may be sent now: never
 * the first bytes of a character that is not complete yet, and never text that could still
 * turn out to be the beginning of a stop sequence (it is held back until it either becomes
 * a whole stop sequence, which ends the request without being sent, or stops matching).
 * srv_json_utf8 (for output) replaces invalid UTF-8 with U+FFFD so every JSON string sent
 * is valid. srv_json_has_nul finds the NUL characters a request's JSON strings would hide.
 */
#ifndef SRV_TEXT_H
#define SRV_TEXT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *buf;
    size_t len, cap;
    size_t sent;          /* bytes already handed out */
} srv_text;

/* Append bytes. 0 ok, -1 out of memory. */
int srv_text_append(srv_text *t, const char *s, size_t n);
void srv_text_free(srv_text *t);

/* Length of the sendable prefix of buf (>= t->sent): a stop sequence found at or after
 * t->sent ends it there (*out_stopped true, the text is then final and ends before the stop
 * sequence); otherwise the prefix excludes an incomplete trailing UTF-8 character and the
 * longest tail that is a proper prefix of a stop sequence. `final` (generation ended for
 * another reason): everything up to a stop sequence, incomplete characters included. */
size_t srv_text_ready(const srv_text *t, char *const *stops, int n_stops, bool final, bool *out_stopped);

/* Copy of s[0..n) with every invalid UTF-8 sequence replaced by U+FFFD, NUL-terminated.
 * NULL on out of memory. */
char *srv_utf8_clean(const char *s, size_t n);

/* Whether JSON text json[0..len) holds a NUL character in a string: a \u0000 escape, or a raw
 * NUL byte. Such a string would be cut short at the NUL by a C string, so requests with
 * one are refused (400) rather than silently shortened. */
bool srv_json_has_nul(const char *json, size_t len);

#endif
