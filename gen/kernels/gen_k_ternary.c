/* gen_k_ternary.c - DSL decode of TQ1_0 / TQ2_0 blocks for the bitlinear kernels
 * (gen_k_ternary.h).
 */
#include "gen_k_ternary.h"

#include "gen_k_common.h"

int gen_tq_block_bytes(int f) { return f == GEN_WFMT_TQ1 ? 54 : f == GEN_WFMT_TQ1T ? 52 : 66; }

dsl_expr gen_tq_word(dsl_kernel *k, dsl_expr W, dsl_expr o)
{
    dsl_expr wi = dsl_let(k, "twi", dsl_shr(k, o, U(2)));
    dsl_expr lo = dsl_let(k, "tlo", dsl_load(k, W, wi));
    dsl_expr hi = dsl_load(k, W, dsl_add(k, wi, U(1)));
    dsl_expr mix = dsl_bor(k, dsl_shr(k, lo, U(16)), dsl_shl(k, hi, U(16)));
    return dsl_select(k, dsl_ne(k, dsl_band(k, o, U(2)), U(0)), mix, lo);
}

/* TQ1_0: trit n of the 4 bytes of `word` (ggml: ((uint8_t)(v * 3^n) * 3) >> 8), even bytes
 * and odd bytes each as two 16-bit lanes; the digit lands in bits 8..9 of its lane. */
static dsl_expr tq1_digits(dsl_kernel *k, dsl_expr word, dsl_expr p)
{
    dsl_expr out[2];
    for (int odd = 0; odd < 2; odd++) {
        dsl_expr lanes = dsl_band(k, odd ? dsl_shr(k, word, U(8)) : word, U(0x00FF00FFu));
        dsl_expr v = dsl_band(k, dsl_mul(k, lanes, p), U(0x00FF00FFu)); /* (v * 3^n) mod 256 */
        out[odd] = dsl_band(k, dsl_mul(k, v, U(3)), U(0xFF00FF00u));   /* (... * 3) >> 8, in place */
    }
    return dsl_bor(k, dsl_shr(k, out[0], U(8)), out[1]);
}

dsl_expr gen_tq_codes(dsl_kernel *k, int f, dsl_expr W, dsl_expr boff, dsl_expr l)
{
    if (f == GEN_WFMT_TQ2) { /* byte 32 (l / 128) + l % 32, bits 2 ((l % 128) / 32) */
        dsl_expr byte = dsl_bor(k, dsl_shl(k, dsl_shr(k, l, U(7)), U(5)), dsl_band(k, l, U(31)));
        dsl_expr sh = dsl_shl(k, dsl_band(k, dsl_shr(k, l, U(5)), U(3)), U(1));
        dsl_expr word = gen_tq_word(k, W, dsl_add(k, boff, byte));
        return dsl_band(k, dsl_shr(k, word, sh), U(0x03030303u));
    }
    /* TQ1_0 and TQ1T: l < 160: qs[l % 32] digit l / 32; l < 240: qs[32 + (l - 160) % 16] digit
     * (l - 160) / 16; else qh[0..3] digit (l - 240) / 4 */
    dsl_expr lo = dsl_lt(k, l, U(160)), mid = dsl_lt(k, l, U(240));
    dsl_expr lm = dsl_sub(k, l, U(160)), lh = dsl_sub(k, l, U(240));
    dsl_expr n = dsl_let(k, "tn", dsl_select(k, lo, dsl_shr(k, l, U(5)),
                                             dsl_select(k, mid, dsl_shr(k, lm, U(4)), dsl_shr(k, lh, U(2)))));
    dsl_expr byte = dsl_select(k, lo, dsl_band(k, l, U(31)),
                               dsl_select(k, mid, dsl_add(k, U(32), dsl_band(k, lm, U(15))), U(48)));
    /* 3^n: 1, 3, 9, 27 from the bytes of 0x1b090301, 81 for n = 4 */
    dsl_expr p = dsl_select(k, dsl_eq(k, n, U(4)), U(81),
                            dsl_band(k, dsl_shr(k, U(0x1B090301u), dsl_shl(k, n, U(3))), U(0xFF)));
    dsl_expr o = dsl_add(k, boff, byte); /* TQ1T: a multiple of 4 (52-byte blocks) */
    dsl_expr word = f == GEN_WFMT_TQ1T ? dsl_load(k, W, dsl_shr(k, o, U(2))) : gen_tq_word(k, W, o);
    return tq1_digits(k, word, p);
}

dsl_expr gen_tq_scale(dsl_kernel *k, int f, dsl_expr W, dsl_expr boff)
{
    dsl_expr o = dsl_let(k, "tdo", dsl_add(k, boff, U((uint32_t)gen_tq_block_bytes(f) - 2)));
    dsl_expr wd = dsl_load(k, W, dsl_shr(k, o, U(2)));
    dsl_expr h = dsl_band(k, dsl_shr(k, wd, dsl_shl(k, dsl_band(k, o, U(2)), U(3))), U(0xFFFF));
    return dsl_comp(k, dsl_unpack_half2x16(k, h), 0);
}

dsl_expr gen_tq_signed(dsl_kernel *k, dsl_expr codes)
{
    return dsl_bxor(k, dsl_add(k, codes, U(0x7F7F7F7Fu)), U(0x80808080u));
}
