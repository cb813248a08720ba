"""Bad input to lecturelib.pretraining.peft: the error and its message."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lecturelib.pretraining import gpt, peft
from lecturelib.recurrence import lm


def model():
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1, n_heads=2))


PAIR = (torch.zeros(2, 2, 8), torch.zeros(2, 2, 8))  # a prefix's (key, value) (h, p, e)


CASES = [
    (lambda: peft.LoRALinear(nn.Conv1d(2, 2, 1), 2, 4.0), TypeError,
     r"base must be an nn.Linear; got Conv1d"),
    (lambda: peft.LoRALinear(nn.Linear(8, 4), 0, 4.0), ValueError,
     r"r must be an int in 1..4; got int 0"),
    (lambda: peft.LoRALinear(nn.Linear(8, 4), 5, 4.0), ValueError,
     r"r must be an int in 1..4; got int 5"),
    (lambda: peft.LoRALinear(nn.Linear(8, 4), 2, 0.0), ValueError,
     r"alpha must be a finite number in \(0, inf\); got float 0.0"),
    (lambda: peft.LoRALinear(nn.Linear(8, 4), 2, 1.0, rows=[0, 4]), ValueError,
     r"rows must be a non-empty 1-d list of output rows in 0..3, or a 2-d list of such "
     r"groups of equal size \(one adapter each\); got .*shape \(2,\)"),
    (lambda: peft.LoRALinear(nn.Linear(8, 4), 2, 1.0, rows=[]), ValueError,
     r"rows must be a non-empty 1-d list of output rows in 0..3"),
    (lambda: peft.LoRALinear(nn.Linear(8, 4), 2, 1.0, rows=[0.5]), TypeError,
     r"rows must be a non-empty 1-d list of output rows in 0..3.*got torch.float32"),
    (lambda: peft.LoRALinear(nn.Linear(8, 4), 2, 1.0, rows=[[0, 1], [2]]), ValueError,
     r"rows must be .* a 2-d list of such groups of equal size .*got list \[\[0, 1\], \[2\]\]"),
    (lambda: peft.LoRALinear(nn.Linear(8, 4), 2, 1.0, rows=[[[0]]]), ValueError,
     r"rows must be a non-empty 1-d list .*got torch.int64 tensor of shape \(1, 1, 1\)"),
    (lambda: peft.LoRALinear(nn.Linear(8, 4), 2, 1.0, rows=[[0, 1], [2, 4]]), ValueError,
     r"rows must be a non-empty 1-d list of output rows in 0..3.*shape \(2, 2\)"),
    (lambda: peft.LoRALinear(nn.Linear(8, 4), 2, 1.0, rows="q"), TypeError,
     r"rows must be a non-empty 1-d list .*got str 'q'"),
    (lambda: peft.LoRALinear(nn.Linear(8, 4), 2, 1.0, rows=[[True, False]]), TypeError,
     r"rows must be a non-empty 1-d list .*got torch.bool"),
    (lambda: peft.add_lora(nn.Linear(2, 2)), TypeError,
     r"model must be a gpt.GPT; got Linear"),
    (lambda: peft.add_lora(model(), parts="qx"), ValueError,
     r"parts must name distinct slices among 'q', 'k', 'v' \(e.g. 'qv'\); got 'qx'"),
    (lambda: peft.add_lora(model(), parts="qq"), ValueError,
     r"parts must name distinct slices .*got 'qq'"),
    (lambda: peft.add_lora(model(), parts=""), ValueError,
     r"parts must name distinct slices .*got ''"),
    (lambda: peft.add_lora(peft.add_lora(model())), ValueError,
     r"model already has LoRA on its qkv projections"),
    (lambda: peft.merge_lora(model()), ValueError,
     r"model has no LoRA layers to merge \(call add_lora first\)"),
    (lambda: peft.add_adapters(model(), 0), ValueError,
     r"d_bottleneck must be an int >= 1; got int 0"),
    (lambda: peft.add_adapters(peft.add_adapters(model())), ValueError,
     r"model already has adapters \(add_adapters was called on it\): a second call "
     r"would wrap them in new ones and freeze the trained adapters"),
    (lambda: peft.add_lora(peft.add_adapters(model())), ValueError,
     r"add_lora wraps each block's attention qkv projection; this model's attention is "
     r"wrapped already \(add_adapters\): use one method per model"),
    (lambda: peft.freeze("gpt"), TypeError,
     r"model must be a torch.nn.Module; got str 'gpt'"),
    (lambda: peft.add_adapters("gpt"), TypeError,
     r"model must be a gpt.GPT; got str 'gpt'"),
    (lambda: peft.PromptTuned(model(), torch.tensor([1.0, 2.0])), TypeError,
     r"init_ids must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: peft.PromptTuned(model(), torch.arange(8)), ValueError,
     r"init_ids must be a 1-d tensor of 1 to 7 token ids in 0..6; got torch.int64 tensor "
     r"of shape \(8,\)"),
    (lambda: peft.PrefixTuned(model(), torch.tensor([1, 9])), ValueError,
     r"init_ids must be a 1-d tensor of 1 to 7 token ids in 0..6"),
    (lambda: peft.PrefixTuned(model(), torch.tensor([[1, 2]])), ValueError,
     r"init_ids must be a 1-d tensor .*shape \(1, 2\)"),
    (lambda: peft.PromptTuned(model(), torch.tensor([1, 2, 3]))(
        torch.zeros(1, 6, dtype=torch.long)), ValueError,
     r"ids has 6 positions; with a prompt of 3 the model takes 1 to 5"),
    (lambda: peft.PrefixTuned(model(), torch.tensor([1]))(torch.zeros(1, 9, dtype=torch.long)),
     ValueError, r"ids has 9 positions; the model takes 1 to seq_len = 8"),
    (lambda: peft.trainable([1]), TypeError, r"model must be an nn.Module; got list"),
    (lambda: peft.to_vocab(b"text", lm.Vocab("text")), TypeError,
     r"text must be a str; got bytes"),
    (lambda: peft.run_blocks("gpt", torch.zeros(1, 3, 16)), TypeError,
     r"model must be a gpt.GPT; got str 'gpt'"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 3, dtype=torch.long)), TypeError,
     r"x must be a float tensor \(b, t, d=16\); got torch.int64"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 3, 8)), ValueError,
     r"x must be \(b, t, d=16\) with t in 1..seq_len = 8; got shape \(1, 3, 8\)"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 9, 16)), ValueError,
     r"x must be \(b, t, d=16\) with t in 1..seq_len = 8; got shape \(1, 9, 16\)"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 0, 16)), ValueError,
     r"x must be \(b, t, d=16\) with t in 1..seq_len = 8; got shape \(1, 0, 16\)"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 3, 16).double()), TypeError,
     r"x must have the model's dtype torch.float32; got torch.float64"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 3, 16, device="meta")), ValueError,
     r"x must be on the model's device cpu; got meta"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 3, 16), []), TypeError,
     r"prefixes must be None or a list of n_layers = 1 \(key, value\) pairs; got "
     r"list \[\]"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 3, 16), [PAIR, PAIR]), TypeError,
     r"prefixes must be None or a list of n_layers = 1 \(key, value\) pairs"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 3, 16), [PAIR[:1]]), ValueError,
     r"prefixes\[0\] must be a pair \(key, value\) of \(h=2, p, e=8\) tensors"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 3, 16),
                             [(PAIR[0], torch.zeros(2, 3, 8))]), ValueError,
     r"prefixes\[0\] must be a pair \(key, value\) of \(h=2, p, e=8\) tensors"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 3, 16),
                             [(PAIR[0][:1], PAIR[1][:1])]), ValueError,
     r"prefixes\[0\] must be a pair \(key, value\) of \(h=2, p, e=8\) tensors"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 3, 16),
                             [(PAIR[0][None], PAIR[1][None])]), ValueError,
     r"prefixes\[0\]'s key must be \(h=2, p, e=8\); got shape \(1, 2, 2, 8\)"),
    (lambda: peft.to_vocab("text", "text"), TypeError,
     r"vocab must be an lm.Vocab \(a stoi dict of its characters\); got str 'text'"),
    (lambda: peft.to_vocab("text", {"t"}), TypeError,
     r"vocab must be an lm.Vocab \(a stoi dict of its characters\); got set"),
    (lambda: peft.run_blocks(model(), torch.zeros(1, 3, 16),
                             [(PAIR[0], PAIR[1].double())]), ValueError,
     r"prefixes\[0\]'s value must have the dtype and device of x \(torch.float32 on "
     r"cpu\); got torch.float64 on cpu"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
