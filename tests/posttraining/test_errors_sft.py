"""Bad input to lecturelib.posttraining.sft: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.posttraining import chat, sft
from lecturelib.pretraining import gpt


IDS = torch.tensor([[1, 5, 6, 2, 7, 3]])


def tiny():
    torch.manual_seed(0)
    return gpt.GPT(
        gpt.GPTConfig(
            vocab_size=len(chat.VOCAB), seq_len=16, d_model=16, n_layers=1, n_heads=2
        )
    )


CASES = [
    (
        lambda: sft.sft_loss(tiny(), (IDS, IDS)),
        TypeError,
        r"batch must be \(ids, targets, segments, mask\) as pack or shifted make; got "
        r"tuple of length 2",
    ),
    # recipes and models
    (lambda: sft.SFTRecipe(steps=0), ValueError, r"SFTRecipe.steps must be an int >= 1"),
    (
        lambda: sft.SFTRecipe(steps=5, warmup=5),
        ValueError,
        r"SFTRecipe.warmup must be an int in 0..4; got int 5",
    ),
    (
        lambda: sft.SFTRecipe(lr=0.0),
        ValueError,
        r"SFTRecipe.lr must be a finite number in \(0, inf\); got float 0.0",
    ),
    (
        lambda: sft.ChatRecipe("recipe", 100),
        TypeError,
        r"ChatRecipe.base must be a pretrain.Recipe; got str 'recipe'",
    ),
    (
        lambda: sft.ChatRecipe(sft.RECIPES["smoke"].base, 0),
        ValueError,
        r"ChatRecipe.corpus_chars must be an int >= 1; got int 0",
    ),
    (
        lambda: sft.ChatRecipe(sft.RECIPES["smoke"].base, 10, sft={}),
        TypeError,
        r"ChatRecipe.sft must be an SFTRecipe; got dict",
    ),
    (
        lambda: sft.recipe("laptop"),
        ValueError,
        r"profile must be one of \('smoke', 'cpu', 'gpu'\); got str 'laptop'",
    ),
    (
        lambda: sft.model_path("cpu", "dpo"),
        ValueError,
        r"part must be one of \('base', 'sft'\); got str 'dpo'",
    ),
    (
        lambda: sft.base_model("tpu"),
        ValueError,
        r"profile must be one of .*got str 'tpu'",
    ),
    (lambda: sft.sft_model(None), ValueError, r"profile must be one of .*got NoneType"),
    (lambda: sft.sft_examples(0, 1), ValueError, r"n_per_kind must be an int >= 1"),
    (lambda: sft.held_examples(0, 1), ValueError, r"n_per_kind must be an int >= 1"),
    (lambda: sft.held_examples(3, "x"), ValueError, r"seed must be an int .*got str"),
    (
        lambda: sft.finetune(tiny(), {"steps": 3}),
        TypeError,
        r"recipe must be an SFTRecipe; got dict",
    ),
    (
        lambda: sft.finetune("gpt", sft.SFTRecipe()),
        TypeError,
        r"model must be a gpt.GPT; got str",
    ),
    (
        lambda: sft.finetune(tiny(), sft.SFTRecipe(), masked="yes"),
        TypeError,
        r"masked must be a bool; got str 'yes'",
    ),
    (lambda: sft.sft_loss("m", (1, 2, 3, 4)), TypeError,
     r"model \(a GPT\) must be callable; got str 'm'"),
    (lambda: sft.base_model("smoke", device=3), TypeError,
     r"device must be a str or a torch.device; got int 3"),
    (lambda: sft.sft_model("smoke", device="nodevice"), ValueError,
     r"device 'nodevice' is not usable here"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_finetune_refuses_a_stop_beyond_the_recipe():
    with pytest.raises(ValueError, match=r"stop must be an int in 1..10; got int 11"):
        sft.finetune(tiny(), sft.SFTRecipe(steps=10, warmup=2), stop=11)
