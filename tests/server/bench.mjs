// bench.mjs - aggregate generation speed of a running ternion-server for 1, 2, 4, 8, ...
// concurrent streams: node bench.mjs BASE_URL MODEL TOKENS STREAMS...
// Each round starts K greedy completions of TOKENS tokens at once (different prompts, so no
// prefix is shared) and reports the generated tokens of all of them over the round's wall
// time (prompt evaluation included; the prompts are a few tokens), and from the server's
// own counters the decode throughput (tokens of decode steps per second of step time) and
// the time per step. One JSON line per round on stdout, a table on stderr.
const [base, model, tokens, ...streams] = process.argv.slice(2);
const n = Number(tokens);

async function metrics() {
  const t = await (await fetch(`${base}/metrics`)).text();
  const get = (k) => Number((t.match(new RegExp(`^ternion_${k} (\\S+)$`, 'm')) || [0, NaN])[1]);
  return { steps: get('decode_steps_total'), secs: get('decode_seconds_total'), gen: get('generated_tokens_total') };
}

// Streamed (server-sent events), so a slow device never hits fetch's 300 s wait for the
// response headers; the usage chunk at the end gives the generated token count.
async function one(i, k) {
  const r = await fetch(`${base}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, prompt: `Round ${k} stream ${i}: the`, max_tokens: n, temperature: 0,
      stream: true, stream_options: { include_usage: true } }),
  });
  const body = await r.text();
  if (!r.ok) throw new Error(body);
  const usage = body.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)))
    .map((c) => c.usage).filter(Boolean).pop();
  if (!usage) throw new Error(`no usage chunk in the stream: ${body.slice(0, 200)}`);
  return usage.completion_tokens;
}

await one(0, 0); // warm-up: pipelines, caches
console.error('streams  generated  wall s  aggregate tok/s  decode tok/s  ms/step');
for (const s of streams.map(Number)) {
  const m0 = await metrics();
  const t0 = performance.now();
  const counts = await Promise.all(Array.from({ length: s }, (_, i) => one(i, s)));
  const wall = (performance.now() - t0) / 1000;
  const m1 = await metrics();
  const gen = counts.reduce((a, b) => a + b, 0);
  const row = { streams: s, generated: gen, wall_s: wall, aggregate_tok_s: gen / wall,
    // decode steps only (the server's counters): generated tokens per second of step time
    decode_tok_s: (m1.gen - m0.gen) / (m1.secs - m0.secs),
    ms_per_step: ((m1.secs - m0.secs) * 1000) / Math.max(1, m1.steps - m0.steps) };
  console.log(JSON.stringify(row));
  console.error(`${String(s).padStart(7)}  ${String(gen).padStart(9)}  ${wall.toFixed(2).padStart(6)}  ${row.aggregate_tok_s.toFixed(2).padStart(15)}  ${row.decode_tok_s.toFixed(2).padStart(12)}  ${row.ms_per_step.toFixed(1).padStart(7)}`);
}
