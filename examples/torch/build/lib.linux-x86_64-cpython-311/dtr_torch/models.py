# SPDX-License-Identifier: Apache-2.0
"""Models the bench and the tests train: a GPT-style decoder, a TreeLSTM over a
data-dependent tree, a narrow residual network, and a small net with dropout and batch norm.

Each ``make_*`` returns ``(module, inputs_tuple, loss_fn)`` with ``loss_fn(outputs)`` the
scalar loss: the ``FILE.py:FACTORY`` convention of ``python3 -m dtr_torch.bench``.
"""

from __future__ import annotations

import math

import torch

F = torch.nn.functional


# --- GPT ---------------------------------------------------------------------------------

class _Block(torch.nn.Module):
    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)
        self.heads = heads
        self.dropout = dropout

    def forward(self, x, mask):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
        att = F.dropout(att, self.dropout, self.training)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + F.dropout(self.proj(y), self.dropout, self.training)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(torch.nn.Module):
    """A GPT-style causal decoder (pre-norm blocks, learned positions, tied output)."""

    def __init__(self, vocab=512, layers=6, d_model=256, heads=4, seq=256, dropout=0.0):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d_model)
        self.pos = torch.nn.Parameter(torch.zeros(seq, d_model))
        self.blocks = torch.nn.ModuleList(_Block(d_model, heads, dropout) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d_model)
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos[:t]
        for blk in self.blocks:
            x = blk(x, self.mask)
        return self.ln(x) @ self.tok.weight.t()


def make_gpt(batch=8, layers=6, d_model=256, heads=4, seq=256, vocab=512, dropout=0.0):
    model = GPT(vocab, layers, d_model, heads, seq, dropout)
    idx = torch.randint(0, vocab, (batch, seq))
    tgt = torch.randint(0, vocab, (batch, seq))
    return model, (idx,), lambda out: F.cross_entropy(out.reshape(-1, vocab), tgt.reshape(-1))


# --- TreeLSTM ------------------------------------------------------------------------------

class TreeLSTMCell(torch.nn.Module):
    """The binary TreeLSTM composition cell (N-ary TreeLSTM with N = 2): a leaf from one
    input, a node from its two children's ``(h, c)``. Also the cell of the recorder's
    committed TreeLSTM trace (bench/trace/dtr_trace.py)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.leaf = torch.nn.Linear(dim, 3 * dim)
        self.node = torch.nn.Linear(2 * dim, 5 * dim)

    def forward_leaf(self, x):
        i, o, u = self.leaf(x).chunk(3, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(u)
        return torch.sigmoid(o) * torch.tanh(c), c

    def forward_node(self, left, right):
        (hl, cl), (hr, cr) = left, right
        i, fl, fr, o, u = self.node(torch.cat([hl, hr], dim=-1)).chunk(5, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * cl + torch.sigmoid(fr) * cr
        return torch.sigmoid(o) * torch.tanh(c), c


class TreeLSTM(torch.nn.Module):
    """A binary TreeLSTM over a tree the data decides: each span of more than ``leaf_span``
    tokens splits where a learned score is highest (``argmax().item()``), so the tree's depth
    and shape, and with them the operator sequence, depend on values."""

    def __init__(self, vocab=1000, dim=128, classes=5, leaf_span=1):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.split = torch.nn.Linear(dim, 1)
        self.cell = TreeLSTMCell(dim)
        self.out = torch.nn.Linear(dim, classes)
        self.leaf_span = leaf_span
        self.depth = 0

    def _build(self, x, scores, lo, hi, depth):
        self.depth = max(self.depth, depth)
        if hi - lo <= self.leaf_span:
            return self.cell.forward_leaf(x[lo:hi].mean(dim=0, keepdim=True))
        # the split point: the highest score strictly inside the span
        k = lo + 1 + int(scores[lo + 1:hi].argmax().item())
        left = self._build(x, scores, lo, k, depth + 1)
        right = self._build(x, scores, k, hi, depth + 1)
        return self.cell.forward_node(left, right)

    def forward(self, tokens):
        x = self.embed(tokens)
        scores = self.split(x).squeeze(-1)
        self.depth = 0
        h, _ = self._build(x, scores, 0, tokens.shape[0], 0)
        return self.out(h)


def make_treelstm(batch=1, tokens=64, dim=128, vocab=1000):
    """``batch`` is the number of token sequences (trees) per step."""
    model = TreeLSTM(vocab=vocab, dim=dim)
    seqs = torch.randint(0, vocab, (batch, tokens))
    tgt = torch.randint(0, 5, (batch,))

    class _Batch(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, s):
            return torch.cat([self.m(s[i]) for i in range(s.shape[0])])

    return _Batch(model), (seqs,), lambda out: F.cross_entropy(out, tgt)


# --- a narrow residual network ---------------------------------------------------------------

class _Res(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(c)
        self.c2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)), inplace=True)
        return F.relu(self.b2(self.c2(y)) + x, inplace=True)


def make_resnet(batch=8, size=32, width=8, blocks=6, classes=10):
    """Activations (batch x width x size^2 per layer) outweigh the few parameters."""
    m = torch.nn.Sequential(torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.ReLU(inplace=True),
                            *[_Res(width) for _ in range(blocks)],
                            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                            torch.nn.Linear(width, classes))
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, classes, (batch,))
    return m, (x,), lambda out: F.cross_entropy(out, y)


# --- dropout and batch norm ----------------------------------------------------------------

def make_dropout_bn(batch=32, features=64, hidden=256, classes=10, layers=2):
    blocks = []
    width = features
    for i in range(layers):
        blocks += [torch.nn.Linear(width, hidden), torch.nn.BatchNorm1d(hidden), torch.nn.ReLU(),
                   torch.nn.Dropout(0.3 if i % 2 == 0 else 0.5)]
        width = hidden
    m = torch.nn.Sequential(*blocks, torch.nn.Linear(hidden, classes))
    x = torch.randn(batch, features)
    y = torch.randint(0, classes, (batch,))
    return m, (x,), lambda out: F.cross_entropy(out, y)


# --- torchvision -----------------------------------------------------------------------------

def make_torchvision(name: str, batch: int, size: int = 128, classes: int = 10):
    import torchvision
    try:
        ctor = getattr(torchvision.models, name)
    except AttributeError:
        raise ValueError(f"torchvision has no model {name!r}") from None
    model = ctor(weights=None, num_classes=classes)
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, classes, (batch,))

    def loss(out):
        if isinstance(out, tuple):  # inception/googlenet auxiliary outputs in training
            out = out[0]
        if hasattr(out, "logits"):
            out = out.logits
        return F.cross_entropy(out, y)

    return model, (x,), loss
