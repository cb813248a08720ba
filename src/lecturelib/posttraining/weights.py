"""Chapter 21: GPT-2's released weights in the book's GPT (chapter 11).

GPT-2 small (124M parameters; Radford et al., 2019) is chapter 11's
`GPT` with learned positions, LayerNorm (eps 1e-5)
with biases, biases in every linear layer, a tied output head and GELU's tanh
approximation. `gpt2_config` reads its `config.json` into a `GPTConfig` and
refuses, by name, what the book's GPT cannot express. `from_gpt2_state_dict`
renames GPT-2's tensors (`h.{i}.attn.c_attn.weight` → `blocks.{i}.attn.qkv.weight`,
...) and transposes the weights of its `Conv1D` layers, which store a linear map
`(in, out)` where `nn.Linear` stores `(out, in)`; a test asserts equal logits and
equal greedy generations against `transformers.GPT2LMHeadModel` on a random small
configuration.

`load_gpt2` fetches the real files (`config.json`, `model.safetensors`,
`tokenizer.json`) at a pinned revision through `lecturelib.data` (SHA-256, cache,
progress bar, and an error that says what to do offline), and `read_safetensors`
reads the weights with the `safetensors` package: 8 bytes holding the header's length
`n` (little-endian), `n` bytes of JSON giving each tensor's dtype, shape and byte
range, then the raw little-endian tensors.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from tokenizers import Tokenizer

from lecturelib import data
from lecturelib.pretraining import gpt
from lecturelib.validate import check_int, check_type, describe, is_int

# GPT-2's activation_function → GPTConfig.activation ("gelu_new" is the tanh
# approximation under the name of the original code)
ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
}
# GPT-2 options the book's GPT has one value of: (name, GPT2Config's default, required)
FIXED = (
    ("layer_norm_epsilon", 1e-5, 1e-5),  # torch's LayerNorm eps
    ("scale_attn_weights", True, True),  # scores divided by √d_head
    ("scale_attn_by_inverse_layer_idx", False, False),
    ("reorder_and_upcast_attn", False, False),
    ("add_cross_attention", False, False),
)
SIZES = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")
# A block's module in the book's GPT: (its name in GPT-2, a Conv1D stored (in, out))
BLOCK = {
    "norm1": ("ln_1", False),
    "attn.qkv": ("attn.c_attn", True),
    "attn.out": ("attn.c_proj", True),
    "norm2": ("ln_2", False),
    "mlp.up": ("mlp.c_fc", True),
    "mlp.down": ("mlp.c_proj", True),
}


def gpt2_config(hf_config: dict) -> gpt.GPTConfig:
    """The `GPTConfig` of a GPT-2 `config.json` (a dict): `n_embd` → `d_model`,
    `n_layer`, `n_head`, `n_positions` → `seq_len`, `n_inner` → `d_ff`, its
    one dropout rate, and GPT-2's form: learned positions, LayerNorm, biases, tied head.
    Missing options take `transformers.GPT2Config`'s defaults."""
    check_gpt2_config(hf_config)
    c = hf_config
    return gpt.GPTConfig(
        vocab_size=c["vocab_size"],
        seq_len=c["n_positions"],
        d_model=c["n_embd"],
        n_layers=c["n_layer"],
        n_heads=c["n_head"],
        d_ff=c.get("n_inner"),
        dropout=c.get("resid_pdrop", 0.1),
        norm="layer",
        positions="learned",
        bias=True,
        tie_embeddings=c.get("tie_word_embeddings", True),
        activation=ACTIVATIONS[c.get("activation_function", "gelu_new")],
    )


def check_gpt2_config(hf_config) -> None:
    """A GPT-2 configuration that the book's GPT expresses exactly: the sizes present,
    a tanh or exact GELU, one dropout rate, and GPT-2's fixed options."""
    check_type(hf_config, "hf_config", Mapping, "a dict (GPT-2's config.json)")
    c = hf_config
    if c.get("model_type", "gpt2") != "gpt2":
        raise ValueError(
            f"hf_config must be GPT-2's; got model_type {c['model_type']!r}"
        )
    missing = [name for name in SIZES if name not in c]
    if missing:
        raise ValueError(f"hf_config lacks {', '.join(missing)}")
    for name in SIZES:
        if not is_int(c[name]):
            raise ValueError(
                f"hf_config {name} must be an int; got {describe(c[name])}"
            )
    activation = c.get("activation_function", "gelu_new")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"hf_config activation_function must be one of {tuple(ACTIVATIONS)}; the "
            f"book's GPT has no {activation!r}"
        )
    rates = {
        name: c.get(name, 0.1) for name in ("resid_pdrop", "embd_pdrop", "attn_pdrop")
    }
    if len(set(rates.values())) > 1:
        raise ValueError(
            f"the book's GPT has one dropout rate; hf_config has {rates} (set them "
            "equal)"
        )
    for name, default, required in FIXED:
        if c.get(name, default) != required:
            raise ValueError(
                f"hf_config {name} must be {required!r} for the book's GPT; got "
                f"{c.get(name, default)!r}"
            )


def gpt2_names(n_layers: int) -> dict[str, tuple[str, bool]]:
    """The book's GPT's parameter names → (GPT-2's, whether it is a `Conv1D` weight to
    transpose). The tied output head is the embedding and has no entry."""
    check_int(n_layers, "n_layers", 1)
    names = {
        "embed.weight": ("wte.weight", False),
        "pos.weight": ("wpe.weight", False),
        "norm.weight": ("ln_f.weight", False),
        "norm.bias": ("ln_f.bias", False),
    }
    for i in range(n_layers):
        for ours, (theirs, conv1d) in BLOCK.items():
            names[f"blocks.{i}.{ours}.weight"] = (f"h.{i}.{theirs}.weight", conv1d)
            names[f"blocks.{i}.{ours}.bias"] = (f"h.{i}.{theirs}.bias", False)
    return names


def gpt2_tensors(state_dict: Mapping) -> dict[str, torch.Tensor]:
    """GPT-2's tensors by their names in `GPT2Model` (`transformer.` dropped, as in
    the released file), without the causal-mask buffers `attn.bias` and
    `attn.masked_bias`."""
    check_type(state_dict, "state_dict", Mapping, "a dict of tensors")
    bad = [k for k in state_dict if not isinstance(k, str)]
    if bad:
        raise TypeError(f"state_dict keys must be tensor names (str); got {bad[0]!r}")
    tensors = {}
    for name, value in state_dict.items():
        name = name.removeprefix("transformer.")
        if not name.endswith((".attn.bias", ".attn.masked_bias")):
            tensors[name] = value
    return tensors


def from_gpt2_state_dict(state_dict: Mapping, config: gpt.GPTConfig) -> gpt.GPT:
    """A `GPT` with GPT-2's weights: renamed, `Conv1D` weights transposed."""
    check_gpt2_state_dict(state_dict, config)
    theirs = gpt2_tensors(state_dict)
    ours = {
        name: theirs[hf_name].T if conv1d else theirs[hf_name]
        for name, (hf_name, conv1d) in gpt2_names(config.n_layers).items()
    }
    ours["head.weight"] = (
        ours["embed.weight"] if config.tie_embeddings else theirs["lm_head.weight"]
    )
    model = gpt.GPT(config)
    model.load_state_dict(ours)
    return model


def check_gpt2_state_dict(state_dict, config) -> None:
    """`state_dict` must hold exactly GPT-2's tensors for `config` (a GPT-2-shaped
    `GPTConfig`), each of its shape; a tied `lm_head.weight` must equal `wte`."""
    check_type(state_dict, "state_dict", Mapping, "a dict of tensors")
    check_type(config, "config", gpt.GPTConfig, "a GPTConfig")
    form = {"norm": "layer", "positions": "learned", "bias": True}
    for name, value in form.items():
        if getattr(config, name) != value:
            raise ValueError(
                f"config must have GPT-2's form (norm='layer', positions='learned', "
                f"bias=True); got {name}={getattr(config, name)!r}"
            )
    theirs = gpt2_tensors(state_dict)
    for name, value in theirs.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"state_dict[{name!r}] must be a tensor; got {describe(value)}"
            )
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in gpt.GPT(config).state_dict().items()}
    expected = {
        hf_name: shapes[name][::-1] if conv1d else shapes[name]
        for name, (hf_name, conv1d) in gpt2_names(config.n_layers).items()
    }
    if not config.tie_embeddings:
        expected["lm_head.weight"] = shapes["head.weight"]
    extra = set(theirs) - set(expected) - {"lm_head.weight"}
    missing = set(expected) - set(theirs)
    for what, names in (("lacks", missing), ("has unexpected", extra)):
        if names:
            listed = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
            raise ValueError(
                f"state_dict {what} tensors for a {config.n_layers}-layer GPT-2: "
                f"{listed} ({len(names)} in all)"
            )
    for name, shape in expected.items():
        if theirs[name].shape != shape:
            raise ValueError(
                f"state_dict[{name!r}] must have shape {tuple(shape)} for this config; "
                f"got {tuple(theirs[name].shape)}"
            )
    head = theirs.get("lm_head.weight")
    if (
        config.tie_embeddings
        and head is not None
        and not torch.equal(head, theirs["wte.weight"])
    ):
        raise ValueError(
            "state_dict['lm_head.weight'] differs from wte.weight, but the config ties "
            "them (tie_embeddings=True)"
        )


def read_safetensors(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a `.safetensors` file (8 bytes holding the header's length `n`,
    `n` bytes of JSON giving each tensor's dtype, shape and byte range, then the raw
    tensors), read by the `safetensors` package, which refuses a malformed file
    (a truncated header, byte ranges that overlap, leave gaps or miss the file, a
    dtype it does not know, a shape that does not fill its bytes): a `ValueError`
    naming the file."""
    check_type(path, "path", (str, os.PathLike), "a str or a Path")
    try:
        return load_file(os.fspath(path))
    except SafetensorError as e:
        raise ValueError(f"{path} is not a valid safetensors file: {e}") from None


def load_gpt2(device: str | torch.device = "cpu"):
    """GPT-2 small (124M) at the pinned revision as the book's GPT, in eval mode on
    `device`, and its byte-level BPE tokenizer (a `tokenizers.Tokenizer`).

    The three files (about 550 MB) are downloaded once into the cache and verified
    against their SHA-256 at every use (`lecturelib.data`, data sets
    `gpt2/config`, `gpt2/model`, `gpt2/tokenizer`); offline, the
    `data.DataError` says where to copy them by hand.
    """
    check_type(device, "device", (str, torch.device), "a str or a torch.device")
    config = gpt2_config(json.loads(data.read_text("gpt2/config")))
    tokenizer = Tokenizer.from_file(str(data.path("gpt2/tokenizer")))
    model = from_gpt2_state_dict(read_safetensors(data.path("gpt2/model")), config)
    return model.to(device).eval(), tokenizer
