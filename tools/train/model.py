"""model.py - the BitNet b1.58 forward pass for quantization-aware training (PyTorch).

Owns: the training-time model. Same computation as models/bitnet-b1.58-2b.yaml and the
reference in the format notes (build_bitnet_158):
  x = embed[tok]; per layer: h = rmsnorm(x)*attn_norm; q,k,v = BitLinear(h); NeoX RoPE on q,k
  (pairs (i, i + head_dim/2), theta = rope_base); causal softmax(q k^T / sqrt(head_dim)) v per
  head, GQA (query head h reads KV head h / (n_heads / n_kv_heads)); a = rmsnorm(a)*attn_sub_norm;
  x += BitLinear(Wo, a); g = rmsnorm(x)*ffn_norm; f = relu(BitLinear(Wgate, g))^2 *
  BitLinear(Wup, g); f = rmsnorm(f)*ffn_sub_norm; x += BitLinear(Wdown, f);
  logits = embed^T (rmsnorm(x)*output_norm)   (tied embedding).
BitLinear: weights ternarized per tensor with absmean (scale = mean|W|, t = clamp(round(W /
scale), -1, 1)), activations per token with absmax to int8 (s = 127 / max(max|x|, 1e-5),
q = clamp(round(x s), -128, 127)); y = (q / s) . (t * scale), which is the reference's
integer dot divided by s times the scale. Both quantizers pass gradients straight through
(STE: autograd functions whose backward is the identity). The latent weights stay float32; the exporter writes the
ternary codes and scales this module computes (ternary()).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-5


def ternary(w):
    """(codes in {-1,0,1} as float, scale) of a latent weight tensor: absmean, one scale."""
    scale = w.abs().mean().clamp(min=1e-5)
    return (w / scale).round().clamp(-1, 1), scale


def act_quant(x):
    s = 127.0 / x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5)
    return (x * s).round().clamp(-128, 127) / s


class _ActSTE(torch.autograd.Function):
    """act_quant forward, identity backward (straight-through)."""

    @staticmethod
    def forward(ctx, x):
        return act_quant(x)

    @staticmethod
    def backward(ctx, g):
        return g


class _WeightSTE(torch.autograd.Function):
    """t * scale forward (absmean ternary), identity backward (straight-through)."""

    @staticmethod
    def forward(ctx, w):
        t, scale = ternary(w)
        return t * scale

    @staticmethod
    def backward(ctx, g):
        return g


class BitLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, n_in))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        return F.linear(_ActSTE.apply(x), _WeightSTE.apply(self.weight))


class RMSNorm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def rope_tables(T, head_dim, base):
    half = head_dim // 2
    inv = base ** (-torch.arange(0, half, dtype=torch.float64) * 2.0 / head_dim)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def rope(x, cos, sin):
    """x [B, T, H, hd]; NeoX: rotate pairs (i, i + hd/2)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, hd = cfg["dim"], cfg["head_dim"]
        self.nh, self.nkv, self.hd = cfg["n_heads"], cfg["n_kv_heads"], hd
        self.attn_norm = RMSNorm(d)
        self.attn_q = BitLinear(d, self.nh * hd)
        self.attn_k = BitLinear(d, self.nkv * hd)
        self.attn_v = BitLinear(d, self.nkv * hd)
        self.attn_sub_norm = RMSNorm(self.nh * hd)
        self.attn_output = BitLinear(self.nh * hd, d)
        self.ffn_norm = RMSNorm(d)
        self.ffn_gate = BitLinear(d, cfg["ffn_dim"])
        self.ffn_up = BitLinear(d, cfg["ffn_dim"])
        self.ffn_sub_norm = RMSNorm(cfg["ffn_dim"])
        self.ffn_down = BitLinear(cfg["ffn_dim"], d)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = rope(self.attn_q(h).view(B, T, self.nh, self.hd), cos, sin)
        k = rope(self.attn_k(h).view(B, T, self.nkv, self.hd), cos, sin)
        v = self.attn_v(h).view(B, T, self.nkv, self.hd)
        rep = self.nh // self.nkv
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, T, hd]
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + mask
        a = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, self.nh * self.hd)
        x = x + self.attn_output(self.attn_sub_norm(a))
        g = self.ffn_norm(x)
        f = F.relu(self.ffn_gate(g)).pow(2) * self.ffn_up(g)
        return x + self.ffn_down(self.ffn_sub_norm(f))


class BitNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.token_embd = nn.Embedding(cfg["vocab"], cfg["dim"])
        nn.init.normal_(self.token_embd.weight, std=0.02)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg["n_layers"])])
        self.output_norm = RMSNorm(cfg["dim"])
        cos, sin = rope_tables(cfg["ctx"], cfg["head_dim"], cfg["rope_base"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tok):
        T = tok.shape[1]
        mask = torch.full((T, T), float("-inf")).triu(1)
        x = self.token_embd(tok)
        for b in self.blocks:
            x = b(x, self.cos[:T], self.sin[:T], mask)
        return F.linear(self.output_norm(x), self.token_embd.weight)
