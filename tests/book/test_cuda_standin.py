"""tests/cuda_standin.py: the stand-in refuses what CUDA refuses and runs what CUDA runs."""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import cuda_standin as standin_module
from cuda_standin import CudaParameter, CudaTensor, cuda_standin, install, is_cuda
from cuda_standin import real_cuda, uninstall

SAME_DEVICE = "Expected all tensors to be on the same device"

pytestmark = pytest.mark.skipif(
    real_cuda(),
    reason="a real CUDA device is here: the stand-in refuses to install, and the tests "
    "marked gpu (tests/book/test_gpu_path.py) run on the device instead",
)


@pytest.fixture(autouse=True)
def _standin():
    with cuda_standin():
        yield


def net() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 3))
    model.register_buffer("offset", torch.ones(3))
    return model


def test_torch_cuda_describes_a_t4():
    assert torch.cuda.is_available() and torch.cuda.device_count() == 1
    assert torch.cuda.get_device_name() == "Tesla T4 (stand-in)"
    assert torch.cuda.get_device_capability() == (7, 5)
    assert not torch.cuda.is_bf16_supported()
    assert not torch.cuda.is_bf16_supported(including_emulation=True)
    assert torch.cuda.get_device_properties(0).total_memory == 15 * 2**30
    assert torch.cuda.max_memory_allocated() == 0 and torch.cuda.synchronize() is None
    torch.cuda.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.mem_get_info()[1] == 15 * 2**30


def test_it_installs_over_a_cuda_built_torch_and_answers_for_its_accelerator(
    monkeypatch,
):
    """pip's default torch on Linux is built with CUDA, and most machines that run the
    tests have no GPU: the stand-in installs there, and torch.accelerator (which such a
    torch asks, e.g. in every optimizer's step) answers for the T4 without touching
    CUDA."""
    uninstall()
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    install()
    assert torch.cuda.is_available()
    assert torch.accelerator.current_accelerator(True) == torch.device("cuda")
    assert torch.accelerator.is_available() and torch.accelerator.device_count() == 1
    assert torch.accelerator.current_device_index() == 0
    assert not torch.accelerator.current_stream().is_capturing()
    assert not torch.cuda.is_current_stream_capturing()
    assert torch.accelerator.synchronize() is None
    p = nn.Parameter(torch.ones(3, device="cuda"))
    p.grad = torch.ones(3, device="cuda")
    torch.optim.Adam([p], lr=0.1).step()  # checks the stream for graph capture
    assert is_cuda(p) and p.detach().cpu().lt(1).all()


def test_it_refuses_a_machine_with_a_real_cuda_device(monkeypatch):
    uninstall()
    monkeypatch.setattr(standin_module, "_REAL_IS_AVAILABLE", lambda: True)
    assert real_cuda()
    with pytest.raises(
        RuntimeError, match="this one has one: run the tests marked gpu"
    ):
        install()
    monkeypatch.undo()
    install()


def test_uninstall_restores_torch():
    uninstall()
    try:
        assert not torch.cuda.is_available()
        assert torch.Generator is torch._C.Generator
        assert torch.accelerator.current_accelerator() != torch.device("cuda") or (
            torch.backends.cuda.is_built()
        )
        # a CPU-only torch: "Torch not compiled with CUDA enabled"; a CUDA build
        # without a GPU: "Found no NVIDIA driver on your system"
        with pytest.raises((RuntimeError, AssertionError), match="CUDA|NVIDIA driver"):
            torch.zeros(1, device="cuda")
    finally:
        install()
    assert torch.cuda.is_available()


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.zeros(2, 3, device="cuda"),
        lambda: torch.arange(6, device=torch.device("cuda")),
        lambda: torch.ones(2).to("cuda"),
        lambda: torch.ones(2).to(torch.device("cuda:0")),
        lambda: torch.ones(2).cuda(),
        lambda: torch.ones(2).to(torch.zeros(1, device="cuda")),
        lambda: torch.zeros_like(torch.ones(2), device="cuda"),
        lambda: torch.randn(3, device="cuda") * 2 + 1,
        lambda: torch.tensor([[1, 2]], device="cuda").sum(0),
        lambda: torch.zeros(2, device="cuda").new_zeros(3),
    ],
)
def test_tensors_made_on_cuda_say_so_and_their_results_stay_there(make):
    x = make()
    assert isinstance(x, CudaTensor) and x.is_cuda
    assert x.device == torch.device("cuda", 0) and x.device.type == "cuda"
    assert is_cuda(x.float().exp()) and is_cuda(x[..., :1]) and is_cuda(x.view(-1))


def test_cpu_and_to_cpu_copy_back_untagged():
    x = torch.ones(3, device="cuda")
    for y in (x.cpu(), x.to("cpu"), x.to(torch.device("cpu"), torch.float64)):
        assert type(y) is torch.Tensor and y.device.type == "cpu"
        y.zero_()  # a copy, as from a real GPU
    assert x.sum().item() == 3
    assert x.to("cuda") is x and x.cuda() is x  # nothing to move


@pytest.mark.parametrize(
    "op",
    [
        lambda a, b: a + b,
        lambda a, b: torch.cat([a, b]),
        lambda a, b: torch.where(b > 0, a, b),
        lambda a, b: F.linear(a, b.view(1, -1).expand(2, 3)),
        lambda a, b: a.index_select(0, b.long()),
        lambda a, b: torch.gather(a, 0, b.long()),
        lambda a, b: a.masked_fill(b > 0, 0.0),
        lambda a, b: a.copy_(b) + b,
    ],
)
def test_a_cuda_tensor_meeting_a_cpu_tensor_raises(op):
    a, b = torch.zeros(3, device="cuda"), torch.zeros(3)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        op(a, b)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        op(b, a)


def test_embedding_on_cuda_refuses_cpu_ids():
    emb = nn.Embedding(5, 2).to("cuda")
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        emb(torch.tensor([1, 2]))
    assert is_cuda(emb(torch.tensor([1, 2], device="cuda")))


def test_scalars_mix_freely_as_on_cuda():
    x = torch.ones(3, device="cuda")
    for y in (
        x * torch.tensor(2.0),
        torch.tensor(2.0) + x,
        torch.maximum(x, torch.tensor(0.5)),
    ):
        assert is_cuda(y) and y.sum().item() > 0
    assert is_cuda(torch.zeros((), device="cuda") + torch.tensor(1.0))


def test_indexing_a_cuda_tensor_with_cpu_indices_works_the_reverse_raises():
    x = torch.arange(5.0, device="cuda")
    assert is_cuda(x[torch.tensor([0, 2])]) and is_cuda(x[torch.tensor([True] * 5)])
    x[torch.tensor([0])] = torch.tensor(7.0)
    x[1:3] = torch.tensor([8.0, 9.0])  # basic indexing copies across devices
    assert x.tolist() == [7.0, 8.0, 9.0, 3.0, 4.0]
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        x[torch.tensor([0, 1])] = torch.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="indices should be either on cpu"):
        torch.arange(5.0)[torch.tensor([0], device="cuda")]


def test_numpy_of_a_cuda_tensor_raises():
    x = torch.ones(2, device="cuda")
    with pytest.raises(TypeError, match="Use Tensor.cpu"):
        x.numpy()
    with pytest.raises(TypeError, match="Use Tensor.cpu"):
        np.asarray(x)
    assert x.cpu().numpy().tolist() == [1.0, 1.0] and x.tolist() == [1.0, 1.0]
    assert f"{x.sum():.2f}" == "2.00" and float(x.sum()) == 2.0  # scalars print


def test_generators_must_be_on_the_device_of_the_op():
    probs = torch.full((2, 4), 0.25, device="cuda")
    cpu, cuda = torch.Generator().manual_seed(0), torch.Generator("cuda").manual_seed(0)
    assert cuda.device.type == "cuda" and isinstance(cuda, torch.Generator)
    assert isinstance(torch.default_generator, torch.Generator)
    with pytest.raises(
        RuntimeError, match="Expected a 'cuda' device type for generator"
    ):
        torch.multinomial(probs, 1, generator=cpu)
    with pytest.raises(
        RuntimeError, match="Expected a 'cuda' device type for generator"
    ):
        torch.randn(3, device="cuda", generator=cpu)
    with pytest.raises(
        RuntimeError, match="Expected a 'cpu' device type for generator"
    ):
        torch.randn(3, generator=cuda)
    assert is_cuda(torch.multinomial(probs, 1, generator=cuda))
    same = torch.Generator("cuda").manual_seed(0)
    assert torch.equal(
        torch.rand(4, device="cuda", generator=cuda.manual_seed(3)),
        torch.rand(4, device="cuda", generator=same.manual_seed(3)),
    )


def test_module_to_moves_parameters_gradients_and_buffers_keeping_their_identity():
    model = net()
    weight = model[0].weight
    model(torch.randn(2, 4)).sum().backward()
    model.to("cuda")
    assert model[0].weight is weight and isinstance(weight, CudaParameter)
    assert isinstance(weight, nn.Parameter) and is_cuda(weight.grad)
    assert all(is_cuda(t) for t in [*model.parameters(), *model.buffers()])
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        model(torch.randn(2, 4))
    out = model(torch.randn(2, 4, device="cuda")) + model.offset
    out.sum().backward()
    assert is_cuda(out) and all(is_cuda(p.grad) for p in model.parameters())
    model.cpu()
    assert type(weight) is nn.Parameter and weight.device.type == "cpu"
    assert not is_cuda(model.offset) and not is_cuda(weight.grad)


def test_new_parameters_deepcopy_and_checkpoints_keep_the_device():
    p = nn.Parameter(torch.zeros(3, device="cuda"))
    assert isinstance(p, CudaParameter) and p.requires_grad
    model = net().cuda()
    twin = copy.deepcopy(model)
    assert all(is_cuda(t) for t in [*twin.parameters(), *twin.buffers()])
    assert not any(is_cuda(t) for t in [*copy.deepcopy(net()).state_dict().values()])
    assert twin[0].weight.data_ptr() != model[0].weight.data_ptr()
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, map_location="cuda", weights_only=True)
    assert all(is_cuda(v) for v in state.values())
    model.load_state_dict(state)
    buffer.seek(0)
    assert not any(is_cuda(v) for v in torch.load(buffer, weights_only=True).values())


def train_steps(optimizer_fn, scaler=None, steps=30, fp16=False):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1)).to("cuda")
    optimizer = optimizer_fn(model)
    x = torch.randn(64, 4, device="cuda")
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0], device="cuda")[:, None]
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        with torch.autocast("cuda", enabled=fp16):
            out = model(x)
            assert out.dtype == (torch.float16 if fp16 else torch.float32)
            loss = F.mse_loss(out.float(), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        losses.append(loss.item())
    assert all(is_cuda(p) for p in model.parameters())
    return losses


def muon(model):
    matrices = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    muon = torch.optim.Muon(matrices, lr=0.1, adjust_lr_fn="match_rms_adamw")
    return [muon, torch.optim.AdamW(rest, lr=0.1)]


class Both:
    """Two optimizers stepped as one (GradScaler steps each)."""

    def __init__(self, optimizers):
        self.optimizers = optimizers

    def zero_grad(self):
        for o in self.optimizers:
            o.zero_grad()

    def step(self):
        for o in self.optimizers:
            o.step()


OPTIMIZERS = {
    "adamw": lambda m: torch.optim.AdamW(m.parameters(), lr=0.02),
    "adamw-fused": lambda m: torch.optim.AdamW(m.parameters(), lr=0.02, fused=True),
    "sgd": lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9),
    "muon": lambda m: Both(muon(m)),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizers_step_on_cuda_parameters(name):
    losses = train_steps(OPTIMIZERS[name])
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_grad_scaler_with_fp16_autocast(name):
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0**10)
    assert scaler.is_enabled()
    opt = OPTIMIZERS[name]

    def step(optimizer):
        if isinstance(optimizer, Both):
            for o in optimizer.optimizers:
                scaler.step(o)
        else:
            scaler.step(optimizer)

    class Scaled:  # scaler.step for each optimizer of Both
        def scale(self, loss):
            return scaler.scale(loss)

        def step(self, optimizer):
            step(optimizer)

        def update(self):
            scaler.update()

    losses = train_steps(opt, scaler=Scaled(), fp16=True)
    assert losses[-1] < 0.5 * losses[0]
    assert is_cuda(scaler._scale) and scaler.get_scale() > 0


def test_grad_scaler_skips_a_step_whose_gradients_overflowed():
    model = nn.Linear(2, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.warns(FutureWarning):  # the old name still works
        scaler = torch.cuda.amp.GradScaler(init_scale=2.0**16)
    before = model.weight.detach().clone()
    with torch.autocast("cuda"):
        loss = model(torch.full((1, 2), 6e4, device="cuda")).float().sum() * 1e4
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    assert torch.equal(model.weight.detach(), before) and scaler.get_scale() == 2.0**15


def test_autocast_cuda_is_fp16_and_refuses_bf16_on_a_t4():
    a, b = torch.randn(4, 4, device="cuda"), torch.randn(4, 4, device="cuda")
    with torch.autocast("cuda"):
        assert torch.is_autocast_enabled("cuda") and torch.is_autocast_enabled()
        assert torch.get_autocast_dtype("cuda") == torch.float16
        assert (a @ b).dtype == torch.float16 and is_cuda(a @ b)
        h = a @ b  # float16; CUDA autocast computes these in float32 (CPU's would not)
        for out in (F.softmax(h, -1), h.exp(), h.cumsum(0), h.sum(), h**2):
            assert out.dtype == torch.float32 and is_cuda(out)
        assert F.layer_norm(h, (4,)).dtype == torch.float32
        assert torch.mv(a, b[0]).dtype == torch.float16
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(torch.sigmoid(a), torch.ones_like(a))
    assert (a @ b).dtype == torch.float32 and not torch.is_autocast_enabled("cuda")
    with pytest.raises(RuntimeError, match="does not support bfloat16"):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            pass


def test_custom_autograd_functions_see_cuda_tensors_in_backward():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            assert is_cuda(x)
            return 2 * x * grad  # grad comes from the engine untagged: not an error

    x = torch.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    Square.apply(x).sum().backward()
    assert is_cuda(x.grad) and x.grad.tolist() == [2.0, 4.0]


def test_backward_passes_run_with_the_stand_in_on():
    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        def backward(ctx, grad):  # a factory on the gradient's device
            return grad * torch.full_like(grad, 2.0) + torch.zeros(
                3, device=grad.device
            )

    x = torch.ones(3, device="cuda", requires_grad=True)
    Scaled.apply(x).sum().backward()
    assert is_cuda(x.grad) and x.grad.tolist() == [2.0, 2.0, 2.0]


def test_packed_sequences_keep_their_batch_sizes_on_the_cpu():
    gru = nn.GRU(3, 4, batch_first=True).to("cuda")
    x, lengths = torch.randn(2, 5, 3, device="cuda"), torch.tensor([5, 2])
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
    assert is_cuda(packed.data) and not is_cuda(packed.batch_sizes)
    out, h = gru(packed)
    padded, back = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
    assert is_cuda(padded) and is_cuda(h) and back.tolist() == [5, 2]
    with torch.autocast("cuda"):
        assert gru(x)[0].dtype == torch.float16  # cuDNN's RNNs under autocast


def test_float16_ffts_take_powers_of_two_only_as_cufft():
    x = torch.randn(2, 300, device="cuda")
    assert is_cuda(torch.fft.rfft(x.half(), n=512))
    with pytest.raises(RuntimeError, match="powers of two"):
        torch.fft.rfft(x.half(), n=600)
    with pytest.raises(RuntimeError, match="BFloat16"):
        torch.fft.rfft(x.bfloat16())
    assert is_cuda(torch.fft.rfft(x, n=600))  # float32: any size


class AtenDtypes(TorchDispatchMode):
    """Records (op, dtype) of the matmul and convolution kernels that run inside it."""

    OPS = ("mm", "addmm", "bmm", "baddbmm", "convolution", "_scaled_dot_product")

    def __enter__(self):
        self.ran = []
        super().__enter__()
        return self.ran

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name.startswith(self.OPS) and "backward" not in name:
            dtypes = {a.dtype for a in args if isinstance(a, torch.Tensor)}
            self.ran += [(name, d) for d in dtypes]
        return func(*args, **(kwargs or {}))


def test_autocast_matmuls_compute_as_tensor_cores_in_float32():
    """CUDA autocast's float16 ops run as on a GPU's tensor cores: float16 inputs, sums in
    float32, a float16 result; the stand-in computes the sums in float32 (CPU autocast's
    float16 matmuls are ~20x slower) and gradients flow back through the casts."""
    torch.manual_seed(0)
    x = torch.randn(8, 64, device="cuda", requires_grad=True)
    linear = nn.Linear(64, 32).to("cuda")
    b = torch.randn(64, 16, device="cuda")

    def tensor_cores(
        *ts,
    ):  # the float32 op of float16-rounded inputs, its result in fp16
        return [t.detach().half().float() for t in ts]

    with torch.autocast("cuda"):
        y, z = linear(x), x @ b
        conv = F.conv1d(x[None], torch.randn(4, 8, 3, device="cuda"))
    assert y.dtype == z.dtype == conv.dtype == torch.float16
    assert is_cuda(y) and is_cuda(z) and is_cuda(conv)
    xr, wr, br, bias = tensor_cores(x, linear.weight, b, linear.bias)
    # Equal (not close) to the float32 result rounded once to float16.
    assert torch.equal(y, F.linear(xr, wr, bias).half())
    assert torch.equal(z, (xr @ br).half())
    with AtenDtypes() as ran:  # and the kernels that ran were float32 ones (fast)
        with torch.autocast("cuda"):
            y, z = linear(x), x @ b
            F.conv1d(x[None], torch.randn(4, 8, 3, device="cuda"))
        (y.float().sum() + z.float().sum()).backward()
    assert {"addmm", "mm", "convolution"} <= {op for op, _ in ran}
    assert all(dtype == torch.float32 for _, dtype in ran), ran
    x.grad = linear.weight.grad = None
    with torch.autocast("cuda"):
        y, z = linear(x), x @ b
    (y.float().sum() + z.float().sum()).backward()
    assert is_cuda(x.grad) and x.grad.dtype == torch.float32
    assert is_cuda(linear.weight.grad) and linear.weight.grad.dtype == torch.float32
    xr, wr, br = xr.cpu(), wr.cpu(), br.cpu()  # d/dx of the sums, at float16 precision
    expected = torch.ones(8, 32) @ wr + torch.ones(8, 16) @ br.T
    torch.testing.assert_close(x.grad.cpu(), expected, rtol=1e-3, atol=1e-3)
    # (the weight's gradient comes back through its cast to float16: a float16 gradient)
    weight_grad = (torch.ones(32, 8) @ xr).half().float()
    torch.testing.assert_close(linear.weight.grad.cpu(), weight_grad)
    with torch.autocast("cuda"):  # attention too; float64 and integers are left alone
        q = torch.randn(2, 4, 8, 16, device="cuda")
        assert F.scaled_dot_product_attention(q, q, q).dtype == torch.float16
        assert (q.double() @ q.double().transpose(-1, -2)).dtype == torch.float64


def test_triton_is_hidden_as_it_needs_a_real_gpu():
    """Triton compiles for the GPU's driver: under the stand-in ``import triton`` fails,
    so code takes its no-Triton path; uninstall() gives it back."""
    import importlib

    with pytest.raises(ImportError, match="real GPU"):
        importlib.import_module("triton")
    with pytest.raises(ImportError):
        importlib.import_module("triton.language")
    uninstall()
    try:
        if importlib.util.find_spec("triton") is not None:
            assert importlib.import_module("triton").__name__ == "triton"
    finally:
        install()
