"""Chapter 13: weight quantization, round-to-nearest and GPTQ.

- absmax (symmetric) quantization: `s = max|w| / (2^(b-1) - 1)`, `q = round(w / s)`;
- zero-point (asymmetric) quantization: `s = (max w - min w) / (2^b - 1)`,
  `z = round(-min w / s)`, `q = clamp(round(w / s) + z, 0, 2^b - 1)`,
  `w ≈ s (q - z)`;
- both per output row, or per group of `group_size` consecutive inputs of a row;
- GPTQ (Frantar et al., arXiv:2210.17323): quantize the columns of `W` one at a time
  and spread each column's error over the columns not yet quantized with the inverse
  Hessian `H = 2 X Xᵀ` of the layer's calibration inputs, in the paper's Cholesky form
  with dampening. We run its column loop without the paper's lazy block updates (the
  same result, slower on large matrices) and give every layer the full-precision model's
  inputs, where the paper feeds each layer the outputs of the already quantized layers
  before it;
- QLoRA (Dettmers et al., arXiv:2305.14314): the 4-bit NormalFloat (NF4) code book,
  per-block absmax NF4 codes, and double quantization of the block scales to int8.

Everything here is *fake quantization*: weights are quantized and immediately
dequantized back to float, which gives the quantized model's exact outputs without
integer kernels. Shapes: W `(d_out, d_in)`; calibration inputs X `(n, d_in)`.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from lecturelib.pretraining import gpt
from lecturelib.validate import check_int, check_number, check_tensor, describe

SCHEMES = ("absmax", "zeropoint")


def check_matrix(w, name: str = "w") -> None:
    """`w` must be a float matrix `(d_out, d_in)`, not empty, of finite values (for
    `hessian`, `n` calibration inputs `(n, d_in)`)."""
    message = f"{name} must be a 2-d float tensor (d_out, d_in); got {describe(w)}"
    if not isinstance(w, torch.Tensor) or not w.is_floating_point():
        raise TypeError(message)
    if w.dim() != 2:
        raise ValueError(message)
    if w.numel() < 1:
        raise ValueError(
            f"{name} must have at least one row and one column; got shape "
            f"{tuple(w.shape)}"
        )
    check_finite(w, name)


def check_finite(w, name: str = "w") -> None:
    """Every value of `w` must be finite: one `inf` makes its row's scale
    infinite, and every code of the row dequantizes to NaN."""
    if not bool(torch.isfinite(w).all()):
        bad = (~torch.isfinite(w)).nonzero()[0].tolist()
        raise ValueError(
            f"{name} must hold finite values (an inf or NaN makes its whole row or "
            f"group NaN); got {w[tuple(bad)].item()} at {name}{bad}"
        )


def check_quant_args(bits: int, group_size: int | None, scheme: str, d_in: int) -> None:
    """The bits (2 to 16), the scheme and the group size (a divisor of `d_in`, or None
    for whole rows) of a quantization."""
    check_int(bits, "bits", 2, 16)
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}; got {scheme!r}")
    if group_size is not None:
        check_int(group_size, "group_size", 1)
        if d_in % group_size:
            raise ValueError(f"group_size ({group_size}) must divide d_in ({d_in})")


def check_codes(w, bits: int, scheme: str) -> None:
    """The weights, bits (2 to 16) and scheme of `scale_zero` and `quantize`."""
    check_tensor(w, "w", "(..., n)")
    if w.dim() < 1 or w.shape[-1] < 1:
        raise ValueError(
            f"w must be (..., n) with n >= 1 values per row; got shape {tuple(w.shape)}"
        )
    check_int(bits, "bits", 2, 16)
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}; got {scheme!r}")
    check_finite(w)


def scale_zero(w: torch.Tensor, bits: int, scheme: str = "absmax"):
    """Scale and zero point (..., 1) of each row of `w` (zero is 0 for absmax)."""
    check_codes(w, bits, scheme)
    if scheme == "absmax":
        scale = w.abs().amax(-1, keepdim=True) / (2 ** (bits - 1) - 1)
        return scale.clamp_min(1e-12), torch.zeros_like(scale)
    lo = w.amin(-1, keepdim=True).clamp_max(0)
    hi = w.amax(-1, keepdim=True).clamp_min(0)
    scale = ((hi - lo) / (2**bits - 1)).clamp_min(1e-12)
    return scale, torch.round(-lo / scale)


def quantize(
    w: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor,
    bits: int,
    scheme: str = "absmax",
) -> torch.Tensor:
    """Integer codes of `w`: `round(w / s) (+ z)`, clamped to the `bits`-bit range."""
    check_codes(w, bits, scheme)
    if scheme == "absmax":
        qmax = 2 ** (bits - 1) - 1
        return torch.clamp(torch.round(w / scale), -qmax, qmax)
    return torch.clamp(torch.round(w / scale) + zero, 0, 2**bits - 1)


def fake_quantize(
    w: torch.Tensor, bits: int, group_size: int | None = None, scheme: str = "absmax"
) -> torch.Tensor:
    """Round-to-nearest quantize-dequantize, per row or per `group_size` columns."""
    check_fake_quantize(w, bits, group_size, scheme)
    g = group_size or w.shape[1]
    groups = w.reshape(w.shape[0], -1, g)  # (d_out, d_in/g, g)
    scale, zero = scale_zero(groups, bits, scheme)
    q = quantize(groups, scale, zero, bits, scheme)
    return ((q - zero) * scale).reshape(w.shape)


def check_fake_quantize(w, bits: int, group_size: int | None, scheme: str) -> None:
    """The arguments of `fake_quantize`."""
    check_matrix(w)
    check_quant_args(bits, group_size, scheme, w.shape[1])


def exact_dtype(t: torch.Tensor) -> torch.dtype:
    """float64 on the CPU; float32 on an accelerator (as GPTQ's reference code), whose
    float64 arithmetic is many times slower."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"exact_dtype takes a tensor; got {describe(t)}")
    return torch.float64 if t.device.type == "cpu" else torch.float32


def hessian(x: torch.Tensor) -> torch.Tensor:
    """GPTQ's `H = 2 xᵀ x / n` of calibration inputs: (n, d_in) -> (d_in, d_in)."""
    check_matrix(x, "x")
    x = x.to(exact_dtype(x))
    return 2 * x.T @ x / len(x)


def gptq(
    w: torch.Tensor,
    h: torch.Tensor,
    bits: int,
    group_size: int | None = None,
    scheme: str = "absmax",
    damp: float = 0.01,
) -> torch.Tensor:
    """GPTQ quantize-dequantize of `w`, input Hessian `h` (+ `damp` × mean diagonal)."""
    check_gptq(w, h, bits, group_size, scheme, damp)
    d_in = w.shape[1]
    w, h = w.to(exact_dtype(w)).clone(), h.to(exact_dtype(w)).clone()
    dead = h.diagonal() == 0  # inputs that are always zero
    h[dead, dead] = 1
    w[:, dead] = 0
    h += damp * h.diagonal().mean() * torch.eye(d_in, dtype=h.dtype, device=h.device)
    # The upper Cholesky factor U of H⁻¹ = UᵀU: row i of U, divided by U[i, i], is how
    # column i's error is spread over columns i.. once columns < i are fixed.
    h_inv = torch.cholesky_inverse(torch.linalg.cholesky(h))
    u = torch.linalg.cholesky(h_inv, upper=True)
    q = torch.zeros_like(w)
    g = group_size or d_in
    for i in range(d_in):
        if i % g == 0:  # the group's scale from its columns as they are now
            scale, zero = scale_zero(w[:, i : i + g], bits, scheme)
        col = w[:, i : i + 1]
        q[:, i : i + 1] = (quantize(col, scale, zero, bits, scheme) - zero) * scale
        err = (col - q[:, i : i + 1]) / u[i, i]  # (d_out, 1)
        w[:, i:] -= err * u[i : i + 1, i:]
    return q.to(torch.get_default_dtype())


def check_gptq(
    w, h, bits: int, group_size: int | None, scheme: str, damp: float
) -> None:
    """The arguments of `gptq`."""
    check_fake_quantize(w, bits, group_size, scheme)
    d_in = w.shape[1]
    message = f"h must be the ({d_in}, {d_in}) Hessian of w's inputs; got {describe(h)}"
    if not isinstance(h, torch.Tensor) or not h.is_floating_point():
        raise TypeError(message)
    if h.shape != (d_in, d_in):
        raise ValueError(message)
    check_finite(h, "h")
    check_number(damp, "damp", 0, low_open=True)


def block_linears(model: gpt.GPT) -> dict[str, nn.Linear]:
    """The Linear layers of the blocks by name (the embedding and tied head stay)."""
    gpt.check_gpt(model)
    return {
        name: m for name, m in model.blocks.named_modules() if isinstance(m, nn.Linear)
    }


def check_calibration(model, ids) -> None:
    """A GPT and at least one window of ids that it reads (no window records no input
    of any layer)."""
    gpt.check_gpt(model)
    gpt.check_gpt_ids(ids, model.config)
    if ids.shape[0] < 1:
        raise ValueError(
            f"ids must hold at least one calibration window (b >= 1); got shape "
            f"{tuple(ids.shape)}"
        )


@torch.no_grad()
def calibration_inputs(model: gpt.GPT, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """The inputs of every block Linear when `model` reads the windows `ids`.
    Shapes: ids `(b, t)` → `(b·t, d_in)` per layer name."""
    check_calibration(model, ids)
    inputs, hooks = {}, []

    def record(name: str):
        def hook(module, args, out):
            inputs[name] = args[0].flatten(0, -2)

        return hook

    for name, layer in block_linears(model).items():
        hooks.append(layer.register_forward_hook(record(name)))
    try:
        model(ids)
    finally:
        for hk in hooks:
            hk.remove()
    return inputs


def quantize_model(
    model: gpt.GPT,
    bits: int,
    group_size: int | None = None,
    method: str = "rtn",
    calib_ids: torch.Tensor | None = None,
    scheme: str = "absmax",
) -> gpt.GPT:
    """A copy of `model` whose block weights are fake-quantized to `bits` by
    `method` (`"rtn"` round-to-nearest or `"gptq"` with the calibration windows
    `calib_ids`); `bits=16` rounds every weight to float16. Embedding and tied head
    stay in float."""
    gpt.check_gpt(model)
    check_int(bits, "bits", 2, 16)
    if method not in ("rtn", "gptq"):
        raise ValueError(f"method must be 'rtn' or 'gptq'; got {method!r}")
    if method == "gptq" and calib_ids is None:
        raise ValueError("method='gptq' needs calib_ids, windows of calibration text")
    if group_size is not None:
        check_quant_args(bits, group_size, scheme, model.config.d_model)
    elif scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}; got {scheme!r}")
    if calib_ids is not None:
        gpt.check_gpt_ids(calib_ids, model.config)
    out = copy.deepcopy(model)
    if bits == 16:
        for p in out.parameters():
            p.data = p.data.half().float()
        return out
    layers = block_linears(out)
    inputs = calibration_inputs(model, calib_ids) if method == "gptq" else {}
    for name, layer in layers.items():
        w = layer.weight.data
        if method == "rtn":
            layer.weight.data = fake_quantize(w, bits, group_size, scheme)
        else:
            layer.weight.data = gptq(w, hessian(inputs[name]), bits, group_size, scheme)
    return out


# QLoRA (Dettmers et al., arXiv:2305.14314): 4-bit NormalFloat and double quantization.

NF4_OFFSET = 0.9677083  # the QLoRA / bitsandbytes `create_normal_map` offset


def nf4_code_book() -> torch.Tensor:
    """QLoRA's 16 NormalFloat-4 values in [-1, 1], sorted, with an exact 0. Shape
    `(16,)`."""
    from scipy.special import ndtri  # = scipy.stats.norm.ppf, a lighter import

    pos = ndtri(torch.linspace(NF4_OFFSET, 0.5, 9)[:-1].numpy()).tolist()
    neg = (-ndtri(torch.linspace(NF4_OFFSET, 0.5, 8)[:-1].numpy())).tolist()
    values = torch.tensor(pos + [0.0] + neg, dtype=torch.float64).sort().values
    return (values / values.abs().max()).float()


def check_nf4_quantize(w, block: int) -> None:
    """The weights (any shape, finite, a multiple of `block` values) and block size."""
    check_tensor(w, "w", "(...)")
    check_int(block, "block", 1)
    if w.numel() < 1 or w.numel() % block:
        raise ValueError(
            f"w must hold a positive multiple of block={block} values; got shape "
            f"{tuple(w.shape)} ({w.numel()} values)"
        )
    check_finite(w)


def nf4_quantize(w: torch.Tensor, block: int = 64):
    """NF4 codes of `w`: per block of `block` values, divide by the block's absmax
    and take the nearest code-book entry. Shapes: `(...)` → codes `(numel,)` uint8,
    absmax `(numel / block,)`."""
    check_nf4_quantize(w, block)
    book = nf4_code_book().to(w.device)
    blocks = w.detach().float().reshape(-1, block)
    absmax = blocks.abs().amax(1).clamp_min(1e-12)
    mids = (book[1:] + book[:-1]) / 2
    codes = torch.bucketize(blocks / absmax[:, None], mids)
    return codes.to(torch.uint8).reshape(-1), absmax


def check_nf4_dequantize(codes, absmax, shape) -> None:
    """uint8 codes in 0..15, one float absmax per block, a shape of `codes.numel()`."""
    if not isinstance(codes, torch.Tensor) or codes.dtype != torch.uint8:
        raise TypeError(f"codes must be a uint8 tensor (numel,); got {describe(codes)}")
    if codes.numel() and int(codes.max()) > 15:
        raise ValueError(f"codes must be in 0..15; got a code {int(codes.max())}")
    check_tensor(absmax, "absmax", "(n_blocks,)", 1)
    if absmax.numel() < 1 or codes.numel() % absmax.numel():
        raise ValueError(
            f"codes ({codes.numel()} values) must split into absmax.numel() = "
            f"{absmax.numel()} equal blocks"
        )
    size = torch.Size(shape).numel()
    if size != codes.numel():
        raise ValueError(
            f"shape must hold codes.numel() = {codes.numel()} values; got {tuple(shape)}"
        )


def nf4_dequantize(codes: torch.Tensor, absmax: torch.Tensor, shape) -> torch.Tensor:
    """Weights back from NF4: code-book value times the block's absmax. Shapes: codes
    `(numel,)`, absmax `(n_blocks,)` → `shape`."""
    check_nf4_dequantize(codes, absmax, shape)
    book = nf4_code_book().to(absmax.device)
    values = book[codes.long()].reshape(absmax.numel(), -1) * absmax[:, None]
    return values.reshape(shape)


def check_double_quantize(absmax, block: int) -> None:
    """The block scales (1-d, finite, not empty) and the second-level block size."""
    check_tensor(absmax, "absmax", "(n_blocks,)", 1)
    if absmax.numel() < 1:
        raise ValueError("absmax must hold at least one block scale; got shape (0,)")
    check_finite(absmax, "absmax")
    check_int(block, "block", 1)


def double_quantize(absmax: torch.Tensor, block: int = 256):
    """QLoRA's double quantization of the block scales: subtract their mean, then int8
    absmax per block of `block` scales (the last block may be shorter). Shapes:
    `(n,)` → codes `(n,)` int8, scales `(ceil(n / block),)`, offset `()`."""
    check_double_quantize(absmax, block)
    offset = absmax.float().mean()
    centred = absmax.float() - offset
    pad = (-centred.numel()) % block
    blocks = torch.cat([centred, centred.new_zeros(pad)]).reshape(-1, block)
    scales = (blocks.abs().amax(1) / 127).clamp_min(1e-12)
    codes = torch.round(blocks / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return codes.reshape(-1)[: absmax.numel()], scales, offset


def check_double_dequantize(codes, scales, offset, block: int) -> None:
    """int8 codes, one float scale per `block` codes, a float offset."""
    if not isinstance(codes, torch.Tensor) or codes.dtype != torch.int8:
        raise TypeError(f"codes must be an int8 tensor (n,); got {describe(codes)}")
    check_tensor(scales, "scales", "(n_blocks,)", 1)
    check_tensor(offset, "offset", "()", 0)
    check_int(block, "block", 1)
    if scales.numel() != -(-codes.numel() // block):
        raise ValueError(
            f"scales must hold ceil({codes.numel()} / {block}) = "
            f"{-(-codes.numel() // block)} values; got {scales.numel()}"
        )


def double_dequantize(
    codes: torch.Tensor, scales: torch.Tensor, offset: torch.Tensor, block: int = 256
) -> torch.Tensor:
    """Block scales back from `double_quantize`. Shapes: codes `(n,)`, scales
    `(ceil(n / block),)`, offset `()` → `(n,)`."""
    check_double_dequantize(codes, scales, offset, block)
    per_code = scales.repeat_interleave(block)[: codes.numel()]
    return codes.float() * per_code + offset
