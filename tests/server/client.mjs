// client.mjs - checks of a running ternion-server with the official `openai` Node client
// (and fetch for the routes the client has no call for). Run by tests/test_server_e2e.c:
//   node client.mjs BASE_URL SCENARIO [ARGS...]
// Prints one JSON line with what it saw on stdout; exits non-zero (message on stderr) when
// a check fails. Scenarios:
//   chat-stream PROMPT N          streamed chat: role first, text chunks, a finish reason, usage
//   completion PROMPT N [SEED T]  non-streamed completion (greedy unless T), its text and usage
//   concurrent K N                K different streamed completions at once, then each alone:
//                                 every concurrent text must equal its text alone
//   staggered K N                 one stream of N tokens, then K - 1 more while it generates: every
//                                 text equals its text alone; prints the mixed steps they took and
//                                 whether the K - 1 ended before the first
//   errors                        any model name served (the answer names the real one), prompt too
//                                 long (400), bad values (400)
//   disconnect                    a stream aborted after its first chunks frees its slot
//   metrics                       /metrics is Prometheus text (every line checked)
//   structured                    response_format json_schema for 10 schemas (streamed and not,
//                                 greedy and sampled): each answer ends with finish_reason stop and
//                                 validates against its schema (ajv); json_object mode; a GBNF
//                                 `grammar`; invalid formats and schemas are 400s naming the field
//   eos IDS                       ignore_eos and min_tokens with the end tokens IDS raised
//   budget SEEDS MAX [measure]    6 unbounded schemas and json_object at temperature 0.8, SEEDS
//                                 seeds, max_tokens MAX: all valid with finish_reason stop; a budget below a schema's
//                                 shortest answer is a 400 naming both numbers
//   llama PROMPT N                llama-server's POST /completion as its clients call it (fetch):
//                                 the prompt as text and as the token ids /tokenize gives, the same
//                                 greedy content; n_predict, tokens_predicted / tokens_evaluated,
//                                 stop_type, timings; streamed as data events joining to the same
//                                 content, the last one final, no [DONE]; cache_prompt true reuses
//                                 the prompt (cache_n), false evaluates it all
import Ajv from 'ajv';
import OpenAI from 'openai';

import { checks } from './expect.mjs';

const [base, scenario, ...args] = process.argv.slice(2);
const apiKey = process.env.TERNION_API_KEY || 'none';
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 600000 });
const model = process.env.TERNION_MODEL;

const { check, expectError } = checks(`client.mjs ${scenario}`);

async function streamCompletion(prompt, n, { onText, ...extra } = {}) {
  const s = await client.completions.create({ model, prompt, max_tokens: n, temperature: 0, stream: true, ...extra });
  let text = '';
  let finish = null;
  for await (const c of s) {
    text += c.choices[0]?.text ?? '';
    if (text && onText) onText();
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  check(finish === 'stop' || finish === 'length', `finish_reason ${finish}`);
  return text;
}

async function metric(name) {
  const r = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${apiKey}` } });
  const m = (await r.text()).match(new RegExp(`^ternion_${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}


// Bounded schemas (every string, array and number has a largest size), so an answer ends.
const schemas = [
  { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' }, good: { type: 'boolean' } },
    required: ['name', 'age', 'good'], additionalProperties: false },
  { type: 'object', properties: { tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, minItems: 1, maxItems: 3 } },
    required: ['tags'], additionalProperties: false },
  { type: 'object', properties: { user: { type: 'object', properties: { id: { type: 'integer' }, email: { type: 'string', maxLength: 10 } },
    required: ['id', 'email'], additionalProperties: false } }, required: ['user'], additionalProperties: false },
  { anyOf: [{ type: 'integer' }, { type: 'string', maxLength: 5 }] },
  { type: ['number', 'null'] },
  { enum: ['red', 'green', 42, null, true] },
  { const: { v: [1, 'two'] } },
  { $defs: { pt: { type: 'object', properties: { x: { type: 'integer' }, y: { type: 'integer' } }, required: ['x', 'y'],
    additionalProperties: false } }, type: 'object', properties: { a: { $ref: '#/$defs/pt' }, b: { $ref: '#/$defs/pt' } },
    required: ['a', 'b'], additionalProperties: false },
  { type: 'array', items: { type: 'object', properties: { k: { type: 'string', minLength: 1, maxLength: 4 } }, required: ['k'],
    additionalProperties: false }, minItems: 1, maxItems: 2 },
  { type: 'object', properties: { a: { type: 'boolean' }, b: { type: 'integer' }, c: { enum: ['x', 'y'] } }, additionalProperties: false },
];

async function chatJson(responseFormat, i, stream) {
  const req = {
    model, messages: [{ role: 'user', content: `Answer in JSON (${i}).` }], max_tokens: 600,
    temperature: i % 2 ? 0.9 : 0, seed: i, response_format: responseFormat,
  };
  if (!stream) {
    const r = await client.chat.completions.create(req);
    return { text: r.choices[0].message.content, finish: r.choices[0].finish_reason };
  }
  let text = '', finish = null;
  for await (const c of await client.chat.completions.create({ ...req, stream: true })) {
    text += c.choices[0]?.delta?.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  return { text, finish };
}

// Unbounded schemas like a client's (strings without maxLength): the model may run a string on
// past max_tokens unless the grammar's budget closes it (issue: cut mid-string, finish length).
const budgetSchemas = [
  { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } }, required: ['name', 'age'],
    additionalProperties: false },
  { type: 'object', properties: { book: { type: 'string' }, verse: { type: 'string' } }, required: ['book', 'verse'],
    additionalProperties: false },
  { type: 'array', items: { type: 'string' }, minItems: 2, maxItems: 4 },
  { type: 'object', properties: { mood: { enum: ['glad', 'sad', 'wroth'] }, reason: { type: 'string' } },
    required: ['mood', 'reason'], additionalProperties: false },
  { type: 'object', properties: { person: { type: 'object', properties: { name: { type: 'string' }, tribe: { type: 'string' } },
    required: ['name', 'tribe'], additionalProperties: false }, count: { type: 'integer' } }, required: ['person', 'count'],
    additionalProperties: false },
  { type: 'object', properties: { items: { type: 'array', items: { type: 'object', properties: { k: { type: 'string' } },
    required: ['k'], additionalProperties: false }, minItems: 1, maxItems: 3 } }, required: ['items'], additionalProperties: false },
];

const scenarios = {
  // budget SEEDS MAX_TOKENS [measure]: each budget schema at temperature 0.8 for SEEDS seeds with
  // a small max_tokens; every answer must end with finish_reason stop and validate (ajv), and a
  // max_tokens below a schema's shortest answer must be a 400 naming both numbers. `measure`:
  // count only (for a server without the budget rule).
  async budget(seeds = '10', maxTokens = '40', mode = 'check') {
    const ajv = new Ajv({ strict: true });
    const measure = mode === 'measure';
    let valid = 0, total = 0, stop = 0;
    const cut = [];
    for (let i = 0; i < budgetSchemas.length; i++)
      for (let seed = 0; seed < Number(seeds); seed++) {
        const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: `Answer in JSON (${i}).` }],
          max_tokens: Number(maxTokens), temperature: 0.8, seed,
          response_format: { type: 'json_schema', json_schema: { name: `b${i}`, strict: true, schema: budgetSchemas[i] } } });
        const text = r.choices[0].message.content, finish = r.choices[0].finish_reason;
        let ok = false;
        try { ok = ajv.validate(budgetSchemas[i], JSON.parse(text)); } catch (e) { ok = false; }
        total++, valid += ok, stop += finish === 'stop';
        if (!ok && cut.length < 3) cut.push({ schema: i, seed, finish, text });
        if (!measure) {
          check(finish === 'stop', `schema ${i} seed ${seed}: finish_reason ${finish}: ${JSON.stringify(text)}`);
          check(ok, `schema ${i} seed ${seed}: ${JSON.stringify(text)} fails: ${ajv.errorsText()}`);
          check(r.usage.completion_tokens < Number(maxTokens), `schema ${i} seed ${seed}: ${r.usage.completion_tokens} tokens`);
        }
      }
    for (let seed = 0; seed < Number(seeds); seed++) { /* json_object: any object, the same promise */
      const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Answer in JSON.' }],
        max_tokens: Number(maxTokens), temperature: 0.8, seed, response_format: { type: 'json_object' } });
      const text = r.choices[0].message.content, finish = r.choices[0].finish_reason;
      let ok = false;
      try { const v = JSON.parse(text); ok = typeof v === 'object' && v !== null && !Array.isArray(v); } catch (e) { ok = false; }
      total++, valid += ok, stop += finish === 'stop';
      if (!ok && cut.length < 3) cut.push({ schema: 'json_object', seed, finish, text });
      if (!measure) check(ok && finish === 'stop', `json_object seed ${seed}: ${finish}: ${JSON.stringify(text)}`);
    }
    if (!measure) {
      const e = await expectError(client.chat.completions.create({ model, messages: [{ role: 'user', content: 'JSON' }],
        max_tokens: 5, response_format: { type: 'json_schema', json_schema: { name: 'b0', schema: budgetSchemas[4] } } }),
      400, 'budget below the shortest answer', 'max_tokens');
      const m = e.message.match(/is (\d+) tokens.*allows 5 /);
      check(m && Number(m[1]) > 5, `message names both numbers: ${e.message}`);
    }
    return { valid, total, stop, max_tokens: Number(maxTokens), cut };
  },
  // eos IDS: with the end tokens IDS (comma-separated) raised by logit_bias the answer is empty
  // (finish stop); with ignore_eos it runs to max_tokens (finish length); with min_tokens 7 it has
  // exactly 7 tokens and ends with stop; both streamed and not. vLLM's min_tokens > max_tokens: 400.
  async eos(ids) {
    const logit_bias = Object.fromEntries(ids.split(',').map((t) => [t, 100]));
    const base = { model, messages: [{ role: 'user', content: 'Who was Moses?' }], max_tokens: 20, temperature: 0.8, seed: 5,
      logit_bias };
    const got = [];
    for (const extra of [{}, { ignore_eos: true }, { min_tokens: 7 }]) {
      const r = await client.chat.completions.create({ ...base, ...extra });
      got.push({ n: r.usage.completion_tokens, finish: r.choices[0].finish_reason });
      let chunks = 0, finish = null;
      for await (const c of await client.chat.completions.create({ ...base, ...extra, stream: true })) {
        chunks += (c.choices[0]?.delta?.content ?? '') !== '';
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      check(finish === r.choices[0].finish_reason, `streamed finish ${finish} vs ${r.choices[0].finish_reason}`);
    }
    check(got[0].n === 0 && got[0].finish === 'stop', `raised end tokens: ${JSON.stringify(got[0])}`);
    check(got[1].n === 20 && got[1].finish === 'length', `ignore_eos: ${JSON.stringify(got[1])}`);
    check(got[2].n === 7 && got[2].finish === 'stop', `min_tokens 7: ${JSON.stringify(got[2])}`);
    await expectError(client.chat.completions.create({ ...base, min_tokens: 30 }), 400, 'min_tokens > max_tokens', 'min_tokens');
    return { got };
  },
  async structured() {
    const ajv = new Ajv({ strict: true });
    const answers = [];
    for (let i = 0; i < schemas.length; i++) {
      const { text, finish } = await chatJson({ type: 'json_schema', json_schema: { name: `s${i}`, strict: true, schema: schemas[i] } },
        i, i % 3 === 2);
      check(finish === 'stop', `schema ${i}: finish_reason ${finish}: ${JSON.stringify(text)}`);
      let v;
      try { v = JSON.parse(text); } catch (e) { check(false, `schema ${i}: not JSON: ${JSON.stringify(text)}`); }
      const ok = ajv.validate(schemas[i], v);
      check(ok, `schema ${i}: ${JSON.stringify(text)} fails: ${ajv.errorsText()}`);
      answers.push(v);
    }
    const o = await chatJson({ type: 'json_object' }, 1, false);
    if (o.finish === 'stop') check(typeof JSON.parse(o.text) === 'object' && !Array.isArray(JSON.parse(o.text)), `json_object ${o.text}`);
    else check(o.text.trimStart().startsWith('{'), `json_object: ${JSON.stringify(o.text)}`);
    const g = await client.completions.create({ model, prompt: 'Is it? ', max_tokens: 8, temperature: 0.9, seed: 3,
      grammar: 'root ::= ("yes" | "no") "."' });
    check(['yes.', 'no.'].includes(g.choices[0].text) && g.choices[0].finish_reason === 'stop', `grammar: ${JSON.stringify(g.choices[0])}`);
    const msgs = [{ role: 'user', content: 'hi' }];
    const e1 = await expectError(client.chat.completions.create({ model, messages: msgs, response_format: { type: 'bogus' } }), 400,
      'bogus response_format');
    check(e1.param === 'response_format', `param ${e1.param}`);
    const e2 = await expectError(client.chat.completions.create({ model, messages: msgs,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a' } } } }), 400, 'pattern');
    check(e2.message.includes("unsupported keyword 'pattern'"), `message ${e2.message}`);
    const e3 = await expectError(client.completions.create({ model, prompt: 'x', grammar: 'root ::= (' }), 400, 'bad grammar');
    check(e3.param === 'grammar' && e3.message.startsWith('grammar:1:'), `grammar error ${JSON.stringify(e3)}`);
    return { schemas: answers.length, answers };
  },
  async 'chat-stream'(prompt, n) {
    const s = await client.chat.completions.create({
      model, messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: prompt }],
      max_tokens: Number(n), temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    let text = '', role = null, finish = null, usage = null, chunks = 0;
    for await (const c of s) {
      chunks++;
      if (c.usage) usage = c.usage;
      const ch = c.choices[0];
      if (!ch) continue;
      if (chunks === 1) role = ch.delta.role;
      text += ch.delta.content ?? '';
      finish = ch.finish_reason ?? finish;
    }
    check(role === 'assistant', `first chunk role ${role}`);
    check(finish === 'stop' || finish === 'length', `finish_reason ${finish}`);
    check(usage && usage.completion_tokens >= 1 && usage.prompt_tokens > 0, `usage ${JSON.stringify(usage)}`);
    check(usage.total_tokens === usage.prompt_tokens + usage.completion_tokens, 'usage total');
    return { text, finish, usage, chunks };
  },
  async completion(prompt, n, seed, temperature) {
    const r = await client.completions.create({
      model, prompt, max_tokens: Number(n), temperature: temperature ? Number(temperature) : 0,
      ...(seed ? { seed: Number(seed) } : {}),
    });
    check(r.object === 'text_completion', `object ${r.object}`);
    check(r.usage.completion_tokens >= 1, 'no tokens');
    return { text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage };
  },
  async concurrent(k, n) {
    const prompts = Array.from({ length: Number(k) }, (_, i) => `Story ${i}: once upon a time${' and'.repeat(i % 3)}`);
    const together = await Promise.all(prompts.map((p) => streamCompletion(p, Number(n))));
    const alone = [];
    for (const p of prompts) alone.push(await streamCompletion(p, Number(n)));
    for (let i = 0; i < prompts.length; i++)
      check(together[i] === alone[i], `stream ${i} differs:\n  together: ${JSON.stringify(together[i])}\n  alone:    ${JSON.stringify(alone[i])}`);
    check(new Set(alone).size > 1, 'every prompt gave the same text: the check could not tell them apart');
    return { streams: together.length, texts: alone };
  },
  async staggered(k, n) {
    // a first stream (ignore_eos, N tokens) starts alone; once its text arrives, K - 1 more
    // start, so their prompts are evaluated while it generates - on the CPU backend in the
    // steps that decode its tokens (mixed_steps_total grows). Every text must equal its text
    // alone.
    const prompts = Array.from({ length: Number(k) }, (_, i) => `Tale ${i}: in the beginning${' and'.repeat(i % 3)}`);
    const before = await metric('mixed_steps_total');
    let go;
    const started = new Promise((r) => { go = r; });
    const t0 = Date.now();
    const lead = streamCompletion(prompts[0], Number(n), { ignore_eos: true, onText: go });
    await started;
    const t1 = Date.now();
    let leadDone = false;
    lead.then(() => { leadDone = true; }, () => {});
    const rest = await Promise.all(prompts.slice(1).map((p) => streamCompletion(p, 12)));
    const restFirst = !leadDone; // the short streams ended while the long one still ran
    const t2 = Date.now();
    const together = [await lead, ...rest];
    const t3 = Date.now();
    const mixed = (await metric('mixed_steps_total')) - before;
    const alone = [await streamCompletion(prompts[0], Number(n), { ignore_eos: true })];
    for (const p of prompts.slice(1)) alone.push(await streamCompletion(p, 12));
    for (let i = 0; i < prompts.length; i++)
      check(together[i] === alone[i], `stream ${i} differs:\n  together: ${JSON.stringify(together[i])}\n  alone:    ${JSON.stringify(alone[i])}`);
    check(new Set(alone.slice(1)).size > 1, 'every prompt gave the same text: the check could not tell them apart');
    return { streams: together.length, mixed_steps: mixed, rest_first: restFirst, first_text_ms: t1 - t0, rest_ms: t2 - t1, lead_ms: t3 - t0,
      texts: alone.slice(1) };
  },
  async errors() {
    const msgs = [{ role: 'user', content: 'hi' }];
    const any = await client.chat.completions.create({ model: 'no-such-model', messages: msgs, max_tokens: 2 });
    check(any.model === model || (!model && any.model), `any model name: answered by '${any.model}'`);
    const e2 = await expectError(client.completions.create({ model, prompt: 'word '.repeat(5000), max_tokens: 4 }), 400, 'long prompt');
    check(e2.code === 'context_length_exceeded', `code ${e2.code}`);
    await expectError(client.chat.completions.create({ model, messages: msgs, temperature: 7 }), 400, 'temperature 7');
    await expectError(client.chat.completions.create({ model, messages: 'hi' }), 400, 'messages as a string');
    await expectError(client.chat.completions.create({ model, messages: msgs, n: 17 }), 400, 'n 17');
    return { ok: true };
  },
  async disconnect() {
    const before = await metric('requests_cancelled_total');
    const ac = new AbortController();
    const s = await client.completions.create({ model, prompt: 'Tell me a long story', max_tokens: 100000, temperature: 0, stream: true },
      { signal: ac.signal });
    let chunks = 0;
    try {
      for await (const c of s) {
        if (c.choices[0]?.text !== undefined && ++chunks === 2) ac.abort();
      }
    } catch (e) {
      check(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', `abort: ${e}`);
    }
    for (let i = 0; i < 200; i++) {
      if ((await metric('requests_cancelled_total')) > before && (await metric('slots_busy')) === 0) {
        const h = await fetch(`${base}/health`);
        check(h.status === 200, `/health ${h.status}`);
        return { cancelled: true };
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    check(false, 'the aborted stream was not cancelled');
  },
  async llama(prompt, n) {
    const post = async (path, body) => {
      const r = await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body),
        headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' } });
      check(r.status === 200, `${path}: status ${r.status}: ${await r.clone().text()}`);
      return r;
    };
    const n_predict = Number(n);
    const ids = (await (await post('/tokenize', { content: prompt, add_special: true })).json()).tokens;
    const req = { n_predict, temperature: 0 };
    const a = await (await post('/completion', { ...req, prompt })).json();
    const b = await (await post('/completion', { ...req, prompt: ids })).json();
    check(typeof a.content === 'string' && a.content === b.content, `text "${a.content}" != ids "${b.content}"`);
    for (const o of [a, b]) {
      check(o.stop === true && o.tokens_evaluated === ids.length, `tokens_evaluated ${o.tokens_evaluated}`);
      check(o.stop_type === 'limit' ? o.tokens_predicted === n_predict
            : o.stop_type === 'eos' && o.tokens_predicted < n_predict, `${o.stop_type}: ${o.tokens_predicted}`);
      const t = o.timings;
      check(t.predicted_n === o.tokens_predicted && t.prompt_n + t.cache_n === ids.length && t.prompt_ms >= 0 &&
            t.predicted_ms >= 0, `timings ${JSON.stringify(t)}`);
    }
    check(b.timings.cache_n === ids.length - 1, `the same prompt again: cache_n ${b.timings.cache_n}`);
    const c = await (await post('/completion', { ...req, prompt, cache_prompt: false })).json();
    check(c.content === a.content && c.timings.cache_n === 0, `cache_prompt false: ${JSON.stringify(c.timings)}`);
    const raw = await (await post('/completion', { ...req, prompt, stream: true })).text();
    check(!raw.includes('[DONE]'), 'a [DONE] on /completion');
    const events = raw.split('\n\n').filter((e) => e).map((e) => {
      check(e.startsWith('data: '), `not a data event: ${e}`);
      return JSON.parse(e.slice(6));
    });
    const last = events[events.length - 1];
    check(events.slice(0, -1).every((e) => e.stop === false) && last.stop === true, 'only the last event is final');
    check(events.map((e) => e.content).join('') === a.content, 'streamed content differs');
    check(last.tokens_predicted === a.tokens_predicted, `streamed tokens_predicted ${last.tokens_predicted}`);
    return { content: a.content, tokens_predicted: a.tokens_predicted, stop_type: a.stop_type, events: events.length };
  },
  async metrics() {
    const r = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${apiKey}` } });
    check(r.status === 200, `status ${r.status}`);
    check((r.headers.get('content-type') || '').startsWith('text/plain'), 'content type');
    const lines = (await r.text()).trimEnd().split('\n');
    const typed = new Set();
    let samples = 0;
    for (const l of lines) {
      let m;
      if ((m = l.match(/^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/))) typed.add(m[1]);
      else if (l.startsWith('# HELP ')) continue;
      else if ((m = l.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? (-?[0-9.eE+-]+|NaN|[+-]Inf)$/))) {
        check(typed.has(m[1]), `sample before its TYPE: ${l}`);
        samples++;
      } else check(false, `not Prometheus text: ${JSON.stringify(l)}`);
    }
    check(samples >= 10, `only ${samples} samples`);
    return { samples };
  },
};

check(scenarios[scenario], `unknown scenario ${scenario}`);
const out = await scenarios[scenario](...args);
console.log(JSON.stringify(out));
