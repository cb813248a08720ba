"""lecturelib.pretraining.quant: round trips within half a step, 8 bits exact up to the step, groups and
bits in the right order, and GPTQ below round-to-nearest on held-out activations."""

from __future__ import annotations

import pytest
import torch

from lecturelib.pretraining import gpt, quant


def weights(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(24, 64, generator=g)
    w[3, 5] = 9.0  # an outlier
    return w


@pytest.mark.parametrize("scheme", quant.SCHEMES)
@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("group_size", [None, 16])
def test_round_trip_error_is_at_most_half_a_step(scheme, bits, group_size):
    w = weights()
    g = group_size or w.shape[1]
    scale, _ = quant.scale_zero(w.reshape(24, -1, g), bits, scheme)
    err = (quant.fake_quantize(w, bits, group_size, scheme) - w).abs().reshape(24, -1, g)
    assert (err <= scale / 2 + 1e-6).all()


@pytest.mark.parametrize("scheme", quant.SCHEMES)
def test_codes_lie_in_the_integer_range(scheme):
    w = weights()
    for bits in (2, 4, 8):
        scale, zero = quant.scale_zero(w, bits, scheme)
        q = quant.quantize(w, scale, zero, bits, scheme)
        assert torch.equal(q, q.round())
        lo, hi = (-(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1) if scheme == "absmax" else (
            0, 2 ** bits - 1)
        assert q.min() >= lo and q.max() <= hi
        assert q.max() == hi or q.min() == lo  # the range is used


def test_eight_bits_are_exact_on_the_grid():
    """A matrix whose entries are multiples of its step comes back exactly at 8 bits."""
    g = torch.Generator().manual_seed(1)
    q = torch.randint(-127, 128, (8, 32), generator=g).float()
    q[:, 0] = 127
    w = 0.01 * q
    torch.testing.assert_close(quant.fake_quantize(w, 8), w, rtol=0, atol=1e-7)


def test_zero_point_represents_zero_exactly_and_absmax_is_symmetric():
    w = weights()
    w[:, :4] = 0
    for scheme in quant.SCHEMES:
        assert (quant.fake_quantize(w, 3, scheme=scheme)[:, :4] == 0).all()
    torch.testing.assert_close(quant.fake_quantize(-w, 4), -quant.fake_quantize(w, 4))


def test_error_falls_with_bits_and_with_smaller_groups():
    w = weights()
    err = {(b, g): (quant.fake_quantize(w, b, g) - w).norm().item()
           for b in (2, 3, 4, 8) for g in (None, 32, 8)}
    for g in (None, 32, 8):
        assert err[2, g] > err[3, g] > err[4, g] > err[8, g]
    for b in (3, 4, 8):
        assert err[b, None] > err[b, 32] > err[b, 8]


def correlated_inputs(n: int, seed: int) -> torch.Tensor:
    mix = torch.randn(64, 64, generator=torch.Generator().manual_seed(7))
    return torch.randn(n, 64, generator=torch.Generator().manual_seed(seed)) @ mix


@pytest.mark.parametrize("scheme", quant.SCHEMES)
@pytest.mark.parametrize("bits, group_size", [(4, None), (3, 16), (2, 16)])
def test_gptq_output_error_on_held_out_inputs_is_below_rounding(scheme, bits, group_size):
    w = weights()
    calib, held = correlated_inputs(2000, 1), correlated_inputs(500, 2)
    h = quant.hessian(calib)
    rtn = quant.fake_quantize(w, bits, group_size, scheme)
    ours = quant.gptq(w, h, bits, group_size, scheme)
    def out_err(wq):
        return (held @ (wq - w).T).pow(2).mean()

    assert out_err(ours) < 0.9 * out_err(rtn)


def test_gptq_with_identity_hessian_is_rounding():
    """Uncorrelated inputs: no error can be compensated, GPTQ rounds as RTN does."""
    w = weights()
    torch.testing.assert_close(quant.gptq(w, 2 * torch.eye(64), 4, None, damp=1e-9),
                               quant.fake_quantize(w, 4), rtol=0, atol=1e-6)


def test_gptq_values_lie_on_the_grid_of_their_group():
    w = weights()
    q = quant.gptq(w, quant.hessian(correlated_inputs(500, 3)), 3, 16)
    for k in range(4):
        block = q[:, 16 * k:16 * (k + 1)]
        assert (block.unique(dim=None).numel()) <= 24 * 7


def test_hessian_is_two_x_transpose_x_over_n():
    x = correlated_inputs(10, 4)
    x = x.double()
    torch.testing.assert_close(quant.hessian(x), 2 * x.T @ x / 10)


def tiny_model() -> gpt.GPT:
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=11, seq_len=16, d_model=32, n_layers=2,
                                 n_heads=4)).eval()


def test_quantize_model_copies_and_quantizes_the_block_linears_only():
    m = tiny_model()
    ids = torch.randint(0, 11, (4, 16), generator=torch.Generator().manual_seed(0))
    for method in ("rtn", "gptq"):
        q = quant.quantize_model(m, 4, 16, method, ids)
        assert torch.equal(q.embed.weight, m.embed.weight)
        for name, layer in quant.block_linears(q).items():
            original = quant.block_linears(m)[name].weight
            assert not torch.equal(layer.weight, original)
            bound = original.abs().max() / (7 if method == "rtn" else 2)
            assert (layer.weight - original).abs().max() < bound
    assert torch.equal(quant.quantize_model(m, 4, 16).blocks[0].attn.qkv.weight,
                       quant.fake_quantize(m.blocks[0].attn.qkv.weight, 4, 16))
    half = quant.quantize_model(m, 16)
    assert torch.equal(half.head.weight, m.head.weight.half().float())


def test_calibration_inputs_are_what_each_linear_reads():
    m = tiny_model()
    ids = torch.randint(0, 11, (3, 16), generator=torch.Generator().manual_seed(0))
    inputs = quant.calibration_inputs(m, ids)
    assert set(inputs) == set(quant.block_linears(m))
    h = m.blocks[0].norm1(m.embed_ids(ids)).flatten(0, 1)
    torch.testing.assert_close(inputs["0.attn.qkv"], h)
    assert inputs["1.mlp.down"].shape == (48, 128)


NF4_PUBLISHED = [
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
]  # bitsandbytes / QLoRA's NF4 table


def test_nf4_code_book_is_the_published_table():
    book = quant.nf4_code_book()
    assert book.shape == (16,)
    assert torch.allclose(book.double(), torch.tensor(NF4_PUBLISHED).double(), atol=1e-6)
    assert (book == 0).sum() == 1


def test_nf4_round_trip_error_is_at_most_half_the_largest_gap_times_absmax():
    torch.manual_seed(0)
    w = torch.randn(32, 128) * torch.rand(32, 1) * 3
    codes, absmax = quant.nf4_quantize(w, block=64)
    assert codes.dtype == torch.uint8 and codes.shape == (32 * 128,)
    assert int(codes.max()) <= 15 and absmax.shape == (32 * 128 // 64,)
    back = quant.nf4_dequantize(codes, absmax, w.shape)
    half_gap = quant.nf4_code_book().diff().max() / 2
    err = (w - back).abs().reshape(-1, 64)
    assert (err <= half_gap * absmax[:, None] + 1e-6).all()
    # each weight gets its nearest code: no other entry is closer
    book = quant.nf4_code_book()
    x = (w.reshape(-1, 64) / absmax[:, None]).reshape(-1)
    chosen = (x - book[codes.long()]).abs()
    assert (chosen <= (x[:, None] - book).abs().amin(1) + 1e-6).all()


def test_nf4_beats_uniform_4_bit_absmax_on_gaussian_weights():
    torch.manual_seed(1)
    w = torch.randn(64, 256)
    codes, absmax = quant.nf4_quantize(w, block=64)
    nf4 = ((w - quant.nf4_dequantize(codes, absmax, w.shape)) ** 2).mean()
    uniform = ((w - quant.fake_quantize(w, 4, group_size=64)) ** 2).mean()
    assert nf4 < uniform


@pytest.mark.parametrize("n", [1, 255, 256, 1000])
def test_double_quantization_moves_each_scale_by_at_most_half_its_step(n):
    torch.manual_seed(2)
    absmax = torch.rand(n) * 2 + 0.1
    codes, scales, offset = quant.double_quantize(absmax, block=256)
    assert codes.dtype == torch.int8 and codes.shape == (n,)
    assert scales.shape == (-(-n // 256),)
    back = quant.double_dequantize(codes, scales, offset, block=256)
    bound = scales.repeat_interleave(256)[:n] / 2
    assert ((back - absmax).abs() <= bound + 1e-6).all()
