"""Chapter 8: the Vision Transformer (Dosovitskiy et al., 2021, arXiv:2010.11929), the
encoder of `transformer` read over images.

`patchify` cuts images into non-overlapping `P×P` patches; `PatchEmbedding`
embeds them by a convolution with kernel = stride = P, puts a class token in front and
adds learned positions; `ViT` runs encoder blocks (`transformer.stack`) and
classifies the class token. `ViTConfig` extends `transformer.StackConfig` with
the image sizes and the classes. The paper's pre-training on large image sets and its MLP
head's hidden layer are left out.

Shapes use `b` batch, `c` channels, `n` patches, `d` width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from einops import rearrange, repeat
from torch import nn

from lecturelib.transformers.transformer import (
    StackConfig,
    check_config,
    check_stack_config,
    stack,
)
from lecturelib.validate import check_sizes, check_tensor


def check_patchify(images, patch_size) -> None:
    """The arguments of `patchify`: images whose sides are multiples of
    `patch_size`."""
    check_sizes(patch_size=patch_size)
    check_tensor(images, "images", "(b, c, H, W)")
    if (
        images.dim() != 4
        or images.shape[2] % patch_size
        or images.shape[3] % patch_size
    ):
        raise ValueError(
            f"images must be (b, c, H, W) with H and W multiples of "
            f"patch_size={patch_size}; got {tuple(images.shape)}"
        )


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut images into non-overlapping `P×P` patches, each flattened, row by row.
    Shapes: images `(b, c, H, W)` → `(b, n, c·P·P)` with `n = (H/P)·(W/P)`."""
    check_patchify(images, patch_size)
    return rearrange(
        images, "b c (gh p) (gw q) -> b (gh gw) (c p q)", p=patch_size, q=patch_size
    )


def check_patch_embedding(image_size, patch_size, in_channels, d_model) -> None:
    """The arguments of `PatchEmbedding`."""
    check_sizes(
        image_size=image_size,
        patch_size=patch_size,
        in_channels=in_channels,
        d_model=d_model,
    )
    if image_size % patch_size:
        raise ValueError(
            f"image_size must be a multiple of patch_size; got "
            f"{image_size} and {patch_size}"
        )


def check_images(images, in_channels: int, image_size: int) -> None:
    """Images `(b, c, H, W)` of the configured channels and size."""
    c, h, w = in_channels, image_size, image_size
    check_tensor(images, "images", f"(b, c, H, W) = (b, {c}, {h}, {w})")
    if images.dim() != 4 or tuple(images.shape[1:]) != (c, h, w):
        raise ValueError(
            f"images must be (b, c, H, W) = (b, {c}, {h}, {w}) as configured; "
            f"got {tuple(images.shape)}"
        )


class PatchEmbedding(nn.Module):
    """Class token + embedded `P×P` patches, plus learned positions: (b, 1 + n, d)."""

    def __init__(
        self, image_size: int, patch_size: int, in_channels: int, d_model: int
    ):
        super().__init__()
        check_patch_embedding(image_size, patch_size, in_channels, d_model)
        self.image_size, self.in_channels = image_size, in_channels
        self.n_patches = (image_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_channels, d_model, patch_size, stride=patch_size)
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 1 + self.n_patches, d_model))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        check_images(images, self.in_channels, self.image_size)
        x = rearrange(self.proj(images), "b d gh gw -> b (gh gw) d")  # (b, n, d)
        cls = repeat(self.cls, "1 1 d -> b 1 d", b=images.shape[0])  # (b, 1, d)
        return torch.cat([cls, x], 1) + self.pos  # (b, 1 + n, d)


def check_vit_config(c) -> None:
    """The fields of a `ViTConfig`."""
    check_stack_config(c)
    check_sizes(
        image_size=c.image_size,
        patch_size=c.patch_size,
        n_classes=c.n_classes,
        in_channels=c.in_channels,
    )


@dataclass(kw_only=True)
class ViTConfig(StackConfig):
    """Stack sizes; square `image_size`-pixel images cut into `patch_size` patches."""

    image_size: int
    patch_size: int
    n_classes: int
    in_channels: int = 1

    def __post_init__(self):
        check_vit_config(self)


class ViT(nn.Module):
    """Vision Transformer: patches → blocks → norm → classifier on the class token."""

    def __init__(self, config: ViTConfig):
        super().__init__()
        check_config(config, ViTConfig)
        c = self.config = config
        self.patches = PatchEmbedding(
            c.image_size, c.patch_size, c.in_channels, c.d_model
        )
        self.blocks = stack(c)
        self.norm = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.n_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patches(images)  # (b, 1 + n, d)
        for block in self.blocks:
            x = block(x)  # no mask
        return self.head(self.norm(x[:, 0]))  # (b, n_classes)
