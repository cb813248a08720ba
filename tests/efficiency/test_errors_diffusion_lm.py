"""Bad input to lecturelib.efficiency.diffusion_lm: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import diffusion_lm as dl
from lecturelib.pretraining import bert, gpt


def denoiser():
    torch.manual_seed(0)
    return bert.BERT(bert.BERTConfig(vocab_size=11, max_len=9, d_model=16, n_heads=2,
                                     n_layers=1))


def decoder():
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=11, seq_len=9, d_model=16, n_heads=2,
                                 n_layers=1))


PROMPT = torch.tensor([[2, 3, 4, 5, 1]])

CASES = [
    (lambda: dl.unmask(denoiser(), PROMPT, 4, 0), ValueError,
     r"steps must be an int in 1..4; got int 0"),
    (lambda: dl.unmask(denoiser(), PROMPT, 4, 5), ValueError,
     r"steps must be an int in 1..4; got int 5"),
    (lambda: dl.unmask(denoiser(), PROMPT, 0, 1), ValueError,
     r"length must be an int >= 1; got int 0"),
    (lambda: dl.unmask(denoiser(), PROMPT, 4, 2, order="left"), ValueError,
     r"order must be one of \('confidence', 'random'\); got 'left'"),
    (lambda: dl.unmask(denoiser(), PROMPT[0], 4, 2), ValueError,
     r"prompt must be \(b, P\) token ids; got torch.int64 tensor of shape \(5,\)"),
    (lambda: dl.unmask("bert", PROMPT, 4, 2), TypeError,
     r"model must be a bert.BERT; got str"),
    (lambda: dl.diffusion_loss(denoiser(), (PROMPT, torch.tensor([[2, 3]]), 1)),
     ValueError, r"batch must be \(prompt \(b, P\), answer \(b, L\)\) id tensors"),
    (lambda: dl.diffusion_loss(denoiser(), (PROMPT, torch.tensor([[2], [3]]))),
     ValueError, r"batch must be \(prompt \(b, P\), answer \(b, L\)\) id tensors"),
    (lambda: dl.ar_generate(None, PROMPT, 0), ValueError,
     r"length must be an int >= 1; got int 0"),
    (lambda: dl.exact_match(torch.zeros(0, 3), torch.zeros(0, 3)), ValueError,
     r"answer and truth must be tensors of one shape \(b, L\) with b >= 1 rows \(the "
     r"fraction of no row is NaN\); got torch.float32 tensor of shape \(0, 3\)"),
    (lambda: dl.exact_match(torch.zeros(3), torch.zeros(3)), ValueError,
     r"answer and truth must be tensors of one shape \(b, L\)"),
    (lambda: dl.exact_match(torch.zeros(2, 3), torch.zeros(2, 4)), ValueError,
     r"answer and truth must be tensors of one shape"),
    (lambda: dl.sorted_either_way(torch.zeros(2, 3), torch.zeros(2, 3)), ValueError,
     r"answer must be \(b, L\) and prompt \(b, L \+ 1\)"),
    (lambda: dl.either_way_pairs(0, 4), ValueError, r"n must be"),
    (lambda: dl.teacher_params(torch.zeros(4)), ValueError,
     r"x must be a float tensor \(n, D\); got torch.float32 tensor of shape \(4,\)"),
    (lambda: dl.teacher_sample(10, 0), ValueError, r"D must be an int >= 1; got int 0"),
    (lambda: dl.IAF(0), ValueError, r"D must be an int >= 1; got int 0"),
    (lambda: dl.IAF(3)(torch.zeros(5, 2)), ValueError,
     r"z must be \(n, D=3\); got torch.float32 tensor of shape \(5, 2\)"),
    (lambda: dl.IAF(3).sample(0), ValueError, r"n must be an int >= 1; got int 0"),
    (lambda: dl.reverse_kl("flow", 10), TypeError, r"student must be an IAF; got str"),
    (lambda: dl.gaussian_log_prob(torch.zeros(3), torch.zeros(2, 3), torch.zeros(3)),
     ValueError, r"mu and log_sigma must broadcast to the shape of x \(3,\); got "
     r"\(2, 3\) and \(3,\)"),
    (lambda: dl.gaussian_log_prob(torch.zeros(3), torch.zeros(2), torch.zeros(3)),
     ValueError, r"mu and log_sigma must broadcast to the shape of x \(3,\); got "
     r"\(2,\) and \(3,\)"),
    (lambda: dl.gaussian_log_prob(torch.zeros(3), torch.zeros(3), 0.0), TypeError,
     r"log_sigma must be a float tensor \(\.\.\.\); got float 0.0"),
    (lambda: dl.gaussian_log_prob(torch.arange(3), torch.zeros(3), torch.zeros(3)),
     TypeError, r"x must be a float tensor \(\.\.\.\); got torch.int64"),
    # sorting_pairs, mask_id, ar_loss, timed, teacher_log_prob
    (lambda: dl.sorting_pairs(0, 3), ValueError,
     r"sorting_pairs\(\): n must be an int >= 1; got int 0"),
    (lambda: dl.sorting_pairs(2, 0), ValueError,
     r"sorting_pairs\(\): length must be an int >= 1; got int 0"),
    (lambda: dl.sorting_pairs(2, 3.0), ValueError,
     r"sorting_pairs\(\): length must be an int >= 1; got float 3.0"),
    (lambda: dl.sorting_pairs(2, 3, 2), ValueError,
     r"sorting_pairs\(\): vocab_size must be an int >= 3; got int 2"),
    (lambda: dl.sorting_pairs(2, 3, 10, "0"), ValueError,
     r"sorting_pairs\(\): seed must be an int in .*; got str '0'"),
    (lambda: dl.mask_id(decoder()), TypeError, r"model must be a bert.BERT; got GPT"),
    (lambda: dl.mask_id("bert"), TypeError, r"model must be a bert.BERT; got str"),
    (lambda: dl.ar_loss("model", (PROMPT, PROMPT[:, :2])), TypeError,
     r"model must be a gpt.GPT; got str"),
    (lambda: dl.ar_loss(denoiser(), (PROMPT, PROMPT[:, :2])), TypeError,
     r"model must be a gpt.GPT; got BERT"),
    (lambda: dl.ar_loss(decoder(), PROMPT), TypeError,
     r"batch must be \(prompt \(b, P\), answer \(b, L\)\) id tensors; got torch.int64"),
    (lambda: dl.ar_loss(decoder(), (PROMPT, PROMPT[:, :0])), ValueError,
     r"batch must be .* with b >= 1 rows and L >= 1 answer tokens \(a mean over none is "
     r"NaN\); got answer of shape \(1, 0\)"),
    (lambda: dl.ar_loss(decoder(), (PROMPT[:, :0], PROMPT)), ValueError,
     r"batch's prompt must be \(b, P\) with P >= 1 \(the first answer token is predicted "
     r"from the prompt's last\); got shape \(1, 0\)"),
    (lambda: dl.ar_loss(decoder(), (PROMPT, PROMPT + 10)), ValueError,
     r"ids must hold token ids in 0..10; got ids from 1 to 15"),
    (lambda: dl.timed(3), TypeError, r"fn must be callable; got int 3"),
    (lambda: dl.teacher_log_prob([1.0]), TypeError,
     r"x must be a float tensor \(n, D\); got list"),
    (lambda: dl.teacher_log_prob(torch.zeros(3)), ValueError,
     r"x must be a float tensor \(n, D\); got torch.float32 tensor of shape \(3,\)"),
    (lambda: dl.teacher_log_prob(torch.zeros(3, 2).long()), TypeError,
     r"x must be a float tensor \(n, D\); got torch.int64"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
