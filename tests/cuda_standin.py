"""A CUDA stand-in: run the GPU path of the book on a machine without a CUDA device.

It works over a CPU-only torch and over a CUDA-built torch on a machine without a GPU (pip's
default torch on Linux); on a machine with a real CUDA device it refuses to install
(:func:`real_cuda`): the tests marked ``gpu`` run there on the device itself.

Tensors "on cuda" are CPU tensors of the tagging subclass :class:`CudaTensor` (their
``.device`` says ``cuda:0``), and a ``TorchFunctionMode`` sees every torch call and refuses
what CUDA refuses:

- a cuda tensor meeting a CPU tensor of one or more dimensions (CPU scalars, dim 0, mix
  freely, as on CUDA): ``RuntimeError: Expected all tensors to be on the same device``;
- a CPU generator driving a cuda op, or a cuda generator a CPU op;
- ``.numpy()`` (and ``numpy.asarray``) on a cuda tensor: ``TypeError``.

- a float16 FFT of a size that is not a power of two (cuFFT's limit), bfloat16 autocast.

Triton is hidden (``import triton`` raises ImportError): its kernels compile for a real GPU's
driver, which the stand-in does not have, so code takes its path for a machine without Triton.

Factories with ``device="cuda"``, ``.to("cuda")``, ``.cuda()`` and ``module.to("cuda")``
(parameters keep their identity; their gradients and the buffers move too) make tagged
tensors; the results of ops on cuda tensors are tagged; ``.cpu()`` and ``.to("cpu")`` copy
to an untagged tensor. ``torch.cuda`` (and ``torch.accelerator``) describes a Tesla T4 (capability 7.5, 15 GiB, no
bf16, not even emulated). ``autocast("cuda")`` runs as CPU autocast with CUDA's dtype
(float16 by default) and CUDA's op lists (softmax, exp, cumsum, sum, norms and losses in
float32; RNNs in float16); its float16 ops (matmuls, convolutions, attention, RNNs) compute
as tensor cores do, at the CPU's float32 speed: inputs rounded to float16, sums in float32,
a float16 result. ``torch.amp.GradScaler("cuda")`` scales fp16 losses of CPU tensors.
``torch.load(map_location="cuda")`` tags what it loads; ``torch.save`` stores a cuda tensor
as the CPU tensor it is. ``loss.backward()`` runs with the stand-in on (custom autograd
Functions run Python there: their factories with ``device="cuda"`` work).

    with cuda_standin():
        model = Model().to("cuda")
        ...

    install()     # e.g. in a Jupyter kernel's startup script; uninstall() undoes it

``with count_syncs() as syncs:`` counts the host-device syncs of the code inside (every
read of a cuda tensor's values by the host: ``.item()``, ``bool``/``float``/``int``,
``.tolist()``, ``.cpu()``/``.to("cpu")``/``.numpy()``, printing and formatting,
``torch.equal``, ``nonzero``, boolean-mask indexing and ``bincount``): ``syncs.n`` and
``syncs.where``.

What it cannot see: code in C++ (it checks the arguments of each torch call, not what torch
does inside), devices inside a backward pass (the engine's gradients carry no tag, so
there results are tagged but nothing is refused), torch functions written in Python that
call others (``F.multi_head_attention_forward``: the mode sees the outer call only, so its
matmuls run under CPU autocast, in float16), memory use (``memory_allocated`` is 0) and
speed.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.abc
import os
import sys
import types

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

CUDA = torch.device("cuda", 0)
CPU = torch.device("cpu")
NAME = "Tesla T4 (stand-in)"
TOTAL_MEMORY = 15_360 * 2**20  # a T4's 15 GiB, as nvidia-smi reports it
_RealGenerator = torch._C.Generator


class CudaTensor(torch.Tensor):
    """A CPU tensor that is "on cuda:0". Torch functions ignore the class (the mode tags the
    results), so outside the stand-in it computes as the CPU tensor it is."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    device = property(lambda self: CUDA)
    is_cuda = property(lambda self: True)
    is_cpu = property(lambda self: False)

    def get_device(self) -> int:
        return 0


class CudaParameter(CudaTensor, nn.Parameter):
    """A parameter on cuda:0 (``isinstance(p, nn.Parameter)`` holds)."""


class CudaGenerator(_RealGenerator):
    """``torch.Generator(device="cuda")``: a CPU generator that says it is on cuda:0."""

    device = property(lambda self: CUDA)


class _GeneratorMeta(type(_RealGenerator)):
    def __instancecheck__(cls, obj):  # every generator is a torch.Generator
        return isinstance(obj, _RealGenerator)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _RealGenerator)


class Generator(_RealGenerator, metaclass=_GeneratorMeta):
    """Stands in for ``torch.Generator``: ``device="cuda"`` gives a :class:`CudaGenerator`."""

    def __new__(cls, device="cpu"):
        return CudaGenerator() if _is_cuda(device) else _RealGenerator(device)


def _is_cuda(device) -> bool:
    if isinstance(device, int):  # tensor.to(0), .cuda(0)
        return True
    return device is not None and torch.device(device).type == "cuda"


def is_cuda(x) -> bool:
    """Whether tensor (or generator) ``x`` is on the stand-in's cuda."""
    return isinstance(x, (CudaTensor, CudaGenerator))


def _retag(t: torch.Tensor, cuda: bool) -> torch.Tensor:
    """Make ``t`` (in place, keeping its identity) a cuda or a CPU tensor."""
    param = isinstance(t, nn.Parameter)
    if cuda and not isinstance(t, CudaTensor):
        t.__class__ = CudaParameter if param else CudaTensor
    elif not cuda and isinstance(t, CudaTensor):
        t.__class__ = nn.Parameter if param else torch.Tensor
    return t


def _plain(t: torch.Tensor) -> torch.Tensor:
    """A CPU alias of ``t`` without autograd history."""
    with torch._C.DisableTorchFunction():
        return t.detach().as_subclass(torch.Tensor)


def _device_error(where: str) -> RuntimeError:
    return RuntimeError(
        "Expected all tensors to be on the same device, but found at least two "
        f"devices, cuda:0 and cpu! (cuda stand-in, in {where})"
    )


def _name(func) -> str:
    return getattr(func, "__name__", None) or str(func)


def _tensors(tree) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


# Ops whose sequence lengths / batch sizes are CPU integer tensors by design (a
# PackedSequence's batch_sizes stay on the CPU whatever the device of its data).
CPU_LENGTHS_OPS = frozenset(
    "_pack_padded_sequence _pad_packed_sequence lstm gru rnn_tanh rnn_relu".split()
)


def _check_devices(func, tensors) -> bool:
    """Whether the op runs on cuda; raises when a cuda tensor meets a CPU one (dim > 0)."""
    cuda = any(isinstance(t, CudaTensor) for t in tensors)
    lengths = _name(func) in CPU_LENGTHS_OPS
    for t in tensors:
        if cuda and not isinstance(t, CudaTensor) and t.dim() > 0:
            if not (lengths and not t.is_floating_point()):
                raise _device_error(_name(func))
    return cuda


def _check_generator(func, args, kwargs, cuda: bool) -> None:
    for g in pytree.tree_leaves((args, kwargs)):
        if isinstance(g, _RealGenerator) and isinstance(g, CudaGenerator) != cuda:
            want, got = ("cuda", "cpu") if cuda else ("cpu", "cuda")
            raise RuntimeError(
                f"Expected a '{want}' device type for generator but found '{got}' "
                f"(cuda stand-in, in {_name(func)})"
            )


def _cufft(func, args, kwargs):
    """cuFFT computes float16 transforms of powers of two only, and no bfloat16; the
    CPU none in float16, so the stand-in computes the allowed ones in float32. Returns
    the arguments to call ``func`` with."""
    name = _name(func)
    if not name.startswith("fft_") or not args or not isinstance(args[0], torch.Tensor):
        return args
    x = args[0]
    if x.dtype not in (torch.float16, torch.bfloat16):
        return args
    if x.dtype == torch.bfloat16:
        raise RuntimeError(f"Unsupported dtype BFloat16 (cuda stand-in, in {name})")
    n = args[1] if len(args) > 1 else kwargs.get("n")
    dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
    if n is None and isinstance(dim, int):
        n = (
            x.shape[dim]
            if name not in ("fft_irfft", "fft_hfft")
            else 2 * (x.shape[dim] - 1)
        )
    if isinstance(n, int) and n & (n - 1):
        raise RuntimeError(
            "cuFFT only supports dimensions whose sizes are powers of two when "
            f"computing in half precision, but got a signal size of [{n}] (cuda "
            f"stand-in, in {name})"
        )
    return (_retag(x.float(), True), *args[1:])


def _tag_outputs(out, inputs, cuda: bool, func=None):
    """Tag the tensors of ``out`` as cuda when the op ran on cuda (inputs returned by
    in-place ops keep their device, and packed sequences' batch sizes the CPU)."""
    if not cuda:
        return out
    seen = {id(t) for t in inputs}
    lengths = func is not None and _name(func) in CPU_LENGTHS_OPS
    for t in _tensors(out):
        if id(t) not in seen and not (lengths and not t.is_floating_point()):
            _retag(t, True)
    return out


# Torch functions that may take tensors on two devices, or that the stand-in implements.
def _to(func, self, *args, **kwargs):
    """``Tensor.to``: a copy when the device changes, ``self`` when nothing changes."""
    copy_ = kwargs.pop("copy", False)
    if args and isinstance(args[0], torch.Tensor):  # .to(other): its device and dtype
        other, args = args[0], args[1:]
        device, dtype = (CUDA if is_cuda(other) else CPU), other.dtype
        _, _, non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
    else:
        device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(
            *args, **kwargs
        )
    cuda = is_cuda(self) if device is None else device.type == "cuda"
    if device is not None and device.type not in ("cpu", "cuda"):
        return func(self, *args, **kwargs)  # meta and other devices: torch's own
    moves = cuda != is_cuda(self)
    out = func(
        self,
        dtype=dtype or self.dtype,
        non_blocking=non_blocking,
        copy=copy_ or moves,
        memory_format=memory_format or torch.preserve_format,
    )
    return out if out is self else _retag(out, cuda)


def _set_data(func, self, value):
    """``param.data = value`` (how ``module.to`` moves a parameter): it takes value's
    device, keeping its identity, so optimizers built before ``.to`` still hold it."""
    func(self, value)
    _retag(self, is_cuda(value))


def _numpy(func, self, *args, **kwargs):
    if is_cuda(self):
        raise TypeError(
            "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy "
            "the tensor to host memory first. (cuda stand-in)"
        )
    return func(self, *args, **kwargs)


def _format(func, self, spec):
    """``f"{loss:.3f}"`` of a cuda scalar (torch formats only plain Tensors' items)."""
    if is_cuda(self) and self.dim() == 0:
        return self.item().__format__(spec)
    return func(self, spec)


def _getitem(func, self, index):
    """A cuda tensor takes CPU indices; a CPU tensor refuses cuda indices."""
    if not is_cuda(self) and any(is_cuda(t) and t.dim() > 0 for t in _tensors(index)):
        raise RuntimeError(
            "indices should be either on cpu or on the same device as the indexed "
            "tensor (cpu) (cuda stand-in)"
        )
    return _retag(func(self, index), is_cuda(self))


def _setitem(func, self, index, value):
    """Basic indexing copies (any device); advanced indexing (index_put_) needs the
    values on self's device, or a scalar."""
    advanced = bool(_tensors(index))
    if advanced and isinstance(value, torch.Tensor) and value.dim() > 0:
        if is_cuda(value) != is_cuda(self):
            raise _device_error("Tensor.__setitem__ (index_put_)")
    return func(self, index, value)


def _reduce_ex(func, self, proto):
    """Pickled (``torch.save``) as the CPU tensor it is."""
    if not is_cuda(self):
        return func(self, proto)
    return torch.Tensor.__reduce_ex__(
        _plain(self).requires_grad_(self.requires_grad), proto
    )


def _deepcopy(func, self, memo):
    if not is_cuda(self):
        return func(self, memo)
    if id(self) in memo:
        return memo[id(self)]
    plain = _plain(self)
    memo.setdefault(id(memo), []).append(plain)  # keep it alive while memo keys on id
    new = func(plain, memo).requires_grad_(self.requires_grad)
    new.__dict__.update(copy.deepcopy(self.__dict__, memo))
    memo[id(self)] = _retag(new, True)
    return new


def _cross_device(func, *args, **kwargs):
    """Ops that take tensors on two devices by design: the result is on self's device."""
    out = func(*args, **kwargs)
    return _tag_outputs(out, args, is_cuda(args[0]))


def _backward(
    func,
    tensors,
    gradient=None,
    retain_graph=None,
    create_graph=False,
    inputs=None,
    **kw,
):
    """``loss.backward()``: torch would run the backward pass with the mode off (it is
    off inside its own handler), and custom autograd Functions run Python there; this
    runs torch.autograd.backward's steps with the mode on again."""
    from torch.autograd import _make_grads, _tensor_or_tensors_to_tuple
    from torch.autograd.graph import _engine_run_backward

    tensors = (tensors,) if isinstance(tensors, torch.Tensor) else tuple(tensors)
    gradient = kw.get("grad_tensors", gradient)
    inputs = () if inputs is None else tuple(_tensors(inputs))
    mode = _Mode()
    mode.__enter__()
    try:
        grads = _tensor_or_tensors_to_tuple(gradient, len(tensors))
        grads = _make_grads(tensors, grads, is_grads_batched=False)
        keep = create_graph if retain_graph is None else retain_graph
        _engine_run_backward(
            tensors,
            grads,
            keep,
            create_graph,
            inputs,
            allow_unreachable=True,
            accumulate_grad=True,
        )
    finally:
        mode.__exit__(None, None, None)


_SPECIAL = {
    torch.Tensor.backward: _backward,
    torch.autograd.backward: _backward,
    torch.Tensor.to: _to,
    torch.Tensor.cuda: lambda func, self, device=None, non_blocking=False, **kw: _to(
        torch.Tensor.to, self, "cuda", non_blocking=non_blocking
    ),
    torch.Tensor.cpu: lambda func, self, **kw: _to(torch.Tensor.to, self, "cpu"),
    torch.Tensor.data.__set__: _set_data,
    torch.Tensor.numpy: _numpy,
    torch.Tensor.__array__: _numpy,
    torch.Tensor.__format__: _format,
    torch.Tensor.__getitem__: _getitem,
    torch.Tensor.__setitem__: _setitem,
    torch.Tensor.__reduce_ex__: _reduce_ex,
    torch.Tensor.__deepcopy__: _deepcopy,
    torch.Tensor.copy_: _cross_device,
    torch.Tensor.new_tensor: _cross_device,
    torch._has_compatible_shallow_copy_type: _cross_device,  # in module.to
}
_CONSTRUCTORS = {torch.tensor, torch.as_tensor}  # take data from any device


# ---------------------------------------------------------------------------------------
# Host-device syncs: what makes the CPU wait for the GPU


# Torch functions that read a cuda tensor's values back to the host (the CPU waits for
# every queued kernel): Python numbers and bools, lists, printing, comparing whole
# tensors, ops whose output size depends on the data (nonzero, boolean masks), and
# bincount (CUDA's reads the largest value back to size its output, minlength or not).
SYNC_OPS = frozenset(
    """__bool__ __float__ __int__ __index__ __complex__ item tolist equal nonzero
    argwhere masked_select unique unique_consecutive bincount __format__ __repr__
    __str__ numpy __array__""".split()
)
_TORCH_DIR = os.path.dirname(torch.__file__)


class SyncCounter:
    """Host-device syncs seen inside :func:`count_syncs`: ``n`` of them, and ``where``
    each happened (``"file:line in function"`` of the innermost caller outside torch
    and the stand-in)."""

    def __init__(self):
        self.n = 0
        self.where: list[str] = []

    def __repr__(self) -> str:
        return f"SyncCounter(n={self.n}, where={self.where})"


_COUNTERS: list[SyncCounter] = []


def _caller() -> str:
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if path != __file__ and not path.startswith(_TORCH_DIR):
            return f"{path}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return "?"


def _note_sync() -> None:
    if _COUNTERS:
        where = _caller()
        for counter in _COUNTERS:
            counter.n += 1
            counter.where.append(where)


def _syncs(func, args, kwargs) -> bool:
    """Whether calling ``func`` reads a cuda tensor back to the host."""
    name = _name(func)
    first = args[0] if args else None
    if not is_cuda(first):
        return False
    if name in SYNC_OPS:
        return True
    if name == "where" and len(args) == 1 and not kwargs:  # torch.where(cond): nonzero
        return True
    if name == "__getitem__" and len(args) > 1:  # a boolean mask is a nonzero
        return any(t.dtype == torch.bool and t.dim() > 0 for t in _tensors(args[1]))
    if name in ("to", "cpu") and func in (torch.Tensor.to, torch.Tensor.cpu):
        if name == "cpu":
            return True
        named = (*args[1:], kwargs.get("device"))
        device = next((a for a in named if isinstance(a, (str, torch.device))), None)
        if isinstance(device, str):
            try:
                device = torch.device(device)
            except RuntimeError:  # a dtype's name, e.g. .to("float")? not a device
                device = None
        other = next((a for a in args[1:] if isinstance(a, torch.Tensor)), None)
        if other is not None:
            return not is_cuda(other)
        return device is not None and device.type == "cpu"
    return False


@contextlib.contextmanager
def count_syncs():
    """``with count_syncs() as syncs:`` counts the host-device syncs of the code inside
    (``syncs.n``, ``syncs.where``); the stand-in must be installed."""
    counter = SyncCounter()
    _COUNTERS.append(counter)
    try:
        yield counter
    finally:
        _COUNTERS.remove(counter)


class _Mode(TorchFunctionMode):
    """Sees every torch call while the stand-in is installed."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if _COUNTERS and _syncs(func, args, kwargs):
            _note_sync()
        if func in _SPECIAL:
            return _SPECIAL[func](func, *args, **kwargs)
        inputs = _tensors((args, kwargs))
        if "device" in kwargs and kwargs["device"] is not None:  # a factory
            cuda = _is_cuda(kwargs["device"])
            if cuda:
                kwargs["device"] = CPU
        elif func in _CONSTRUCTORS:
            cuda = False
        elif torch._C._current_autograd_node() is not None:
            # In a backward pass the engine's gradients are untagged CPU tensors.
            cuda = any(isinstance(t, CudaTensor) for t in inputs)
        else:
            cuda = _check_devices(func, inputs)
        _check_generator(func, args, kwargs, cuda)
        if cuda:
            args = _cufft(func, args, kwargs)
        cast = _cuda_autocast_cast(func, args, kwargs) if cuda else None
        if cast is not None:  # run at CUDA's precision, CPU autocast off
            (args, kwargs), out_dtype = cast
            with _ORIGINAL_AUTOCAST("cpu", enabled=False):
                out = func(*args, **kwargs)
            if out_dtype is not None:  # a tensor-core op: its float32 result in fp16
                out = pytree.tree_map(lambda t: _cast_float(t, out_dtype), out)
            return _tag_outputs(out, inputs, cuda, func)
        return _tag_outputs(func(*args, **kwargs), inputs, cuda, func)


# ---------------------------------------------------------------------------------------
# torch.cuda as a T4, autocast("cuda") as CPU autocast


# CUDA autocast's op lists where CPU autocast's differ (torch's amp docs, "CUDA Ops that
# can autocast to float32 / float16"): CPU autocast runs softmax, exp, cumsum, sum,
# layer_norm ... in float16, CUDA in float32; CPU keeps mv, RNN cells ... in float32.
CUDA_FP32_OPS = frozenset(
    """__pow__ __rdiv__ __rpow__ __rtruediv__ acos asin binary_cross_entropy_with_logits
    cosh cosine_embedding_loss cdist cosine_similarity cross_entropy cumprod cumsum dist
    erfinv exp expm1 group_norm hinge_embedding_loss kl_div l1_loss layer_norm log
    log_softmax log10 log1p log2 margin_ranking_loss mse_loss multilabel_margin_loss
    multi_margin_loss nll_loss norm normalize pdist poisson_nll_loss pow prod reciprocal
    rsqrt sinh smooth_l1_loss soft_margin_loss softmax softmin softplus sum renorm tan
    triplet_margin_loss""".split()
)
CUDA_FP16_OPS = frozenset(
    # CPU autocast's lower-precision list, which CUDA's shares (torch's amp docs, "CPU Ops
    # that can autocast to bfloat16"), under the names torch functions carry ...
    """__matmul__ __rmatmul__ matmul mm bmm addmm addbmm baddbmm linear linalg_vecdot
    conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d conv_tbc
    convolution _convolution prelu scaled_dot_product_attention
    _native_multi_head_attention einsum tensordot"""  # (the last two: their matmuls)
    # ... and CUDA's alone: CPU autocast keeps these in float32 (cuDNN's RNNs run in fp16)
    """ mv addmv addr chain_matmul multi_dot lstm_cell gru_cell rnn_tanh_cell
    rnn_relu_cell lstm gru rnn_tanh rnn_relu""".split()
)
_AUTOCAST_CUDA: list[bool] = []  # per entered autocast: is it the stand-in's cuda one?
_is_autocast_enabled = torch.is_autocast_enabled
_ORIGINAL_AUTOCAST = torch.amp.autocast_mode.autocast


class autocast(torch.amp.autocast_mode.autocast):
    """``torch.autocast``: CUDA's (float16 by default) runs as CPU autocast, with CUDA's op
    lists (:data:`CUDA_FP32_OPS`); a T4 refuses bfloat16 as CUDA does without it."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.standin_cuda = device_type == "cuda"
        if self.standin_cuda:
            dtype = dtype or torch.float16
            if enabled and dtype == torch.bfloat16:
                raise RuntimeError(
                    "Current CUDA Device does not support bfloat16. Please switch dtype "
                    "to float16. (cuda stand-in: a T4)"
                )
            device_type = "cpu"
        super().__init__(device_type, dtype, enabled, cache_enabled)

    def __enter__(self):
        _AUTOCAST_CUDA.append(self.standin_cuda)
        return super().__enter__()

    def __exit__(self, *exc):
        _AUTOCAST_CUDA.pop()
        return super().__exit__(*exc)


def _cast_float(t, dtype):
    """``t`` in ``dtype`` if it is a floating tensor other than float64 (the tensors that
    autocast casts), keeping its device tag; anything else as it is. Autograd sees the
    cast (``Tensor.to``), so gradients flow back through it in the tensor's own dtype."""
    if (
        isinstance(t, torch.Tensor)
        and t.is_floating_point()
        and t.dtype != torch.float64
    ):
        return _retag(t.to(dtype), is_cuda(t)) if t.dtype != dtype else t
    return t


def _cuda_autocast_cast(func, args, kwargs):
    """Under the stand-in's CUDA autocast, ``((args, kwargs), out_dtype)``: the inputs
    cast as CUDA autocast would cast them and the dtype to cast the outputs to (None: as
    the op returns them), or None where CUDA autocast leaves the op to CPU autocast.

    - :data:`CUDA_FP32_OPS` take their float16 inputs in float32.
    - :data:`CUDA_FP16_OPS` (matmuls, convolutions, attention, RNNs) are what a GPU runs
      on its tensor cores: float16 inputs, products summed in float32, a float16 result.
      The stand-in does the same sums at the CPU's float32 speed (its float16 matmuls are
      ~20x slower): the inputs rounded to float16 and back to float32, the op in float32
      (CPU autocast off), and the result cast to float16 (``out_dtype``).
    """
    if not (_AUTOCAST_CUDA and _AUTOCAST_CUDA[-1] and _is_autocast_enabled("cpu")):
        return None
    name = _name(func)
    if name == "binary_cross_entropy":
        raise RuntimeError(
            "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
            "autocast. (cuda stand-in)"
        )
    if "out" in kwargs:  # autocast does not cast ops that write into a given tensor
        return None
    if name in CUDA_FP32_OPS:

        def cast(t):
            if isinstance(t, torch.Tensor) and t.dtype in (
                torch.float16,
                torch.bfloat16,
            ):
                return _cast_float(t, torch.float32)
            return t

        return pytree.tree_map(cast, (args, kwargs)), None
    if name in CUDA_FP16_OPS:
        low = torch.get_autocast_dtype("cpu")  # float16: a T4 refuses bfloat16

        def rounded(t):  # to the precision of a float16 tensor, kept in float32
            return _cast_float(_cast_float(t, low), torch.float32)

        if name == "einsum" and len(_tensors((args, kwargs))) < 2:
            return None  # one operand: a sum or a trace, no matmul
        return pytree.tree_map(rounded, (args, kwargs)), low
    return None


class _CudaAmpAutocast(autocast):  # torch.cuda.amp.autocast(...)
    def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
        super().__init__("cuda", dtype, enabled, cache_enabled)


def _cpu_for_cuda(f):
    """``torch.is_autocast_enabled("cuda")`` and friends answer for CPU autocast."""

    def wrapped(device_type=None, *args):
        if device_type is None:  # the old no-argument form means cuda
            device_type = "cuda"
        return f("cpu" if device_type == "cuda" else device_type, *args)

    return wrapped


class _DeviceContext(contextlib.nullcontext):  # torch.cuda.device(0)
    def __init__(self, device=None):
        super().__init__()


def _properties(device=None):
    return types.SimpleNamespace(
        name=NAME,
        major=7,
        minor=5,
        total_memory=TOTAL_MEMORY,
        multi_processor_count=40,
        is_integrated=False,
    )


def _torch_load(f, map_location=None, *args, **kwargs):
    """``torch.load``: ``map_location`` on cuda loads to the CPU and tags every tensor."""
    cuda = isinstance(map_location, (str, torch.device, int)) and _is_cuda(map_location)
    out = _PATCHES_ORIGINAL["torch.load"](
        f, *args, map_location=CPU if cuda else map_location, **kwargs
    )
    return _tag_outputs(out, [], cuda)


def _returns(value, name: str):
    """A function of any arguments returning ``value`` (one object per name: torch._dynamo
    refuses one function under two names)."""

    def f(*args, **kwargs):
        return value

    f.__name__ = f.__qualname__ = name
    return f


def _cuda_functions() -> dict:
    """What ``torch.cuda`` answers on a T4 with nothing allocated (the stand-in has one
    random generator for both devices: seeding cuda's is a no-op)."""
    answers = {
        "is_available": True,
        "is_initialized": True,
        "device_count": 1,
        "current_device": 0,
        "get_device_name": NAME,
        "get_device_capability": (7, 5),
        "is_bf16_supported": False,  # not even emulated
        # torch < 2.10 asks this in every optimizer's step on a CUDA build (later ones
        # ask torch.accelerator's stream): no graph is being captured
        "is_current_stream_capturing": False,
        "mem_get_info": (TOTAL_MEMORY, TOTAL_MEMORY),
    }
    memory = "memory_allocated max_memory_allocated memory_reserved max_memory_reserved"
    answers |= dict.fromkeys(memory.split(), 0)
    nothing = (
        "init set_device synchronize empty_cache manual_seed manual_seed_all seed "
        "seed_all set_rng_state set_rng_state_all reset_peak_memory_stats "
        "reset_max_memory_allocated"
    ).split()
    answers |= dict.fromkeys(nothing)
    out = {name: _returns(value, name) for name, value in answers.items()}
    out["get_device_properties"] = _properties
    out["device"] = _DeviceContext
    out["get_rng_state"] = lambda device="cuda": torch.get_rng_state()
    out["get_rng_state_all"] = lambda: [torch.get_rng_state()]
    return out


class _Stream:
    """The stand-in's one stream: it never captures a graph and is always done."""

    device = CUDA
    device_type = "cuda"
    device_index = 0

    def is_capturing(self) -> bool:
        return False

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def wait_stream(self, stream) -> None:
        return None


_STREAM = _Stream()


def _accelerator_functions() -> dict:
    """What ``torch.accelerator`` answers for the T4. A CUDA-built torch names cuda as
    its accelerator (a CPU-only one names none), and torch code that asks it for its
    stream (every optimizer's step checks for CUDA-graph capture) would initialise CUDA
    without a device; the stand-in answers instead."""
    answers = {
        "is_available": True,
        "device_count": 1,
        "current_device_index": 0,
        "current_device_idx": 0,
        "get_memory_info": (TOTAL_MEMORY, TOTAL_MEMORY),
    }
    memory = "memory_allocated max_memory_allocated memory_reserved max_memory_reserved"
    answers |= dict.fromkeys(memory.split(), 0)
    nothing = (
        "set_device_index set_device_idx set_stream synchronize empty_cache "
        "reset_peak_memory_stats reset_accumulated_memory_stats"
    ).split()
    answers |= dict.fromkeys(nothing)
    out = {name: _returns(value, name) for name, value in answers.items()}
    out["current_accelerator"] = lambda check_available=False: torch.device("cuda")
    out["current_stream"] = lambda device=None: _STREAM
    out["device_index"] = _DeviceContext
    return out


def _parameter_new(cls, data=None, requires_grad=True):
    """``nn.Parameter(cuda_tensor)`` is a :class:`CudaParameter`."""
    if isinstance(data, CudaTensor) or issubclass(cls, CudaTensor):
        data = _plain(data) if isinstance(data, CudaTensor) else data
        p = _PATCHES_ORIGINAL["Parameter.__new__"](nn.Parameter, data, requires_grad)
        return _retag(p, True)
    return _PATCHES_ORIGINAL["Parameter.__new__"](cls, data, requires_grad)


_CLIP_GRAD = sys.modules["torch.nn.utils.clip_grad"]
_OPTIMIZER = sys.modules["torch.optim.optimizer"]


def _group_by_device(key: str):
    """Torch's grouping of tensors by (device, dtype), for clipping and the optimizers'
    multi-tensor and fused steps, with the devices the tensors say they are on (C++ sees
    the stand-in's cuda tensors on the CPU, and moving the clip coefficient or the gradient
    scaler's overflow flag "to the CPU" would read as a sync)."""

    def grouped(tensorlistlist, with_indices=False):
        groups = _PATCHES_ORIGINAL[key](tensorlistlist, with_indices)
        out = {}
        for (device, dtype), value in groups.items():
            first = next((t for ts in value[0] for t in ts if t is not None), None)
            out[(CUDA if is_cuda(first) else device, dtype)] = value
        return out

    return grouped


def _patches() -> list[tuple[object, str, object, str]]:
    """(owner, attribute, stand-in, key): what :func:`install` replaces."""
    out = [(torch.cuda, k, v, f"cuda.{k}") for k, v in _cuda_functions().items()]
    out += [
        (torch.accelerator, k, v, f"accelerator.{k}")
        for k, v in _accelerator_functions().items()
        if hasattr(torch.accelerator, k)  # older torch has fewer of them
    ]
    out += [
        (torch, "autocast", autocast, "torch.autocast"),
        (torch.amp, "autocast", autocast, "amp.autocast"),
        (torch.amp.autocast_mode, "autocast", autocast, "autocast_mode.autocast"),
        (torch.cuda.amp, "autocast", _CudaAmpAutocast, "cuda.amp.autocast"),
        (torch, "Generator", Generator, "torch.Generator"),
        (torch, "load", _torch_load, "torch.load"),
        # no cuDNN here: nn.RNN's flatten_parameters asks, and would warn
        (
            torch.backends.cudnn,
            "is_acceptable",
            _returns(False, "is_acceptable"),
            "cudnn.is_acceptable",
        ),
        (nn.Parameter, "__new__", staticmethod(_parameter_new), "Parameter.__new__"),
    ]
    for owner, name in ((_CLIP_GRAD, "clip_grad"), (_OPTIMIZER, "optimizer")):
        key = f"{name}._group_tensors_by_device_and_dtype"
        grouped = _group_by_device(key)
        out.append((owner, "_group_tensors_by_device_and_dtype", grouped, key))
    for name in ("is_autocast_enabled", "get_autocast_dtype"):
        out.append((torch, name, _cpu_for_cuda(getattr(torch, name)), f"torch.{name}"))
    return out


class _NoTriton(importlib.abc.MetaPathFinder):
    """Refuses ``import triton`` (and its submodules) while the stand-in is installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            raise ImportError(
                "Triton compiles its kernels for a real GPU; the cuda stand-in has none",
                name=name,
            )
        return None


_NO_TRITON = _NoTriton()
_TRITON_MODULES: dict[str, types.ModuleType] = {}  # imported before install()


def _hide_triton() -> None:
    for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
        _TRITON_MODULES[name] = sys.modules.pop(name)
    sys.meta_path.insert(0, _NO_TRITON)


def _show_triton() -> None:
    if _NO_TRITON in sys.meta_path:
        sys.meta_path.remove(_NO_TRITON)
    sys.modules.update(_TRITON_MODULES)
    _TRITON_MODULES.clear()


_PATCHES_ORIGINAL: dict[str, object] = {}
_MODE: list[_Mode] = []
_REAL_IS_AVAILABLE = torch.cuda.is_available  # before any install()


def real_cuda() -> bool:
    """Whether this machine has a real CUDA device (then the stand-in refuses to install
    and its tests skip: the tests marked ``gpu`` run there instead)."""
    return _REAL_IS_AVAILABLE()


def install() -> None:
    """Pretend this machine has a T4 until :func:`uninstall` (idempotent); refused on a
    machine with a real CUDA device."""
    if _MODE:
        return
    if real_cuda():
        raise RuntimeError(
            "the cuda stand-in is for a machine without a CUDA device; this one has "
            "one: run the tests marked gpu on it instead"
        )
    for owner, name, new, key in _patches():
        _PATCHES_ORIGINAL[key] = owner.__dict__.get(name, getattr(owner, name))
        setattr(owner, name, new)
    # nn.Parameter.__new__ is a staticmethod: call the original as a function
    original = _PATCHES_ORIGINAL["Parameter.__new__"]
    if isinstance(original, staticmethod):
        _PATCHES_ORIGINAL["Parameter.__new__"] = original.__func__
    _hide_triton()
    mode = _Mode()
    mode.__enter__()
    _MODE.append(mode)


def uninstall() -> None:
    """Undo :func:`install`; tensors tagged cuda stay tagged but compute as CPU tensors."""
    if not _MODE:
        return
    _MODE.pop().__exit__(None, None, None)
    _show_triton()
    for owner, name, _, key in _patches():
        original = _PATCHES_ORIGINAL.pop(key)
        if key == "Parameter.__new__":
            original = staticmethod(original)
        setattr(owner, name, original)


@contextlib.contextmanager
def cuda_standin():
    """``with cuda_standin():`` the code inside runs "on a T4"."""
    install()
    try:
        yield
    finally:
        uninstall()
