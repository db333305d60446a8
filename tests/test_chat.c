/* test_chat.c - the trained chat format: conversation text vs hand-written strings, and the
 * incremental per-turn token builder vs tokenizing the whole conversation text (Llama 3
 * vocabulary and the bitnet-tiny vocabulary, found as tests/fixture.h says; skipped when absent).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/rt_chat.h"
#include "tok_fixture.h"

static const rt_chat_msg k_conv[] = {
    { RT_ROLE_SYSTEM, "You are a helpful assistant." },
    { RT_ROLE_USER, "Hi! What's 2+2?" },
    { RT_ROLE_ASSISTANT, "2+2 is 4." },
    { RT_ROLE_USER, "And in  French?\nThanks." },
};

static void test_format_text(void **state)
{
    (void)state;
    char err[RT_ERR_LEN], *s;
    assert_int_equal(rt_chat_format(k_conv, 4, true, &s, err), 0);
    assert_string_equal(s, "<|begin_of_text|>System: You are a helpful assistant.<|eot_id|>"
                           "User: Hi! What's 2+2?<|eot_id|>Assistant: 2+2 is 4.<|eot_id|>"
                           "User: And in  French?\nThanks.<|eot_id|>Assistant: ");
    free(s);
    assert_int_equal(rt_chat_format(k_conv + 1, 1, false, &s, err), 0);
    assert_string_equal(s, "<|begin_of_text|>User: Hi! What's 2+2?<|eot_id|>");
    free(s);
    assert_int_equal(rt_chat_format(NULL, 0, true, &s, err), 0);
    assert_string_equal(s, "<|begin_of_text|>Assistant: ");
    free(s);
    assert_string_equal(rt_chat_role_name(RT_ROLE_ASSISTANT), "Assistant");
}

/* Build the k_conv conversation turn by turn as a CLI would (the assistant reply "generated"
 * by encoding its text), check it equals tokenizing the whole text with special parsing. */
static void check_incremental(const char *path)
{
    rt_tok *t = load_or_skip(path);
    if (!t)
        skip();
    char err[RT_ERR_LEN];
    rt_chat c;
    assert_int_equal(rt_chat_init(&c, t, err), 0);
    rt_ids all = { 0 }, turn = { 0 };
    /* turn 1: system + user + generation prompt */
    assert_int_equal(rt_chat_add(&c, RT_ROLE_SYSTEM, k_conv[0].content, &turn, err), 0);
    assert_int_equal(rt_chat_user_turn(&c, k_conv[1].content, &turn, err), 0);
    assert_int_equal(turn.v[0], rt_tok_bos(t));
    assert_true(c.in_reply);
    for (size_t i = 0; i < turn.n; i++)
        rt_ids_push(&all, turn.v[i]);
    size_t first_turn = turn.n;
    /* the reply, as generated (the stop token <|eot_id|> is sampled but not fed) */
    turn.n = 0;
    assert_int_equal(rt_tok_encode(t, k_conv[2].content, strlen(k_conv[2].content), false, &all,
                                   err), 0);
    /* turn 2: only the new tokens: <|eot_id|> closing the reply, user turn, prompt */
    assert_int_equal(rt_chat_user_turn(&c, k_conv[3].content, &turn, err), 0);
    assert_int_equal(turn.v[0], rt_tok_eot(t));
    for (size_t i = 1; i < turn.n; i++)
        assert_int_not_equal(turn.v[i], rt_tok_bos(t));
    for (size_t i = 0; i < turn.n; i++)
        rt_ids_push(&all, turn.v[i]);
    assert_int_equal(c.n_tokens, first_turn + turn.n);

    char *text;
    assert_int_equal(rt_chat_format(k_conv, 4, true, &text, err), 0);
    rt_ids want = { 0 };
    assert_int_equal(rt_tok_encode(t, text, strlen(text), true, &want, err), 0);
    assert_int_equal(all.n, want.n);
    assert_memory_equal(all.v, want.v, want.n * sizeof *want.v);
    /* the generation prompt is "Assistant: " tokenized alone (ends with the space token) */
    rt_ids tail = { 0 };
    assert_int_equal(rt_tok_encode(t, "Assistant: ", 11, false, &tail, err), 0);
    assert_memory_equal(all.v + all.n - tail.n, tail.v, tail.n * sizeof *tail.v);
    assert_int_equal(tail.v[tail.n - 1], rt_tok_find(t, "\xC4\xA0", 2));
    rt_ids_free(&tail);
    char *dec;
    assert_int_equal(rt_tok_decode(t, all.v, all.n, true, &dec, NULL, err), 0);
    assert_string_equal(dec, text);
    free(dec);
    free(text);

    /* eot already fed: nothing to close; content that looks special stays text */
    turn.n = 0;
    assert_int_equal(rt_chat_end_reply(&c, true, &turn, err), 0);
    assert_int_equal(turn.n, 0);
    assert_false(c.in_reply);
    assert_int_equal(rt_chat_add(&c, RT_ROLE_USER, "say <|eot_id|> now", &turn, err), 0);
    assert_int_equal(turn.v[turn.n - 1], rt_tok_eot(t));
    for (size_t i = 0; i + 1 < turn.n; i++)
        assert_int_not_equal(turn.v[i], rt_tok_eot(t));
    assert_int_equal(rt_chat_end_reply(&c, false, &turn, err), 0); /* no reply open: no-op */
    assert_int_equal(turn.v[turn.n - 1], rt_tok_eot(t));

    rt_ids_free(&all);
    rt_ids_free(&turn);
    rt_ids_free(&want);
    rt_tok_free(t);
}

static void test_tokens_llama3(void **state)
{
    (void)state;
    check_incremental("llama3-vocab/llama3-vocab.gguf");
}

static void test_tokens_tiny(void **state)
{
    (void)state;
    check_incremental("bitnet-tiny/model.gguf");
}

/* The opening turn as exact ids with the Llama 3 vocabulary. */
static void test_llama3_ids(void **state)
{
    (void)state;
    rt_tok *t = load_or_skip("llama3-vocab/llama3-vocab.gguf");
    if (!t)
        skip();
    char err[RT_ERR_LEN];
    rt_chat c;
    rt_ids ids = { 0 };
    assert_int_equal(rt_chat_init(&c, t, err), 0);
    assert_int_equal(rt_chat_user_turn(&c, "Hello world", &ids, err), 0);
    /* <|begin_of_text|> User : " Hello" " world" <|eot_id|> Assistant : " " */
    int32_t want[] = { 128000, rt_tok_find(t, "User", 4), rt_tok_find(t, ":", 1),
                       rt_tok_find(t, "\xC4\xA0Hello", 7), 1917, 128009,
                       rt_tok_find(t, "Assistant", 9), rt_tok_find(t, ":", 1), 220 };
    assert_int_equal(ids.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < ids.n; i++)
        assert_true(want[i] >= 0);
    assert_memory_equal(ids.v, want, sizeof want);
    rt_ids_free(&ids);
    rt_tok_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_text),
        cmocka_unit_test(test_tokens_llama3),
        cmocka_unit_test(test_tokens_tiny),
        cmocka_unit_test(test_llama3_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
