"""train.py - quantization-aware training of a small BitNet b1.58 model on the CPU.

    python3 tools/train/train.py --yaml models/bitnet-kjv.yaml --data DIR --out DIR [options]
    python3 tools/train/train.py --yaml ... --out DIR --dump CKPT WEIGHTS.bin   (export only)

Owns: the training loop. Widths (dim, heads, head_dim, ffn_dim, rope base) come from the
model's YAML so the trained network and the generated engine cannot disagree; layers, vocab
size and context are options (the GGUF carries them). DIR/train.bin and DIR/val.bin are the
corpus tokenized by the runtime's tokenizer (tools/tokenize: little-endian uint16 ids).
Each step draws `batch` windows of ctx-1 tokens at random offsets of the training ids from a
seeded generator and puts BOS in front (position 0 is BOS, as at run time and in the
perplexity chunks); the loss is the mean cross entropy of the next token at every position.
AdamW (betas 0.9/0.95, weight decay on the matrices only), linear warm-up then cosine decay to
lr_min over a fixed number of steps. Deterministic under --seed: the data generator's state
is part of the checkpoint, so an interrupted run resumed with --resume continues with the
same batches. Logs train loss every step group and validation loss (fixed non-overlapping
windows of val.bin) every --eval-every steps. OUT/ckpt.pt is rewritten atomically every
--ckpt-every steps; at the end OUT/weights.bin is the export dump (see dump()).
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import BitNet, ternary  # noqa: E402


def config(args):
    with open(args.yaml) as f:
        hp = yaml.safe_load(f)["hparams"]
    return {"dim": hp["dim"], "n_heads": hp["n_heads"], "n_kv_heads": hp["n_kv_heads"],
            "head_dim": hp["head_dim"], "ffn_dim": hp["ffn_dim"],
            "rope_base": float(hp["rope"]["base"]), "n_layers": args.layers,
            "vocab": args.vocab, "ctx": args.ctx, "bos": args.vocab - 3}


def dump(model, path):
    """Export dump read by tools/export_trained.c. Little-endian: magic 'TRNW', u32 version 1,
    u32 tensor count; per tensor: u32 name length, name (the GGUF tensor name), u32 kind
    (0 = float32 values, 1 = ternary: int8 codes then one float32 scale), u32 n_dims,
    u64 ne[n_dims] (GGUF order, ne0 contiguous), then the data."""
    ts = []
    sd = model.state_dict()
    ts.append(("token_embd.weight", 0, sd["token_embd.weight"]))
    ts.append(("output_norm.weight", 0, sd["output_norm.weight"]))
    for i in range(model.cfg["n_layers"]):
        for k, v in sd.items():
            pre = "blocks.%d." % i
            if not k.startswith(pre):
                continue
            name = "blk.%d.%s" % (i, k[len(pre):])
            ts.append((name, 1 if v.dim() == 2 else 0, v))
    with open(path + ".tmp", "wb") as f:
        f.write(b"TRNW" + struct.pack("<II", 1, len(ts)))
        for name, kind, v in ts:
            nb = name.encode()
            ne = list(reversed(v.shape))
            f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<II", kind, len(ne)))
            f.write(struct.pack("<%dQ" % len(ne), *ne))
            if kind == 0:
                f.write(v.float().contiguous().numpy().astype("<f4").tobytes())
            else:
                t, scale = ternary(v.float())
                f.write(t.to(torch.int8).contiguous().numpy().tobytes())
                f.write(struct.pack("<f", float(scale)))
    os.replace(path + ".tmp", path)


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    p = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr_min + 0.5 * (a.lr - a.lr_min) * (1 + math.cos(math.pi * min(1.0, p)))


def batch(ids, gen, a, bos):
    off = torch.randint(0, len(ids) - a.ctx, (a.batch,), generator=gen)
    y = torch.stack([ids[o:o + a.ctx] for o in off.tolist()])
    x = torch.cat([torch.full((a.batch, 1), bos, dtype=torch.long), y[:, :-1]], dim=1)
    return x, y


@torch.no_grad()
def evaluate(model, val, a, bos):
    model.eval()
    n = min(a.eval_windows, len(val) // a.ctx)
    tot = 0.0
    for i in range(0, n, a.batch):
        y = torch.stack([val[j * a.ctx:(j + 1) * a.ctx] for j in range(i, min(n, i + a.batch))])
        x = torch.cat([torch.full((y.shape[0], 1), bos, dtype=torch.long), y[:, :-1]], dim=1)
        tot += F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum").item()
    model.train()
    return tot / (n * a.ctx)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--yaml", required=True)
    p.add_argument("--data")
    p.add_argument("--out", required=True)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--lr-min", type=float, default=3e-4)
    p.add_argument("--wd", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-windows", type=int, default=64)
    p.add_argument("--ckpt-every", type=int, default=25)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--dump", nargs=2, metavar=("CKPT", "WEIGHTS"))
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    cfg = config(a)
    os.makedirs(a.out, exist_ok=True)
    model = BitNet(cfg)
    if a.dump:
        ck = torch.load(a.dump[0])
        model.load_state_dict(ck["model"])
        dump(model, a.dump[1])
        print("dumped step %d of %s to %s" % (ck["step"], a.dump[0], a.dump[1]))
        return
    tr = torch.from_numpy(np.fromfile(os.path.join(a.data, "train.bin"), "<u2").astype(np.int64))
    va = torch.from_numpy(np.fromfile(os.path.join(a.data, "val.bin"), "<u2").astype(np.int64))
    if int(max(tr.max(), va.max())) >= cfg["vocab"] - 3:
        sys.exit("train.py: token id beyond the vocabulary in the data")
    decay = [q for n, q in model.named_parameters() if q.dim() == 2 and "token_embd" not in n]
    other = [q for n, q in model.named_parameters() if not (q.dim() == 2 and "token_embd" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd},
                             {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(a.seed)
    step, ck_path = 0, os.path.join(a.out, "ckpt.pt")
    log = open(os.path.join(a.out, "log.jsonl"), "a")
    if a.resume and os.path.exists(ck_path):
        ck = torch.load(ck_path)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        gen.set_state(ck["gen"])
        step = ck["step"]
        print("resumed at step %d" % step, flush=True)
    n_par = sum(q.numel() for q in model.parameters())
    print("config %s, %d parameters, %d train / %d val tokens, %d tokens per step"
          % (json.dumps(cfg), n_par, len(tr), len(va), a.batch * a.ctx), flush=True)
    t0, acc, n_acc = time.time(), 0.0, 0
    while step < a.steps:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        x, y = batch(tr, gen, a, cfg["bos"])
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        acc, n_acc = acc + loss.item(), n_acc + 1
        rec = None
        if step % a.log_every == 0 or step == a.steps:
            dt = time.time() - t0
            rec = {"step": step, "train_loss": acc / n_acc, "lr": lr_at(step - 1, a),
                   "tok_s": n_acc * a.batch * a.ctx / dt}
            t0, acc, n_acc = time.time(), 0.0, 0
        if step % a.eval_every == 0 or step == a.steps:
            rec = rec or {"step": step}
            rec["val_loss"] = evaluate(model, va, a, cfg["bos"])
            t0 = time.time()
        if rec:
            print(json.dumps(rec), flush=True)
            log.write(json.dumps(rec) + "\n")
            log.flush()
        if step % a.ckpt_every == 0 or step == a.steps:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                        "gen": gen.get_state(), "step": step, "cfg": cfg}, ck_path + ".tmp")
            os.replace(ck_path + ".tmp", ck_path)
    dump(model, os.path.join(a.out, "weights.bin"))
    print("done: %s" % os.path.join(a.out, "weights.bin"), flush=True)


if __name__ == "__main__":
    main()
