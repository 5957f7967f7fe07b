# SPDX-License-Identifier: Apache-2.0
"""Operator zoo: views, in-place operators, multi-output and tuple-returning operators,
data-dependent sizes, .item() control flow, printing and .numpy(), random operators
recomputed after eviction, a library's operators with values beside their tensors, and clear
errors for what the bridge does not support. Every value is compared with plain PyTorch bit
for bit."""

import sys

from _common import torch, dtr_torch

F = torch.nn.functional


def zoo(x, w):
    """Forward computation touching many kinds of operators; returns (loss, extras)."""
    h = x @ w                                   # mm
    a, b = h.chunk(2, dim=1)                    # multi-view
    c, d, e = h.split([3, 5, h.shape[1] - 8], dim=1)
    t = h.t().contiguous().view(-1)[:17]        # transpose, copy, view, slicing
    ex = h[:, :1].expand(-1, 4)                 # expand
    y = a * b.relu() + c.sum() + d.mean(dim=1, keepdim=True) + e[:, 0:1] + ex[:, :1]
    z = y.clone()
    z.add_(1.5)                                 # in-place on a computed tensor
    z.masked_fill_(x[:, : z.shape[1]] > 0.3, 0.25)
    z.relu_()
    vals, idx = z.max(dim=1)                    # multi-output (tuple)
    top, topi = z.topk(2, dim=1)
    srt, _ = z.sort(dim=0)
    nz = torch.nonzero(z > 1.6)                 # data-dependent sizes
    ms = torch.masked_select(z, z > 1.0)
    u = torch.unique(idx)
    drop = F.dropout(z, 0.3, training=True)     # random
    # .item() in Python control flow
    s = z.sum()
    k = 0
    while s.item() > 0 and k < 5:
        s = s - z.abs().mean() * 3
        k += 1
    loss = (vals.sum() + top.sum() * 0.5 + srt[0].sum() + nz.sum() * 1e-3 + ms.sum() +
            drop.sum() + t.sum() + s + u.float().sum() + idx.float().sum())
    return loss, (vals, idx, top, topi, nz, ms, u, drop, srt)


def run(rt=None, evict_all=False):
    torch.manual_seed(0)
    x = torch.randn(512, 32, requires_grad=True)
    w = torch.randn(32, 40, requires_grad=True)
    torch.manual_seed(1)
    if rt is None:
        loss, extras = zoo(x, w)
        loss.backward()
        return loss.detach(), [t.detach() for t in extras], x.grad, w.grad
    with rt:
        loss, extras = zoo(x, w)
        if evict_all:
            # every computed tensor goes; reading recomputes (random ops replay their draws)
            for t in extras:
                rt.evict(t)
        loss.backward()
        out = (dtr_torch.materialize(loss.detach()), [dtr_torch.materialize(t.detach()) for t in extras])
    return out[0], out[1], x.grad, w.grad


def check_same(ref, got, what):
    assert torch.equal(ref[0], got[0]), f"{what}: loss {ref[0]} vs {got[0]}"
    for i, (p, q) in enumerate(zip(ref[1], got[1])):
        assert p.shape == q.shape and torch.equal(p, q), f"{what}: extra {i} differs"
    assert torch.equal(ref[2], got[2]) and torch.equal(ref[3], got[3]), f"{what}: gradients differ"
    assert type(got[2]) is torch.Tensor, f"{what}: x.grad not given back as a plain tensor"


def test_values():
    ref = run()
    check_same(ref, run(dtr_torch.Runtime()), "unlimited")
    rt = dtr_torch.Runtime()
    check_same(ref, run(rt, evict_all=True), "evict all")
    # Without the out-of-place rewrites, z.add_, masked_fill_ and relu_ (on an activation
    # nothing else holds) are the runtime's mutations, written into the old version's block.
    rt = dtr_torch.Runtime(inplace_rewrite=False)
    check_same(ref, run(rt, evict_all=True), "evict all, in-place updates through the runtime")
    assert rt.stats()["in_place_reuses"] >= 3, rt.stats()
    peak = dtr_torch.Runtime()
    run(peak)
    p = peak.stats()["peak_resident_bytes"]
    floor = peak.stats()["max_op_bytes"] + (512 * 32 + 32 * 40) * 4 * 2  # + x, w and their grads
    print(f"zoo: peak {p}, floor {floor} ({floor / p:.2f})")
    for ratio in ((1 + floor / p) / 2, 1.3 * floor / p):
        rt = dtr_torch.Runtime(deterministic_costs=True, budget=int(p * ratio))
        check_same(ref, run(rt), f"ratio {ratio}")
        st = rt.stats()
        assert st["peak_resident_bytes"] <= rt.budget
        print(f"zoo ratio {ratio:.2f}: identical, evictions {st['evictions']}, remats {st['rematerializations']}")


def test_random_recompute():
    """A dropout mask recomputed after eviction equals the first draw, and the generator
    continues as in plain PyTorch."""
    torch.manual_seed(3)
    x = torch.randn(64, 64)
    plain_mask = F.dropout(torch.ones(64, 64), 0.5)
    plain_next = torch.rand(3)
    torch.manual_seed(3)
    x = torch.randn(64, 64)
    rt = dtr_torch.Runtime()
    with rt:
        m = F.dropout(torch.ones(64, 64), 0.5)
        assert rt.evict(m), "dropout output should be evictable (its generator state is recorded)"
        nxt = torch.rand(3)
        again = dtr_torch.materialize(m)
        nxt = dtr_torch.materialize(nxt)
    assert rt.stats()["rematerializations"] >= 1
    assert torch.equal(again, plain_mask) and torch.equal(nxt, plain_next)
    del x


def test_printing_numpy():
    rt = dtr_torch.Runtime()
    with rt:
        a = torch.arange(6.0).view(2, 3) * 2
        s = repr(a)
        n = a.numpy()
        rt.evict(a)
        l = a.tolist()
        v = a[1, 2].item()
    assert "10." in s and n.shape == (2, 3) and l[1][2] == 10.0 and v == 10.0, (s, n, l, v)


def test_views_share_storage():
    """A write through one view is seen through the others (mutation follows the storage)."""
    torch.manual_seed(0)
    base = torch.randn(4, 6)
    ref = base.clone()
    v = ref.view(6, 4)[1:3]
    v.mul_(10)
    rt = dtr_torch.Runtime()
    with rt:
        b = base * 1
        bv = b.view(6, 4)[1:3]
        bv.mul_(10)
        rt.evict(b)
        got = dtr_torch.materialize(b)
    assert torch.equal(got, ref)
    # parameters updated in place inside the context are the same tensors afterwards
    p = torch.zeros(3)
    pid = id(p)
    with dtr_torch.Runtime():
        p.add_(torch.ones(3))
        p[1:].mul_(4)
    assert id(p) == pid and type(p) is torch.Tensor and torch.equal(p, torch.tensor([1.0, 4.0, 4.0])), p


def test_unsupported():
    rt = dtr_torch.Runtime()
    sp = torch.eye(3).to_sparse()
    try:
        with rt:
            (sp * 2)
    except RuntimeError as e:
        assert "unsupported" in str(e) and "Sparse" in str(e), e
    else:
        raise AssertionError("a sparse tensor must be refused")
    try:
        with dtr_torch.Runtime():
            x = torch.ones(3, 4) * 2
            x.resize_(6)
    except RuntimeError as e:
        assert "unsupported" in str(e) and "resize_" in str(e), e
    else:
        raise AssertionError("resize_ must be refused")


def test_custom_operator_returns():
    """A library's operator that returns values beside its tensor (an int list, a float)
    hands them back as plain PyTorch does, also once its tensor was evicted and recomputed;
    one that returns tensors inside another structure (Tensor?[], or a value of type Any) is
    refused, named."""
    lib = torch.library.Library("dtr_zoo", "DEF")
    for schema, kernel in (
            ("scaled_with_shape(Tensor x) -> (Tensor, int[], float)",
             lambda x: (x * 2, list(x.shape), float(x.sum()))),
            ("optional_pair(Tensor x) -> Tensor?[]", lambda x: [x + 1, None]),
            ("numel_any(Tensor x) -> Any", lambda x: x.numel()),
            ("pair_any(Tensor x) -> Any", lambda x: (x + 1, 3)),
            ("scaled_and_any(Tensor x) -> (Tensor, Any)", lambda x: (x * 2, [x.sum()]))):
        lib.define(schema)
        lib.impl(schema.split("(")[0], kernel, "CPU")
    x = torch.arange(12.0).view(3, 4)
    ref = torch.ops.dtr_zoo.scaled_with_shape(x)

    def refused(op, words, why):
        try:
            getattr(torch.ops.dtr_zoo, op)(x * 1)
        except RuntimeError as e:
            assert all(w in str(e) for w in ["unsupported", op] + words), e
        else:
            raise AssertionError(why + " must be refused")

    rt = dtr_torch.Runtime()
    with rt:
        got = torch.ops.dtr_zoo.scaled_with_shape(x * 1)
        assert isinstance(got[0], dtr_torch.DTRTensor), "the tensor result is not managed"
        assert got[1] == [3, 4] and got[2] == ref[2], f"values beside the tensor: {got[1:]}"
        rt.evict(got[0])
        assert torch.equal(dtr_torch.materialize(got[0]), ref[0]), "recomputed result differs"
        refused("optional_pair", ["Tensor?[]"], "tensors returned inside a Tensor?[]")
        assert torch.ops.dtr_zoo.numel_any(x * 1) == 12, "an Any holding no tensor is kept"
        refused("pair_any", ["Tuple"], "a tensor returned inside an Any")
        # beside a tensor result: the recorded path (above: the path of no tensor results)
        refused("scaled_and_any", ["List"], "a tensor returned inside an Any")
    print("custom operators: values beside the tensor kept, Tensor?[] and tensors in Any refused")


def test_inplace_views():
    """Sizes and strides changed in place (GRU's transpose_, squeeze_, as_strided_) on managed
    and plain tensors alike, as in plain PyTorch."""
    def f():
        x = torch.arange(12.0).reshape(3, 4) * 2
        x.t_()
        x.unsqueeze_(0)
        y = torch.ones(2, 1, 3)
        y.squeeze_(1)
        z = x.clone()
        z.as_strided_((2, 2), (1, 4), 1)
        return x * 1, y * 1, z * 1
    ref = f()
    with dtr_torch.Runtime() as rt:
        got = [dtr_torch.materialize(t) for t in f()]
        assert rt.stats()["dispatched"] > 0
    for a, b in zip(ref, got):
        assert a.shape == b.shape and a.stride() == b.stride() and torch.equal(a, b), (a, b)


def test_inplace_constants_and_promotion():
    """Optimizer updates of parameters nothing reads any more run in place (the parameter keeps
    its storage, as in plain PyTorch); an update of a constant a live recipe still reads is
    copy-on-write (the recipe's input keeps its old bytes); gradients become constants without
    a copy. Values bit-identical to plain PyTorch."""
    def train(rt=None):
        torch.manual_seed(3)
        m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        x = torch.randn(8, 16)
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        ptr = m[0].weight.data_ptr()
        with (rt if rt is not None else _Null()):
            for _ in range(3):
                opt.zero_grad()
                m(x).square().mean().backward()
                opt.step()
            # a recipe that reads a parameter, kept alive; then an in-place update of it
            h = m[0](x)
            with torch.no_grad():
                m[0].bias.add_(1.0)
            if rt is not None:
                assert rt.evict(h), "h must be evictable"
            hv = h.sum().item()
        return [p.detach().clone() for p in m.parameters()], hv, m[0].weight.data_ptr() == ptr

    ref, ref_h, _ = train()
    rt = dtr_torch.Runtime(deterministic_costs=True)
    got, got_h, same_storage = train(rt)
    st = rt.stats()
    for a, b in zip(ref, got):
        assert torch.equal(a, b)
    assert ref_h == got_h, (ref_h, got_h)  # recomputed h read the bias before the update
    assert st["inplace_direct"] > 0, st
    assert st["promotion_evictions"] > 0, st
    assert same_storage, "an unread parameter's update must keep its storage"


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_collective_single_process():
    """A c10d collective on a DTRTensor (a one-process gloo group): runs on its memory, is
    never recorded, and the tensor reads back the collective's result after eviction of its
    inputs."""
    import os
    import socket
    import torch.distributed as dist
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}?use_libuv=0", rank=0, world_size=1)
    try:
        rt = dtr_torch.Runtime(deterministic_costs=True)
        with rt:
            a = torch.arange(6.0) * 2
            dist.all_reduce(a)
            b = (a + 1).sum()
            assert b.item() == float((torch.arange(6.0) * 2 + 1).sum())
    finally:
        dist.destroy_process_group()
    del os


def test_view_cache():
    """The same view operators on arguments of the same sizes but other strides, offsets or
    storage sizes, twice: every result has plain PyTorch's geometry and values, the second
    round from the view cache."""
    torch.manual_seed(0)
    base = torch.randn(6, 8)

    def views(x):
        return [x.t(), x.t().t(), x[1:].t(), x[:, 2:].t(), x.view(-1) if x.is_contiguous() else x.t(),
                x.unsqueeze(0).expand(3, -1, -1), x.transpose(0, 1)[::2], x.unbind(0)[2], x.split(3, 1)[1],
                x.narrow(1, 1, 4), x.select(0, 2), x.diagonal()]

    def arguments(b):
        return [b, b.t().contiguous().t(), b[1:], b[:, 1:7], b.t()]

    ref = [[(v.shape, v.stride(), v.storage_offset(), v.clone()) for v in views(a)] for a in arguments(base)]
    with dtr_torch.Runtime() as rt:
        src = base * 1  # managed
        for _ in range(2):
            for want, a in zip(ref, arguments(src)):
                for (shape, stride, offset, value), v in zip(want, views(a)):
                    assert (v.shape, v.stride(), v.storage_offset()) == (shape, stride, offset), \
                        (v.shape, v.stride(), v.storage_offset(), shape, stride, offset)
                    assert torch.equal(dtr_torch.materialize(v), value)
    st = rt.stats()
    assert st["view_cache_hits"] > 0 and st["view_cache_hits"] < st["views"], st
    print(f"view cache: {st['views']} views, {st['view_cache_hits']} geometries from the cache, all as plain")


def main():
    test_view_cache()
    test_values()
    test_random_recompute()
    test_printing_numpy()
    test_views_share_storage()
    test_unsupported()
    test_custom_operator_returns()
    test_inplace_views()
    test_inplace_constants_and_promotion()
    test_collective_single_process()
    print("zoo: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
