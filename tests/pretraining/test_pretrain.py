"""lecturelib.pretraining.pretrain: recipes, and the cached pretrained model that later chapters load."""

from __future__ import annotations

import pytest
import torch

from dataclasses import asdict

from lecturelib.pretraining import gpt, pretrain
from lecturelib.train import checkpoint
from lecturelib.runtime import PROFILES, STEPS_CAP_ENV


def test_every_profile_has_a_recipe_and_nanogpt_is_the_published_one():
    assert set(PROFILES) <= set(pretrain.RECIPES)
    nano = pretrain.RECIPES["nanogpt"]
    assert (nano.batch_size, nano.steps, nano.lr) == (12, 2000, 1e-3)
    assert nano.config(65).n_layers == 4 and nano.tokens == 2000 * 12 * 64
    assert pretrain.RECIPES["cpu"].key() != nano.key()


def test_train_gpt_learns():
    ids = torch.arange(600) % 7  # a periodic stream: easy to learn
    recipe = pretrain.with_steps(pretrain.RECIPES["smoke"], 40)
    model, hist = pretrain.train_gpt(recipe, 7, ids[:500], ids[500:], progress=False, evals=4)
    assert hist.eval_steps == [10, 20, 30, 40]
    assert hist.final("val_loss") < 0.5 * hist.evals["val_loss"][0]
    assert hist.tokens == recipe.tokens


@pytest.mark.skipif("LECTURELIB_DATA" not in __import__("os").environ,
                    reason="needs the local data copy ($LECTURELIB_DATA)")
def test_pretrained_is_trained_once_then_loaded_from_a_verified_file(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURELIB_CACHE", str(tmp_path))
    monkeypatch.setitem(pretrain.RECIPES, "smoke",
                        pretrain.with_steps(pretrain.RECIPES["smoke"], 3))
    model, vocab = pretrain.pretrained("smoke", progress=False)
    path = pretrain.model_path("smoke")
    assert path.is_file() and len(vocab) == 65 and not model.training
    again, _ = pretrain.pretrained("smoke", progress=False)
    for p, q in zip(model.parameters(), again.parameters()):
        assert torch.equal(p, q)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(checkpoint.CheckpointError, match="is corrupt"):
        pretrain.pretrained("smoke", progress=False)


@pytest.mark.skipif("LECTURELIB_DATA" not in __import__("os").environ,
                    reason="needs the local data copy ($LECTURELIB_DATA)")
def test_pretrained_refuses_a_cached_file_of_another_config(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURELIB_CACHE", str(tmp_path))
    other = gpt.GPT(gpt.GPTConfig(vocab_size=65, seq_len=8, d_model=16, n_layers=1,
                                  n_heads=2))
    path = pretrain.model_path("smoke")
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint.save(path, {"config": asdict(other.config), "model": other.state_dict()})
    with pytest.raises(ValueError, match=r"the cached file .* does not hold the smoke "
                       r"recipe's GPT .*Delete it, and the next call pretrains"):
        pretrain.pretrained("smoke", progress=False)


def test_a_steps_cap_caps_the_recipe_and_names_another_cache_file(tmp_path, monkeypatch):
    """With ``$LECTURELIB_STEPS_CAP`` set (the capped gpu check), the recipe that
    ``pretrained`` trains and caches has that many steps, under a file name of its own."""
    monkeypatch.setenv("LECTURELIB_CACHE", str(tmp_path))
    monkeypatch.delenv(STEPS_CAP_ENV, raising=False)
    full = {p: (pretrain.recipe(p), pretrain.model_path(p)) for p in PROFILES}
    assert all(full[p][0] == pretrain.RECIPES[p] for p in PROFILES)
    monkeypatch.setenv(STEPS_CAP_ENV, "2")
    for p in PROFILES:
        capped = pretrain.recipe(p)
        assert capped == pretrain.with_steps(pretrain.RECIPES[p], 2)
        assert capped.steps == 2 and capped.warmup <= 1
        assert pretrain.model_path(p) != full[p][1]
        assert pretrain.model_path(p).name.startswith(f"gpt-shakespeare-{p}-")


@pytest.mark.skipif("LECTURELIB_DATA" not in __import__("os").environ,
                    reason="needs the local data copy ($LECTURELIB_DATA)")
def test_pretrained_trains_the_capped_recipe_when_steps_are_capped(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURELIB_CACHE", str(tmp_path))
    monkeypatch.setenv(STEPS_CAP_ENV, "2")
    trained = []
    train_gpt = pretrain.train_gpt
    monkeypatch.setattr(pretrain, "train_gpt",
                        lambda r, *a, **k: trained.append(r) or train_gpt(r, *a, **k))
    pretrain.pretrained("smoke", progress=False)
    assert [r.steps for r in trained] == [2]
    assert pretrain.model_path("smoke").is_file()
    assert max(checkpoint.load(pretrain.model_path("smoke"))["history"]["steps"]) == 2
    monkeypatch.delenv(STEPS_CAP_ENV)
    assert not pretrain.model_path("smoke").exists()  # the full recipe's file: not trained
