# SPDX-License-Identifier: Apache-2.0
"""What PyTorch 2.x brings that reaches the bridge in a new way (docs/torch.md, "PyTorch 2.x"):
functional collectives work, bit-identical; a torch.compile'd region entered inside a Runtime
context and FullyShardedDataParallel's flat parameters each get a clear error naming them,
never a wrong value. Parts whose PyTorch feature is missing (1.13: no torch.compile, no
functional collectives) say so and are skipped; the rest runs on every version."""

import socket

from _common import torch, dtr_torch

F = torch.nn.functional


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def expect_error(fn, *needles):
    try:
        fn()
    except Exception as e:  # noqa: BLE001: the type varies with the wrapping (dynamo wraps)
        text = str(e)
        assert all(n in text for n in needles), f"unexpected error text: {text}"
        return text
    raise AssertionError(f"no error; expected one naming {needles}")


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def compiled_regions():
    if not hasattr(torch, "compile"):
        print("torch.compile: not in this PyTorch, skipped")
        return
    model = mlp()
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="eager")  # no C compiler needed; same entry path
    warm = compiled(x)  # compiled (and cached) outside the context
    plain = model(x)
    with dtr_torch.Runtime():
        # a cached graph and a fresh compilation are both refused at the region's entry
        expect_error(lambda: compiled(x * 1), "torch.compile", "_orig_mod")
        expect_error(lambda: torch.compile(mlp(), backend="eager")(x), "torch.compile")
        # the eager module works in the same context, bit-identical
        got = dtr_torch.materialize(compiled._orig_mod(x).sum())
    assert torch.equal(got, plain.sum()), (got, plain.sum())
    assert torch.equal(compiled(x), warm)  # and the compiled one again after it
    print("torch.compile: refused inside the context with a clear error; eager module bit-identical")


def process_group(port):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}?use_libuv=0",
                            rank=0, world_size=1)
    return dist


def functional_collectives():
    try:
        import torch.distributed._functional_collectives as fc
    except ImportError:
        print("functional collectives: not in this PyTorch, skipped")
        return
    dist = process_group(free_port())
    try:
        x = torch.arange(6.0).reshape(2, 3)
        ref = fc.wait_tensor(fc.all_reduce(x * 2, "sum", dist.group.WORLD))
        ref_next = (ref + 1).square().sum()
        with dtr_torch.Runtime():
            y = fc.all_reduce(x * 2, "sum", dist.group.WORLD)
            got = dtr_torch.materialize((y + 1).square().sum())
            got_y = dtr_torch.materialize(fc.wait_tensor(y))
        assert torch.equal(got, ref_next) and torch.equal(got_y, ref), (got, ref_next)
    finally:
        dist.destroy_process_group()
    print("functional collectives: bit-identical")


def fsdp():
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    except Exception as e:  # noqa: BLE001: 1.13's FSDP fails to import on Python 3.11 (ValueError)
        print(f"FSDP: not importable in this PyTorch ({type(e).__name__}: {e}), skipped")
        return
    dist = process_group(free_port())
    try:
        try:
            model = FSDP(mlp(), device_id=torch.device("cpu"))
            model(torch.randn(4, 8))
        except Exception as e:  # noqa: BLE001
            print(f"FSDP: does not run on a CPU process group in this PyTorch ({e}); skipped")
            return
        x = torch.randn(4, 8)
        with dtr_torch.Runtime():
            expect_error(lambda: model(x).sum().backward(), "FullyShardedDataParallel",
                         "dtr_torch: unsupported")
    finally:
        dist.destroy_process_group()
    print("FSDP: refused with a clear error")


def main():
    compiled_regions()
    functional_collectives()
    fsdp()
    print("ok")


if __name__ == "__main__":
    main()
