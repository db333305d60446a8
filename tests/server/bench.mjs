// bench.mjs - aggregate generation speed of a running ternion-server for 1, 2, 4, 8, ...
// concurrent streams, optionally beside a peer server (llama.cpp's llama-server):
//   node bench.mjs BASE_URL MODEL TOKENS STREAMS...
// Each round starts K greedy completions of TOKENS tokens at once (ignore_eos: every stream
// generates all of them; different prompts of about 34 tokens, so no prefix is shared) and
// reports the generated tokens of all of them over the round's wall time (prompt evaluation
// included), and from ternion-server's own counters the decode throughput (tokens of decode
// steps per second of step time) and the time per step. BENCH_ROUNDS rounds (default 1) per
// stream count, the median reported. BENCH_PEER=URL[,MODEL]: the peer too, its round right
// after ternion-server's (alternated), non-streamed, and the ratio of the medians.
// One JSON line per stream count on stdout, a table on stderr.
const [base, model, tokens, ...streams] = process.argv.slice(2);
const n = Number(tokens);
const rounds = Number(process.env.BENCH_ROUNDS || 1);
const [peerBase, peerModel] = (process.env.BENCH_PEER || '').split(',');
const TEXT = 'the lighthouse keeper climbed';

async function metrics() {
  const r = await fetch(`${base}/metrics`);
  const t = await r.text();
  const get = (k) => Number((t.match(new RegExp(`^ternion_${k} (\\S+)$`, 'm')) || [0, NaN])[1]);
  return { steps: get('decode_steps_total'), secs: get('decode_seconds_total'), gen: get('generated_tokens_total') };
}

// ternion-server: streamed (server-sent events), so a slow device never hits fetch's 300 s
// wait for the response headers; the usage chunk at the end gives the token counts. The peer:
// one JSON answer with its usage.
async function one(url, name, stream, i, k) {
  const r = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: name, prompt: `Round ${k} stream ${i}: ${TEXT}`, max_tokens: n, temperature: 0,
      ignore_eos: true, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) }),
  });
  const body = await r.text();
  if (!r.ok) throw new Error(body);
  const usage = stream ? body.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)))
    .map((c) => c.usage).filter(Boolean).pop() : peerUsage(JSON.parse(body));
  if (!usage) throw new Error(`no usage in the answer: ${body.slice(0, 200)}`);
  return usage;
}

// an OpenAI usage, or the older llama-server's counts (bitnet.cpp's fork answers /v1/completions so)
const peerUsage = (a) => a.usage || (a.tokens_predicted !== undefined
  ? { completion_tokens: a.tokens_predicted, prompt_tokens: a.tokens_evaluated } : undefined);

// one round of s streams released together: generated tokens, wall seconds, prompt tokens
async function round(url, name, stream, s, k) {
  const t0 = performance.now();
  const us = await Promise.all(Array.from({ length: s }, (_, i) => one(url, name, stream, i, k)));
  const wall = (performance.now() - t0) / 1000;
  const gen = us.reduce((a, u) => a + u.completion_tokens, 0);
  return { gen, wall, agg: gen / wall, prompt: us[0].prompt_tokens };
}

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)];
const f = (v, w, d = 2) => (Number.isFinite(v) ? v.toFixed(d) : '-').padStart(w);

await one(base, model, true, 0, 0); // warm-up: pipelines, caches
if (peerBase) await one(peerBase, peerModel || model, false, 0, 0);
console.error(`streams  generated  prompt  wall s  aggregate tok/s  decode tok/s  ms/step${peerBase ? '  peer tok/s  ratio' : ''}`);
let k = 1;
for (const s of streams.map(Number)) {
  const ours = [], peer = [], dec = [], step = [];
  for (let i = 0; i < rounds; i++, k++) {
    const m0 = await metrics();
    const r = await round(base, model, true, s, k);
    const m1 = await metrics();
    ours.push(r);
    // decode steps only (the server's counters): generated tokens per second of step time
    dec.push((m1.gen - m0.gen) / (m1.secs - m0.secs));
    step.push(((m1.secs - m0.secs) * 1000) / Math.max(1, m1.steps - m0.steps));
    if (peerBase) peer.push(await round(peerBase, peerModel || model, false, s, k));
  }
  const agg = median(ours.map((r) => r.agg)), pagg = peerBase ? median(peer.map((r) => r.agg)) : NaN;
  const row = { streams: s, rounds, generated: ours[0].gen, prompt_tokens: ours[0].prompt, wall_s: median(ours.map((r) => r.wall)),
    aggregate_tok_s: agg, decode_tok_s: median(dec), ms_per_step: median(step),
    ...(peerBase ? { peer_aggregate_tok_s: pagg, ratio: agg / pagg } : {}) };
  console.log(JSON.stringify(row));
  console.error(`${String(s).padStart(7)}  ${String(row.generated).padStart(9)}  ${String(row.prompt_tokens).padStart(6)}  ${f(row.wall_s, 6)}  ` +
    `${f(agg, 15)}  ${f(row.decode_tok_s, 12)}  ${f(row.ms_per_step, 7, 1)}${peerBase ? `  ${f(pagg, 10)}  ${f(agg / pagg, 5)}` : ''}`);
}
