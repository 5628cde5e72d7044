"""Model building blocks as public code writes them: the compiler's models suite.

Each :class:`Model` is an ``nn.Module`` written the way its public source writes it (nanoGPT's block with
manual attention and with ``scaled_dot_product_attention``, a Llama decoder layer, a ResNet basic block in
training mode, a ViT patch embedding and head, label-smoothed cross entropy over a large vocabulary, a
weight-tied MLP language model, Mixtral's expert loop and gpt-fast's gathered experts, a diffusion UNet's
residual block, and a grab-bag of indexing and scan ops), with its inputs declared by dim name.

:func:`run` is the one way a block is run, forward and backward, in a precision ``mode``:

- ``"float32"``, ``"bfloat16"``, ``"float16"``: parameters and floating inputs in that dtype;
- ``"autocast"``: float32 parameters and inputs under ``torch.autocast`` to bfloat16, as mixed-precision
  training runs them.

Parameters come from a seeded float32 initialisation, so a block is a pure function of its inputs, its
dims and the seed.  Handed float64 inputs, :func:`run` is the float64 truth of the same computation: every
parameter and input is rounded through the mode's dtype first (the values the low-precision run holds),
then computed in float64 without autocast.  The harness subjects (``tritondiff.harness.subjects.models``)
and the benchmark's ``--suite models`` both go through it.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Any, Callable, Mapping, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

MODES = ("float32", "bfloat16", "float16", "autocast")
_LOW = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "autocast": torch.float32}
AUTOCAST_DTYPE = torch.bfloat16


@dataclasses.dataclass(frozen=True)
class Input:
    """One input of a block: its shape by dim name (or int), and for integer ids the dim they index."""

    shape: tuple[str | int, ...]
    ids_below: Optional[str] = None     # int64 ids in [0, dim) -- token ids, class labels
    grad: bool = True                   # a floating input whose gradient the backward returns


@dataclasses.dataclass(frozen=True)
class Model:
    """A block of the suite: how to build it from dims, its inputs, the cotangents its outputs take, the dims
    the harness draws (sized for the CPU interpreter) and the sizes the GPU benchmark times."""

    name: str
    build: Callable[..., nn.Module]               # build(**dims) -> the float32 module
    inputs: Mapping[str, Input]
    outputs: Sequence[tuple[str | int, ...]]      # the shape of each floating output, in order
    dims: Mapping[str, tuple[int, int]]
    bench: Mapping[str, int]
    where: Optional[Callable[..., bool]] = None   # a relation the dims must satisfy (heads dividing width)
    description: str = ""

    def dims_of(self, sizes: Mapping[str, int]) -> dict[str, int]:
        """The dims ``build`` takes, picked out of ``sizes``."""
        return {p: sizes[p] for p in inspect.signature(self.build).parameters}


# ------------------------------------------------------------------------------ nanoGPT (karpathy/nanoGPT)

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int, flash: bool):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd, self.flash = n_head, n_embd, flash
        if not flash:
            self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                                 .view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GPTMLP(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class GPTBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int, flash: bool):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, flash)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = GPTMLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


# ------------------------------------------------------------------------------ Llama (HF transformers' shape)

class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, inter: int, theta: float = 10000.0):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.input_layernorm = LlamaRMSNorm(hidden)
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        self.post_attention_layernorm = LlamaRMSNorm(hidden)
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rotary(self, x, T):
        position_ids = torch.arange(T, device=x.device)[None, :]
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        with torch.autocast(device_type=x.device.type, enabled=False):
            freqs = (inv.float() @ position_ids[:, None, :].float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        return cos.to(x.dtype), sin.to(x.dtype)

    def forward(self, hidden_states):
        B, T, _ = hidden_states.shape
        residual = hidden_states
        h = self.input_layernorm(hidden_states)
        q = self.q_proj(h).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(v, T)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = (q * cos) + (rotate_half(q) * sin)
        k = (k * cos) + (rotate_half(k) * sin)
        rep = self.heads // self.kv_heads
        k = k[:, :, None].expand(B, self.kv_heads, rep, T, self.head_dim).reshape(B, self.heads, T, self.head_dim)
        v = v[:, :, None].expand(B, self.kv_heads, rep, T, self.head_dim).reshape(B, self.heads, T, self.head_dim)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        attn = attn.transpose(1, 2).contiguous().reshape(B, T, -1)
        hidden_states = residual + self.o_proj(attn)
        residual = hidden_states
        h = self.post_attention_layernorm(hidden_states)
        return residual + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


# ------------------------------------------------------------------------------ ResNet (torchvision BasicBlock)

def conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


# ------------------------------------------------------------------------------ ViT (patch embedding and head)

class ViTPatchHead(nn.Module):
    def __init__(self, patch: int, embed: int, classes: int, image_h: int, image_w: int):
        super().__init__()
        self.proj = nn.Conv2d(3, embed, kernel_size=patch, stride=patch)
        patches = (image_h // patch) * (image_w // patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, patches + 1, embed) * 0.02)
        self.norm = nn.LayerNorm(embed, eps=1e-6)
        self.head = nn.Linear(embed, classes)

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        x = x + self.pos_embed
        x = self.norm(x)
        return self.head(x[:, 0])


# ------------------------------------------------------------------------------ losses and a tied LM

class LabelSmoothedCrossEntropy(nn.Module):
    def __init__(self, smoothing: float = 0.1):
        super().__init__()
        self.smoothing = smoothing

    def forward(self, logits, target):
        return F.cross_entropy(logits, target, label_smoothing=self.smoothing)


class TiedMLPLM(nn.Module):
    """Token embedding, one pre-norm MLP residual, a final norm and logits through the embedding's own weight."""

    def __init__(self, vocab: int, n_embd: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.ln = nn.LayerNorm(n_embd)
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.proj = nn.Linear(4 * n_embd, n_embd)
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx, targets):
        x = self.wte(idx)
        x = x + self.proj(F.gelu(self.fc(self.ln(x)), approximate="tanh"))
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# ------------------------------------------------------------------------------ mixture of experts

class MixtralBlockSparseTop2MLP(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.w1 = nn.Linear(hidden, ffn, bias=False)
        self.w2 = nn.Linear(ffn, hidden, bias=False)
        self.w3 = nn.Linear(hidden, ffn, bias=False)

    def forward(self, hidden_states):
        return self.w2(F.silu(self.w1(hidden_states)) * self.w3(hidden_states))


class MixtralSparseMoeBlock(nn.Module):
    """HF Mixtral's routing: softmax router, top-2, renormalised weights, a loop over experts that gathers
    each one's tokens with ``torch.where`` and scatters its output back with ``index_add_``."""

    def __init__(self, hidden: int, ffn: int, experts: int, top_k: int = 2):
        super().__init__()
        self.num_experts, self.top_k = experts, top_k
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList([MixtralBlockSparseTop2MLP(hidden, ffn) for _ in range(experts)])

    def forward(self, hidden_states):
        tokens, hidden_dim = hidden_states.shape
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final = torch.zeros((tokens, hidden_dim), dtype=hidden_states.dtype, device=hidden_states.device)
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        for expert_idx in range(self.num_experts):
            idx, top_x = torch.where(expert_mask[expert_idx])
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current = self.experts[expert_idx](current_state) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, current.to(hidden_states.dtype))
        return final


class GatheredMoE(nn.Module):
    """gpt-fast's MoE feed-forward: the chosen experts' weights gathered per token (``w1[expert_indices]``)
    and contracted with einsum, no data-dependent shapes."""

    def __init__(self, hidden: int, ffn: int, experts: int, top_k: int = 2):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, ffn, hidden) / math.sqrt(hidden))
        self.w2 = nn.Parameter(torch.randn(experts, hidden, ffn) / math.sqrt(ffn))
        self.w3 = nn.Parameter(torch.randn(experts, ffn, hidden) / math.sqrt(hidden))

    def forward(self, x):
        scores = self.gate(x)
        expert_weights = F.softmax(scores, dim=-1)
        expert_weights, expert_indices = torch.topk(expert_weights, self.top_k, dim=-1)
        expert_weights = expert_weights / expert_weights.sum(dim=-1, keepdim=True)
        w1_weights = self.w1[expert_indices]
        w3_weights = self.w3[expert_indices]
        w2_weights = self.w2[expert_indices]
        x1 = F.silu(torch.einsum("ti,taoi -> tao", x, w1_weights))
        x3 = torch.einsum("ti, taoi -> tao", x, w3_weights)
        expert_outs = torch.einsum("tao, taio -> tai", (x1 * x3), w2_weights)
        return torch.einsum("tai,ta -> ti", expert_outs, expert_weights)


# ------------------------------------------------------------------------------ UNet (diffusers ResnetBlock2D)

class ResnetBlock2D(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, temb_channels: int, groups: int, eps: float = 1e-6):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_channels, eps=eps, affine=True)
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.time_emb_proj = nn.Linear(temb_channels, out_channels)
        self.norm2 = nn.GroupNorm(groups, out_channels, eps=eps, affine=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.nonlinearity = nn.SiLU()
        self.conv_shortcut = (nn.Conv2d(in_channels, out_channels, kernel_size=1)
                              if in_channels != out_channels else None)

    def forward(self, input_tensor, temb):
        hidden_states = self.nonlinearity(self.norm1(input_tensor))
        hidden_states = self.conv1(hidden_states)
        temb = self.time_emb_proj(self.nonlinearity(temb))[:, :, None, None]
        hidden_states = hidden_states + temb
        hidden_states = self.nonlinearity(self.norm2(hidden_states))
        hidden_states = self.conv2(hidden_states)
        if self.conv_shortcut is not None:
            input_tensor = self.conv_shortcut(input_tensor)
        return input_tensor + hidden_states


# ------------------------------------------------------------------------------ grab-bag

class GrabBag(nn.Module):
    """Row softmax, logsumexp, cumsum, argmax and top-k beside embedding, index_select and scatter_add over a
    table: the indexing and scan ops model code leans on, in one graph."""

    def __init__(self, vocab: int, width: int, k: int = 2):
        super().__init__()
        self.table = nn.Parameter(torch.randn(vocab, width))
        self.k = k

    def forward(self, x, ids):
        probs = torch.softmax(x, dim=-1)
        lse = torch.logsumexp(x, dim=-1)
        running = torch.cumsum(x, dim=-1)
        best = x.argmax(dim=-1)
        top = torch.topk(x, min(self.k, x.shape[-1]), dim=-1).values
        emb = F.embedding(ids, self.table)
        picked = torch.index_select(self.table, 0, best)
        pooled = torch.zeros(self.table.shape[0], self.table.shape[1], dtype=emb.dtype, device=emb.device)
        pooled = pooled.scatter_add(0, ids[:, None].expand(-1, emb.shape[1]), emb * probs[:, :1])
        return probs, lse, running, top, emb + picked, pooled, best


# ------------------------------------------------------------------------------ the suite

def _gpt(flash: bool) -> Callable[..., nn.Module]:
    def build(C: int, H: int, T: int) -> nn.Module:
        return GPTBlock(C, H, T, flash)
    return build


def _llama(C: int, H: int, KV: int, T: int) -> nn.Module:
    return LlamaDecoderLayer(C, H, KV, C // H, (8 * C) // 3 // 8 * 8 or 8)


SUITE: tuple[Model, ...] = (
    Model("nanogpt_block", _gpt(False), {"x": Input(("B", "T", "C"))}, [("B", "T", "C")],
          dims={"B": (1, 2), "T": (1, 16), "C": (2, 32), "H": (1, 4)}, bench={"B": 8, "T": 128, "C": 256, "H": 4},
          where=lambda C, H: C % H == 0, description="nanoGPT Block, manual causal attention"),
    Model("nanogpt_block_sdpa", _gpt(True), {"x": Input(("B", "T", "C"))}, [("B", "T", "C")],
          dims={"B": (1, 2), "T": (1, 16), "C": (2, 32), "H": (1, 4)}, bench={"B": 8, "T": 128, "C": 256, "H": 4},
          where=lambda C, H: C % H == 0, description="nanoGPT Block, scaled_dot_product_attention"),
    Model("llama_layer", _llama, {"x": Input(("B", "T", "C"))}, [("B", "T", "C")],
          dims={"B": (1, 2), "T": (1, 16), "C": (4, 32), "H": (1, 4), "KV": (1, 2)},
          bench={"B": 8, "T": 128, "C": 256, "H": 4, "KV": 2},
          where=lambda C, H, KV: C % H == 0 and (C // H) % 2 == 0 and H % KV == 0,
          description="Llama decoder layer: RMSNorm, RoPE, grouped-query SDPA, SwiGLU"),
    Model("resnet_basic_block", lambda C, O: BasicBlock(C, O), {"x": Input(("N", "C", "HW", "HW"))},
          [("N", "O", "HW", "HW")], dims={"N": (1, 3), "C": (1, 8), "O": (1, 8), "HW": (1, 8)},
          bench={"N": 32, "C": 64, "O": 64, "HW": 56},
          # Training-mode batch norm over a handful of values per channel makes every gradient a cancellation of
          # O(1) terms to ~1e-4: an error set by where an implementation stores bfloat16, which eager and a compiler
          # choose differently (two values: eager 100% off, this compiler 25x eager's error, Inductor near the truth).
          where=lambda N, HW: N * HW * HW >= 16,
          description="ResNet BasicBlock in training mode (C != O adds the 1x1 downsample path)"),
    Model("vit_patch_head", lambda P, D, K, IH, IW: ViTPatchHead(P, D, K, IH, IW),
          {"x": Input(("N", 3, "IH", "IW"))}, [("N", "K")],
          dims={"N": (1, 3), "P": (2, 4), "D": (1, 32), "K": (1, 10), "IH": (2, 16), "IW": (2, 16)},
          bench={"N": 64, "P": 16, "D": 384, "K": 1000, "IH": 224, "IW": 224},
          where=lambda P, IH, IW: IH >= P and IW >= P, description="ViT patch embedding, class token, norm, head"),
    Model("cross_entropy_smoothed", lambda: LabelSmoothedCrossEntropy(0.1),
          {"logits": Input(("N", "V")), "target": Input(("N",), ids_below="V")}, [()],
          dims={"N": (1, 8), "V": (2, 32768)}, bench={"N": 4096, "V": 32768},
          description="cross entropy with label smoothing 0.1 over a vocabulary up to 32k"),
    Model("tied_mlp_lm", lambda V, C: TiedMLPLM(V, C),
          {"idx": Input(("B", "T"), ids_below="V"), "targets": Input(("B", "T"), ids_below="V")}, [()],
          dims={"B": (1, 2), "T": (1, 16), "V": (2, 512), "C": (1, 32)}, bench={"B": 8, "T": 256, "V": 32768, "C": 512},
          description="embedding, MLP residual, logits through the tied embedding weight, cross entropy"),
    Model("mixtral_moe", lambda C, F, E: MixtralSparseMoeBlock(C, F, E), {"x": Input(("T", "C"))}, [("T", "C")],
          dims={"T": (1, 16), "C": (1, 32), "F": (1, 48), "E": (2, 6)}, bench={"T": 2048, "C": 512, "F": 1024, "E": 8},
          description="Mixtral sparse MoE block: top-2 routing, torch.where / index_add_ expert loop"),
    Model("gathered_moe", lambda C, F, E: GatheredMoE(C, F, E), {"x": Input(("T", "C"))}, [("T", "C")],
          dims={"T": (1, 16), "C": (1, 32), "F": (1, 48), "E": (2, 6)}, bench={"T": 64, "C": 512, "F": 1024, "E": 8},
          description="gpt-fast MoE: experts' weights gathered per token, einsum"),
    Model("unet_resnet_block", lambda C, O, TC, G: ResnetBlock2D(C, O, TC, G),
          {"x": Input(("N", "C", "HW", "HW")), "temb": Input(("N", "TC"))}, [("N", "O", "HW", "HW")],
          dims={"N": (1, 2), "C": (1, 16), "O": (1, 16), "HW": (1, 8), "TC": (1, 16), "G": (1, 4)},
          bench={"N": 8, "C": 128, "O": 128, "HW": 32, "TC": 512, "G": 32},
          where=lambda C, O, G: C % G == 0 and O % G == 0,
          description="diffusers ResnetBlock2D: GroupNorm, SiLU, convolutions, time embedding, shortcut"),
    Model("grab_bag", lambda V, W: GrabBag(V, W),
          {"x": Input(("M", "V")), "ids": Input(("M",), ids_below="V")},
          [("M", "V"), ("M",), ("M", "V"), ("M", "K2"), ("M", "W"), ("V", "W")],
          dims={"M": (1, 16), "V": (2, 64), "W": (1, 16), "K2": (2, 2)}, bench={"M": 4096, "V": 4096, "W": 256, "K2": 2},
          description="softmax, logsumexp, cumsum, argmax, topk, embedding, index_select, scatter_add"),
)

BY_NAME = {m.name: m for m in SUITE}


def concrete(shape: Sequence[str | int], sizes: Mapping[str, int]) -> tuple[int, ...]:
    """A shape by dim name (or int) at ``sizes``."""
    return tuple(sizes[d] if isinstance(d, str) else d for d in shape)


def output_shapes(model: Model, sizes: Mapping[str, int]) -> list[tuple[int, ...]]:
    """The concrete shape of each floating output (the cotangent each takes) at ``sizes``."""
    return [concrete(shape, sizes) for shape in model.outputs]


# ------------------------------------------------------------------------------ running a block

def module(model: Model, sizes: Mapping[str, int], seed: int, mode: str, dtype: torch.dtype,
           device: torch.device | str) -> nn.Module:
    """``model`` at ``sizes``, initialised from ``seed``, parameters rounded through ``mode``'s dtype and held in
    ``dtype`` (the mode's own, or float64 for the truth); training mode."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: choose one of {', '.join(MODES)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        m = model.build(**model.dims_of(sizes))
    m = m.to(device=device, dtype=_LOW[mode]).to(dtype)
    return m.train()


def compute_dtype(mode: str, given: torch.dtype) -> torch.dtype:
    """The dtype a block runs in: float64 when handed float64 inputs (the truth), else the mode's."""
    return torch.float64 if given == torch.float64 else _LOW[mode]


def cast_input(t: torch.Tensor, mode: str) -> torch.Tensor:
    """A floating input rounded through the mode's dtype and held in the compute dtype; ids as they are."""
    if not t.is_floating_point():
        return t
    return t.to(_LOW[mode]).to(compute_dtype(mode, t.dtype))


def forward_backward(mod: nn.Module, mode: str, inputs: Sequence[torch.Tensor], cotangents: Sequence[torch.Tensor],
                     call: Callable[..., Any]) -> tuple:
    """``call(mod, *inputs)`` and the gradients of its floating outputs (against ``cotangents``) with respect to
    the floating inputs and every parameter: (outputs..., input grads..., parameter grads...)."""
    leaves = [t.detach().requires_grad_() if t.is_floating_point() else t for t in inputs]
    params = [p for p in mod.parameters()]
    autocast = mode == "autocast" and not any(t.dtype == torch.float64 for t in leaves if t.is_floating_point())
    device_type = next((t.device.type for t in leaves), "cpu")
    with torch.enable_grad():
        with torch.autocast(device_type=device_type, dtype=AUTOCAST_DTYPE, enabled=autocast):
            out = call(mod, *leaves)
        outs = out if isinstance(out, tuple) else (out,)
        floats = [o for o in outs if o.is_floating_point()]
        wrt = [t for t in leaves if t.is_floating_point()] + params
        grads = torch.autograd.grad(floats, wrt, [c.to(o.dtype) for o, c in zip(floats, cotangents)],
                                    allow_unused=True)
    grads = tuple(torch.zeros_like(w) if g is None else g for w, g in zip(wrt, grads))
    return tuple(o.detach() for o in outs) + grads


def call_module(mod: nn.Module, *inputs: torch.Tensor) -> Any:
    """The plain call, what ``run`` compiles."""
    return mod(*inputs)


def run(model: Model, sizes: Mapping[str, int], mode: str, seed: int, inputs: Sequence[torch.Tensor],
        cotangents: Sequence[torch.Tensor], wrap: Callable[[Callable], Callable] = lambda fn: fn) -> tuple:
    """Forward and backward of ``model`` at ``sizes`` in ``mode``: ``wrap`` turns the plain call into the one run
    (``compile_fresh`` for a backend; identity for eager).  float64 inputs make it the truth."""
    floats = [t for t in (*inputs, *cotangents) if t.is_floating_point()]
    dtype = compute_dtype(mode, floats[0].dtype if floats else torch.float32)
    device = (inputs[0] if inputs else cotangents[0]).device
    mod = module(model, sizes, seed, mode, dtype, device)
    return forward_backward(mod, mode, [cast_input(t, mode) for t in inputs],
                            [cast_input(c, mode) for c in cotangents], wrap(call_module))
