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
        check_model("gpt 2 layers, seq 256", lambda: models.make_gpt(batch=2, layers=2, d_model=64, heads=4, seq=256,
                                                                      vocab=64, dropout=0.1), opt="sgd",
                    floor_multiples=(2.4, 1.8))
    if "treelstm" in which:
        # Deep recomputation chains (a subtree per node) thrash below about 3.3x this floor; see
        # docs/torch.md for the measured floor.
        check_model("treelstm", lambda: models.make_treelstm(batch=2, tokens=96, dim=16, vocab=50), opt="sgd",
                    floor_multiples=(3.7, 3.4))
    if "dropout_bn" in which:
        check_model("dropout + batch norm", lambda: models.make_dropout_bn(batch=512, features=32, hidden=64, layers=6),
                    opt="adam")
    return 0


if __name__ == "__main__":
    sys.exit(main())
