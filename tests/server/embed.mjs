// embed.mjs - /v1/embeddings of a running ternion-server through the official `openai` Node
// client (and fetch for llama-server's /tokenize). Run by tests/test_server_embed.c:
//   node embed.mjs BASE_URL
// Prints one JSON line with what it saw; exits non-zero (message on stderr) when a check fails.
// Checks:
//   - the client's default request (base64, decoded by the client) equals encoding_format
//     float exactly, and both are unit vectors (|v| = 1 within 1e-5: a float32 vector of a
//     few thousand elements normalised in double);
//   - a text embedded alone and inside batches of 2, 4 and 8 inputs (at different places,
//     between other texts) gives the same vector bit for bit: the inputs of a request run
//     packed into one prompt step, each masked from the others, and no row's arithmetic
//     depends on the other rows of its step;
//   - different texts give different vectors (cosine < 0.9999), the same text the same;
//   - token ids (from /tokenize with BOS) give the text's vector; usage counts the tokens;
//   - any "model" name is accepted and the answer names the served model;
//   - errors are OpenAI errors (400) the client raises: empty input, an empty string inside an
//     array, a number among strings, 2049 inputs (over OpenAI's 2048), a NUL, bad format.
import OpenAI from 'openai';

import { checks } from './expect.mjs';

const [base] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 600000 });
const served = process.env.TERNION_MODEL;

const { check, expectError } = checks('embed.mjs');

// the same float32 values: JSON numbers are read as doubles, base64 as float32s
const same = (a, b) => a.length === b.length && a.every((x, i) => Object.is(Math.fround(x), Math.fround(b[i])));
const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);

const texts = ['In the beginning God created the heaven and the earth.', 'And the earth was without form, and void.',
  'Call me Ishmael.', 'It was the best of times, it was the worst of times.', 'Happy families are all alike.',
  'The sky above the port was the color of television.', 'Stately, plump Buck Mulligan.', 'a'];

const r0 = await client.embeddings.create({ model: 'text-embedding-3-small', input: texts[0] });
check(r0.object === 'list' && r0.data.length === 1 && r0.data[0].object === 'embedding' && r0.data[0].index === 0,
  `shape ${JSON.stringify(r0).slice(0, 200)}`);
check(!served || r0.model === served, `model ${r0.model}, served ${served}`);
const alone = r0.data[0].embedding;
const dim = alone.length;
check(dim > 0 && alone.every(Number.isFinite), `dimension ${dim}`);
check(r0.usage.prompt_tokens > 0 && r0.usage.total_tokens === r0.usage.prompt_tokens, `usage ${JSON.stringify(r0.usage)}`);
const f = await client.embeddings.create({ model: 'x', input: texts[0], encoding_format: 'float' });
check(same(f.data[0].embedding, alone), 'float and base64 (the client\'s default) differ');
check(Math.abs(Math.sqrt(dot(alone, alone)) - 1) < 1e-5, `norm ${Math.sqrt(dot(alone, alone))}`);

// the same text at different places of batches of 2, 4 and 8
for (const k of [2, 4, 8]) {
  const batch = texts.slice(1, k);
  batch.splice(k >> 1, 0, texts[0]);
  const r = await client.embeddings.create({ model: 'x', input: batch, encoding_format: 'float' });
  check(r.data.length === k, `batch of ${k}: ${r.data.length} answers`);
  r.data.forEach((d, i) => check(d.index === i, `batch of ${k}: index ${d.index} at ${i}`));
  check(same(r.data[k >> 1].embedding, alone), `batch of ${k}: the text at ${k >> 1} differs from it alone`);
}

// different texts differ
const all = await client.embeddings.create({ model: 'x', input: texts, encoding_format: 'float' });
let worst = -1;
for (let i = 0; i < texts.length; i++)
  for (let j = i + 1; j < texts.length; j++) worst = Math.max(worst, dot(all.data[i].embedding, all.data[j].embedding));
check(worst < 0.9999, `two different texts have cosine ${worst}`);

// token ids: the same vector as the text; usage counts them
const tk = await (await fetch(`${base}/tokenize`, { method: 'POST', body: JSON.stringify({ content: texts[0], add_special: true }) })).json();
check(Array.isArray(tk.tokens) && tk.tokens.length === r0.usage.prompt_tokens, `tokenize: ${JSON.stringify(tk).slice(0, 200)}`);
const rt = await client.embeddings.create({ model: 'x', input: [tk.tokens, tk.tokens.slice(0, 3)], encoding_format: 'float' });
check(same(rt.data[0].embedding, alone), 'token ids differ from their text');
check(rt.usage.prompt_tokens === tk.tokens.length + 3, `usage of token inputs ${rt.usage.prompt_tokens}`);

await expectError(client.embeddings.create({ model: 'x', input: '' }), 400, 'empty string');
await expectError(client.embeddings.create({ model: 'x', input: [] }), 400, 'empty array');
await expectError(client.embeddings.create({ model: 'x', input: [texts[0], '', texts[1]] }), 400,
  'an empty string in the array', 'input', "'input[1]' is an empty string");
await expectError(client.embeddings.create({ model: 'x', input: [texts[0], 7] }), 400, 'a number among strings', 'input');
await expectError(client.embeddings.create({ model: 'x', input: Array(2049).fill('a') }), 400,
  'an array over the limit of 2048', 'input', 'at most 2048');
await expectError(client.embeddings.create({ model: 'x', input: 'a\u0000b' }), 400, 'NUL');
await expectError(client.embeddings.create({ model: 'x', input: 'a', encoding_format: 'hex' }), 400, 'bad encoding_format');

console.log(JSON.stringify({ dim, batches: [2, 4, 8], worst_cosine: worst, prompt_tokens: r0.usage.prompt_tokens }));
