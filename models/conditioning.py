"""Conditioning beyond class labels (issue 53): what a DiT can be given per
sample besides x_t, t and y, and how each enters the network.

  vector:NAME:D     a vector [B, D], embedded by Linear-SiLU-Linear and added
                    to the timestep embedding (adaLN, as DiT does with t)
  concat:NAME:C     a field [B, C, H, W] concatenated to x_t along channels;
                    the output keeps the data's channels
  tokens:NAME:L:D   a token sequence [B, L, D] (fixed L), projected to the
                    hidden size (PixArt-alpha's caption projection) and
                    attended to by a cross-attention after each block's
                    self-attention (queries from the image tokens)

Each has a null form, for dropout while training and for guidance: a learned
null embedding for vectors, a learned null sequence for tokens (both chosen
per sample by the graph input NAME_drop, float32 [B], 1 = null), and zeros
for fields (the trainer zeroes the field itself). The exported graph takes,
after x_t, t and y, for every conditioning in order: NAME, then NAME_drop
for vectors and tokens.
"""

KINDS = {"vector": ("D",), "concat": ("C",), "tokens": ("L", "D")}


class CondSpec:
    def __init__(self, kind, name, dims):
        self.kind, self.name, self.dims = kind, name, tuple(int(d) for d in dims)

    def __str__(self):
        return ":".join([self.kind, self.name] + [str(d) for d in self.dims])

    @property
    def has_drop_input(self):
        return self.kind in ("vector", "tokens")

    def input_names(self):
        return [self.name] + ([self.name + "_drop"] if self.has_drop_input else [])

    def shape(self, batch, image_size=None):
        """The graph input's shape (fields take the image's size)."""
        if self.kind == "vector":
            return [batch, self.dims[0]]
        if self.kind == "concat":
            return [batch, self.dims[0], image_size, image_size]
        return [batch, self.dims[0], self.dims[1]]


def parse(text):
    """"KIND:NAME:N[:M]" -> CondSpec; ValueError naming what is wrong."""
    parts = text.split(":")
    if len(parts) < 2 or parts[0] not in KINDS:
        raise ValueError("--cond %r: expected vector:NAME:D, concat:NAME:C or tokens:NAME:L:D"
                         % text)
    kind, name, dims = parts[0], parts[1], parts[2:]
    if len(dims) != len(KINDS[kind]):
        raise ValueError("--cond %r: %s takes %s" % (text, kind, ":".join(
            ["NAME"] + list(KINDS[kind]))))
    if not name.isidentifier() or name in ("x_t", "t", "y", "noise", "target", "x_start"):
        raise ValueError("--cond %r: the name must be an identifier other than the graph's own "
                         "inputs" % text)
    try:
        values = [int(d) for d in dims]
    except ValueError:
        raise ValueError("--cond %r: sizes must be integers" % text)
    if any(v <= 0 for v in values):
        raise ValueError("--cond %r: sizes must be positive" % text)
    return CondSpec(kind, name, values)


def parse_all(texts):
    specs = [parse(t) if isinstance(t, str) else t for t in texts]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError("--cond: a name is given twice (%s)" % ", ".join(names))
    if sum(s.kind == "tokens" for s in specs) > 1:
        raise ValueError("--cond: one token sequence at most (its cross-attention is the "
                         "block's)")
    return specs
