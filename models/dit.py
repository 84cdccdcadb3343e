#!/usr/bin/env -S /usr/bin/python3
"""A PyTorch Diffusion Transformer (DiT) for hc's tests and exports.

The architecture follows Peebles & Xie, "Scalable Diffusion Models with
Transformers" (2022) and the layout of facebookresearch/DiT's models.py, so
state_dict names match upstream checkpoints:

  x_embedder.proj.{weight,bias}          patch embedding (strided Conv2d)
  pos_embed                              fixed 2-D sin-cos, requires_grad=False
  t_embedder.mlp.{0,2}.{weight,bias}     timestep MLP over a 256-d sinusoid
  y_embedder.embedding_table.weight      label table (+1 null-class row)
  blocks.N.attn.{qkv,proj}.{weight,bias} fused qkv + output projection
  blocks.N.mlp.{fc1,fc2}.{weight,bias}   GELU(tanh) MLP
  blocks.N.adaLN_modulation.1.{weight,bias}
  final_layer.{linear,adaLN_modulation.1}.{weight,bias}

Deliberate differences from upstream, all for a clean training-graph export:
  * no Dropout modules at all (upstream's are p=0, but a TRAINING-mode export
    would still emit Dropout nodes);
  * class-label dropout runs only when asked for explicitly
    (`label_dropout=True` or `force_drop_ids`); DiTLoss never asks, so the
    export carries no random subgraph (hc-run drops labels itself);
  * attention is written out (reshape/permute, q@k^T*scale, softmax, @v)
    by default; `attention="unbind"|"sdpa"` gives timm's and torch 2's forms;
  * the timestep frequency table is a float32 constant computed once, so the
    graph holds a Constant (not a Range/Exp chain) and a float64 run of the
    module uses exactly the same (upcast) values as the graph.
"""

import json
import math

import numpy as np
import torch
import torch.utils.checkpoint  # for --checkpoint-blocks
import torch.nn as nn

# name -> (depth, hidden_size, num_heads, patch_size)
MODEL_CONFIGS = {}
for _size, (_d, _h, _nh) in {
    "S": (12, 384, 6),
    "B": (12, 768, 12),
    "L": (24, 1024, 16),
    "XL": (28, 1152, 16),
}.items():
    for _p in (2, 4, 8):
        MODEL_CONFIGS["DiT-%s/%d" % (_size, _p)] = (_d, _h, _nh, _p)
MODEL_CONFIGS["tiny"] = (2, 64, 4, 2)
# The embedded demo (tools/demo.sh): 1x32x32 Fashion-MNIST, 64 tokens;
# its loss falls >= 20% within a few minutes on 2 cores (models/README.md).
MODEL_CONFIGS["demo"] = (4, 128, 4, 4)

FREQUENCY_EMBEDDING_SIZE = 256


def modulate(x, shift, scale):
    """adaLN modulation: x * (1 + scale) + shift, broadcast over tokens."""
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


# --------------------------------------------------------------------------
# Fixed 2-D sine-cosine position embedding (MAE / DiT convention).
# --------------------------------------------------------------------------

def _sincos_1d(embed_dim, positions):
    """[M] positions -> [M, embed_dim]: sin of the first half, cos of the second."""
    assert embed_dim % 2 == 0, "sin-cos embedding needs an even dimension"
    omega = np.arange(embed_dim // 2, dtype=np.float64) / (embed_dim / 2.0)
    omega = 1.0 / 10000 ** omega
    angles = np.outer(positions.reshape(-1).astype(np.float64), omega)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def sincos_2d_pos_embed(embed_dim, grid_size):
    """[grid_size*grid_size, embed_dim]; the first half of the channels
    encodes the column (w) coordinate, the second the row (h) one, as in
    upstream (which meshgrids w first)."""
    assert embed_dim % 4 == 0, "2-D sin-cos embedding needs hidden % 4 == 0"
    gh = np.arange(grid_size, dtype=np.float64)
    gw = np.arange(grid_size, dtype=np.float64)
    ww, hh = np.meshgrid(gw, gh)  # ww[i, j] = j (column), hh[i, j] = i (row)
    emb_a = _sincos_1d(embed_dim // 2, ww)
    emb_b = _sincos_1d(embed_dim // 2, hh)
    return np.concatenate([emb_a, emb_b], axis=1)


# --------------------------------------------------------------------------
# Embedders
# --------------------------------------------------------------------------

class PatchEmbed(nn.Module):
    """Image [B, C, H, W] -> tokens [B, (H/p)*(W/p), hidden] via a strided conv."""

    def __init__(self, image_size, patch_size, in_channels, hidden_size):
        super().__init__()
        self.grid_size = image_size // patch_size
        self.num_patches = self.grid_size * self.grid_size
        self.proj = nn.Conv2d(in_channels, hidden_size, kernel_size=patch_size,
                              stride=patch_size, bias=True)

    def forward(self, x):
        x = self.proj(x)                      # [B, hidden, gh, gw]
        return x.flatten(2).transpose(1, 2)   # [B, gh*gw, hidden]


class TimestepEmbedder(nn.Module):
    """Integer timesteps [B] -> [B, hidden]: sinusoid(256) then Linear-SiLU-Linear."""

    def __init__(self, hidden_size, frequency_embedding_size=FREQUENCY_EMBEDDING_SIZE,
                 max_period=10000):
        super().__init__()
        self.frequency_embedding_size = frequency_embedding_size
        self.mlp = nn.Sequential(
            nn.Linear(frequency_embedding_size, hidden_size, bias=True),
            nn.SiLU(),
            nn.Linear(hidden_size, hidden_size, bias=True),
        )
        half = frequency_embedding_size // 2
        # Same arithmetic as upstream (float32 torch ops); kept as a plain
        # tensor attribute (not a parameter or buffer) so the export holds it
        # as a Constant node, never as an initializer.
        with torch.no_grad():
            self._freqs = torch.exp(
                -math.log(max_period) * torch.arange(0, half, dtype=torch.float32) / half)

    def timestep_embedding(self, t, dtype):
        freqs = self._freqs.to(device=t.device, dtype=dtype)
        args = t[:, None].to(dtype) * freqs[None]
        emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        if self.frequency_embedding_size % 2:
            emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
        return emb

    def forward(self, t):
        dtype = self.mlp[0].weight.dtype
        return self.mlp(self.timestep_embedding(t, dtype))


class LabelEmbedder(nn.Module):
    """Class labels [B] -> [B, hidden]. With dropout_prob > 0 the table has a
    null-class row (index num_classes) used for classifier-free guidance."""

    def __init__(self, num_classes, hidden_size, dropout_prob):
        super().__init__()
        use_null = 1 if dropout_prob > 0 else 0
        self.embedding_table = nn.Embedding(num_classes + use_null, hidden_size)
        self.num_classes = num_classes
        self.dropout_prob = dropout_prob

    def token_drop(self, labels, force_drop_ids=None):
        if force_drop_ids is None:
            drop = torch.rand(labels.shape[0], device=labels.device) < self.dropout_prob
        else:
            drop = force_drop_ids == 1
        return torch.where(drop, torch.full_like(labels, self.num_classes), labels)

    def forward(self, labels, label_dropout=False, force_drop_ids=None):
        if (label_dropout and self.dropout_prob > 0) or force_drop_ids is not None:
            labels = self.token_drop(labels, force_drop_ids)
        return self.embedding_table(labels)


# --------------------------------------------------------------------------
# Transformer parts
# --------------------------------------------------------------------------

# How Attention.forward takes q, k, v and scales the scores; each is a form
# DiT code in the wild writes, and hc fuses every one into hc.attention:
#   index   qkv[0], qkv[1], qkv[2]; softmax(q @ k^T * scale)  (upstream DiT)
#   unbind  q, k, v = qkv.unbind(0); the same product         (timm >= 0.6)
#   sdpa    F.scaled_dot_product_attention(q, k, v)            (torch >= 2.0)
ATTENTION_FORMS = ("index", "unbind", "sdpa")


def scaled_dot_product_attention(q, k, v):
    """softmax(q @ k^T / sqrt(head_dim)) @ v. torch >= 2.0 has it as
    F.scaled_dot_product_attention; torch 1.13 (Debian's) does not, so it is
    written here the way the TorchScript exporter decomposes that op (opsets
    14-17): the scale computed from q's shape (Shape -> Slice [-1:] -> Cast
    -> Sqrt -> Div) and its square root applied to q and to k^T."""
    sdpa = getattr(nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None:
        return sdpa(q, k, v)
    head_dim = torch._shape_as_tensor(q)[-1:].to(q.dtype)
    scale = torch.ones(1, dtype=q.dtype) / torch.sqrt(head_dim)
    root = torch.sqrt(scale)
    attn = (q * root) @ (k.transpose(-2, -1) * root)
    return attn.softmax(dim=-1) @ v


class Attention(nn.Module):
    def __init__(self, dim, num_heads, form="index"):
        super().__init__()
        assert dim % num_heads == 0, "hidden size must be divisible by num_heads"
        if form not in ATTENTION_FORMS:
            raise ValueError("unknown attention form %r (expected one of: %s)"
                             % (form, ", ".join(ATTENTION_FORMS)))
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.form = form
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim, bias=True)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim)
        qkv = qkv.permute(2, 0, 3, 1, 4)            # [3, B, heads, N, head_dim]
        if self.form == "index":
            q, k, v = qkv[0], qkv[1], qkv[2]
        else:
            q, k, v = qkv.unbind(0)
        if self.form == "sdpa":
            x = scaled_dot_product_attention(q, k, v)
        else:
            attn = (q @ k.transpose(-2, -1)) * self.scale
            x = attn.softmax(dim=-1) @ v
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class CrossAttention(nn.Module):
    """Image tokens [B, N, C] attending to a context [B, L, C] (PixArt-alpha's
    MultiHeadCrossAttention without a mask): q from x, k and v from the
    context by one linear each, then the output projection."""

    def __init__(self, dim, num_heads, form="index"):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.form = form
        self.q_linear = nn.Linear(dim, dim, bias=True)
        self.kv_linear = nn.Linear(dim, dim * 2, bias=True)
        self.proj = nn.Linear(dim, dim, bias=True)

    def forward(self, x, ctx):
        B, N, C = x.shape
        L = ctx.shape[1]
        q = self.q_linear(x).reshape(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        kv = self.kv_linear(ctx).reshape(B, L, 2, self.num_heads, self.head_dim)
        kv = kv.permute(2, 0, 3, 1, 4)               # [2, B, heads, L, head_dim]
        if self.form == "index":
            k, v = kv[0], kv[1]
        else:
            k, v = kv.unbind(0)
        if self.form == "sdpa":
            x = scaled_dot_product_attention(q, k, v)
        else:
            x = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1) @ v
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class VectorEmbedder(nn.Module):
    """A conditioning vector [B, D] -> [B, hidden] (Linear-SiLU-Linear), or
    the learned null embedding where drop = 1."""

    def __init__(self, dim, hidden_size):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, hidden_size, bias=True), nn.SiLU(),
                                 nn.Linear(hidden_size, hidden_size, bias=True))
        self.null = nn.Parameter(torch.zeros(hidden_size))

    def forward(self, v, drop):
        d = drop.to(v.dtype)[:, None]
        return self.mlp(v) * (1 - d) + self.null[None] * d


class TokenEmbedder(nn.Module):
    """A token sequence [B, L, D] -> [B, L, hidden] (PixArt-alpha's caption
    projection, Linear-GELU(tanh)-Linear); where drop = 1 the learned null
    sequence [L, D] replaces the tokens first."""

    def __init__(self, length, dim, hidden_size):
        super().__init__()
        self.null = nn.Parameter(torch.zeros(length, dim))
        self.proj = nn.Sequential(nn.Linear(dim, hidden_size, bias=True),
                                  nn.GELU(approximate="tanh"),
                                  nn.Linear(hidden_size, hidden_size, bias=True))

    def forward(self, tokens, drop):
        d = drop.to(tokens.dtype)[:, None, None]
        return self.proj(tokens * (1 - d) + self.null[None] * d)


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden, bias=True)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(hidden, dim, bias=True)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class DiTBlock(nn.Module):
    """Transformer block with adaLN-Zero conditioning."""

    def __init__(self, hidden_size, num_heads, mlp_ratio=4.0, attention="index",
                 cross_attention=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(hidden_size, num_heads, attention)
        # PixArt-alpha: a cross-attention to the token condition after the
        # self-attention, no norm or gate of its own.
        self.cross_attn = (CrossAttention(hidden_size, num_heads, attention)
                           if cross_attention else None)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(hidden_size, int(hidden_size * mlp_ratio))
        self.adaLN_modulation = nn.Sequential(
            nn.SiLU(), nn.Linear(hidden_size, 6 * hidden_size, bias=True))

    def forward(self, x, c, ctx=None):
        (shift_msa, scale_msa, gate_msa,
         shift_mlp, scale_mlp, gate_mlp) = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa, scale_msa))
        if self.cross_attn is not None:
            x = x + self.cross_attn(x, ctx)
        x = x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))
        return x


class FinalLayer(nn.Module):
    def __init__(self, hidden_size, patch_size, out_channels):
        super().__init__()
        self.norm_final = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(hidden_size, patch_size * patch_size * out_channels, bias=True)
        self.adaLN_modulation = nn.Sequential(
            nn.SiLU(), nn.Linear(hidden_size, 2 * hidden_size, bias=True))

    def forward(self, x, c):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        return self.linear(modulate(self.norm_final(x), shift, scale))


# --------------------------------------------------------------------------
# DiT
# --------------------------------------------------------------------------

class DiT(nn.Module):
    def __init__(self, image_size=32, patch_size=2, in_channels=4, hidden_size=1152,
                 depth=28, num_heads=16, mlp_ratio=4.0, class_dropout_prob=0.1,
                 num_classes=1000, learn_sigma=True, init="default", seed=None,
                 model_name=None, attention="index", conds=()):
        super().__init__()
        import conditioning
        self.conds = conditioning.parse_all(conds)
        if image_size % patch_size != 0:
            raise ValueError("image size %d is not divisible by patch size %d"
                             % (image_size, patch_size))
        if hidden_size % num_heads != 0:
            raise ValueError("hidden size %d is not divisible by %d heads"
                             % (hidden_size, num_heads))
        if hidden_size % 4 != 0:
            raise ValueError("hidden size %d must be a multiple of 4 (2-D sin-cos)"
                             % hidden_size)
        self.config = dict(
            model=model_name, depth=depth, hidden_size=hidden_size, num_heads=num_heads,
            patch_size=patch_size, in_channels=in_channels, image_size=image_size,
            num_classes=num_classes, learn_sigma=bool(learn_sigma),
            mlp_ratio=float(mlp_ratio), class_dropout_prob=float(class_dropout_prob),
            attention=attention)
        if self.conds:
            self.config["conds"] = [str(c) for c in self.conds]
        self.learn_sigma = learn_sigma
        self.checkpoint_blocks = False  # set by train_torch.py --checkpoint-blocks
        self.in_channels = in_channels
        self.out_channels = in_channels * 2 if learn_sigma else in_channels
        self.patch_size = patch_size
        self.num_heads = num_heads

        # Fields are concatenated to x_t: the patch embedding sees their channels too.
        field_channels = sum(c.dims[0] for c in self.conds if c.kind == "concat")
        self.x_embedder = PatchEmbed(image_size, patch_size, in_channels + field_channels,
                                     hidden_size)
        self.cond_embedders = nn.ModuleDict(
            {c.name: (VectorEmbedder(c.dims[0], hidden_size) if c.kind == "vector"
                      else TokenEmbedder(c.dims[0], c.dims[1], hidden_size))
             for c in self.conds if c.kind != "concat"})
        cross = any(c.kind == "tokens" for c in self.conds)
        self.t_embedder = TimestepEmbedder(hidden_size)
        # num_classes 0: an unconditional DiT (no label input, c = t's embedding).
        self.y_embedder = (LabelEmbedder(num_classes, hidden_size, class_dropout_prob)
                           if num_classes > 0 else None)
        num_patches = self.x_embedder.num_patches
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches, hidden_size),
                                      requires_grad=False)
        self.blocks = nn.ModuleList(
            [DiTBlock(hidden_size, num_heads, mlp_ratio, attention, cross) for _ in range(depth)])
        self.final_layer = FinalLayer(hidden_size, patch_size, self.out_channels)
        self.initialize_weights(init, seed)

    # ---- initialization --------------------------------------------------
    def initialize_weights(self, init="default", seed=None):
        gen = torch.Generator()
        gen.manual_seed(0 if seed is None else int(seed))
        pe = sincos_2d_pos_embed(self.pos_embed.shape[-1], self.x_embedder.grid_size)
        with torch.no_grad():
            self.pos_embed.copy_(torch.from_numpy(pe).float().unsqueeze(0))
        if init == "random":
            # Every trainable tensor ~ N(0, 0.02): keeps tests off adaLN-Zero's
            # all-zero output.
            with torch.no_grad():
                for name, p in self.named_parameters():
                    if p.requires_grad:
                        p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
            return
        if init != "default":
            raise ValueError("unknown init %r (expected 'default' or 'random')" % init)

        def xavier_(w):
            fan_out, fan_in = w.shape[0], int(np.prod(w.shape[1:]))
            a = math.sqrt(6.0 / (fan_in + fan_out))
            with torch.no_grad():
                w.copy_((torch.rand(w.shape, generator=gen) * 2 - 1) * a)

        def normal_(w, std):
            with torch.no_grad():
                w.copy_(torch.randn(w.shape, generator=gen) * std)

        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    xavier_(m.weight)
                    m.bias.zero_()
            # Patch embedding initialised like a Linear over the flattened kernel.
            xavier_(self.x_embedder.proj.weight)
            self.x_embedder.proj.bias.zero_()
            if self.y_embedder is not None:
                normal_(self.y_embedder.embedding_table.weight, 0.02)
            normal_(self.t_embedder.mlp[0].weight, 0.02)
            normal_(self.t_embedder.mlp[2].weight, 0.02)
            # adaLN-Zero: every block starts as the identity (PixArt-alpha
            # zeroes its cross-attention's output projection too).
            for blk in self.blocks:
                blk.adaLN_modulation[-1].weight.zero_()
                blk.adaLN_modulation[-1].bias.zero_()
                if blk.cross_attn is not None:
                    blk.cross_attn.proj.weight.zero_()
                    blk.cross_attn.proj.bias.zero_()
            # The null forms of vectors and tokens start as small noise.
            for emb in self.cond_embedders.values():
                normal_(emb.null, 0.02)
            self.final_layer.adaLN_modulation[-1].weight.zero_()
            self.final_layer.adaLN_modulation[-1].bias.zero_()
            self.final_layer.linear.weight.zero_()
            self.final_layer.linear.bias.zero_()

    # ---- forward -----------------------------------------------------------
    def unpatchify(self, x):
        """[B, T, p*p*c] -> [B, c, H, W]."""
        c = self.out_channels
        p = self.patch_size
        h = w = self.x_embedder.grid_size
        n = x.shape[0]  # taken before the Einsum: torch's ONNX shape inference
        #                 does not see through Einsum, so a static batch would
        #                 otherwise come out symbolic in the exported output.
        x = x.reshape(n, h, w, p, p, c)
        x = torch.einsum("nhwpqc->nchpwq", x)
        return x.reshape(n, c, h * p, w * p)

    def forward(self, x, t, y=None, conds=None, label_dropout=None, force_drop_ids=None):
        """x [B,C,H,W] float, t [B] int64 timesteps, y [B] int64 labels (None
        for an unconditional DiT, num_classes 0).
        label_dropout defaults to False: the class-dropout random path only
        runs when asked for (never in DiTLoss, hence never in an export).
        conds: name -> tensor for every conditioning of the model, and
        NAME_drop -> float [B] (1 = the null form) for vectors and tokens
        (conditioning.py)."""
        conds = conds or {}
        missing = [n for c in self.conds for n in c.input_names() if n not in conds]
        if missing:
            raise ValueError("DiT.forward: conditioning input %s is missing" % missing[0])
        fields = [conds[c.name] for c in self.conds if c.kind == "concat"]
        if fields:
            x = torch.cat([x] + fields, dim=1)
        x = self.x_embedder(x) + self.pos_embed
        t_emb = self.t_embedder(t)
        if self.y_embedder is None:
            c = t_emb
        else:
            c = t_emb + self.y_embedder(y, bool(label_dropout), force_drop_ids)
        ctx = None
        for spec in self.conds:
            if spec.kind == "vector":
                c = c + self.cond_embedders[spec.name](conds[spec.name],
                                                       conds[spec.name + "_drop"])
            elif spec.kind == "tokens":
                ctx = self.cond_embedders[spec.name](conds[spec.name],
                                                     conds[spec.name + "_drop"])
        for blk in self.blocks:
            if self.checkpoint_blocks and torch.is_grad_enabled():
                # torch.utils.checkpoint: keep only the block's inputs and
                # run its forward again in backward (what users do when
                # activations do not fit; never part of an export).
                x = torch.utils.checkpoint.checkpoint(blk, x, c, ctx, use_reentrant=False)
            else:
                x = blk(x, c, ctx)
        x = self.final_layer(x, c)
        return self.unpatchify(x)


class StopGradient(torch.autograd.Function):
    """`.detach()` that survives ONNX export. torch.onnx drops aten::detach
    (the graph would then train the mean through the VLB term), so this
    exports as hc's own op hc::StopGradient (domain "hc", version 1):
    identity forward, no gradient backward (docs/input-format.md)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return None

    @staticmethod
    def symbolic(g, x):
        return g.op("hc::StopGradient", x).setType(x.type())


OBJECTIVES = ("mse", "mse+vlb", "flow")


class _ModelCall(nn.Module):
    """What the loss modules share: the model, the data's channels, and the
    conditioning inputs that come after y (conditioning.py), passed to the
    model as a dict (a model without them is called with (x, t, y))."""

    def __init__(self, dit, in_channels, with_output):
        super().__init__()
        self.dit = dit
        self.in_channels = dit.in_channels if in_channels is None else in_channels
        self.with_output = with_output
        self.cond_names = [n for c in getattr(dit, "conds", ()) for n in c.input_names()]

    def model(self, x_t, t, y, rest):
        """(model output, what in `rest` follows the conditioning inputs)."""
        k = len(self.cond_names)
        if not k:
            return self.dit(x_t, t, y), rest
        return self.dit(x_t, t, y, dict(zip(self.cond_names, rest[:k]))), rest[k:]

    def result(self, loss, out):
        return (loss, out) if self.with_output else loss


class DiTLoss(_ModelCall):
    """Training objective as exported.

    objective "mse": loss = mean((DiT(x_t,t,y)[:, :C] - noise)^2), inputs
    (x_t, t, y, [conditioning...], noise). "mse+vlb" (learn_sigma only):
    DiT's full objective, the MSE plus the variational bound on the learned
    variance with the mean stopped (diffusion.vlb_terms), averaged over the
    batch; a last input x_start (the clean sample x_t was made from) feeds
    the bound.

    The squared error is written out (aten::mse_loss has no ONNX exporter in
    torch 1.13). With with_output=True, forward returns (loss, prediction),
    prediction being the full DiT output [B, out_channels, H, W]."""

    def __init__(self, dit, in_channels=None, with_output=False, objective="mse",
                 stop_gradient=None):
        super().__init__(dit, in_channels, with_output)
        if objective not in ("mse", "mse+vlb"):
            raise ValueError("DiTLoss takes objective mse or mse+vlb, not %r (flow: FlowLoss)"
                             % objective)
        if objective != "mse" and not getattr(dit, "learn_sigma", True):
            raise ValueError("objective %s trains the variance: it needs learn_sigma" % objective)
        self.objective = objective
        # How the stop survives export: StopGradient's symbolic for the
        # TorchScript exporter, a custom op for dynamo (export_torch2.py).
        self.stop_gradient = stop_gradient or StopGradient.apply

    def forward(self, x_t, t, y, *rest):
        out, rest = self.model(x_t, t, y, rest)
        noise, x_start = rest[0], (rest[1] if len(rest) > 1 else None)
        loss = objective_loss(out, self.in_channels, self.objective, self.stop_gradient,
                              x_t, t, noise, x_start)
        return self.result(loss, out)


class UnconditionalLoss(DiTLoss):
    """DiTLoss of an unconditional DiT (num_classes 0) with its inputs as
    exported: x_t, t, [conditioning...], noise (and x_start), no label."""

    def forward(self, x_t, t, *rest):
        return super().forward(x_t, t, None, *rest)


class FlowLoss(_ModelCall):
    """A flow-matching objective (models/transport.py, SiT's interpolants) as
    exported: inputs x_t, t (float32 in [0, 1], t = 1 data), y,
    [conditioning...] and the target (u_t for a velocity model, the noise x0
    for noise and score); loss = transport.Objective.loss of
    DiT(x_t, t, y)[:, :C]. The path's coefficients and the loss weight are
    computed in the graph from t. With a learned sigma (SiT's default) the
    extra channels are ignored, as SiT's forward does."""

    def __init__(self, dit, flow, in_channels=None, with_output=False):
        super().__init__(dit, in_channels, with_output)
        self.flow = flow

    def forward(self, x_t, t, y, *rest):
        out, rest = self.model(x_t, t, y, rest)
        return self.result(self.flow.loss(out[:, :self.in_channels], t, rest[0]), out)


class UnconditionalFlowLoss(FlowLoss):
    def forward(self, x_t, t, *rest):
        return super().forward(x_t, t, None, *rest)


def loss_wrapper(model, objective="mse", flow=None, in_channels=None, conditional=True,
                 with_output=False, stop_gradient=None):
    """The exported training module around `model` (any module with forward
    (x, t[, y]) -> [B, C', H, W], or models/dit.py's DiT with conditioning)
    for an objective name (and, for "flow", a transport.Objective). Its
    parameters are model's under "dit."."""
    if objective == "flow":
        cls = FlowLoss if conditional else UnconditionalFlowLoss
        return cls(model, flow, in_channels, with_output=with_output)
    cls = DiTLoss if conditional else UnconditionalLoss
    return cls(model, in_channels, with_output=with_output, objective=objective,
               stop_gradient=stop_gradient)


def objective_loss(out, in_channels, objective, stop_gradient, x_t, t, noise, x_start=None):
    """The training loss of DiT's output `out` (see DiTLoss)."""
    eps = out[:, :in_channels]
    diff = eps - noise
    loss = (diff * diff).mean()
    if objective == "mse+vlb":
        import diffusion
        vb = diffusion.vlb_terms(stop_gradient(eps), out[:, in_channels:], x_start, x_t, t)
        loss = loss + vb.mean()
    return loss


def make_dit(model="tiny", image_size=32, in_channels=4, num_classes=1000,
             learn_sigma=True, init="default", seed=0, class_dropout_prob=0.1,
             mlp_ratio=4.0, attention="index", conds=()):
    if model not in MODEL_CONFIGS:
        raise ValueError("unknown model %r (expected one of: %s)"
                         % (model, ", ".join(MODEL_CONFIGS)))
    depth, hidden, heads, patch = MODEL_CONFIGS[model]
    return DiT(image_size=image_size, patch_size=patch, in_channels=in_channels,
               hidden_size=hidden, depth=depth, num_heads=heads, mlp_ratio=mlp_ratio,
               class_dropout_prob=class_dropout_prob, num_classes=num_classes,
               learn_sigma=learn_sigma, init=init, seed=seed, model_name=model,
               attention=attention, conds=conds)


def dit_from_config(cfg):
    """Rebuild a DiT from the `hc.dit_config` JSON (dict or string). The
    weights are left at their default init; load a state_dict afterwards."""
    if isinstance(cfg, str):
        cfg = json.loads(cfg)
    return DiT(image_size=cfg["image_size"], patch_size=cfg["patch_size"],
               in_channels=cfg["in_channels"], hidden_size=cfg["hidden_size"],
               depth=cfg["depth"], num_heads=cfg["num_heads"],
               mlp_ratio=cfg.get("mlp_ratio", 4.0),
               class_dropout_prob=cfg.get("class_dropout_prob", 0.1),
               num_classes=cfg["num_classes"], learn_sigma=cfg["learn_sigma"],
               model_name=cfg.get("model"), attention=cfg.get("attention", "index"),
               conds=cfg.get("conds", ()))
