"""lecturelib.pretraining.pretrain: recipes, and the cached pretrained model that later chapters load."""

from __future__ import annotations

import pytest
import torch

from lecturelib.pretraining import pretrain
from lecturelib.train import checkpoint
from lecturelib.runtime import PROFILES


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
