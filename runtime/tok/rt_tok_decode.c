/* rt_tok_decode.c - token ids back to bytes.
 *
 * Owns: the GPT-2 bytes_to_unicode table and its inverse, the decoded piece of every token
 * (built once at load, llama.cpp's token_to_piece for BPE, SPM and WPM), whole-sequence
 * decode (with SPM's leading-space strip and WPM's clean_spaces passes) and the streaming
 * decoder that holds back incomplete UTF-8 characters.
 */
#include "tok/rt_tok_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rt_tok_byte_map(struct rt_tok *t)
{
    /* Printable bytes map to themselves; the other 68 take 256, 257, ... in byte order. */
    uint16_t next = 256;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        t->byte_cp[b] = keep ? (uint16_t)b : next++;
    }
    memset(t->cp_byte, 0xff, sizeof t->cp_byte);
    for (int b = 0; b < 256; b++)
        t->cp_byte[t->byte_cp[b]] = (int16_t)b;
}

/* Inverse byte map of stored text s[0..n) into dst; returns bytes written (<= n). Code points
 * outside the map (not produced by a byte-level vocabulary) are copied as they are. */
static size_t unmap(const struct rt_tok *t, const char *s, size_t n, char *dst)
{
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        if (c < 0x80) {
            int16_t b = t->cp_byte[c];
            dst[m++] = b >= 0 ? (char)b : (char)c;
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0 && i + 1 < n && ((uint8_t)s[i + 1] & 0xC0) == 0x80) {
            uint32_t cp = (c & 0x1Fu) << 6 | ((uint8_t)s[i + 1] & 0x3Fu);
            if (cp < 324 && t->cp_byte[cp] >= 0) {
                dst[m++] = (char)t->cp_byte[cp];
                i += 2;
                continue;
            }
        }
        dst[m++] = s[i++];
    }
    return m;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 0;
}

/* SPM piece of a normal token (U+2581 -> " ") or a byte token (<0xHH>, checked at load). */
static size_t spm_piece(uint8_t type, const char *s, size_t n, char *dst)
{
    if (type == RT_TOKTYPE_BYTE) {
        dst[0] = (char)(hexval(s[3]) << 4 | hexval(s[4]));
        return 1;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 2 < n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
            dst[m++] = ' ';
            i += 2;
        } else {
            dst[m++] = s[i];
        }
    }
    return m;
}

int rt_tok_build_pieces(struct rt_tok *t)
{
    int32_t n = t->n_vocab;
    t->piece = malloc((size_t)t->text_off[n] + 1);
    t->piece_off = malloc(((size_t)n + 1) * sizeof *t->piece_off);
    if (!t->piece || !t->piece_off)
        return -1;
    uint32_t off = 0;
    t->max_piece = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *s = t->text + t->text_off[i];
        size_t len = t->text_off[i + 1] - t->text_off[i], m;
        uint8_t ty = t->type[i];
        t->piece_off[i] = off;
        if (ty == RT_TOKTYPE_CONTROL || ty == RT_TOKTYPE_USER_DEFINED || ty == RT_TOKTYPE_UNKNOWN) {
            memcpy(t->piece + off, s, len);
            m = len;
        } else if (ty == RT_TOKTYPE_UNUSED) {
            m = 0; /* llama.cpp's token_to_piece gives unused tokens nothing */
        } else if (t->model != RT_TOK_BPE) { /* WPM byte tokens: spelt as normal ones */
            m = spm_piece(t->model == RT_TOK_SPM ? ty : RT_TOKTYPE_NORMAL, s, len, t->piece + off);
        } else {
            m = unmap(t, s, len, t->piece + off);
        }
        off += (uint32_t)m;
        if (m > t->max_piece)
            t->max_piece = m;
    }
    t->piece_off[n] = off;
    return 0;
}

const char *rt_tok_piece(const rt_tok *t, int32_t id, bool special, size_t *out_len)
{
    *out_len = 0;
    if (id < 0 || id >= t->n_vocab)
        return "";
    if ((t->type[id] == RT_TOKTYPE_CONTROL || t->type[id] == RT_TOKTYPE_UNKNOWN) && !special)
        return "";
    *out_len = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece + t->piece_off[id];
}

/* llama.cpp's detokenize clean_spaces passes, transcribed to work in place as it does (each
 * pass reads text[i - 1] after earlier output may have been written there); n bytes, returns
 * the new length. */
static size_t clean_spaces(char *text, size_t n)
{
    size_t total1 = n, total = n ? 1 : 0; /* " ?" " !" " ." " ," lose their space */
    for (size_t i = 1; i < total1; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            total--;
        text[total++] = x;
    }
    const size_t total2 = total; /* " ' " -> "'" */
    total = total ? 1 : 0;
    for (size_t i = 1; i < total2; ++i) {
        const char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    const size_t total3 = total; /* " 's" " 'm" " 're" " 've" lose their space */
    total = total ? 1 : 0;
    for (size_t i = 1; i < total3; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            const char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm')
                total--;
            else if (i + 2 < total3 && (x1 == 'r' || x1 == 'v') && text[i + 2] == 'e')
                total--;
        }
        text[total++] = x;
    }
    return total;
}

int rt_tok_decode(const rt_tok *t, const int32_t *ids, size_t n, bool special, char **out_str,
                  size_t *out_len, char *err)
{
    size_t total = 0, len;
    for (size_t i = 0; i < n; i++) {
        rt_tok_piece(t, ids[i], special, &len);
        total += len;
    }
    /* llama.cpp's detokenize: with add_space_prefix, one leading space of the first token's
     * piece goes (the first token counts even when its piece is empty) */
    char *s = malloc(total + 1);
    if (!s) {
        snprintf(err, RT_ERR_LEN, "tokenizer: out of memory decoding %zu tokens", n);
        return -1;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = rt_tok_piece(t, ids[i], special, &len);
        if (i == 0 && t->add_space_prefix && len && p[0] == ' ') {
            p++;
            len--;
        }
        memcpy(s + m, p, len);
        m += len;
    }
    if (t->clean_spaces)
        m = clean_spaces(s, m);
    s[m] = 0;
    *out_str = s;
    if (out_len)
        *out_len = m;
    return 0;
}

/* ---- streaming ---- */

int rt_tok_stream_init(rt_tok_stream *s, const rt_tok *t, bool special)
{
    memset(s, 0, sizeof *s);
    s->tok = t;
    s->special = special;
    s->cap = t->max_piece + 8;
    s->buf = malloc(s->cap);
    return s->buf ? 0 : -1;
}

void rt_tok_stream_free(rt_tok_stream *s)
{
    free(s->buf);
    memset(s, 0, sizeof *s);
}

static size_t utf8_len_of_lead(uint8_t c)
{
    return c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
         : (c & 0xF8) == 0xF0 ? 4 : 1; /* continuation or invalid byte: stands alone */
}

const char *rt_tok_stream_push(rt_tok_stream *s, int32_t id, size_t *out_len)
{
    size_t len;
    const char *p = rt_tok_piece(s->tok, id, s->special, &len);
    size_t n = (size_t)s->n_pend;
    memcpy(s->buf, s->pend, n);
    memcpy(s->buf + n, p, len);
    n += len;
    /* Hold back a trailing lead byte (and its continuation bytes) still short of its length. */
    size_t cut = n;
    for (size_t k = 1; k <= 4 && k <= n; k++) {
        uint8_t c = (uint8_t)s->buf[n - k];
        if ((c & 0xC0) == 0x80)
            continue; /* continuation: keep looking for its lead byte */
        if (utf8_len_of_lead(c) > k)
            cut = n - k;
        break;
    }
    s->n_pend = (int)(n - cut);
    memcpy(s->pend, s->buf + cut, n - cut);
    *out_len = cut;
    return s->buf;
}

const char *rt_tok_stream_flush(rt_tok_stream *s, size_t *out_len)
{
    memcpy(s->buf, s->pend, (size_t)s->n_pend);
    *out_len = (size_t)s->n_pend;
    s->n_pend = 0;
    return s->buf;
}
