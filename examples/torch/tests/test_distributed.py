# SPDX-License-Identifier: Apache-2.0
"""Two processes (torch.distributed, gloo, 127.0.0.1) train one model data-parallel, each
with its own runtime under its own budget; gradients are all-reduced after backward
(dtr_torch.distributed.all_reduce_grads), and, separately, by DistributedDataParallel
(prepared with dtr_torch.distributed.prepare_ddp; small buckets, so that several collectives
run while backward still computes). Each result is bit-identical to the same two-process
run without the bridge."""

import os
import signal
import socket
import subprocess
import sys
import tempfile

from _common import torch, dtr_torch  # noqa: F401 (skips without torch or the extension)

STEPS = 3


def worker(mode, rank, port, out):
    import torch.distributed as dist
    from dtr_torch import models
    from dtr_torch.distributed import all_reduce_grads
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}?use_libuv=0", rank=rank, world_size=2)
    torch.manual_seed(0)
    model, _, _ = models.make_resnet(batch=4, size=16, width=8, blocks=2)
    torch.manual_seed(100 + rank)  # each rank its own shard
    x = torch.randn(4, 3, 16, 16)
    y = torch.randint(0, 10, (4,))
    ddp = mode.startswith("ddp")
    net = model
    if ddp:
        from dtr_torch.distributed import prepare_ddp
        net = prepare_ddp(torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    F = torch.nn.functional

    def steps():
        for _ in range(STEPS):
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            if not ddp:
                all_reduce_grads(model.parameters())
            opt.step()

    if mode in ("plain", "ddp_plain"):
        # as in _common.train: the plain reference zero-fills its allocations, since 2.6's
        # oneDNN convolution backward reads uninitialized padding (docs/torch.md, "PyTorch 2.x")
        from dtr_torch._bridge import _ext
        _ext.set_zero_fill(True)
        steps()
    else:
        peak = int(os.environ["DTR_PEAK"]) if "DTR_PEAK" in os.environ else None
        rt = dtr_torch.Runtime(deterministic_costs=True, budget=None if peak is None else int(peak * (0.75 + 0.1 * rank)))
        with rt:
            steps()
        st = rt.stats()
        print(f"rank {rank}: budget {rt.budget}, peak {st['peak_resident_bytes']}, evictions {st['evictions']}, "
              f"remats {st['rematerializations']}", flush=True)
        if peak is not None:
            assert st["evictions"] > 0, st
    torch.save([p.detach().clone() for p in model.parameters()], out)
    # Both ranks done before either tears down: PyTorch 2.6's gloo once aborted a plain (no
    # dtr) worker at teardown ("terminate called without an active exception") in CI.
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pair(mode, tmp, env=None):
    port = free_port()
    outs = [os.path.join(tmp, f"{mode}{r}.pt") for r in range(2)]
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", mode, str(r), str(port), outs[r]],
                              env={"GLOO_SOCKET_IFNAME": "lo", **os.environ, **(env or {})})
             for r in range(2)]
    for p, out in zip(procs, outs):
        rc = p.wait(timeout=240)
        # PyTorch 2.6's gloo (Debian's build) aborts a worker at exit about one run in five,
        # plain PyTorch as much as the bridge's ("terminate called without an active
        # exception", SIGABRT), after its results are written: accepted then, and said.
        if rc == -signal.SIGABRT and os.path.exists(out):
            print(f"{mode} worker aborted at exit after writing its results (gloo teardown)",
                  file=sys.stderr)
            continue
        assert rc == 0, f"{mode} worker failed (exit status {rc})"
    return [torch.load(o) for o in outs]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        plain = run_pair("plain", tmp)
        unlimited = run_pair("dtr", tmp)
        # the peak of one rank's unlimited run, measured in-process, sets the budgets
        rt = dtr_torch.Runtime()
        from dtr_torch import models
        torch.manual_seed(0)
        model, (x,), loss_fn = models.make_resnet(batch=4, size=16, width=8, blocks=2)
        with rt:
            loss_fn(model(x)).backward()
        budgeted = run_pair("dtr", tmp, {"DTR_PEAK": str(rt.stats()["peak_resident_bytes"])})
        ddp_plain = run_pair("ddp_plain", tmp)
        ddp_budgeted = run_pair("ddp_dtr", tmp, {"DTR_PEAK": str(rt.stats()["peak_resident_bytes"])})
    for r in range(2):
        for a, b in zip(ddp_plain[r], ddp_budgeted[r]):
            assert torch.equal(a, b), f"rank {r}: DistributedDataParallel under budgets differs from plain DDP"
    for run, what in ((unlimited, "no budget"), (budgeted, "budgets 0.75 and 0.85")):
        for r in range(2):
            for a, b in zip(plain[r], run[r]):
                assert torch.equal(a, b), f"rank {r} ({what}) differs from the plain two-process run"
        for a, b in zip(run[0], run[1]):
            assert torch.equal(a, b), "the two ranks diverged"
    print("two processes (gloo): bit-identical to the plain two-process run, with and without budgets; "
          "DistributedDataParallel under budgets bit-identical to plain DDP")
    return 0


if __name__ == "__main__":
    sys.exit(main())
