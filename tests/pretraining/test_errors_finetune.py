"""Bad input to lecturelib.pretraining.finetune and lecturelib.pretraining.t5: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.pretraining import finetune, gpt, peft, t5

F = dict(start=20, delim=21, extract=22)
IDS = torch.zeros(2, 4, dtype=torch.long)


def tiny():
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1,
                                 n_heads=2))


def with_head(head=None, untied=False):
    m = tiny()
    if untied:
        m.head.weight = torch.nn.Parameter(m.head.weight.detach().clone())
    if head is not None:
        m.head = head(m.head)
    return m


def classifier():
    return finetune.GPTClassifier(tiny(), 2)


CASES = [
    (lambda: finetune.format_input("ab", None, max_len=5, **F), TypeError,
     r"text_a must be a list of token ids \(ints >= 0\); got str 'ab'"),
    (lambda: finetune.format_input([1], [-1], max_len=5, **F), ValueError,
     r"text_b must be a list of token ids \(ints >= 0\); got list \[-1\]"),
    (lambda: finetune.format_input([1], [2], max_len=4, **F), ValueError,
     r"max_len must be an int >= 5; got int 4"),
    (lambda: finetune.format_input([1], None, max_len=2, **F), ValueError,
     r"max_len must be an int >= 3; got int 2"),
    (lambda: finetune.extend_vocab(torch.nn.Linear(2, 2), 3), TypeError,
     r"model must be a gpt.GPT; got Linear"),
    (lambda: finetune.extend_vocab(tiny(), 0), ValueError,
     r"n_new must be an int >= 1; got int 0"),
    (lambda: finetune.extend_vocab(tiny(), 2, std=-1.0), ValueError,
     r"std must be a finite number in \[0, inf\); got float -1.0"),
    # Every variant is grown exactly or refused by name (issue 26).
    (lambda: finetune.extend_vocab(with_head(lambda h: peft.LoRALinear(h, 2, 4.0)), 2),
     TypeError, r"extend_vocab grows model.head, which must be an nn.Linear; got "
     r"LoRALinear"),
    (lambda: finetune.extend_vocab(
        with_head(lambda h: torch.nn.Linear(16, 7, bias=True), untied=True), 2),
     ValueError, r"extend_vocab grows a head without bias; model.head has one"),
    (lambda: finetune.extend_vocab(with_head(untied=True), 2), ValueError,
     r"model.config.tie_embeddings=True, but the head is not the embedding"),
    (lambda: finetune.GPTClassifier(tiny(), 1), ValueError,
     r"n_classes must be an int >= 2; got int 1"),
    (lambda: finetune.GPTClassifier("gpt", 2), TypeError,
     r"model must be a gpt.GPT; got str"),
    (lambda: classifier()(IDS, torch.tensor([1, 5])), ValueError,
     r"lengths must be \(b,\) = \(2,\) integer lengths in 1..4; got torch.int64"),
    (lambda: classifier()(IDS, torch.tensor([1.0, 2.0])), TypeError,
     r"lengths must be \(b,\) = \(2,\) integer lengths in 1..4; got torch.float32"),
    (lambda: finetune.classifier_loss(
        classifier(), (IDS[:1, :3], torch.tensor([3]), torch.tensor([0])),
        lm_weight=-0.5),
     ValueError,
     r"lm_weight must be a finite number in \[0, inf\); got float -0.5"),
    (lambda: t5.span_corrupt([1], [90, 91]), ValueError,
     r"ids must hold at least 2 tokens; got 1"),
    (lambda: t5.span_corrupt([1, 2, 90], [90, 91]), ValueError,
     r"ids must not contain sentinel ids"),
    (lambda: t5.span_corrupt([1, 2, 3], [90], rate=0.0), ValueError,
     r"rate must be a finite number in \(0, 1\]; got float 0.0"),
    (lambda: t5.span_corrupt([1, 2, 3], [90], mean_span=0.5), ValueError,
     r"mean_span must be a finite number in \[1, inf\); got float 0.5"),
    (lambda: t5.span_corrupt(list(range(40)), [90], rate=0.5), ValueError,
     r"sentinels: 1 are too few for the spans \(one per span, plus one to end the "
     r"target\)"),
    (lambda: t5.span_corrupt("abc", [90]), TypeError,
     r"ids must be a list of token ids \(ints >= 0\); got str 'abc'"),
    (lambda: t5.span_restore([1, 90], [2], [90]), ValueError,
     r"targets must start with a sentinel"),
    (lambda: t5.span_restore([1, 91], [90, 2, 92], [90, 91, 92]), ValueError,
     r"sentinel 91 of the inputs is not in the targets"),
    # copy_model
    (lambda: finetune.copy_model("model"), TypeError,
     r"model must be an nn.Module; got str 'model'"),
    (lambda: finetune.copy_model(None), TypeError,
     r"model must be an nn.Module; got NoneType None"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
