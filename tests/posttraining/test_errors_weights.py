"""Bad input to lecturelib.posttraining.weights (and to the GPT-2 option of
lecturelib.pretraining.gpt): the error and its message."""

from __future__ import annotations

import json
import struct
import urllib.error

import pytest
import torch

from lecturelib import data
from lecturelib.data import store
from lecturelib.posttraining import weights
from lecturelib.pretraining import gpt

SMALL = {"n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 4, "vocab_size": 5}


def config(**kw):
    return weights.gpt2_config({**SMALL, **kw})


def state(**changes):
    """GPT-2's tensors for SMALL (as the released file names them), with changes; a
    value None deletes the key."""
    d, f = 8, 32
    shapes = {
        "wte.weight": (5, d), "wpe.weight": (4, d), "ln_f.weight": (d,), "ln_f.bias": (d,),
        "h.0.ln_1.weight": (d,), "h.0.ln_1.bias": (d,), "h.0.ln_2.weight": (d,),
        "h.0.ln_2.bias": (d,), "h.0.attn.c_attn.weight": (d, 3 * d),
        "h.0.attn.c_attn.bias": (3 * d,), "h.0.attn.c_proj.weight": (d, d),
        "h.0.attn.c_proj.bias": (d,), "h.0.mlp.c_fc.weight": (d, f),
        "h.0.mlp.c_fc.bias": (f,), "h.0.mlp.c_proj.weight": (f, d), "h.0.mlp.c_proj.bias": (d,),
    }
    tensors = {name: torch.zeros(shape) for name, shape in shapes.items()}
    tensors.update(changes)
    return {k: v for k, v in tensors.items() if v is not None}


def safetensors_file(tmp_path, header=None, payload=b"", length=None):
    raw = json.dumps(header).encode() if header is not None else b""
    path = tmp_path / "bad.safetensors"
    n = len(raw) if length is None else length
    path.write_bytes(struct.pack("<Q", n) + raw + payload)
    return path


def tensor(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def offline(monkeypatch, tmp_path):
    def refuse(url, timeout=60):
        raise urllib.error.URLError("no network")

    monkeypatch.delenv(data.DATA_ENV, raising=False)
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(store, "_urlopen", refuse)
    return weights.load_gpt2()


CASES = [
    (lambda t: gpt.GPTConfig(vocab_size=5, activation="relu"), ValueError,
     r"GPTConfig.activation must be one of \('gelu', 'gelu_tanh'\); got str 'relu'"),
    # gpt2_config
    (lambda t: weights.gpt2_config([("n_embd", 8)]), TypeError,
     r"hf_config must be a dict \(GPT-2's config.json\); got list"),
    (lambda t: config(model_type="bert"), ValueError,
     r"hf_config must be GPT-2's; got model_type 'bert'"),
    (lambda t: weights.gpt2_config({"n_embd": 8, "n_layer": 1}), ValueError,
     r"hf_config lacks vocab_size, n_positions, n_head"),
    (lambda t: config(n_layer=2.0), ValueError, r"hf_config n_layer must be an int; got float 2.0"),
    (lambda t: config(n_head=3), ValueError,
     r"GPTConfig.d_model \(8\) must be divisible by n_heads \(3\)"),
    (lambda t: config(activation_function="relu"), ValueError,
     r"hf_config activation_function must be one of \('gelu_new', 'gelu_pytorch_tanh', "
     r"'gelu'\); the book's GPT has no 'relu'"),
    (lambda t: config(attn_pdrop=0.0), ValueError,
     r"the book's GPT has one dropout rate; hf_config has \{'resid_pdrop': 0.1, "
     r"'embd_pdrop': 0.1, 'attn_pdrop': 0.0\}"),
    (lambda t: config(layer_norm_epsilon=1e-6), ValueError,
     r"hf_config layer_norm_epsilon must be 1e-05 for the book's GPT; got 1e-06"),
    (lambda t: config(scale_attn_weights=False), ValueError,
     r"hf_config scale_attn_weights must be True for the book's GPT; got False"),
    (lambda t: config(scale_attn_by_inverse_layer_idx=True), ValueError,
     r"hf_config scale_attn_by_inverse_layer_idx must be False for the book's GPT; got True"),
    (lambda t: config(reorder_and_upcast_attn=True), ValueError,
     r"hf_config reorder_and_upcast_attn must be False"),
    (lambda t: config(add_cross_attention=True), ValueError,
     r"hf_config add_cross_attention must be False"),
    # from_gpt2_state_dict
    (lambda t: weights.from_gpt2_state_dict([1], config()), TypeError,
     r"state_dict must be a dict of tensors; got list"),
    (lambda t: weights.from_gpt2_state_dict(state(), SMALL), TypeError,
     r"config must be a GPTConfig; got dict"),
    (lambda t: weights.from_gpt2_state_dict(state(), gpt.GPTConfig(vocab_size=5)), ValueError,
     r"config must have GPT-2's form \(norm='layer', positions='learned', bias=True\); "
     r"got norm='rms'"),
    (lambda t: weights.from_gpt2_state_dict(state(**{"wpe.weight": None}), config()),
     ValueError, r"state_dict lacks tensors for a 1-layer GPT-2: wpe.weight \(1 in all\)"),
    (lambda t: weights.from_gpt2_state_dict(state(**{"h.1.ln_1.weight": torch.zeros(8)}),
                                            config()),
     ValueError, r"state_dict has unexpected tensors for a 1-layer GPT-2: h.1.ln_1.weight"),
    (lambda t: weights.from_gpt2_state_dict(
        state(**{"h.0.attn.c_attn.weight": torch.zeros(24, 8)}), config()),
     ValueError, r"state_dict\['h.0.attn.c_attn.weight'\] must have shape \(8, 24\) for "
     r"this config; got \(24, 8\)"),
    (lambda t: weights.from_gpt2_state_dict(state(**{"ln_f.bias": [0.0] * 8}), config()),
     TypeError, r"state_dict\['ln_f.bias'\] must be a tensor; got list"),
    (lambda t: weights.from_gpt2_state_dict(state(**{"lm_head.weight": torch.ones(5, 8)}),
                                            config()),
     ValueError, r"state_dict\['lm_head.weight'\] differs from wte.weight, but the config "
     r"ties them"),
    (lambda t: weights.from_gpt2_state_dict(state(), config(tie_word_embeddings=False)),
     ValueError, r"state_dict lacks tensors for a 1-layer GPT-2: lm_head.weight"),
    # read_safetensors
    (lambda t: weights.read_safetensors(3), TypeError, r"path must be a str or a Path; got int 3"),
    (lambda t: (t / "short").write_bytes(b"abc") and weights.read_safetensors(t / "short"),
     ValueError, r"short is not a valid safetensors file: .*header too small"),
    (lambda t: weights.read_safetensors(safetensors_file(t, {}, length=999)), ValueError,
     r"bad.safetensors is not a valid safetensors file: .*invalid header length"),
    (lambda t: weights.read_safetensors(safetensors_file(t, [1, 2])), ValueError,
     r"bad.safetensors is not a valid safetensors file: .*invalid JSON in header"),
    (lambda t: weights.read_safetensors(t / "missing.safetensors"), FileNotFoundError,
     r"missing.safetensors"),
] + [  # malformed files: each refused by the loader, naming the file
    (lambda t, kw=kw: weights.read_safetensors(safetensors_file(t, **kw)), ValueError,
     r"bad.safetensors is not a valid safetensors file: Error while deserializing "
     r"header: " + why)
    for kw, why in [
        (dict(header={"a": tensor("F32", [2], 0, 8), "b": tensor("F32", [2], 0, 8)},
              payload=b"\0" * 8), r"invalid offset for tensor `[ab]`"),  # overlapping
        (dict(header={"a": tensor("F32", [1], 0, 4)}, payload=b"\0" * 4, length=5),
         r"invalid JSON in header: EOF while parsing"),  # truncated header
        (dict(header={"a": tensor("F32", [1], 0, 4)}, payload=b"", length=999),
         r"invalid header length"),  # header length beyond the file
        (dict(header={"x": tensor("F8", [1], 0, 1)}, payload=b"\0"),
         r"invalid JSON in header: unknown variant `F8`"),  # wrong dtype string
        (dict(header={"x": tensor("F32", [2], 0, 4)}, payload=b"\0" * 4),
         r"invalid shape, data type, or offset for tensor"),  # shape/bytes mismatch
        (dict(header={"x": tensor("F32", [2], 4, 12)}, payload=b"\0" * 8),
         r"invalid offset for tensor `x`"),  # bytes beyond the file
        (dict(header={"x": tensor("F32", [1], 4, 8)}, payload=b"\0" * 8),
         r"invalid offset for tensor `x`"),  # a gap before the tensor
        (dict(header={"x": tensor("F32", [1], 0, 4)}, payload=b"\0" * 8),
         r"incomplete metadata, file not fully covered"),  # bytes after the last
    ]
] + [
    # the name tables
    (lambda t: weights.gpt2_names("a"), ValueError, r"n_layers must be an int >= 1; got str 'a'"),
    (lambda t: weights.gpt2_names(0), ValueError, r"n_layers must be an int >= 1; got int 0"),
    (lambda t: weights.gpt2_tensors([1]), TypeError,
     r"state_dict must be a dict of tensors; got list \[1\]"),
    (lambda t: weights.gpt2_tensors({1: torch.zeros(1)}), TypeError,
     r"state_dict keys must be tensor names \(str\); got 1"),
    # load_gpt2
    (lambda t: weights.load_gpt2(0), TypeError,
     r"device must be a str or a torch.device; got int 0"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message, tmp_path):
    with pytest.raises(error, match=message):
        call(tmp_path)


def test_offline_load_gpt2_says_what_to_do(monkeypatch, tmp_path):
    with pytest.raises(data.DataError) as err:
        offline(monkeypatch, tmp_path)
    message = str(err.value)
    ds = data.dataset("gpt2/config")
    assert "no network" in message and ds.url in message
    assert str(tmp_path / "cache" / "gpt2" / "config.json") in message
    assert ds.forms[0].sha256 in message and data.DATA_ENV in message
    assert not (tmp_path / "cache" / "gpt2" / "config.json").exists()
