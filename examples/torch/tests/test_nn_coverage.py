# SPDX-License-Identifier: Apache-2.0
"""Operator coverage: the torch.nn layers users train with, each forward and backward under a
budget that forces recomputation, two SGD steps, bit for bit against plain PyTorch (loss,
every gradient, every parameter, every buffer). Recurrent layers and cells (their gates come
from unsafe_split / unsafe_chunk, whose result count follows from the arguments), attention
and transformer layers, embeddings, normalisations, pooling, upsampling, convolutions and
the common losses.

Each case runs unlimited first (its peak and its physical floor f: parameters, optimizer state
and the largest operator), then at budgets three quarters and half of the way from 1.25 f to
the peak: the rows print what was evicted and recomputed; every finished row must be identical,
and each case must finish at least one budgeted row with recomputation."""

import sys

from _common import torch, dtr_torch, train, assert_identical, peak_of

nn = torch.nn
F = torch.nn.functional

B, T, D = 16, 24, 32  # batch, sequence, features


def seq_input():
    return torch.randn(B, T, D)


def classes(n=10):
    return torch.randint(0, n, (B,))


class Recurrent(nn.Module):
    """A recurrent layer over the sequence, its last output to a linear head."""

    def __init__(self, layer):
        super().__init__()
        self.rnn = layer
        self.head = nn.Linear(D, 10)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


class Cell(nn.Module):
    """A recurrent cell stepped over the sequence by hand (as an LSTM written by hand is)."""

    def __init__(self, cell, lstm):
        super().__init__()
        self.cell, self.lstm = cell, lstm
        self.head = nn.Linear(D, 10)

    def forward(self, x):
        h = torch.zeros(x.shape[0], D)
        c = torch.zeros(x.shape[0], D)
        for t in range(x.shape[1]):
            if self.lstm:
                h, c = self.cell(x[:, t], (h, c))
            else:
                h = self.cell(x[:, t], h)
        return self.head(h)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(D, 4, batch_first=True)
        self.head = nn.Linear(D, 10)

    def forward(self, x):
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        out, weights = self.mha(x, x, x, attn_mask=mask)
        return self.head(out.mean(1) + weights.sum())


class Transformer(nn.Module):
    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder
        if decoder:
            self.layer = nn.TransformerDecoderLayer(D, 4, dim_feedforward=64, dropout=0.1, batch_first=True)
        else:
            self.layer = nn.TransformerEncoderLayer(D, 4, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.head = nn.Linear(D, 10)

    def forward(self, x):
        out = self.layer(x, x[:, : T // 2]) if self.decoder else self.layer(x)
        return self.head(out.mean(1))


class Embeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, D, padding_idx=0)
        self.bag = nn.EmbeddingBag(100, D, mode="mean")
        self.proj = nn.Linear(D, D)
        self.head = nn.Linear(D, 10)

    def forward(self, idx):
        h = self.proj(torch.tanh(self.emb(idx)) * 2)
        return self.head(torch.relu(h).mean(1) + self.bag(idx))


class Mean(nn.Module):
    """The mean over the sequence."""

    def forward(self, x):
        return x.mean(1)


class Channels(nn.Module):
    """(batch, sequence, features) to (batch, features, sequence), for Conv1d."""

    def forward(self, x):
        return x.transpose(1, 2)


def conv_net(*layers, channels=8):
    """The layers under test between convolutions, so that activations, not one operator,
    make the peak."""
    c = channels
    return nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1),
                         nn.Tanh(), *layers, nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 10))


def image():
    return torch.randn(B, 3, 32, 32)


def case(build, x, loss=None, y=None):
    """A maker for _common.train: (model, inputs, loss_fn) built afresh each call."""
    def make():
        torch.manual_seed(0)
        m = build()
        inp = x()
        target = classes() if y is None else y()
        return m, (inp,), (loss or (lambda out: F.cross_entropy(out, target)))
    return make


class LossHead(nn.Module):
    """Per position, then the mean over the sequence: the output a loss reads."""

    def __init__(self, out=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(D, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                                 nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out))

    def forward(self, x):
        return self.net(x).mean(1)


def loss_case(loss_fn, target, out=10):
    def make():
        torch.manual_seed(0)
        m = LossHead(out)
        x = seq_input()
        t = target()
        return m, (x,), lambda o: loss_fn(o, t)
    return make


CASES = {
    "LSTM": case(lambda: Recurrent(nn.LSTM(D, D, num_layers=2, batch_first=True)), seq_input),
    "GRU": case(lambda: Recurrent(nn.GRU(D, D, batch_first=True, bidirectional=False)), seq_input),
    "RNN": case(lambda: Recurrent(nn.RNN(D, D, batch_first=True, nonlinearity="relu")), seq_input),
    "LSTMCell": case(lambda: Cell(nn.LSTMCell(D, D), lstm=True), seq_input),
    "GRUCell": case(lambda: Cell(nn.GRUCell(D, D), lstm=False), seq_input),
    "MultiheadAttention": case(Attention, seq_input),
    "TransformerEncoderLayer": case(lambda: Transformer(decoder=False), seq_input),
    "TransformerDecoderLayer": case(lambda: Transformer(decoder=True), seq_input),
    "Embedding+EmbeddingBag": case(Embeddings, lambda: torch.randint(0, 100, (B, 4 * T))),
    "BatchNorm2d": case(lambda: conv_net(nn.BatchNorm2d(8), nn.ReLU()), image),
    "GroupNorm+InstanceNorm": case(lambda: conv_net(nn.GroupNorm(2, 8), nn.InstanceNorm2d(8, affine=True)), image),
    "LayerNorm": case(lambda: nn.Sequential(nn.LayerNorm(D), nn.Flatten(), nn.Linear(T * D, 10)), seq_input),
    "MaxPool+AvgPool": case(lambda: conv_net(nn.MaxPool2d(2), nn.ReLU(), nn.AvgPool2d(2)), image),
    "Upsample+ConvTranspose": case(lambda: conv_net(nn.Upsample(scale_factor=2, mode="bilinear"),
                                                    nn.ConvTranspose2d(8, 8, 3, padding=1), nn.ReLU(),
                                                    nn.Upsample(scale_factor=0.5, mode="nearest")), image),
    "PixelShuffle": case(lambda: conv_net(nn.Conv2d(8, 32, 1), nn.PixelShuffle(2),
                                          nn.Conv2d(8, 8, 3, stride=2, padding=1)), image),
    "Conv1d": case(lambda: nn.Sequential(Channels(), nn.Conv1d(D, D, 3, padding=1), nn.GELU(),
                                         nn.Conv1d(D, D, 3, padding=2, dilation=2), nn.ReLU(),
                                         nn.AdaptiveMaxPool1d(1), nn.Flatten(), nn.Linear(D, 10)),
                   seq_input),
    "Dropout+ELU+Softplus": case(lambda: nn.Sequential(nn.Linear(D, 64), nn.Dropout(0.3), nn.ELU(),
                                                       nn.Linear(64, 64), nn.Softplus(), Mean(),
                                                       nn.Linear(64, 10)), seq_input),
    # backward kernels that are fused on the CPU and composite elsewhere (silu_backward,
    # mish_backward): under the bridge they must run fused too, or the last bits differ
    "SiLU+Mish+Hardswish": case(lambda: nn.Sequential(nn.Linear(D, 64), nn.SiLU(), nn.Linear(64, 64),
                                                      nn.Mish(), nn.Linear(64, 64), nn.Hardswish(),
                                                      Mean(), nn.Linear(64, 10)), seq_input),
    "NLLLoss(log_softmax)": loss_case(lambda o, t: F.nll_loss(F.log_softmax(o, 1), t), classes),
    "MSELoss+L1Loss+SmoothL1": loss_case(lambda o, t: F.mse_loss(o, t) + F.l1_loss(o, t) + F.smooth_l1_loss(o, t),
                                         lambda: torch.randn(B, 10)),
    "BCEWithLogits+KLDiv": loss_case(lambda o, t: F.binary_cross_entropy_with_logits(o, t)
                                     + F.kl_div(F.log_softmax(o, 1), F.softmax(t, 1), reduction="batchmean"),
                                     lambda: torch.rand(B, 10)),
    "CosineEmbedding+TripletMargin": loss_case(
        lambda o, t: F.cosine_embedding_loss(o[:, :5], o[:, 5:], t)
        + F.triplet_margin_loss(o[:, :3], o[:, 3:6], o[:, 6:9]),
        lambda: (torch.rand(B) > 0.5).float() * 2 - 1),
}


def budgeted_runs(name, make, ref, peak, floor):
    finished = 0
    low = min(1.25 * floor, peak)
    for part in (0.75, 0.5):
        budget = int(low + part * (peak - low))
        rt = dtr_torch.Runtime(budget=budget, deterministic_costs=True)
        try:
            got = train(make, 2, rt)
        except dtr_torch.OutOfMemoryError as e:
            print(f"  {budget / peak:.2f} of the peak: out of memory ({str(e)[:90]}...)")
            continue
        st = rt.stats()
        assert_identical(ref, got, f"{name} at {budget}")
        assert st["peak_resident_bytes"] <= budget, st
        print(f"  {budget / peak:.2f} of the peak: bit-identical, evictions {st['evictions']}, "
              f"remats {st['rematerializations']}")
        if st["rematerializations"] > 0:
            finished += 1
    return finished


def main():
    only = set(sys.argv[1:])
    for name, make in CASES.items():
        if only and name not in only:
            continue
        ref = train(make, 2)
        rt = dtr_torch.Runtime(deterministic_costs=True)
        assert_identical(ref, train(make, 2, rt), f"{name} unlimited")
        peak, floor = peak_of(make, 2)
        print(f"{name}: peak {peak}, f {floor / peak:.2f} of it, {rt.stats()['dispatched']} operators dispatched")
        assert budgeted_runs(name, make, ref, peak, floor) > 0, f"{name}: no budgeted run recomputed anything"
    print("nn coverage: all layers bit-identical")


if __name__ == "__main__":
    main()
