"""Bad input to lecturelib.pretraining.quant: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.pretraining import gpt, quant


def model():
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1, n_heads=2))


W = torch.randn(4, 8)
H = 2 * torch.eye(8)

CASES = [
    (lambda: quant.exact_dtype([1.0]), TypeError, r"exact_dtype takes a tensor; got list"),
    (lambda: quant.scale_zero(W, 0), ValueError, r"bits must be an int in 2\.\.16; got int 0"),
    (lambda: quant.scale_zero(W, 4, "nf4"), ValueError,
     r"scheme must be one of \('absmax', 'zeropoint'\); got 'nf4'"),
    (lambda: quant.scale_zero(W.long(), 4), TypeError, r"w must be a float tensor"),
    (lambda: quant.quantize(W, torch.ones(4, 1), torch.zeros(4, 1), 1.5), ValueError,
     r"bits must be an int in 2\.\.16; got float 1.5"),
    (lambda: quant.fake_quantize(torch.randn(8), 4), ValueError,
     r"w must be a 2-d float tensor \(d_out, d_in\); got torch.float32 tensor of shape "
     r"\(8,\)"),
    (lambda: quant.fake_quantize(torch.ones(2, 2, dtype=torch.long), 4), TypeError,
     r"w must be a 2-d float tensor .*torch.int64"),
    (lambda: quant.fake_quantize([[1.0]], 4), TypeError, r"w must be a 2-d float tensor .*list"),
    (lambda: quant.fake_quantize(W, 1), ValueError, r"bits must be an int in 2..16; got int 1"),
    (lambda: quant.fake_quantize(W, 4.0), ValueError, r"bits must be an int in 2..16; got float"),
    (lambda: quant.fake_quantize(W, 4, scheme="nf4"), ValueError,
     r"scheme must be one of \('absmax', 'zeropoint'\); got 'nf4'"),
    (lambda: quant.fake_quantize(W, 4, group_size=3), ValueError,
     r"group_size \(3\) must divide d_in \(8\)"),
    (lambda: quant.fake_quantize(W, 4, group_size=0), ValueError,
     r"group_size must be an int >= 1; got int 0"),
    (lambda: quant.fake_quantize(torch.tensor([[1.0, float("inf")], [0.5, 0.25]]), 4),
     ValueError, r"w must hold finite values \(an inf or NaN makes its whole row or "
     r"group NaN\); got inf at w\[0, 1\]"),
    (lambda: quant.fake_quantize(torch.tensor([[1.0, 2.0], [float("nan"), 0.25]]), 4,
                                 scheme="zeropoint"),
     ValueError, r"w must hold finite values .*got nan at w\[1, 0\]"),
    (lambda: quant.fake_quantize(torch.zeros(0, 4), 4), ValueError,
     r"w must have at least one row and one column; got shape \(0, 4\)"),
    (lambda: quant.scale_zero(torch.tensor([1.0, float("-inf")]), 4), ValueError,
     r"w must hold finite values .*got -inf at w\[1\]"),
    (lambda: quant.scale_zero(torch.zeros(3, 0), 4), ValueError,
     r"w must be \(..., n\) with n >= 1 values per row; got shape \(3, 0\)"),
    (lambda: quant.quantize(torch.tensor(2.0), torch.ones(1), torch.zeros(1), 4),
     ValueError, r"w must be \(..., n\) with n >= 1 values per row; got shape \(\)"),
    (lambda: quant.hessian(torch.zeros(0, 8)), ValueError,
     r"x must have at least one row and one column; got shape \(0, 8\)"),
    (lambda: quant.hessian(torch.tensor([[1.0, float("nan")]])), ValueError,
     r"x must hold finite values .*got nan at x\[0, 1\]"),
    (lambda: quant.gptq(W, torch.full((8, 8), float("inf")), 4), ValueError,
     r"h must hold finite values"),
    (lambda: quant.gptq(W, torch.eye(8).long(), 4), TypeError,
     r"h must be the \(8, 8\) Hessian of w's inputs; got torch.int64"),
    (lambda: quant.quantize_model(model(), 4, method="gptq",
                                  calib_ids=torch.zeros(2, 4)), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: quant.quantize_model(model(), 4, method="gptq",
                                  calib_ids=torch.full((2, 4), 7)), ValueError,
     r"ids must hold token ids in 0..6; got ids from 7 to 7"),
    (lambda: quant.quantize_model(model(), 4, scheme="nf4"), ValueError,
     r"scheme must be one of \('absmax', 'zeropoint'\); got 'nf4'"),
    (lambda: quant.hessian(torch.randn(5)), ValueError,
     r"x must be a 2-d float tensor \(d_out, d_in\); got .*shape \(5,\)"),
    (lambda: quant.gptq(W, torch.eye(4), 4), ValueError,
     r"h must be the \(8, 8\) Hessian of w's inputs; got torch.float32 tensor of shape "
     r"\(4, 4\)"),
    (lambda: quant.gptq(W, H, 4, damp=0.0), ValueError,
     r"damp must be a finite number in \(0, inf\); got float 0.0"),
    (lambda: quant.gptq(W, H, 17), ValueError, r"bits must be an int in 2..16; got int 17"),
    (lambda: quant.quantize_model(torch.nn.Linear(2, 2), 4), TypeError,
     r"model must be a gpt.GPT; got Linear"),
    (lambda: quant.quantize_model(model(), 4, method="awq"), ValueError,
     r"method must be 'rtn' or 'gptq'; got 'awq'"),
    (lambda: quant.quantize_model(model(), 4, method="gptq"), ValueError,
     r"method='gptq' needs calib_ids, windows of calibration text"),
    (lambda: quant.quantize_model(model(), 0), ValueError,
     r"bits must be an int in 2..16; got int 0"),
    (lambda: quant.quantize_model(model(), 4, 5), ValueError,
     r"group_size \(5\) must divide d_in \(16\)"),
    (lambda: quant.nf4_quantize(torch.randn(100), 64), ValueError,
     r"w must hold a positive multiple of block=64 values; got shape \(100,\)"),
    (lambda: quant.nf4_dequantize(torch.zeros(64, dtype=torch.int8), torch.ones(1), (64,)),
     TypeError, r"codes must be a uint8 tensor \(numel,\); got torch.int8"),
    (lambda: quant.double_quantize(torch.ones(4, 4)), ValueError,
     r"absmax must be \(n_blocks,\); got shape \(4, 4\)"),
    # block_linears, calibration_inputs, nf4_code_book, double_dequantize
    (lambda: quant.block_linears("model"), TypeError, r"model must be a gpt.GPT; got str"),
    (lambda: quant.block_linears(torch.nn.Linear(2, 2)), TypeError,
     r"model must be a gpt.GPT; got Linear"),
    (lambda: quant.calibration_inputs("model", torch.zeros(2, 4).long()), TypeError,
     r"model must be a gpt.GPT; got str"),
    (lambda: quant.calibration_inputs(model(), torch.zeros(2, 4)), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: quant.calibration_inputs(model(), torch.zeros(4).long()), ValueError,
     r"ids must be 2-D \(b, t\) token ids; got shape \(4,\)"),
    (lambda: quant.calibration_inputs(model(), torch.full((2, 4), 7)), ValueError,
     r"ids must hold token ids in 0..6; got ids from 7 to 7"),
    (lambda: quant.calibration_inputs(model(), torch.zeros(1, 9).long()), ValueError,
     r"ids has 9 positions; the model takes 1 to seq_len = 8"),
    (lambda: quant.calibration_inputs(model(), torch.zeros(0, 4).long()), ValueError,
     r"ids must hold at least one calibration window \(b >= 1\); got shape \(0, 4\)"),
    (lambda: quant.nf4_code_book(4), TypeError,
     r"nf4_code_book\(\) takes 0 positional arguments but 1 was given"),
    (lambda: quant.double_dequantize(torch.zeros(10), torch.ones(3), torch.tensor(0.0), 4),
     TypeError, r"codes must be an int8 tensor \(n,\); got torch.float32"),
    (lambda: quant.double_dequantize(torch.zeros(10, dtype=torch.int8), torch.ones(1),
                                     torch.tensor(0.0), 4),
     ValueError, r"scales must hold ceil\(10 / 4\) = 3 values; got 1"),
    (lambda: quant.double_dequantize(torch.zeros(10, dtype=torch.int8), torch.ones(3).long(),
                                     torch.tensor(0.0), 4),
     TypeError, r"scales must be a float tensor \(n_blocks,\); got torch.int64"),
    (lambda: quant.double_dequantize(torch.zeros(10, dtype=torch.int8), torch.ones(3),
                                     torch.zeros(1), 4),
     ValueError, r"offset must be \(\); got shape \(1,\)"),
    (lambda: quant.double_dequantize(torch.zeros(10, dtype=torch.int8), torch.ones(3),
                                     torch.tensor(0.0), 0),
     ValueError, r"block must be an int >= 1; got int 0"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
