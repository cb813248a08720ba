"""lecturelib.posttraining.sft: the SFT loss, finetuning, the recipes, and the chapter's
cached models."""

from __future__ import annotations

import copy

import pytest
import torch

from lecturelib.posttraining import chat, instructions, sft
from lecturelib.pretraining import gpt


def tiny(seq_len=96, seed=0, positions="rope"):
    torch.manual_seed(seed)
    return gpt.GPT(
        gpt.GPTConfig(
            vocab_size=len(chat.VOCAB),
            seq_len=seq_len,
            d_model=32,
            n_layers=2,
            n_heads=2,
            positions=positions,
        )
    ).eval()


def test_sft_overfits_one_batch():
    model = tiny().train()
    pairs = instructions.problems("reverse", 4, seed=0)
    batch = chat.pack([chat.chat(p, a) for p, a in pairs], 96)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(150):
        loss = sft.sft_loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    model.eval()
    assert instructions.accuracy(model, pairs, "reverse") == {"accuracy": 1.0, "format": 1.0}


# ----------------------------------------------------------------------------- models


@pytest.mark.slow
def test_models_are_trained_on_the_device_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURELIB_CACHE", str(tmp_path))
    monkeypatch.setenv("LECTURELIB_STEPS_CAP", "3")
    monkeypatch.setenv("LECTURELIB_PROGRESS", "off")
    seen = []
    fit = sft.train.fit

    def spy(model, *args, **kw):
        seen.append((next(model.parameters()).device.type, kw["steps"]))
        return fit(model, *args, **kw)

    monkeypatch.setattr(sft.train, "fit", spy)
    monkeypatch.setattr(sft.pretrain.train, "fit", spy)
    model, vocab = sft.sft_model("smoke", "cpu")
    assert vocab is chat.VOCAB and not model.training
    assert seen == [("cpu", 3), ("cpu", 3)]  # base, then SFT; capped
    assert (
        sft.model_path("smoke", "base").exists() and sft.model_path("smoke", "sft").exists()
    )
    again, _ = sft.sft_model("smoke", "cpu")
    assert len(seen) == 2  # loaded, not trained
    for a, b in zip(model.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    assert sft.history("smoke", "sft").steps[-1] == 3
    base, _ = sft.base_model("smoke")
    assert len(seen) == 2
    assert not all(
        torch.equal(a, b)
        for a, b in zip(
            base.state_dict().values(), copy.deepcopy(model).state_dict().values()
        )
    )
    monkeypatch.delenv("LECTURELIB_STEPS_CAP")
    assert sft.model_path("smoke", "sft") != sft.model_path("smoke", "sft").with_name(
        "x"
    ) and "capped" not in str(sft.model_path("smoke", "sft"))
    assert sft.recipe("smoke").sft.steps == sft.RECIPES["smoke"].sft.steps


def test_capped_recipe_has_its_own_key(monkeypatch):
    free = sft.model_path("cpu", "sft")
    monkeypatch.setenv("LECTURELIB_STEPS_CAP", "2")
    capped = sft.model_path("cpu", "sft")
    assert capped != free
    capped_recipe = sft.recipe("cpu")
    assert capped_recipe.base.steps == 2 and capped_recipe.sft.steps == 2
    assert capped_recipe.base.warmup == 1 and capped_recipe.sft.warmup == 1
    assert capped_recipe.corpus_chars == sft.CAPPED_CORPUS
    assert capped_recipe.sft.n_per_kind == sft.CAPPED_PER_KIND
    assert capped_recipe.base.model == sft.RECIPES["cpu"].base.model  # the same model
    monkeypatch.delenv("LECTURELIB_STEPS_CAP")
    assert sft.recipe("cpu") == sft.RECIPES["cpu"]


def test_finetune_masked_unmasked_and_stopped(monkeypatch):
    monkeypatch.setenv("LECTURELIB_PROGRESS", "off")
    recipe = sft.SFTRecipe(n_per_kind=8, batch_size=2, steps=6, warmup=1, lr=1e-3)
    model = tiny()
    full, hist = sft.finetune(model, recipe)
    assert hist.steps[-1] == 6 and hist.eval_steps == [1, 2, 3, 4, 5, 6]
    assert not full.training and full is not model
    assert any(not torch.equal(a, b) for a, b in
               zip(model.state_dict().values(), full.state_dict().values()))
    half, half_hist = sft.finetune(model, recipe, stop=3)
    assert half_hist.eval_steps == [1, 2, 3]                  # the same schedule, cut
    torch.testing.assert_close(half_hist.train_loss, hist.train_loss[:3])
    _, unmasked = sft.finetune(model, recipe, masked=False, stop=3)
    assert unmasked.train_loss[0] != half_hist.train_loss[0]  # more targets
    assert unmasked.eval_steps == half_hist.eval_steps


def test_held_out_responses_share_no_input_with_the_sft_examples():
    """The responses whose loss SFT records are held out: no input of them is one the
    mix trained on (drawn at their own seed alone, a few were)."""
    n, seed = 2000, 5
    seen = instructions.seen_operands(n, seed)
    held = sft.held_examples(n, seed)
    assert len(held) == 16 * len(instructions.KINDS)
    for i, (ids, mask) in enumerate(held):
        kind = instructions.KINDS[i // 16]
        prompt = chat.VOCAB.decode(ids[1 : int((~mask).sum()) - 1])
        assert instructions.operand(kind, prompt) not in seen[kind]
    drawn = {k: instructions.operands(k, 16, sft.HELD) for k in instructions.KINDS}
    assert any(x in seen[k] for k, pairs in drawn.items() for x, _ in pairs)
