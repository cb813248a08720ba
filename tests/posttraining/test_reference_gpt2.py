"""lecturelib.posttraining.weights: GPT-2's weights in the book's GPT give the logits and
the greedy generations of transformers' GPT2LMHeadModel (a random small configuration
built offline; nothing is downloaded), and the safetensors reader reads what
safetensors writes."""

from __future__ import annotations

import json

import pytest
import torch

from lecturelib import data
from lecturelib.data import registry
from lecturelib.posttraining import weights
from lecturelib.pretraining import gpt
from lecturelib.transformers import decoding

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

SMALL = {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 32, "vocab_size": 97}
# GPT-2 small's config.json at the pinned revision (the fields that matter)
GPT2_SMALL = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
    "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
    "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
    "resid_pdrop": 0.1, "vocab_size": 50257,
}


def reference(seed=0, **options):
    """A random GPT2LMHeadModel, every parameter (biases and LayerNorm gains included)
    moved off its initial value so that a wrong mapping shows."""
    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        **{**SMALL, **options}, bos_token_id=None, eos_token_id=None
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def ours(hf):
    config = weights.gpt2_config(hf.config.to_dict())
    return weights.from_gpt2_state_dict(hf.state_dict(), config).eval()


OPTIONS = [
    {},
    {"activation_function": "gelu"},
    {"activation_function": "gelu_pytorch_tanh", "n_inner": 48},
    {"tie_word_embeddings": False},
]


@pytest.mark.parametrize("options", OPTIONS)
def test_logits_equal_gpt2(options):
    hf = reference(**options)
    model = ours(hf)
    ids = torch.randint(0, 97, (3, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=1e-5, rtol=1e-5)
        for t in (1, 7, 20):
            torch.testing.assert_close(
                model(ids[:, :t]), hf(ids[:, :t]).logits, atol=1e-5, rtol=1e-5
            )


def test_a_batch_of_several_lengths_equals_gpt2_padded_and_packed():
    """Right-padded rows (GPT-2 given the attention mask) and the same examples packed
    in one row with ``segments``: equal logits at every real position."""
    hf, lengths = reference(seed=2), [5, 17, 1, 9]
    model = ours(hf)
    g = torch.Generator().manual_seed(3)
    examples = [torch.randint(0, 97, (n,), generator=g) for n in lengths]
    ids = torch.zeros(len(lengths), 17, dtype=torch.long)
    mask = torch.zeros(len(lengths), 17, dtype=torch.long)
    for i, x in enumerate(examples):
        ids[i, : len(x)], mask[i, : len(x)] = x, 1
    row = torch.cat(examples)[None]  # (1, 32)
    segments = torch.repeat_interleave(torch.arange(4), torch.tensor(lengths))[None]
    with torch.no_grad():
        theirs = hf(ids, attention_mask=mask).logits
        padded, packed = model(ids), model(row, segments)[0]
    start = 0
    for i, n in enumerate(lengths):
        torch.testing.assert_close(padded[i, :n], theirs[i, :n], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(packed[start:start + n], theirs[i, :n], atol=1e-5,
                                   rtol=1e-5)
        start += n


def test_greedy_generation_equals_gpt2_generate():
    hf = reference(seed=4)
    model = ours(hf)
    prompts = torch.randint(0, 97, (2, 6), generator=torch.Generator().manual_seed(5))
    theirs = hf.generate(prompts, do_sample=False, max_new_tokens=8, pad_token_id=0)
    assert torch.equal(decoding.greedy(model.step, prompts, 8), theirs)


def test_the_activation_matters():
    """The exact GELU in place of GPT-2's tanh approximation changes the logits: the
    equality above depends on the right one."""
    hf = reference(seed=6)
    config = weights.gpt2_config(hf.config.to_dict())
    assert config.activation == "gelu_tanh"
    config.activation = "gelu"
    wrong = weights.from_gpt2_state_dict(hf.state_dict(), config).eval()
    ids = torch.randint(0, 97, (1, 32), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert not torch.allclose(wrong(ids), hf(ids).logits, atol=1e-4)


def test_the_released_names_and_buffers_are_read():
    """The released file names tensors as GPT2Model does (no ``transformer.``, no
    ``lm_head``) and may hold the causal-mask buffers: the same model comes out."""
    hf = reference(seed=8)
    state = {k.removeprefix("transformer."): v for k, v in hf.state_dict().items()}
    del state["lm_head.weight"]
    state["h.0.attn.bias"] = torch.ones(1, 1, 32, 32).tril()
    state["h.1.attn.masked_bias"] = torch.tensor(-1e4)
    model = weights.from_gpt2_state_dict(state, weights.gpt2_config(hf.config.to_dict()))
    assert model.head.weight is model.embed.weight  # still tied
    for name, value in ours(hf).state_dict().items():
        assert torch.equal(model.state_dict()[name], value), name


def test_gpt2_small_has_124m_parameters():
    config = weights.gpt2_config(GPT2_SMALL)
    assert (config.d_model, config.n_layers, config.n_heads, config.seq_len) == (
        768, 12, 12, 1024)
    assert (config.activation, config.dropout, config.tie_embeddings) == (
        "gelu_tanh", 0.1, True)
    with torch.device("meta"):
        model = gpt.GPT(config)
    assert gpt.n_params(model, embeddings=True) == 124_439_808


def test_read_safetensors_equals_the_safetensors_package(tmp_path):
    g = torch.Generator().manual_seed(9)
    tensors = {
        "f32": torch.randn(3, 5, generator=g),
        "f16": torch.randn(7, generator=g).half(),
        "bf16": torch.randn(2, 3, generator=g).bfloat16(),
        "i64": torch.arange(-4, 5).reshape(3, 3),
        "u8": torch.arange(11, dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
    }
    path = tmp_path / "t.safetensors"
    safetensors_torch.save_file(tensors, str(path), metadata={"format": "pt"})
    got = weights.read_safetensors(path)
    assert got.keys() == tensors.keys()
    for name, value in safetensors_torch.load_file(str(path)).items():
        assert got[name].dtype == value.dtype and torch.equal(got[name], value), name


def test_a_saved_gpt2_reads_back_into_the_same_model(tmp_path):
    hf = reference(seed=10)
    state = {k.removeprefix("transformer."): v.contiguous()
             for k, v in hf.state_dict().items() if k != "lm_head.weight"}
    path = tmp_path / "model.safetensors"
    safetensors_torch.save_file(state, str(path))
    model = weights.from_gpt2_state_dict(
        weights.read_safetensors(path), weights.gpt2_config(hf.config.to_dict())
    ).eval()
    ids = torch.randint(0, 97, (2, 32), generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=1e-5, rtol=1e-5)


def test_load_gpt2_reads_the_registered_files(monkeypatch, tmp_path):
    """load_gpt2 end to end, offline: small stand-ins for the three files, registered
    with their own checksums in a local data folder."""
    from tokenizers import Tokenizer, models

    hf = reference(seed=12)
    folder = tmp_path / "data" / "gpt2"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(hf.config.to_dict()))
    state = {k.removeprefix("transformer."): v.contiguous()
             for k, v in hf.state_dict().items() if k != "lm_head.weight"}
    safetensors_torch.save_file(state, str(folder / "model.safetensors"))
    Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1}, unk_token="[UNK]")).save(
        str(folder / "tokenizer.json"))
    for name, real in registry.MODELS.items():
        file = folder.parent / real.file
        form = data.LocalForm(real.file, data.sha256_of(file), size=file.stat().st_size)
        monkeypatch.setitem(registry.MODELS, name, data.Dataset(
            name, (form,), real.url, real.licence, real.attribution))
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path / "cache"))
    model, tokenizer = weights.load_gpt2("cpu")
    assert not model.training
    assert tokenizer.token_to_id("hello") == 1
    ids = torch.randint(0, 97, (2, 32), generator=torch.Generator().manual_seed(13))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=1e-5, rtol=1e-5)


def test_the_gpt2_files_are_pinned_and_checksummed():
    assert set(registry.MODELS) == {"gpt2/config", "gpt2/model", "gpt2/tokenizer"}
    assert not set(registry.MODELS) & set(data.DATASETS)
    for name, ds in registry.MODELS.items():
        assert ds.url == (
            "https://huggingface.co/openai-community/gpt2/resolve/"
            f"{registry.GPT2_REVISION}/{ds.file.removeprefix('gpt2/')}"
        )
        assert len(registry.GPT2_REVISION) == 40
        form = ds.forms[0]
        assert len(form.sha256) == 64 and int(form.sha256, 16) >= 0
        assert form.size and form.file.startswith("gpt2/")
        assert data.dataset(name) is ds and "OpenAI" in data.attribution(name)
    assert data.dataset("gpt2/model").forms[0].size == 548_105_171
