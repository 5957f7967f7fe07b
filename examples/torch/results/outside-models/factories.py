# SPDX-License-Identifier: Apache-2.0
"""Models of issue 33's list that the bench has no built-in for, as `--model FILE.py:FACTORY`
factories (batch -> model, inputs, loss function): a small ViT with dropout and a 4-layer GPT.
The commands and what they measured: README.md beside this file."""

import torch
import torch.nn.functional as F


def vit_small(batch):
    """A 6-layer ViT (torchvision's VisionTransformer, 256 wide, patches of 16 on 128x128 images)
    with dropout and attention dropout 0.1: random operators in every block."""
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(image_size=128, patch_size=16, num_layers=6, num_heads=8,
                              hidden_dim=256, mlp_dim=1024, dropout=0.1, attention_dropout=0.1,
                              num_classes=10)
    x = torch.randn(batch, 3, 128, 128)
    y = torch.randint(0, 10, (batch,))
    return model, (x,), lambda out: F.cross_entropy(out, y)


def gpt4(batch):
    """The bench's GPT with 4 layers, 128 wide, sequences of 512 (`gpt2` is the same with 2)."""
    from dtr_torch import models

    return models.make_gpt(batch=batch, layers=4, seq=512, d_model=128)
