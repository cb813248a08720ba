"""Mixed precision for training: which dtype, and the gradient scaler that fp16 needs.

On a CUDA GPU that supports bfloat16 (Ampere and later) the forward pass runs under bf16
autocast: bf16 has float32's exponent range, so gradients need no scaling. Older GPUs (the Colab
T4) get float16, whose narrow range makes small gradients underflow to zero; a
`torch.amp.GradScaler` multiplies the loss before `backward` and divides the gradients
before the update, skipping steps whose gradients overflowed. On CPU and Apple GPUs the model
trains in full precision.
"""

from __future__ import annotations

import contextlib

import torch

AMP_CHOICES = (True, False, "auto")


def autocast_dtype(device_type: str, bf16_supported: bool, amp: bool | str = "auto"):
    """The autocast dtype for a device: bf16 on CUDA GPUs that support it, fp16 on other CUDA
    GPUs, `None` (full precision) elsewhere or when `amp` is False.

    >>> autocast_dtype("cuda", bf16_supported=False)   # a T4
    torch.float16
    """
    if not (
        isinstance(amp, bool) or amp == "auto"
    ):  # 1 and 1.0 equal True: refuse them
        raise ValueError(f"amp must be True, False or 'auto'; got {amp!r}")
    if device_type not in ("cpu", "cuda", "mps", "meta"):
        raise ValueError(f"device_type must be cpu, cuda or mps; got {device_type!r}")
    if not amp or device_type != "cuda":
        return None
    return torch.bfloat16 if bf16_supported else torch.float16


def amp_dtype(device: torch.device, amp: bool | str = "auto") -> torch.dtype | None:
    """`autocast_dtype` for this machine's `device`. bf16 counts only where the
    GPU computes it natively (compute capability 8.0 and up): a T4 emulates bf16 without
    tensor cores, several times slower than its fp16 with a gradient scaler."""
    supported = device.type == "cuda" and torch.cuda.is_bf16_supported(
        including_emulation=False
    )
    return autocast_dtype(device.type, supported, amp)


class Precision:
    """Autocast context, backward pass and optimizer step for one dtype choice."""

    def __init__(self, device: torch.device, amp: bool | str = "auto"):
        self.device_type = device.type
        self.dtype = amp_dtype(device, amp)
        self.scaler = (
            torch.amp.GradScaler("cuda") if self.dtype == torch.float16 else None
        )

    @property
    def skips_bad_steps(self) -> bool:
        """fp16's scaler skips updates whose gradients overflowed (it then lowers the scale)."""
        return self.scaler is not None

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()

    def state_dict(self) -> dict | None:
        return self.scaler.state_dict() if self.scaler else None

    def load_state_dict(self, state: dict | None) -> None:
        if self.scaler and state:
            self.scaler.load_state_dict(state)
