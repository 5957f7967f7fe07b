# SPDX-License-Identifier: Apache-2.0
"""Small configurations in which activations outweigh parameters: a narrow residual network,
a 2-layer GPT with a longer sequence, a TreeLSTM over a data-dependent tree, a model with
dropout and batch norm; SGD with momentum and Adam. Each at ratio 1.0 and at two budgets
between 1.5x and 3x its physical floor, bit-identical to plain PyTorch."""

import sys

from _common import check_model
from dtr_torch import models


def main():
    which = sys.argv[1:] or ["resnet", "gpt", "treelstm", "dropout_bn"]
    if "resnet" in which:
        check_model("narrow resnet", lambda: models.make_resnet(batch=4, size=32, width=8, blocks=4), opt="sgd")
    if "gpt" in which:
        check_model("gpt 2 layers", lambda: models.make_gpt(batch=2, layers=2, d_model=32, heads=2, seq=128,
                                                             vocab=64), opt="adam")
    if "treelstm" in which:
        check_model("treelstm", lambda: models.make_treelstm(batch=2, tokens=24, dim=32), opt="sgd")
    if "dropout_bn" in which:
        check_model("dropout + batch norm", lambda: models.make_dropout_bn(batch=256, features=32, hidden=128),
                    opt="adam")
    return 0


if __name__ == "__main__":
    sys.exit(main())
