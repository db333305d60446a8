// embed_oracle.mjs - the embedding oracle through /v1/embeddings and the official `openai` Node
// client. Run by tests/test_server_embed.c on a server of the oracle case's file:
//   node embed_oracle.mjs BASE_URL CASE_DIR
// CASE_DIR: tests/data/oracle-embd/<case> (prompts.txt, one text a line; embeddings.txt, mainline
// llama.cpp's llama-embedding vectors, one a line). Prints one JSON line with what it saw; exits
// non-zero (message on stderr) when a check fails. Checks:
//   - the texts in one request: each vector against the reference's under test_embed.c's rule,
//     cosine >= 0.9999 and max |d| <= 2^-11 (one f16 ulp of a unit vector's largest element);
//   - the same texts as concurrent one-text requests (the server packs waiting requests into
//     one pass): each vector the one-request answer's bit for bit.
import { readFileSync } from 'node:fs';

import OpenAI from 'openai';

import { checks } from './expect.mjs';

const [base, dir] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 600000 });
const { check } = checks('embed_oracle.mjs');

const texts = readFileSync(`${dir}/prompts.txt`, 'utf8').split('\n').filter((l) => l.length > 0);
const want = readFileSync(`${dir}/embeddings.txt`, 'utf8').split('\n').filter((l) => l.length > 0)
  .map((l) => l.trim().split(/\s+/).map(Number));
check(texts.length > 0 && texts.length === want.length, `${texts.length} texts, ${want.length} vectors`);

const together = await client.embeddings.create({ model: 'x', input: texts, encoding_format: 'float' });
check(together.data.length === texts.length, `${together.data.length} answers for ${texts.length} texts`);
let worstCos = 1, worstD = 0;
together.data.forEach((d, i) => {
  const v = d.embedding, w = want[i];
  check(v.length === w.length, `text ${i}: ${v.length} values, the reference ${w.length}`);
  let dot = 0, nv = 0, nw = 0, md = 0;
  for (let k = 0; k < v.length; k++) {
    dot += v[k] * w[k]; nv += v[k] * v[k]; nw += w[k] * w[k];
    md = Math.max(md, Math.abs(v[k] - w[k]));
  }
  const cos = dot / Math.sqrt(nv * nw);
  check(cos >= 0.9999 && md <= 2 ** -11, `text ${i}: cosine ${cos}, max |d| ${md}`);
  worstCos = Math.min(worstCos, cos);
  worstD = Math.max(worstD, md);
});

const same = (a, b) => a.length === b.length && a.every((x, i) => Object.is(x, b[i]));
const alone = await Promise.all(texts.map((t) => client.embeddings.create({ model: 'x', input: t, encoding_format: 'float' })));
alone.forEach((r, i) => check(same(r.data[0].embedding, together.data[i].embedding),
  `text ${i}: its own request's vector differs from the one of the request of all texts`));

console.log(JSON.stringify({ texts: texts.length, one_minus_cosine: 1 - worstCos, max_abs_diff: worstD,
  concurrent_equal: true }));
