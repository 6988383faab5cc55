"""ALBERT in one file: embeddings, attention, feed-forward, the shared encoder, the pooler and every head.

Shapes: B batch, L sequence length, E embedding width, H hidden width, I FFN width, V vocab, P masked positions
per sequence, C choices.

The two ideas of ALBERT live here:
- factorized embeddings: tokens are embedded at width E and projected to H once (`Encoder.project_in`);
- cross-layer sharing: `Encoder` holds a few attention and FFN sub-layers and a schedule that says which ones
  each of the L layers applies (`layer_schedule`).

LayerNorm sits after each residual sum (post-LN, ALBERT's); `config.layer_norm_position="pre"` moves it into
the residual branch and adds one final LayerNorm (`Encoder.final_norm`), an option for pretraining experiments.

The model runs on one device and knows nothing about DDP, autocast or compile: the training code applies those.
Loading and saving (`from_pretrained`/`save_pretrained`) live in `litebert.pretrained`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from litebert.config import AlbertConfig


@dataclass
class AlbertOutput:
    loss: torch.Tensor | None = None
    sequence_output: torch.Tensor | None = None  # [B, L, H]
    pooled_output: torch.Tensor | None = None  # [B, H]
    mlm_logits: torch.Tensor | None = None  # [B, P, V] at masked positions, or [B, L, V]
    sop_logits: torch.Tensor | None = None  # [B, 2]
    logits: torch.Tensor | None = None  # task logits: [B, num_labels], [B, L, num_labels], [B, C] or [B] (QA v2)
    start_logits: torch.Tensor | None = None  # [B, L]
    end_logits: torch.Tensor | None = None  # [B, L]
    mlm_loss: torch.Tensor | None = None
    sop_loss: torch.Tensor | None = None

    def to_dict(self) -> dict[str, torch.Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """The official "gelu": 0.5 x (1 + tanh(z)), z = sqrt(2/pi) (x + 0.044715 x^3).

    Under torch.compile it is written x * sigmoid(2z), the same function (equal to ~1e-7 in fp32): inductor fuses
    that into one loop with a fast exp, 2.6x faster forward + backward than its tanh on CPU (the FFN activation is
    ~15% of an ALBERT-base step). Eager keeps ATen's single fused kernel, which beats the five-op composite.
    """
    if torch.compiler.is_compiling():
        return x * torch.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))  # 1.59... = 2 sqrt(2/pi)
    return F.gelu(x, approximate="tanh")


def activation(name: str):
    return {
        "gelu_new": gelu_tanh,  # the official "gelu"
        "gelu": F.gelu,
        "relu": F.relu,
        "tanh": torch.tanh,
        "linear": lambda x: x,
    }[name]


# ---------------------------------------------------------------------------------------------- the encoder


class Embeddings(nn.Module):
    """Token + position + segment embeddings at width E, then LayerNorm (ALBERT keeps E small: V*E, not V*H)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        E = config.embedding_size
        self.word_embeddings = nn.Embedding(config.vocab_size, E, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, E)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, E)
        self.norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        L = input_ids.shape[1]
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)  # [B, L, E]
        x = x + self.position_embeddings.weight[:L]  # positions 0..L-1, broadcast over the batch
        return self.dropout(self.norm(x))


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout_p: float,
           impl: str = "auto") -> torch.Tensor:
    """softmax(q k^T / sqrt(d), masked) v for q, k, v [B, heads, L, d] -> [B, heads, L, d].

    `mask` is boolean (True: attend; [B, 1, 1, L] from `attention_mask_for_sdpa`) or an additive float bias
    broadcast to [B, heads, L, L] (`Encoder.attention_bias`).

    "sdpa" is `F.scaled_dot_product_attention` (fused kernels, and Flash/memory-efficient ones on GPU). "math"
    spells it out as two batched matmuls and a float32 softmax. "auto" takes "math" only where it measured
    faster: bf16 training on CPU at L <= 256, where the fused CPU kernel's backward is ~2x slower than the
    matmuls (benchmarks/bench_pretrain.py --levers); everywhere else SDPA.
    """
    if impl == "auto":
        slow_fused_backward = (q.device.type == "cpu" and q.dtype == torch.bfloat16 and q.shape[-2] <= 256
                               and torch.is_grad_enabled() and q.requires_grad)
        impl = "math" if slow_fused_backward else "sdpa"
    if mask is not None and mask.is_floating_point():
        mask = mask.to(q.dtype)  # SDPA wants q's dtype (a no-op for Encoder.attention_bias's, built in it)
    if impl == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    probs = attention_weights(q, k, mask).to(v.dtype)
    return torch.matmul(F.dropout(probs, dropout_p) if dropout_p else probs, v)


def attention_weights(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + mask) in float32, [B, heads, L, L]: `attend`'s weights, spelled out (SDPA does not
    return them; experiments/attention_locality.py reads them)."""
    scores = torch.matmul(q * q.shape[-1] ** -0.5, k.transpose(-1, -2))  # [B, heads, L, L]
    if mask is not None and mask.is_floating_point():
        scores = scores + mask.to(scores.dtype)
    elif mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1, dtype=torch.float32)


class Attention(nn.Module):
    """Self-attention with its residual and LayerNorm. Q, K and V come from one fused [3H, H] matmul.

    post (ALBERT): norm(x + attn(x)); pre (config.layer_norm_position): x + attn(norm(x)). The same `norm`
    parameters serve either, so one state dict loads into both (they then compute different functions)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        H = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.qkv = nn.Linear(H, 3 * H)
        self.out = nn.Linear(H, H)
        self.norm = nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.attn_dropout = config.attention_probs_dropout_prob
        self.impl = "auto"  # "auto" | "sdpa" | "math": see `attend`
        self.pre_norm = config.layer_norm_position == "pre"

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, packed: tuple | None = None) -> torch.Tensor:
        """x [B, L, H]; or, `packed` = (idx [T], B, L), x [T, H]: only the real tokens (`Encoder.unpad`), laid out
        padded for the attention alone, so the three matmuls skip the padding."""
        H = x.shape[-1]
        h = self.norm(x) if self.pre_norm else x  # what the attention reads
        qkv = self.qkv(h)  # [B, L, 3H] or [T, 3H]
        if packed is None:
            B, L = x.shape[:2]
        else:
            idx, B, L = packed
            qkv = qkv.new_zeros(B * L, 3 * H).index_copy_(0, idx, qkv)  # padding rows 0 (masked as keys)
        # [B, L, 3H] -> 3 x [B, heads, L, head_dim]
        q, k, v = qkv.view(B, L, 3, self.num_heads, H // self.num_heads).permute(2, 0, 3, 1, 4)
        p = self.attn_dropout if self.training else 0.0
        y = attend(q, k, v, mask, p, self.impl).transpose(1, 2).reshape(B, L, H)  # [B, L, H]
        if packed is not None:
            y = y.reshape(B * L, H).index_select(0, idx)  # [T, H]
        y = self.dropout(self.out(y))
        # pre: the residual stream x is never normalised here, only what each branch reads
        return x + y if self.pre_norm else self.norm(x + y)


class FeedForward(nn.Module):
    """H -> I -> H with its residual and LayerNorm: post norm(x + ffn(x)), or pre x + ffn(norm(x))."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.act = activation(config.hidden_act)
        self.pre_norm = config.layer_norm_position == "pre"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            return x + self.dropout(self.down(self.act(self.up(self.norm(x)))))  # [B, L, H]
        return self.norm(x + self.dropout(self.down(self.act(self.up(x)))))


def layer_schedule(config: AlbertConfig) -> list[tuple[int, int]]:
    """For each block application, which attention and which FFN sub-layer it uses.

    There are L layers, each applying K blocks in turn (K = inner_group_num). Layer i belongs to group
    g = int(i * G / L), the official rule. A shared sub-layer is indexed by (group, inner block): g*K + k;
    an unshared one by (layer, inner block): i*K + k. So "all" with G groups has G*K attention and G*K FFN
    sub-layers, "none" has L*K of each, and "attention"/"ffn" mix the two.
    """
    L, G, K = config.num_hidden_layers, config.num_hidden_groups, config.inner_group_num
    schedule = []
    for i in range(L):
        g = int(i * G / L)
        for k in range(K):
            shared, own = g * K + k, i * K + k
            attn = shared if config.sharing in ("all", "attention") else own
            ffn = shared if config.sharing in ("all", "ffn") else own
            schedule.append((attn, ffn))
    return schedule


class Encoder(nn.Module):
    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.project_in = nn.Linear(config.embedding_size, config.hidden_size) if config.has_projection else None
        self.schedule = layer_schedule(config)
        n_attn = 1 + max(a for a, _ in self.schedule)
        n_ffn = 1 + max(f for _, f in self.schedule)
        self.attention = nn.ModuleList(Attention(config) for _ in range(n_attn))
        self.ffn = nn.ModuleList(FeedForward(config) for _ in range(n_ffn))
        # config.distance_bias as [heads, 1, 1]; not saved (the config holds it), but moved with the model
        slopes = (torch.tensor(config.distance_bias, dtype=torch.float32)[:, None, None]
                  if config.distance_bias is not None else None)
        self.register_buffer("distance_slopes", slopes, persistent=False)
        # Pre-LN leaves the residual stream unnormalised (its scale grows with every block), so the pooler and heads
        # get one LayerNorm after the last block application. It belongs to the encoder, not to a group: shared
        # blocks run L*K times, and a norm inside them would run that often too; this one runs once, whatever the
        # sharing and grouping. Post-LN has none (the last block already ends in its norm).
        self.final_norm = (nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
                           if config.layer_norm_position == "pre" else None)
        self.gradient_checkpointing = False  # a training option: PreTrainedAlbert.set_gradient_checkpointing
        # Inference (`device.for_inference` sets it): every matmul but the attention's own runs on the real tokens
        # alone, packed [T, H], so a padded batch costs its tokens, not rows x longest row. Padding positions of
        # the output are then 0 (nothing reads them); only without grad, as training keeps the padded layout.
        self.unpad = False

    def block(self, x: torch.Tensor, mask: torch.Tensor | None, attn: int, ffn: int, packed=None) -> torch.Tensor:
        return self.ffn[ffn](self.attention[attn](x, mask, packed))

    def attention_bias(self, mask: torch.Tensor | None, x: torch.Tensor, L: int) -> torch.Tensor | None:
        """What the attention adds to its scores: the padding mask (boolean [B, 1, 1, L], or None), or with
        config.distance_bias, -slope_h x |i - j| with padded keys at -inf: float [B or 1, heads, L, L]. The [CLS]
        query (row 0) is exempt: the token that the pooler, SOP and classification read sees the whole sequence
        unbiased (without that, SOP fell from 69% to 52-60%); the other tokens read [CLS] at its distance like
        any token (exempting that too cost 1.3-2.3 points at [MASK]; docs/recipes.md, "Session 19").
        Built in the dtype the attention's q will have (`x`'s, or autocast's), once per forward rather than
        converted at every layer."""
        if self.distance_slopes is None:
            return mask
        kind = x.device.type
        dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else x.dtype
        pos = torch.arange(L, device=self.distance_slopes.device)
        distance = (pos[:, None] - pos[None, :]).abs()  # [L, L]
        distance[0, :] = 0
        bias = (-self.distance_slopes * distance).to(dtype)  # [heads, L, L]
        if mask is None:
            return bias[None]
        return torch.where(mask, bias, float("-inf"))  # [B, heads, L, L] (every row keeps its real [CLS])

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if self.unpad and mask is not None and not torch.is_grad_enabled() and not bool(mask.all()):
            return self.forward_unpadded(x, mask)  # (a batch without padding gains nothing from packing)
        if self.project_in is not None:
            x = self.project_in(x)  # [B, L, E] -> [B, L, H]
        bias = self.attention_bias(mask, x, x.shape[1])
        for attn, ffn in self.schedule:
            if self.gradient_checkpointing and self.training:
                x = checkpoint(self.block, x, bias, attn, ffn, use_reentrant=False)
            else:
                x = self.block(x, bias, attn, ffn)
        return self.final_norm(x) if self.final_norm is not None else x  # [B, L, H]

    def forward_unpadded(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """`forward` on the real tokens alone (mask [B, 1, 1, L] bool); the padding rows of the result are 0."""
        B, L, _ = x.shape
        idx = mask.reshape(B * L).nonzero().squeeze(1)  # [T]: the real tokens' rows
        x = x.reshape(B * L, -1).index_select(0, idx)  # [T, E]
        if self.project_in is not None:
            x = self.project_in(x)  # [T, H]
        bias = self.attention_bias(mask, x, L)
        for attn, ffn in self.schedule:
            x = self.block(x, bias, attn, ffn, (idx, B, L))
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x.new_zeros(B * L, x.shape[-1]).index_copy_(0, idx, x).view(B, L, -1)  # [B, L, H]


class Pooler(nn.Module):
    """[CLS] -> dense -> tanh: the sentence representation the SOP and classification heads read."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(sequence_output[:, 0]))


def attention_mask_for_sdpa(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """[B, L] of 1 (token) / 0 (padding) -> boolean [B, 1, 1, L] that SDPA broadcasts over heads and queries.

    None means "attend everywhere", which lets SDPA pick its fastest kernel; pass None for unpadded batches.
    """
    if attention_mask is None:
        return None
    return attention_mask[:, None, None, :].to(torch.bool)


PROJECTION_INITS = ("official", "unit")  # PreTrainedAlbert.init_projection


def branch_scale_for_depth(layers: int) -> float:
    """DeepNet's beta for an encoder of `layers` block applications, (8 layers)^-1/4: 0.32 at 12, 0.5 at 2
    (PreTrainedAlbert.init_branches)."""
    return (8 * layers) ** -0.25


class PreTrainedAlbert(nn.Module):
    """Shared by every class: config, official initialisation, and the load/save entry points."""

    config: AlbertConfig

    def init_weights(self) -> None:
        self.apply(self._init_module)

    def _init_module(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            # The official code uses tf.truncated_normal_initializer: cut at two standard deviations.
            nn.init.trunc_normal_(module.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def init_projection(self, how: str = "official") -> None:
        """Draw the E -> H embedding projection again (a fresh model's; PROJECTION_INITS). "official" is what
        init_weights drew (std initializer_range, so the encoder's input starts at std ~0.02 sqrt(E): 0.16 at
        E = 64); "unit" draws std 1 / sqrt(E), so it starts at unit variance per feature, as BERT's embedding
        output does. A small-scale recipe choice: at batch 64 "unit" (with a smaller lr for the projection) let
        attention learn to read the neighbouring token 3-5x sooner (docs/recipes.md, "What the model has not
        learned"). No-op without a projection (E = H)."""
        if how not in PROJECTION_INITS:
            raise ValueError(f"projection init {how!r}: expected one of {PROJECTION_INITS}")
        for module in self.modules():
            if isinstance(module, Encoder) and module.project_in is not None:
                if how == "official":
                    self._init_module(module.project_in)  # the one home of the official draws
                    continue
                std = module.project_in.in_features ** -0.5  # weight [H, E]
                with torch.no_grad():
                    nn.init.trunc_normal_(module.project_in.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)

    def init_branches(self, scale: float) -> None:
        """Multiply a fresh model's residual-branch weights by `scale`: each attention's value rows (of the fused
        qkv) and output projection, and each feed-forward's two matrices: DeepNet's beta (Wang et al. 2022)
        without its alpha, so the architecture stays ALBERT's post-LN block and only the starting point moves.
        Why: at the official draw each application of a block adds mostly the sentence's average (attention is
        near uniform at init), so albert-base's 12 applications shrink the tokens' spread within a sentence from
        0.78 to 0.40 before training starts, and the first updates finish the job: every input gets one hidden state
        (issue 43). With the branches at (8 x layers)^-1/4 (0.32 for 12) the spread stays 0.78 through the depth,
        and training at albert-base depth climbs out of the unigram phase instead of sinking into it
        (docs/recipes.md, "Session 18"). 1 leaves the official draw."""
        if scale == 1.0:
            return
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, Attention):
                    hidden = module.out.in_features
                    module.qkv.weight[2 * hidden:] *= scale  # [3H, H]: rows 2H:3H make the values
                    module.out.weight *= scale
                elif isinstance(module, FeedForward):
                    module.up.weight *= scale
                    module.down.weight *= scale

    @classmethod
    def from_pretrained(cls, path, **config_overrides: Any):
        # here, not at the top: pretrained imports convert/, whose entry point builds these classes
        from litebert.pretrained import load_pretrained

        return load_pretrained(cls, path, **config_overrides)

    def save_pretrained(self, path, format: str = "auto", tokenizer=None) -> None:
        from litebert.pretrained import save_pretrained

        save_pretrained(self, path, format=format, tokenizer=tokenizer)

    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        """Recompute each layer's activations in the backward pass instead of keeping them (less memory, ~30%
        slower; the same gradients). A training option (--gradient-checkpointing), not part of the config."""
        for module in self.modules():
            if isinstance(module, Encoder):
                module.gradient_checkpointing = enabled

    def num_parameters(self, exclude_heads: bool = False) -> int:
        module = self.albert if exclude_heads and hasattr(self, "albert") else self
        return sum(p.numel() for p in module.parameters())

    def encoder_parameters(self) -> int:
        """Its config's encoder + pooler count (the paper's convention: encoder_parameters), whatever its head."""
        return encoder_parameters(self.config)


class AlbertModel(PreTrainedAlbert):
    """Embeddings -> encoder -> pooler. `num_parameters()` of this class is the paper's parameter count."""

    def __init__(self, config: AlbertConfig, add_pooler: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(config)
        self.pooler = Pooler(config) if add_pooler else None
        self.init_weights()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> AlbertOutput:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)  # [B, L, E]
        x = self.encoder(x, attention_mask_for_sdpa(attention_mask))  # [B, L, H]
        pooled = self.pooler(x) if self.pooler is not None else None  # [B, H]
        return AlbertOutput(sequence_output=x, pooled_output=pooled)


# ---------------------------------------------------------------------------------------------- heads


def encoder_parameters(config: AlbertConfig) -> int:
    """Encoder + pooler parameters of `config` as AlbertModel builds it, without any head (the convention of the
    paper's tables, litebert.params); counted on the meta device (no memory, no init time)."""
    with torch.device("meta"):
        return AlbertModel(config).num_parameters()


class MaskedLMHead(nn.Module):
    """H -> E -> V. The decoder matrix is the word-embedding table itself (tied), plus a bias of its own."""

    def __init__(self, config: AlbertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.act = activation(config.hidden_act)
        self.norm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.word_embeddings = [word_embeddings]  # a list, so the tied table is not registered twice

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.act(self.dense(hidden)))  # [..., E]
        return F.linear(x, self.word_embeddings[0].weight, self.bias)  # [..., V]


def gather_positions(sequence_output: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """[B, L, H] at [B, P] -> [B, P, H]. The sparse MLM head runs only here: P ~ 0.15 L, so V-wide logits cost
    ~7x less than at every position."""
    index = positions.unsqueeze(-1).expand(-1, -1, sequence_output.shape[-1])
    return torch.gather(sequence_output, 1, index)


def predicted_ids(logits: torch.Tensor) -> torch.Tensor:
    """The argmax over the last dimension: [..., V] -> [...]. Widened to float32 first because torch's CPU argmax
    over bf16 is ~5x slower than the widening plus a float32 argmax ([16, 26, 8000] logits, one thread: 12 ms
    against 2.4 ms; a 60-step profile of the demo model's training and held-out scoring spent 0.74 s in argmax
    before, 0.14 s after). Widening is exact, so the ids (the first maximum) do not change."""
    return logits.float().argmax(-1)


def masked_lm_loss(mlm_logits: torch.Tensor, masked_ids: torch.Tensor, masked_weights: torch.Tensor,
                   denominator: torch.Tensor | float | None = None) -> torch.Tensor:
    """Sum of cross-entropy over real masked tokens, divided by `denominator`.

    The default denominator is the number of real masked tokens here. A training loop that accumulates
    micro-batches or runs data-parallel passes the count over the whole global batch instead, so the gradient
    equals that of one big batch.
    """
    per_token = F.cross_entropy(mlm_logits.flatten(0, -2).float(), masked_ids.flatten(), reduction="none")
    weights = masked_weights.flatten().to(per_token.dtype)
    if denominator is None:
        denominator = weights.sum().clamp_min(1.0)
    return (per_token * weights).sum() / denominator


class AlbertForPreTraining(PreTrainedAlbert):
    """MLM + sentence-order prediction (the same 2-way head serves NSP in ablations)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config)
        self.mlm = MaskedLMHead(config, self.albert.embeddings.word_embeddings)
        self.sop = nn.Linear(config.hidden_size, 2)  # no dropout: the official SOP head has none
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, masked_positions=None,
                masked_ids=None, masked_weights=None, sop_labels=None, labels=None,
                mlm_denominator=None) -> AlbertOutput:
        """`masked_positions` [B, P] selects where MLM logits are computed; `masked_ids`/`masked_weights` [B, P]
        are their targets. HF-style `labels` [B, L] with -100 for "not masked" also works (dense head)."""
        out = self.albert(input_ids, attention_mask, token_type_ids)
        seq = out.sequence_output
        hidden = gather_positions(seq, masked_positions) if masked_positions is not None else seq
        out.mlm_logits = self.mlm(hidden)
        out.sop_logits = self.sop(out.pooled_output)
        if labels is not None and masked_ids is None:
            masked_ids, masked_weights = labels.clamp_min(0), (labels != -100).float()
        if masked_ids is not None:
            weights = masked_weights if masked_weights is not None else torch.ones_like(masked_ids, dtype=torch.float)
            out.mlm_loss = masked_lm_loss(out.mlm_logits, masked_ids, weights, mlm_denominator)
            out.loss = out.mlm_loss
        if sop_labels is not None:
            out.sop_loss = F.cross_entropy(out.sop_logits.float(), sop_labels, ignore_index=-100)
            out.loss = out.sop_loss if out.loss is None else out.loss + out.sop_loss
        return out


class AlbertForMaskedLM(PreTrainedAlbert):
    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config, add_pooler=False)
        self.mlm = MaskedLMHead(config, self.albert.embeddings.word_embeddings)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, masked_positions=None,
                masked_ids=None, masked_weights=None, labels=None) -> AlbertOutput:
        out = self.albert(input_ids, attention_mask, token_type_ids)
        seq = out.sequence_output
        out.mlm_logits = self.mlm(gather_positions(seq, masked_positions) if masked_positions is not None else seq)
        if labels is not None and masked_ids is None:
            masked_ids, masked_weights = labels.clamp_min(0), (labels != -100).float()
        if masked_ids is not None:
            weights = masked_weights if masked_weights is not None else torch.ones_like(masked_ids, dtype=torch.float)
            out.loss = out.mlm_loss = masked_lm_loss(out.mlm_logits, masked_ids, weights)
        return out


def classification_loss(logits: torch.Tensor, labels: torch.Tensor, problem_type: str) -> torch.Tensor:
    if problem_type == "regression":
        return F.mse_loss(logits.float().squeeze(-1), labels.float())
    if problem_type == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits.float(), labels.float())
    return F.cross_entropy(logits.float(), labels, ignore_index=-100)


def infer_problem_type(config: AlbertConfig, labels: torch.Tensor) -> str:
    if config.problem_type:
        return config.problem_type
    if config.num_labels == 1:
        return "regression"
    return "single_label_classification" if labels.dtype in (torch.long, torch.int) else "multi_label_classification"


class AlbertForSequenceClassification(PreTrainedAlbert):
    """Pooled [CLS] -> dropout -> linear. Single-label, regression (num_labels 1) or multi-label."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> AlbertOutput:
        out = self.albert(input_ids, attention_mask, token_type_ids)
        out.logits = self.classifier(self.dropout(out.pooled_output))  # [B, num_labels]
        if labels is not None:
            out.loss = classification_loss(out.logits, labels, infer_problem_type(self.config, labels))
        return out


class AlbertForTokenClassification(PreTrainedAlbert):
    """Every token -> dropout -> linear (NER). Labels are -100 where a token is not scored (sub-words, specials)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config, add_pooler=False)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> AlbertOutput:
        out = self.albert(input_ids, attention_mask, token_type_ids)
        out.logits = self.classifier(self.dropout(out.sequence_output))  # [B, L, num_labels]
        if labels is not None:
            out.loss = F.cross_entropy(out.logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)
        return out


class AlbertForQuestionAnswering(PreTrainedAlbert):
    """Span head (start/end logits per token). With `config.qa_answerability`, a has-answer head on the pooled
    [CLS] as well (SQuAD v2.0): its logit is `logits` [B], trained with BCE against `is_impossible`."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config, add_pooler=config.qa_answerability)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        if config.qa_answerability:
            self.answer_class = nn.Sequential(nn.Linear(config.hidden_size, config.hidden_size), nn.Tanh(),
                                              nn.Dropout(config.classifier_dropout_prob),
                                              nn.Linear(config.hidden_size, 1))
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, start_positions=None,
                end_positions=None, is_impossible=None) -> AlbertOutput:
        out = self.albert(input_ids, attention_mask, token_type_ids)
        start, end = self.qa_outputs(out.sequence_output).unbind(-1)  # 2 x [B, L]
        if attention_mask is not None:  # padding can never be an answer
            start = start.masked_fill(attention_mask == 0, torch.finfo(start.dtype).min)
            end = end.masked_fill(attention_mask == 0, torch.finfo(end.dtype).min)
        out.start_logits, out.end_logits = start, end
        if self.config.qa_answerability:
            out.logits = self.answer_class(out.pooled_output).squeeze(-1)  # [B]
        if start_positions is not None and end_positions is not None:
            L = start.shape[1]
            span = (F.cross_entropy(start.float(), start_positions.clamp(0, L - 1))
                    + F.cross_entropy(end.float(), end_positions.clamp(0, L - 1))) / 2
            out.loss = span
            if self.config.qa_answerability and is_impossible is not None:
                out.loss = span + 0.5 * F.binary_cross_entropy_with_logits(out.logits.float(), is_impossible.float())
        return out


class AlbertForMultipleChoice(PreTrainedAlbert):
    """Each (context, choice) pair [B, C, L] is encoded on its own; pooled -> linear -> one score per choice."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> AlbertOutput:
        B, C, L = input_ids.shape
        flat = lambda t: t.reshape(B * C, L) if t is not None else None  # noqa: E731
        out = self.albert(flat(input_ids), flat(attention_mask), flat(token_type_ids))
        out.logits = self.classifier(self.dropout(out.pooled_output)).view(B, C)  # [B, C]
        if labels is not None:
            out.loss = F.cross_entropy(out.logits.float(), labels)
        return out


MODEL_CLASSES = {cls.__name__: cls for cls in (
    AlbertModel, AlbertForPreTraining, AlbertForMaskedLM, AlbertForSequenceClassification,
    AlbertForTokenClassification, AlbertForQuestionAnswering, AlbertForMultipleChoice)}


def model_flops_per_token(config: AlbertConfig, seq_len: int, masked_fraction: float | None = None) -> float:
    """Training FLOPs per token (forward + backward = 3x forward, 2 FLOPs per multiply-add).

    Counts every matmul: the E->H projection, per layer QKV/out/FFN plus attention scores (2*L*H each way),
    the pooler is negligible; the MLM head at a `masked_fraction` of positions (None: every position).
    Sharing does not change FLOPs: a shared layer is still applied L times.
    """
    E, H, I, V = config.embedding_size, config.hidden_size, config.intermediate_size, config.vocab_size
    layers = config.num_hidden_layers * config.inner_group_num
    per_layer = 2 * (4 * H * H + 2 * H * I) + 2 * 2 * seq_len * H
    proj = 2 * E * H if config.has_projection else 0
    mlm = (2 * H * E + 2 * E * V) * (1.0 if masked_fraction is None else masked_fraction)
    return 3.0 * (proj + layers * per_layer + mlm)


