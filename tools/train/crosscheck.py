"""crosscheck.py - an independent forward pass over an exported GGUF, in the reference's
integer semantics, for the engine's cross-check.

    python3 tools/train/crosscheck.py logits MODEL.gguf IDS_FILE OUT.bin
    python3 tools/train/crosscheck.py ppl MODEL.gguf IDS_FILE [-c CTX] [--json]

IDS_FILE is text tokenized without BOS by tools/tokenize (little-endian uint16), so both
sides see the same ids. Owns: reading the model with gguf.py (its own GGUF / I2_S decoder)
and computing, with PyTorch (float32 on the CPU), what the format notes' reference computes (build_bitnet_158):
  - embeddings and the tied LM head from the F16 table; RMSNorm with the sum of squares in
    double, y = (x / sqrt(mean + eps)) * w in float32;
  - BitLinear: s = 127 / max(max|x|, 1e-5) in float32, q = clamp(rint(x s), -128, 127)
    (torch.round: half to even), acc = the exact integer dot with the ternary codes (a float32
    matmul: every partial sum is an integer below 2^24, so it is exact), y = (acc / s) * scale;
  - NeoX RoPE (pairs (i, i + head_dim/2), theta_i = pos * base^(-2i/head_dim)); Q, K, V rounded
    to F16 as the engine's F16 KV cache (kv_cache: f16 in the YAML) and the reference do;
    causal softmax attention per head, GQA; relu^2 gated FFN with the sub-norms.
`logits` writes: u32 n_tokens, u32 n_vocab, i32 ids[n] (BOS first), f32 logits[n][n_vocab]
for BOS + the ids. `ppl` is llama.cpp's perplexity: BOS + the ids cut into chunks of CTX
tokens (the first token of each chunk replaced by BOS), the negative log-likelihood of the
second half of each chunk (positions CTX/2 .. CTX-2 predicting the next token), a running
[i]ppl per chunk, and the final exp(mean nll) +/- ppl * sqrt(var(nll) / (count - 1)).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402

F32 = torch.float32


def f16(x):
    return x.half().float()


def T(a):
    return torch.from_numpy(np.ascontiguousarray(a)).float()


class Model:
    def __init__(self, path):
        g = gguf.GGUF(path)
        arch = g.kv["general.architecture"]
        kv = lambda k: g.kv["%s.%s" % (arch, k)]  # noqa: E731
        self.n_layers = kv("block_count")
        self.dim = kv("embedding_length")
        self.nh = kv("attention.head_count")
        self.nkv = kv("attention.head_count_kv")
        self.hd = self.dim // self.nh
        self.eps = kv("attention.layer_norm_rms_epsilon")
        self.base = kv("rope.freq_base")
        self.ctx = kv("context_length")
        self.bos = g.kv["tokenizer.ggml.bos_token_id"]
        self.emb = T(g.tensor("token_embd.weight"))       # [vocab, dim] float32 from F16
        self.out_norm = T(g.tensor("output_norm.weight"))
        self.layers = []
        for i in range(self.n_layers):
            L = {}
            for n in ("attn_norm", "attn_sub_norm", "ffn_norm", "ffn_sub_norm"):
                L[n] = T(g.tensor("blk.%d.%s.weight" % (i, n)))
            for n in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
                t, s = g.tensor("blk.%d.%s.weight" % (i, n))
                L[n] = (T(t.T), torch.tensor(s, dtype=F32))  # [in, out] codes, scale
            self.layers.append(L)

    def rmsnorm(self, x, w):
        ms = (x.double() ** 2).mean(-1, keepdim=True).float()
        return (x * (1.0 / torch.sqrt(ms + torch.tensor(self.eps, dtype=F32)))) * w

    @staticmethod
    def bitlinear(x, w):
        t, scale = w
        s = torch.tensor(127.0, dtype=F32) / x.abs().amax(-1, keepdim=True).clamp(min=1e-5)
        q = torch.round(x * s).clamp(-128, 127)  # torch.round: half to even
        return ((q @ t) / s) * scale

    def rope(self, x, pos):
        half = self.hd // 2
        inv = self.base ** (-torch.arange(half, dtype=torch.float64) * 2.0 / self.hd)
        ang = pos[:, None].double() * inv[None, :]
        c, s = torch.cos(ang).float()[:, None, :], torch.sin(ang).float()[:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    @torch.no_grad()
    def forward(self, ids):
        """logits [n, vocab] of the tokens ids (positions 0..n-1, causal), as numpy."""
        n = len(ids)
        pos = torch.arange(n)
        x = self.emb[torch.as_tensor(ids)]
        mask = torch.full((n, n), float("-inf")).triu(1)
        rep = self.nh // self.nkv
        for L in self.layers:
            h = self.rmsnorm(x, L["attn_norm"])
            q = f16(self.rope(self.bitlinear(h, L["attn_q"]).view(n, self.nh, self.hd), pos))
            k = f16(self.rope(self.bitlinear(h, L["attn_k"]).view(n, self.nkv, self.hd), pos))
            v = f16(self.bitlinear(h, L["attn_v"]).view(n, self.nkv, self.hd))
            a = torch.empty((n, self.nh, self.hd))
            for hh in range(self.nh):
                kv = hh // rep
                sc = (q[:, hh, :] @ k[:, kv, :].T) / math.sqrt(self.hd) + mask
                a[:, hh, :] = torch.softmax(sc, dim=-1) @ v[:, kv, :]
            a = self.rmsnorm(a.reshape(n, -1), L["attn_sub_norm"])
            x = x + self.bitlinear(a, L["attn_output"])
            g = self.rmsnorm(x, L["ffn_norm"])
            f = torch.relu(self.bitlinear(g, L["ffn_gate"])) ** 2 * self.bitlinear(g, L["ffn_up"])
            x = x + self.bitlinear(self.rmsnorm(f, L["ffn_sub_norm"]), L["ffn_down"])
        return (self.rmsnorm(x, self.out_norm) @ self.emb.T).numpy()


def log_softmax(z):
    z = z.astype(np.float64)
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def perplexity(m, ids, ctx, as_json):
    toks = [m.bos] + list(ids)
    n_chunk = len(toks) // ctx
    if n_chunk < 2:
        sys.exit("crosscheck: %d tokens, need at least %d (two chunks of %d)" % (len(toks), 2 * ctx, ctx))
    first = ctx // 2
    nll, nll2, cnt, runs = 0.0, 0.0, 0, []
    for c in range(n_chunk):
        chunk = toks[c * ctx:(c + 1) * ctx]
        chunk[0] = m.bos
        lp = log_softmax(m.forward(chunk))
        for j in range(first, ctx - 1):
            v = -lp[j, chunk[j + 1]]
            nll, nll2, cnt = nll + v, nll2 + v * v, cnt + 1
        runs.append(math.exp(nll / cnt))
        if not as_json:
            print("[%d]%.4f," % (c + 1, runs[-1]), end=" ", flush=True)
    mean = nll / cnt
    var = nll2 / cnt - mean * mean
    ppl = math.exp(mean)
    err = ppl * math.sqrt(var / (cnt - 1)) if var > 0 else 0.0
    if as_json:
        print(json.dumps({"ppl": ppl, "ppl_err": err, "chunks": n_chunk, "ctx": ctx,
                          "tokens_scored": cnt, "running": runs}))
    else:
        print("\nFinal estimate: PPL = %.4f +/- %.5f" % (ppl, err))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["logits", "ppl"])
    p.add_argument("model")
    p.add_argument("ids")
    p.add_argument("out", nargs="?")
    p.add_argument("-c", type=int, default=0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(1)
    m = Model(a.model)
    ids = np.fromfile(a.ids, "<u2").astype(np.int64).tolist()
    if a.mode == "logits":
        toks = [m.bos] + ids
        lg = m.forward(toks).astype("<f4")
        with open(a.out, "wb") as f:
            f.write(struct.pack("<II", len(toks), lg.shape[1]))
            f.write(np.asarray(toks, "<i4").tobytes())
            f.write(lg.tobytes())
        print("crosscheck: wrote %s (%d tokens x %d logits)" % (a.out, len(toks), lg.shape[1]))
    else:
        perplexity(m, ids, a.c or m.ctx, a.json)


if __name__ == "__main__":
    main()
