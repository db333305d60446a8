// tools.mjs - tool calls, logprobs and n > 1 of a running ternion-server, checked with the
// official `openai` Node client and ajv. Run by tests/test_server_e2e.c:
//   node tools.mjs BASE_URL SCENARIO
// Prints one JSON line with what it saw; exits non-zero (message on stderr) when a check
// fails. The model (bitnet-kjv) writes Bible text, not tool calls: what makes its answers
// calls is the grammar the server builds from the tools' schemas. Scenarios:
//   tools     tool_choice required / a named function / auto / none, greedy and sampled,
//             streamed and not: every call names a declared function and its arguments
//             validate against that function's schema (ajv); a round trip (call -> role
//             tool result -> answer) streamed and not; bad tools are 400s naming the problem
//   logprobs  chat logprobs + top_logprobs and completions' integer logprobs, streamed and
//             not: the tokens spell the text, greedy picks the top alternative, the sampled
//             token's logprob agrees with the alternatives, probabilities sum to <= 1
//   n         n = 3 choices, each equal to the same request made alone with seed + index;
//             streamed, the deltas interleave by index and each choice ends
//   parallel IDS  several calls in one answer (parallel_tool_calls, the default): asked for two
//             and with the end tokens IDS banned by logit_bias, an answer (the first of 3 seeds
//             that has them) holds two calls or more, every call valid; streamed with that
//             seed, each call's first delta has its id, type and name, the later ones only
//             pieces of its arguments, which join to the arguments of the answer above;
//             parallel_tool_calls false: exactly one call; tool_choice required / named
//             with max_tokens at the shortest call's length (read from the 400 below it): a
//             call every time
import Ajv from 'ajv';
import OpenAI from 'openai';

import { checks } from './expect.mjs';

const [base, scenario, ...args] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: process.env.TERNION_API_KEY || 'none', maxRetries: 0,
                            timeout: 600000 });
const model = process.env.TERNION_MODEL;
const ajv = new Ajv({ strict: false });

const { check, expectError } = checks(`tools.mjs ${scenario}`);

const weather = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'The current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 24 },
                                                unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
                  required: ['city', 'unit'], additionalProperties: false },
  },
};
const verse = {
  type: 'function',
  function: {
    name: 'find_verse', description: 'Look a verse up',
    parameters: { type: 'object', properties: { book: { type: 'string', enum: ['Genesis', 'Exodus', 'Psalms'] },
                                                chapter: { type: 'integer' }, words: { type: 'array', maxItems: 3,
                                                items: { type: 'string', maxLength: 12 } } },
                  required: ['book', 'chapter'] },
  },
};
const tools = [weather, verse];
const validators = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

// A call: declared name, arguments a JSON string that validates; an id call_...
function checkCall(c, what, only) {
  check(c.type === 'function', `${what}: type ${c.type}`);
  check(/^call_[A-Za-z0-9]{24}$/.test(c.id), `${what}: id ${c.id}`);
  check(validators[c.function.name], `${what}: undeclared function ${c.function.name}`);
  check(!only || c.function.name === only, `${what}: called ${c.function.name}, want ${only}`);
  let args;
  try {
    args = JSON.parse(c.function.arguments);
  } catch (e) {
    check(false, `${what}: arguments are not JSON: ${c.function.arguments}`);
  }
  check(validators[c.function.name](args), `${what}: arguments ${c.function.arguments} do not validate: ` +
        JSON.stringify(validators[c.function.name].errors));
  return args;
}

const ask = [{ role: 'user', content: 'What is the weather in Jerusalem, and where is the first verse?' }];

async function callOnce(extra, what, only) {
  const r = await client.chat.completions.create({ model, messages: ask, tools, max_tokens: 600, ...extra });
  const ch = r.choices[0];
  check(ch.finish_reason === 'tool_calls', `${what}: finish_reason ${ch.finish_reason}`);
  check(ch.message.content === null, `${what}: content ${JSON.stringify(ch.message.content)}`);
  check(ch.message.tool_calls?.length >= 1, `${what}: ${ch.message.tool_calls?.length} calls`);
  for (const c of ch.message.tool_calls) checkCall(c, what, only);
  return ch.message;
}

// A streamed answer put together from its deltas as OpenAI documents them.
async function streamed(params) {
  const s = await client.chat.completions.create({ ...params, stream: true });
  const out = {};
  for await (const c of s) {
    for (const ch of c.choices) {
      const o = (out[ch.index] ??= { content: '', calls: [], finish: null, role: null, lps: [] });
      const d = ch.delta ?? {};
      if (d.role) o.role = d.role;
      if (d.content) o.content += d.content;
      for (const tc of d.tool_calls ?? []) {
        const t = (o.calls[tc.index] ??= { id: '', type: '', function: { name: '', arguments: '' } });
        if (tc.id) t.id = tc.id;
        if (tc.type) t.type = tc.type;
        if (tc.function?.name) t.function.name += tc.function.name;
        if (tc.function?.arguments) t.function.arguments += tc.function.arguments;
      }
      if (ch.logprobs?.content) o.lps.push(...ch.logprobs.content);
      if (ch.finish_reason) {
        check(o.finish === null, `choice ${ch.index}: two finish reasons`);
        o.finish = ch.finish_reason;
      }
    }
  }
  return out;
}

async function roundTrip(stream) {
  const what = stream ? 'streamed round trip' : 'round trip';
  let msg;
  if (stream) {
    const o = (await streamed({ model, messages: ask, tools, tool_choice: 'required', max_tokens: 600,
                                temperature: 0 }))[0];
    check(o.role === 'assistant' && o.finish === 'tool_calls', `${what}: role ${o.role}, finish ${o.finish}`);
    check(o.calls.length >= 1 && o.content === '', `${what}: ${o.calls.length} calls, content "${o.content}"`);
    o.calls.forEach((c) => checkCall(c, what));
    msg = { role: 'assistant', content: null, tool_calls: o.calls };
  } else {
    msg = await callOnce({ tool_choice: 'required', temperature: 0 }, what);
  }
  const id = msg.tool_calls[0].id;
  const results = msg.tool_calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: '{"temperature": 31}' }));
  const messages = [...ask, msg, ...results];
  for (const choice of ['none', 'auto']) {
    const p = { model, messages, tools, tool_choice: choice, max_tokens: 600, temperature: 0 };
    const o = stream ? (await streamed(p))[0] : (await client.chat.completions.create(p)).choices[0];
    const content = stream ? o.content : o.message.content;
    const calls = stream ? o.calls : o.message.tool_calls ?? [];
    const finish = stream ? o.finish : o.finish_reason;
    if (choice === 'none' || finish !== 'tool_calls') { // an answer in words
      check(typeof content === 'string' && content.length > 0, `${what} ${choice}: no answer: ${content}`);
      check(finish === 'stop' || finish === 'length', `${what} ${choice}: finish ${finish}`);
      check(calls.length === 0, `${what} ${choice}: calls with finish ${finish}`);
      check(!content.trimStart().startsWith('{') || choice === 'none', `${what} auto: "{" text is not a call`);
    } else {
      check(calls.length >= 1, `${what} auto: ${calls.length} calls`);
      calls.forEach((c) => checkCall(c, `${what} auto`));
    }
  }
  return id;
}

async function badTools() {
  const m = ask;
  const fn = (f) => [{ type: 'function', function: f }];
  await expectError(client.chat.completions.create({ model, messages: m, tools: { a: 1 } }), 400, 'tools object',
                    'tools');
  await expectError(client.chat.completions.create({ model, messages: m, tools: [] }), 400, 'no tools', 'tools');
  await expectError(client.chat.completions.create({ model, messages: m, tools: fn({ description: 'x' }) }), 400,
                    'missing name', 'tools[0]', 'name');
  await expectError(client.chat.completions.create({ model, messages: m, tools: fn({ name: 'a b' }) }), 400,
                    'bad name', 'tools[0]');
  await expectError(client.chat.completions.create({ model, messages: m, tools: [{ type: 'retrieval' }] }), 400,
                    'bad type', 'tools[0]');
  await expectError(client.chat.completions.create({ model, messages: m, tools: fn({ name: 'f', parameters: {
    type: 'object', properties: { zip: { type: 'string', pattern: '^[0-9]{5}$' } } } }) }), 400, 'bad schema keyword',
                    'tools', 'pattern');
  await expectError(client.chat.completions.create({ model, messages: m, tools, tool_choice: 'sometimes' }), 400,
                    'bad tool_choice', 'tool_choice');
  await expectError(client.chat.completions.create({ model, messages: m, tools, tool_choice: { type: 'function',
    function: { name: 'nope' } } }), 400, 'undeclared tool_choice', 'tool_choice', 'nope');
  await expectError(client.chat.completions.create({ model, messages: m, tool_choice: 'required' }), 400,
                    'tool_choice without tools', 'tool_choice');
  await expectError(client.chat.completions.create({ model, messages: [...m, { role: 'tool', content: 'x' }] }), 400,
                    'tool message without id', 'messages[1].tool_call_id');
  await expectError(client.chat.completions.create({ model, messages: [...m, { role: 'assistant', tool_calls: [{
    id: 'c', type: 'function', function: { name: 'f', arguments: '{not json' } }] }] }), 400, 'bad arguments',
                    'messages[1].tool_calls');
  await expectError(client.chat.completions.create({ model, messages: m, tools, response_format: {
    type: 'json_object' } }), 400, 'tools and response_format', 'tools');
}

async function scenarioTools() {
  const seen = {};
  await callOnce({ tool_choice: 'required', temperature: 0 }, 'required greedy');
  for (const seed of [1, 2, 3]) {
    const m = await callOnce({ tool_choice: 'required', temperature: 0.9, seed }, `required seed ${seed}`);
    seen[m.tool_calls[0].function.name] = true;
  }
  for (const name of ['get_weather', 'find_verse']) {
    await callOnce({ tool_choice: { type: 'function', function: { name } }, temperature: 0.8, seed: 7 },
                   `named ${name}`, name);
  }
  const o = (await streamed({ model, messages: ask, tools, max_tokens: 600, temperature: 0.8, seed: 11,
                              tool_choice: { type: 'function', function: { name: 'find_verse' } } }))[0];
  check(o.finish === 'tool_calls' && o.calls.length >= 1, `streamed named: ${o.finish}, ${o.calls.length} calls`);
  o.calls.forEach((c) => checkCall(c, 'streamed named', 'find_verse'));
  // auto: a call or words (this model writes words); none: words
  for (const tool_choice of ['auto', 'none']) {
    const r = await client.chat.completions.create({ model, messages: ask, tools, tool_choice, max_tokens: 40,
                                                     temperature: 0 });
    const ch = r.choices[0];
    if (ch.finish_reason === 'tool_calls') ch.message.tool_calls.forEach((c) => checkCall(c, tool_choice));
    else check(typeof ch.message.content === 'string' && !ch.message.tool_calls, `${tool_choice}: no content`);
    check(tool_choice === 'auto' || ch.finish_reason !== 'tool_calls', 'none: a call');
  }
  const ids = [await roundTrip(false), await roundTrip(true)];
  await badTools();
  return { ids, functions: Object.keys(seen) };
}

// chat entries: tokens spell the content; alternatives sorted, the sampled one consistent
function checkChatLps(lps, content, k, greedy, what) {
  check(lps.map((e) => e.token).join('') === content, `${what}: tokens do not spell the content`);
  for (const e of lps) {
    check(e.logprob <= 0 && Number.isFinite(e.logprob), `${what}: logprob ${e.logprob}`);
    check(Buffer.from(e.bytes).toString('utf8') === e.token || e.token.includes('\ufffd'), `${what}: bytes`);
    check(e.top_logprobs.length === k, `${what}: ${e.top_logprobs.length} alternatives, want ${k}`);
    let sum = 0;
    for (let i = 0; i < e.top_logprobs.length; i++) {
      const t = e.top_logprobs[i];
      check(i === 0 || t.logprob <= e.top_logprobs[i - 1].logprob, `${what}: alternatives not sorted`);
      sum += Math.exp(t.logprob);
      if (t.token === e.token) check(Math.abs(t.logprob - e.logprob) < 1e-6, `${what}: ${t.logprob} != ${e.logprob}`);
    }
    check(sum <= 1 + 1e-5, `${what}: alternatives' probabilities sum to ${sum}`);
    if (k > 0) {
      check(e.logprob <= e.top_logprobs[0].logprob + 1e-6, `${what}: sampled above the top`);
      const inTop = e.top_logprobs.some((t) => t.token === e.token);
      check(inTop || e.logprob <= e.top_logprobs[k - 1].logprob + 1e-6, `${what}: sampled token missing from the top`);
    }
    if (greedy && k > 0) check(e.top_logprobs[0].token === e.token, `${what}: greedy did not pick the top`);
  }
}

async function scenarioLogprobs() {
  const messages = [{ role: 'user', content: 'In the beginning' }];
  const g = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, logprobs: true,
                                                   top_logprobs: 5 });
  const gc = g.choices[0];
  check(gc.logprobs.content.length === g.usage.completion_tokens || gc.finish_reason === 'stop',
        `${gc.logprobs.content.length} entries for ${g.usage.completion_tokens} tokens`);
  checkChatLps(gc.logprobs.content, gc.message.content, 5, true, 'greedy');
  const st = (await streamed({ model, messages, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 5 }))[0];
  check(st.content === gc.message.content, 'streamed text differs');
  check(JSON.stringify(st.lps) === JSON.stringify(gc.logprobs.content), 'streamed logprobs differ');
  for (const seed of [3, 4]) {
    const s = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 1.2, seed,
                                                     logprobs: true, top_logprobs: 2 });
    checkChatLps(s.choices[0].logprobs.content, s.choices[0].message.content, 2, false, `sampled seed ${seed}`);
  }
  const z = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0, logprobs: true });
  checkChatLps(z.choices[0].logprobs.content, z.choices[0].message.content, 0, true, 'top_logprobs 0');
  const off = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0 });
  check(off.choices[0].logprobs === null, 'logprobs without asking');
  // completions: tokens, token_logprobs, top_logprobs dicts, text_offset
  const prompt = 'And God said';
  const c = await client.completions.create({ model, prompt, max_tokens: 10, temperature: 0, logprobs: 3 });
  const lp = c.choices[0].logprobs;
  check(lp.tokens.join('') === c.choices[0].text, 'completion tokens do not spell the text');
  check(lp.token_logprobs.length === lp.tokens.length && lp.top_logprobs.length === lp.tokens.length, 'lengths');
  let at = 0;
  for (let i = 0; i < lp.tokens.length; i++) {
    check(lp.text_offset[i] === at, `text_offset[${i}] ${lp.text_offset[i]}, want ${at}`);
    at += Buffer.byteLength(lp.tokens[i]);
    const alts = Object.entries(lp.top_logprobs[i]).sort((a, b) => b[1] - a[1]);
    check(alts.length >= 1 && alts.length <= 3, `${alts.length} alternatives`);
    check(alts[0][0] === lp.tokens[i] && Math.abs(alts[0][1] - lp.token_logprobs[i]) < 1e-6, 'greedy not the top');
  }
  const s = await client.completions.create({ model, prompt, max_tokens: 10, temperature: 0, logprobs: 3,
                                              stream: true });
  const toks = [];
  for await (const ch of s) toks.push(...(ch.choices[0]?.logprobs?.tokens ?? []));
  check(JSON.stringify(toks) === JSON.stringify(lp.tokens), 'streamed completion tokens differ');
  return { greedy: gc.message.content, first: gc.logprobs.content[0] };
}

async function scenarioN() {
  const messages = [{ role: 'user', content: 'Blessed are' }];
  const p = { model, messages, max_tokens: 12, temperature: 0.9, seed: 42 };
  const r = await client.chat.completions.create({ ...p, n: 3 });
  check(r.choices.length === 3, `${r.choices.length} choices`);
  const texts = [];
  for (let i = 0; i < 3; i++) {
    const ch = r.choices.find((c) => c.index === i);
    check(ch && typeof ch.message.content === 'string', `no choice ${i}`);
    check(ch.finish_reason === 'stop' || ch.finish_reason === 'length', `choice ${i}: ${ch.finish_reason}`);
    const alone = await client.chat.completions.create({ ...p, seed: 42 + i });
    check(alone.choices[0].message.content === ch.message.content,
          `choice ${i} "${ch.message.content}" != seed ${42 + i} alone "${alone.choices[0].message.content}"`);
    texts.push(ch.message.content);
  }
  check(r.usage.completion_tokens >= 3, `usage ${JSON.stringify(r.usage)}`);
  const s = await streamed({ ...p, n: 3 });
  for (let i = 0; i < 3; i++) {
    check(s[i] && s[i].role === 'assistant' && s[i].finish, `streamed choice ${i} incomplete`);
    check(s[i].content === texts[i], `streamed choice ${i} "${s[i].content}" != "${texts[i]}"`);
  }
  const c = await client.completions.create({ model, prompt: 'The LORD', max_tokens: 6, temperature: 0, n: 2 });
  check(c.choices.length === 2 && c.choices[0].text === c.choices[1].text, 'greedy n=2 completions differ');
  await expectError(client.chat.completions.create({ ...p, n: 0 }), 400, 'n 0', 'n');
  return { texts };
}

// A streamed answer's call deltas as they came: per call, its first delta and its argument pieces.
async function callDeltas(params) {
  const s = await client.chat.completions.create({ ...params, stream: true });
  const calls = [];
  let finish = null;
  for await (const c of s) {
    const ch = c.choices[0];
    if (!ch) continue;
    if (ch.finish_reason) finish = ch.finish_reason;
    for (const tc of ch.delta?.tool_calls ?? []) {
      if (tc.id) {
        check(tc.index === calls.length, `delta for call ${tc.index} after ${calls.length} calls`);
        check(tc.type === 'function' && tc.function?.name && tc.function.arguments === '',
              `first delta of call ${tc.index}: ${JSON.stringify(tc)}`);
        calls.push({ id: tc.id, name: tc.function.name, pieces: [] });
      } else {
        check(tc.index === calls.length - 1 && !tc.type && !tc.function?.name && tc.function?.arguments,
              `argument delta: ${JSON.stringify(tc)} (${calls.length} calls begun)`);
        calls[tc.index].pieces.push(tc.function.arguments);
      }
    }
  }
  return { calls, finish };
}

async function scenarioParallel(ids) {
  const logit_bias = Object.fromEntries(ids.split(',').map((id) => [id, -100]));
  const two = [{ role: 'user', content: 'What is the weather in Jerusalem and in Rome? Call get_weather twice.' }];
  // With the end tokens banned the model writes calls until the budget closes the last one that
  // fits. A call of this model takes ~150 tokens (its JSON white space may take up to ~570 bytes
  // of a get_weather call, so 320 tokens do not hold two in every case): the first of these seeds
  // whose answer holds two calls or more is the one checked; every answer's calls must be valid.
  let p, calls = [];
  for (const seed of [5, 6, 7]) {
    p = { model, messages: two, tools, tool_choice: 'required', max_tokens: 320, temperature: 0.8, seed, logit_bias };
    const r = await client.chat.completions.create(p);
    calls = r.choices[0].message.tool_calls ?? [];
    check(r.choices[0].finish_reason === 'tool_calls' && calls.length >= 1,
          `seed ${seed}: finish ${r.choices[0].finish_reason}, ${calls.length} calls`);
    calls.forEach((c, i) => checkCall(c, `seed ${seed} call ${i}`));
    check(new Set(calls.map((c) => c.id)).size === calls.length, 'call ids repeat');
    if (calls.length >= 2) break;
  }
  check(calls.length >= 2, 'no answer with two calls in 3 seeds');
  const st = await callDeltas(p);
  check(st.finish === 'tool_calls' && st.calls.length === calls.length,
        `streamed: finish ${st.finish}, ${st.calls.length} calls, want ${calls.length}`);
  for (let i = 0; i < calls.length; i++) {
    check(st.calls[i].name === calls[i].function.name, `streamed call ${i}: ${st.calls[i].name}`);
    check(st.calls[i].pieces.join('') === calls[i].function.arguments,
          `streamed call ${i}: arguments ${st.calls[i].pieces.join('')} != ${calls[i].function.arguments}`);
    check(st.calls[i].pieces.length > 1, `streamed call ${i}: its arguments came in one piece`);
  }
  const one = await client.chat.completions.create({ ...p, parallel_tool_calls: false });
  check(one.choices[0].message.tool_calls?.length === 1, `parallel_tool_calls false: ` +
        `${one.choices[0].message.tool_calls?.length} calls`);
  checkCall(one.choices[0].message.tool_calls[0], 'parallel_tool_calls false');
  // required and named: a call whenever the budget holds the shortest one
  const tight = [];
  for (const tool_choice of ['required', { type: 'function', function: { name: 'find_verse' } }]) {
    const q = { model, messages: ask, tools, tool_choice, temperature: 0.9 };
    const e = await expectError(client.chat.completions.create({ ...q, max_tokens: 2 }), 400, 'budget 2', null,
                                'shortest');
    const need = Number(/shortest answer that completes 'tools' is (\d+) tokens/.exec(e.message)?.[1]);
    check(need > 2, `no shortest length in "${e.message}"`);
    for (const seed of [1, 2]) {
      const m = await callOnce({ ...q, max_tokens: need, seed }, `tight ${JSON.stringify(tool_choice)} seed ${seed}`,
                               typeof tool_choice === 'string' ? null : 'find_verse');
      tight.push(m.tool_calls.length);
    }
  }
  return { calls: calls.map((c) => [c.function.name, c.function.arguments]), pieces: st.calls.map((c) => c.pieces.length),
           tight };
}

const run = { tools: scenarioTools, logprobs: scenarioLogprobs, n: scenarioN, parallel: scenarioParallel }[scenario];
check(run, `unknown scenario ${scenario}`);
console.log(JSON.stringify(await run(...args)));
