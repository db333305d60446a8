"""sparse_predictor.py - calibrate and evaluate the sparse FFN's activation predictor.

    python3 tools/sparse_predictor.py MODEL.gguf TRAIN_IDS TEST_IDS [--rank R] [--ctx C]
        [--train-chunks N] [--test-chunks N] [--recall 0.99,0.995,0.999] [--json]
        [--out PRED.bin --out-recall R | --out 'PRED-{recall}.bin']
    python3 tools/sparse_predictor.py MODEL.gguf - TEST_IDS --load PRED.bin [--rank R] [--ctx C] [--test-chunks N]

TRAIN_IDS / TEST_IDS are token ids as tools/tokenize writes them (little-endian uint16, no
BOS): the training split (calibration) and the test split (evaluation) of the model's corpus.

Owns the predictor of the sparse FFN's predictor mode (PowerInfer's design): per layer a
low-rank score s = (x P) Q + b over the FFN's neurons, x the FFN input as the engine holds it
(the ffn_norm output after the int8 absmax quantization, q / s), that guesses which neurons
will have gate > 0 before the gate rows are read, so a predicted-inactive neuron skips its
gate row too. Per neuron a threshold t_j turns the score into a decision (s_j >= t_j); it is
the (1 - recall) quantile of s_j over the calibration tokens where the neuron was active, so
each neuron keeps about `recall` of its activations.

Steps: the model's forward in the reference's integer semantics (tools/train/crosscheck.py)
over chunks of the training split records, per layer, x and the sign of the gate; P [dim, R],
Q [R, ffn] and b [ffn] are fitted to it with a logistic loss (Adam, float32, one thread); the
thresholds come from the same tokens. On the test split (chunks of --ctx tokens, llama.cpp's
perplexity: the second half of each chunk scored) it reports, for dense, exact and each
recall target: the gate rows computed (%), the up/down rows computed (%), the predictor's
recall of the active neurons, the FFN weight bytes per token (I2_S rows at dim/4 bytes, the
predictor's P, Q and b - t as F32, as tools/predgguf.c stores them) and the perplexity with the mispredicted neurons dropped (f = 0:
what the predictor mode computes). Exact mode's perplexity is the dense one (it drops only
exact zeros). Only PyTorch and numpy from Debian; torch.set_num_threads(1).

--load evaluates a stored predictor (an --out file) on the test split alone: dense and
predictor rows, no calibration (what tests/test_sparse_pred.c compares the engine with).

--out writes the predictor of recall target --out-recall (one of --recall), or of every
target when the name holds '{recall}' (replaced by the target, e.g. 0.995), as raw
little-endian float32, per layer: P transposed (rank rows of dim), Q transposed (ffn rows of
rank), then b - t (ffn; -1e30 for a never-active neuron: GGUF weights must be finite), so a
neuron is predicted active iff
(x P) Q + (b - t) >= 0. tools/predgguf.c appends it to the model as the GGUF tensors
blk.N.ffn_pred_p [dim, rank], blk.N.ffn_pred_q [rank, ffn] and blk.N.ffn_pred_b [ffn] (GGUF
ne order: ne0 contiguous), the layout these transposes give.
"""
import argparse
import json
import math
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # Debian's OpenBLAS ignores torch's thread count
import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "train"))
import crosscheck  # noqa: E402


class Model(crosscheck.Model):
    """crosscheck's forward with the FFN opened up: record x / gate, or apply a predictor."""

    @torch.no_grad()
    def run(self, ids, record=None, pred=None, stats=None):
        n = len(ids)
        pos = torch.arange(n)
        x = self.emb[torch.as_tensor(ids)]
        mask = torch.full((n, n), float("-inf")).triu(1)
        rep = self.nh // self.nkv
        for li, L in enumerate(self.layers):
            h = self.rmsnorm(x, L["attn_norm"])
            q = crosscheck.f16(self.rope(self.bitlinear(h, L["attn_q"]).view(n, self.nh, self.hd), pos))
            k = crosscheck.f16(self.rope(self.bitlinear(h, L["attn_k"]).view(n, self.nkv, self.hd), pos))
            v = crosscheck.f16(self.bitlinear(h, L["attn_v"]).view(n, self.nkv, self.hd))
            a = torch.empty((n, self.nh, self.hd))
            for hh in range(self.nh):
                kv = hh // rep
                sc = (q[:, hh, :] @ k[:, kv, :].T) / math.sqrt(self.hd) + mask
                a[:, hh, :] = torch.softmax(sc, dim=-1) @ v[:, kv, :]
            a = self.rmsnorm(a.reshape(n, -1), L["attn_sub_norm"])
            x = x + self.bitlinear(a, L["attn_output"])
            g = self.rmsnorm(x, L["ffn_norm"])
            gate = self.bitlinear(g, L["ffn_gate"])
            active = gate > 0
            if record is not None:
                record[li][0].append(quantized(g))
                record[li][1].append(active)
            keep = active
            if pred is not None:
                p = pred[li]
                predicted = score(p, quantized(g)) >= p["t"]
                keep = active & predicted
                if stats is not None:
                    st = stats[li]
                    st["tokens"] += n
                    st["predicted"] += int(predicted.sum())
                    st["active"] += int(active.sum())
                    st["hit"] += int(keep.sum())
            f = torch.relu(gate) ** 2 * self.bitlinear(g, L["ffn_up"]) * keep
            x = x + self.bitlinear(self.rmsnorm(f, L["ffn_sub_norm"]), L["ffn_down"])
            if pred is None and stats is not None:
                stats[li]["tokens"] += n
                stats[li]["active"] += int(active.sum())
        return (self.rmsnorm(x, self.out_norm) @ self.emb.T).numpy()


def quantized(x):
    """The FFN input as the engine holds it: int8 absmax codes / s."""
    s = 127.0 / x.abs().amax(-1, keepdim=True).clamp(min=1e-5)
    return torch.round(x * s).clamp(-128, 127) / s


def score(p, x):
    return (x @ p["P"]) @ p["Q"] + p["b"]


def chunks(ids, ctx, bos, limit):
    toks = [bos] + list(ids)
    out = []
    for c in range(len(toks) // ctx):
        ch = toks[c * ctx:(c + 1) * ctx]
        ch[0] = bos
        out.append(ch)
    return out[:limit] if limit else out


def fit(X, Y, rank, steps, seed):
    """P, Q, b minimising the logistic loss of (X P) Q + b against Y (0/1)."""
    g = torch.Generator().manual_seed(seed)
    dim, ffn = X.shape[1], Y.shape[1]
    P = (torch.randn(dim, rank, generator=g) / math.sqrt(dim)).requires_grad_()
    Q = (torch.randn(rank, ffn, generator=g) / math.sqrt(rank)).requires_grad_()
    prior = Y.mean(0).clamp(1e-4, 1 - 1e-4)
    b = torch.log(prior / (1 - prior)).clone().requires_grad_()
    opt = torch.optim.Adam([P, Q, b], lr=1e-2)
    n = X.shape[0]
    for _ in range(steps):
        idx = torch.randint(0, n, (min(n, 4096),), generator=g)
        loss = torch.nn.functional.binary_cross_entropy_with_logits((X[idx] @ P) @ Q + b, Y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"P": P.detach(), "Q": Q.detach(), "b": b.detach()}


def thresholds(p, X, Y, recall):
    """Per neuron: the (1 - recall) quantile of its score over the tokens where it was active
    (no positives: never predicted)."""
    s = score(p, X)
    t = torch.full((Y.shape[1],), float("inf"))
    for j in range(Y.shape[1]):
        pos = s[Y[:, j] > 0, j]
        if len(pos):
            t[j] = torch.quantile(pos, 1.0 - recall)
    return t


def perplexity(m, test, pred=None, stats=None):
    first = len(test[0]) // 2
    nll, cnt = 0.0, 0
    for ch in test:
        lp = crosscheck.log_softmax(m.run(ch, pred=pred, stats=stats))
        for j in range(first, len(ch) - 1):
            nll -= lp[j, ch[j + 1]]
            cnt += 1
    return math.exp(nll / cnt)


def write(path, preds):
    """The predictors as raw float32: per layer P^T, Q^T, b - t (the --out layout above)."""
    with open(path, "wb") as f:
        for p in preds:
            for t in (p["P"].T, p["Q"].T, (p["b"] - p["t"]).clamp(min=-1e30)):
                f.write(t.contiguous().numpy().astype("<f4").tobytes())


def load_pred(path, layers, dim, ffn, rank):
    """An --out file back as predictors with t = 0 (its bias is b - t)."""
    v = torch.from_numpy(np.fromfile(path, "<f4").copy())
    per = rank * dim + ffn * rank + ffn
    if v.numel() != per * layers:
        sys.exit("sparse_predictor: %s holds %d floats, rank %d needs %d" % (path, v.numel(), rank, per * layers))
    out = []
    for L in range(layers):
        w = v[L * per:(L + 1) * per]
        P = w[:rank * dim].view(rank, dim).T
        Q = w[rank * dim:rank * dim + ffn * rank].view(ffn, rank).T
        out.append({"P": P, "Q": Q, "b": w[rank * dim + ffn * rank:], "t": torch.zeros(ffn)})
    return out


def evaluate(m, test, preds, ffn):
    """Perplexity, gate rows, up/down rows and recall of predictors preds on test."""
    st = [{"tokens": 0, "predicted": 0, "active": 0, "hit": 0} for _ in m.layers]
    p = perplexity(m, test, pred=preds, stats=st)
    tok = sum(s["tokens"] for s in st)
    return {"ppl": p, "gate_pct": 100 * sum(s["predicted"] for s in st) / tok / ffn,
            "updown_pct": 100 * sum(s["hit"] for s in st) / tok / ffn,
            "recall": sum(s["hit"] for s in st) / max(1, sum(s["active"] for s in st))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("train_ids")
    ap.add_argument("test_ids")
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--train-chunks", type=int, default=64)
    ap.add_argument("--test-chunks", type=int, default=0)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--recall", default="0.99,0.995,0.999")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--out-recall", type=float)
    ap.add_argument("--load")
    a = ap.parse_args()
    recalls = [float(v) for v in a.recall.split(",")]
    if a.out and "{recall}" not in a.out and a.out_recall not in recalls:
        sys.exit("sparse_predictor: --out needs --out-recall, one of the --recall values (%s)" % a.recall)
    torch.set_num_threads(1)
    m = Model(a.model)
    load = lambda p: np.fromfile(p, "<u2").astype(np.int64).tolist()  # noqa: E731
    if a.load:
        test = chunks(load(a.test_ids), a.ctx, m.bos, a.test_chunks)
        ffn = m.layers[0]["ffn_gate"][0].shape[1]
        preds = load_pred(a.load, len(m.layers), m.dim, ffn, a.rank)
        row = dict(evaluate(m, test, preds, ffn), mode="predictor r=%d (%s)" % (a.rank, a.load))
        out = {"model": a.model, "rank": a.rank, "ctx": a.ctx, "test_chunks": len(test), "bos": m.bos,
               "rows": [{"mode": "dense", "ppl": perplexity(m, test)}, row]}
        print(json.dumps(out))
        return
    train = chunks(load(a.train_ids), a.ctx, m.bos, a.train_chunks)
    test = chunks(load(a.test_ids), a.ctx, m.bos, a.test_chunks)
    if not train or not test:
        sys.exit("sparse_predictor: need at least one chunk of %d tokens in each split" % a.ctx)
    rec = [([], []) for _ in m.layers]
    for ch in train:
        m.run(ch, record=rec)
    XY = [(torch.cat(xs), torch.cat(ys).float()) for xs, ys in rec]
    preds = [fit(X, Y, a.rank, a.steps, a.seed + i) for i, (X, Y) in enumerate(XY)]
    dim, ffn = m.dim, XY[0][1].shape[1]
    row = dim / 4  # bytes of one I2_S row of gate / up, or column of down
    pred_bytes = (a.rank * (dim + ffn) + ffn) * 4  # P, Q, b - t as F32 (tools/predgguf.c)
    rows = []
    st = [{"tokens": 0, "active": 0} for _ in m.layers]
    ppl = perplexity(m, test, stats=st)
    act = sum(s["active"] for s in st) / sum(s["tokens"] for s in st) / ffn
    layers = len(m.layers)
    rows.append({"mode": "dense", "gate_pct": 100.0, "updown_pct": 100.0, "recall": 1.0,
                 "ffn_bytes": layers * 3 * ffn * row, "ppl": ppl})
    rows.append({"mode": "exact", "gate_pct": 100.0, "updown_pct": 100 * act, "recall": 1.0,
                 "ffn_bytes": layers * (ffn + 2 * act * ffn) * row, "ppl": ppl,
                 "active_per_layer": [s["active"] / s["tokens"] / ffn for s in st]})
    for r in recalls:
        for i, (X, Y) in enumerate(XY):
            preds[i]["t"] = thresholds(preds[i], X, Y, r)
        if a.out and "{recall}" in a.out:
            write(a.out.replace("{recall}", "%g" % r), preds)
        elif a.out and r == a.out_recall:
            write(a.out, preds)
        st = [{"tokens": 0, "predicted": 0, "active": 0, "hit": 0} for _ in m.layers]
        p = perplexity(m, test, pred=preds, stats=st)
        tok = sum(s["tokens"] for s in st)
        pr = sum(s["predicted"] for s in st) / tok / ffn
        hit = sum(s["hit"] for s in st) / tok / ffn
        recall = sum(s["hit"] for s in st) / max(1, sum(s["active"] for s in st))
        rows.append({"mode": "predictor r=%d, recall target %g" % (a.rank, r), "gate_pct": 100 * pr,
                     "updown_pct": 100 * hit, "recall": recall,
                     "ffn_bytes": layers * (pred_bytes + (pr + 2 * hit) * ffn * row), "ppl": p})
    out = {"model": a.model, "rank": a.rank, "ctx": a.ctx, "train_tokens": len(train) * a.ctx,
           "test_chunks": len(test), "rows": rows}
    if a.json:
        print(json.dumps(out))
        return
    print("| mode | gate rows computed | up/down rows computed | recall | FFN weight bytes/token | perplexity |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %.1f %% | %.1f %% | %.4f | %.0f | %.3f |" % (r["mode"], r["gate_pct"], r["updown_pct"],
                                                             r["recall"], r["ffn_bytes"], r["ppl"]))


if __name__ == "__main__":
    main()
