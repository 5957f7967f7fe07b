# SPDX-License-Identifier: Apache-2.0
"""The same bridge on CUDA tensors (PyTorch's CUDA allocator): a CNN step under a budget,
bit-identical to plain PyTorch on the GPU. Skips (77) without a CUDA build of PyTorch and a GPU."""

import sys

from _common import torch, dtr_torch, train, assert_identical, peak_of

if not torch.cuda.is_available():
    print("SKIP: no CUDA device (PyTorch", torch.__version__, "cuda", torch.version.cuda, ")")
    sys.exit(77)

F = torch.nn.functional


def cnn():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(inplace=True),
                            torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10)).cuda()
    x = torch.randn(32, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (32,), device="cuda")
    return m, (x,), lambda out: F.cross_entropy(out, y)


def main():
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    ref = train(cnn, 3)
    rt = dtr_torch.Runtime(device="cuda")
    got = train(cnn, 3, rt)
    assert_identical(ref, got, "cuda unlimited")
    peak = rt.stats()["peak_resident_bytes"]
    rt = dtr_torch.Runtime(budget=int(0.6 * peak), device="cuda")
    got = train(cnn, 3, rt)
    assert_identical(ref, got, "cuda 0.6")
    print("cuda: bit-identical,", rt.stats())
    return 0


if __name__ == "__main__":
    sys.exit(main())
