/* gen_codec_k.c - the kernel side of Q4_K and Q6_K (C side and byte layouts: format/fmt_q4_k.c,
 * format/fmt_q6_k.c): the weights of one unit of a block as vec4s of floats, in ggml's float
 * order ((d * sc) * q - dmin * m; (d * sc) * q).
 *
 * Q4_K: 32 units a block; unit u = 8 j + w is qs word w of 64-element chunk j: its low nibbles
 * are elements 64 j + 4 w .. + 3 (sub-block 2 j), its high nibbles the same 32 later (sub-block
 * 2 j + 1). Blocks are 144 bytes, so every word is aligned.
 * Q6_K: 16 units a block; unit u = 8 h + w covers l = 4 w .. 4 w + 3 of half h: elements
 * 128 h + 32 g + l for g = 0..3, from two ql words, one qh word and four int8 scales. Blocks are
 * 210 bytes: a word at an offset of 2 mod 4 is put together from two aligned loads (every such
 * read stays inside its block).
 */
#include "codec/gen_codec.h"

#define U(v) dsl_u32(k, (v))
#define UX(v) dsl_u32_hex(k, (v))
#define NIBBLES 0x0f0f0f0fu
#define LOW_2 0x03030303u

/* u32 of W (a u32 buffer) at even byte offset o */
static dsl_expr word_at(dsl_kernel *k, dsl_expr W, dsl_expr o)
{
    dsl_expr wi = dsl_let(k, "kwi", dsl_shr(k, o, U(2)));
    dsl_expr lo = dsl_let(k, "klo", dsl_load(k, W, wi));
    dsl_expr hi = dsl_load(k, W, dsl_add(k, wi, U(1)));
    dsl_expr mix = dsl_bor(k, dsl_shr(k, lo, U(16)), dsl_shl(k, hi, U(16)));
    return dsl_select(k, dsl_ne(k, dsl_band(k, o, U(2)), U(0)), mix, lo);
}

/* the 4 bytes of w (each 0..255) as a vec4 */
static dsl_expr bytes_vec4(dsl_kernel *k, dsl_expr w)
{
    dsl_expr c[4];
    for (int b = 0; b < 4; b++)
        c[b] = dsl_cast(k, dsl_unpack8(k, w, U(b), false), DSL_F32);
    return dsl_vec4(k, c[0], c[1], c[2], c[3]);
}

/* byte i (u32, 0..11) of Q4_K's scales, held in words s[0..2] */
static dsl_expr q4k_sbyte(dsl_kernel *k, const dsl_expr s[3], dsl_expr i)
{
    dsl_expr w = dsl_select(k, dsl_lt(k, i, U(4)), s[0], dsl_select(k, dsl_lt(k, i, U(8)), s[1], s[2]));
    return dsl_band(k, dsl_shr(k, w, dsl_shl(k, dsl_band(k, i, U(3)), U(3))), UX(0xff));
}

/* ggml's get_scale_min_k4 for sub-block js (u32, 0..7): scale and min as f32 */
static void q4k_scale_min(dsl_kernel *k, const dsl_expr s[3], dsl_expr js, dsl_expr *sc, dsl_expr *m)
{
    dsl_expr lo = dsl_let(k, "klow", dsl_lt(k, js, U(4)));
    dsl_expr bj = dsl_let(k, "kbj", q4k_sbyte(k, s, js));
    dsl_expr bj4 = dsl_let(k, "kbj4", q4k_sbyte(k, s, dsl_add(k, js, U(4))));
    dsl_expr bjm4 = dsl_let(k, "kbjm4", q4k_sbyte(k, s, dsl_band(k, dsl_sub(k, js, U(4)), U(7))));
    dsl_expr sc_hi = dsl_bor(k, dsl_band(k, bj4, U(15)), dsl_shl(k, dsl_shr(k, bjm4, U(6)), U(4)));
    dsl_expr m_hi = dsl_bor(k, dsl_shr(k, bj4, U(4)), dsl_shl(k, dsl_shr(k, bj, U(6)), U(4)));
    *sc = dsl_cast(k, dsl_select(k, lo, dsl_band(k, bj, U(63)), sc_hi), DSL_F32);
    *m = dsl_cast(k, dsl_select(k, lo, dsl_band(k, bj4, U(63)), m_hi), DSL_F32);
}

static int q4_k_unit(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr u, dsl_expr wv[4], dsl_expr eoff[4])
{
    dsl_expr bw = dsl_let(k, "kbw", dsl_shr(k, boff, U(2))); /* 144-byte blocks: aligned */
    dsl_expr dm = dsl_let(k, "kdm", dsl_unpack_half2x16(k, dsl_load(k, W, bw)));
    dsl_expr s[3];
    for (int i = 0; i < 3; i++)
        s[i] = dsl_let(k, "ks", dsl_load(k, W, dsl_add(k, bw, U(1 + i))));
    dsl_expr j = dsl_let(k, "kj", dsl_shr(k, u, U(3))), w = dsl_let(k, "kw", dsl_band(k, u, U(7)));
    dsl_expr qw = dsl_let(k, "kq", dsl_load(k, W, dsl_add(k, bw, dsl_add(k, U(4), u)))); /* 4 + 8 j + w */
    for (int half = 0; half < 2; half++) {
        dsl_expr sc, m;
        q4k_scale_min(k, s, dsl_add(k, dsl_shl(k, j, U(1)), U(half)), &sc, &m);
        dsl_expr d1 = dsl_let(k, "kd1", dsl_mul(k, dsl_comp(k, dm, 0), sc));
        dsl_expr m1 = dsl_let(k, "km1", dsl_mul(k, dsl_comp(k, dm, 1), m));
        dsl_expr q = dsl_band(k, half ? dsl_shr(k, qw, U(4)) : qw, UX(NIBBLES));
        wv[half] = dsl_let(k, "kwv", dsl_sub(k, dsl_mul(k, bytes_vec4(k, q), d1), m1));
        eoff[half] = dsl_let(k, "keo", dsl_add(k, dsl_shl(k, j, U(6)), dsl_add(k, U(32 * half), dsl_shl(k, w, U(2)))));
    }
    return 2;
}

static int q6_k_unit(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr u, dsl_expr wv[4], dsl_expr eoff[4])
{
    dsl_expr h = dsl_let(k, "kh", dsl_shr(k, u, U(3))), w = dsl_let(k, "kw", dsl_band(k, u, U(7)));
    dsl_expr l4 = dsl_shl(k, w, U(2));
    dsl_expr qo = dsl_let(k, "kqo", dsl_add(k, boff, dsl_add(k, dsl_shl(k, h, U(6)), l4))); /* ql[64 h + l] */
    dsl_expr ql[2] = {dsl_let(k, "kql", word_at(k, W, qo)), dsl_let(k, "kql", word_at(k, W, dsl_add(k, qo, U(32))))};
    dsl_expr qh = dsl_let(k, "kqh", word_at(k, W, dsl_add(k, boff, dsl_add(k, U(128), dsl_add(k, dsl_shl(k, h, U(5)), l4)))));
    /* scales[8 h .. 8 h + 7] as two words; scale of group g: byte (w >> 2) + 2 g */
    dsl_expr so = dsl_let(k, "kso", dsl_add(k, boff, dsl_add(k, U(192), dsl_shl(k, h, U(3)))));
    dsl_expr sw[2] = {dsl_let(k, "ksw", word_at(k, W, so)), dsl_let(k, "ksw", word_at(k, W, dsl_add(k, so, U(4))))};
    dsl_expr d = dsl_let(k, "kd", dsl_comp(k, dsl_unpack_half2x16(k, word_at(k, W, dsl_add(k, boff, U(208)))), 0));
    dsl_expr si = dsl_let(k, "ksi", dsl_shr(k, w, U(2)));
    for (int g = 0; g < 4; g++) {
        dsl_expr sc = dsl_cast(k, dsl_unpack8(k, sw[g >> 1], dsl_add(k, si, U(2 * (g & 1))), true), DSL_F32);
        dsl_expr lo = dsl_band(k, dsl_shr(k, ql[g & 1], U(4 * (g >> 1))), UX(NIBBLES));
        dsl_expr hi = dsl_shl(k, dsl_band(k, dsl_shr(k, qh, U(2 * g)), UX(LOW_2)), U(4));
        dsl_expr q = dsl_sub(k, bytes_vec4(k, dsl_bor(k, lo, hi)), dsl_f32(k, 32.0));
        wv[g] = dsl_let(k, "kwv", dsl_mul(k, q, dsl_mul(k, d, sc)));
        eoff[g] = dsl_let(k, "keo", dsl_add(k, dsl_shl(k, h, U(7)), dsl_add(k, U(32 * g), l4)));
    }
    return 4;
}

const gen_codec gen_codec_q4_k = {.type = FMT_Q4_K, .units = 32, .unit_decode = q4_k_unit};
const gen_codec gen_codec_q6_k = {.type = FMT_Q6_K, .units = 16, .unit_decode = q6_k_unit};
