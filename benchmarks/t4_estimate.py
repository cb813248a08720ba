"""Each chapter's gpu profile on a Colab T4, estimated without a T4: time and peak memory.

Every chapter runs on the CPU in the ``gpu`` profile with its training steps capped
(``LECTURELIB_STEPS_CAP``, as ``tests/book/test_gpu_profile.py`` runs it) and the CUDA stand-in of
the tests (``tests/cuda_standin.py``: a T4 without bf16, so fp16 autocast and a gradient
scaler, as on Colab). In every training step of every ``train.fit`` call (every training run of
the book, the library's included) the CUDA kernels a GPU would launch are counted, and the
floating-point operations of matrix products and attention with ``torch.utils.flop_counter``;
a run's mean step (after its first, which does one-off work) is multiplied by the steps
the uncapped profile asks for. A kernel is an
ATen operation on a cuda tensor that is not a view or an allocation (operations on CPU
tensors, such as building a batch before it is moved, launch nothing; tensors created
on the GPU from nothing, such as a zero state, are not counted), with two exceptions where the CPU runs
another algorithm than CUDA: a recurrent layer counts as cuDNN runs it (about two kernels
per time step, layer and direction forward, three backward), and an optimizer step with a
foreach implementation as PyTorch runs it on CUDA (each operation on up to 36 tensors at
once). The estimate of the training time
is then

    time ≈ FLOPs / R + operations × τ + syncs × σ,

with R = 12 TFLOP/s, what small fp16 matrix products reach on a T4's tensor cores (a fifth of
its 65 TFLOP/s peak), and τ = 10 µs, the cost of launching one CUDA kernel from eager PyTorch
on one of Colab's CPU cores (small models are bound by launches, not by arithmetic). The
host-device syncs of a step are counted with the stand-in's ``count_syncs`` (every read of a
GPU tensor by the host inside the step, and the trainer's one read-back per logging step,
``ceil(steps / log_every)`` of them), at σ = 20 µs each: a device-to-host copy of a few
bytes and its wait when the queue is empty, as in a launch-bound step (a sync behind queued
kernels also idles the GPU while the CPU refills the queue, which this does not count). Work
outside the training steps (evaluation, generation, analyses, loops written out in a chapter)
is not in the estimate; the record says which chapters train outside ``train.fit``. Each
chapter runs with an empty cache, as when it is opened alone in a fresh Colab runtime: what
it loads from the cache after an earlier chapter (chapter 11's GPT) it trains here. Peak memory is the kernel's peak resident memory above what it
held after importing torch: the tensors at the profile's sizes in fp16 autocast, as on the GPU,
plus the CPU allocator's slack; a CUDA context adds about 0.3 GB on a real GPU.

Usage: ``LECTURELIB_DATA=... python benchmarks/t4_estimate.py [NN ...]`` writes
``benchmarks/results/t4_estimate.json``: about 70 minutes on two cores (the capped runs of
the recorded estimate took 4,057 s in all). With ``--update`` it re-estimates the chapters
given and keeps the record's other rows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from lecturelib import records  # noqa: E402
from booktools.toc import toc_notebooks  # noqa: E402

RESULT = ROOT / "benchmarks" / "results" / "t4_estimate.json"
R_FLOPS = 12e12  # achievable fp16 FLOP/s of small matrix products on a T4
TAU = 10e-6  # seconds per kernel launch from eager PyTorch
SIGMA = 20e-6  # seconds per host-device sync (a small device-to-host copy, queue empty)
CAP = 2

# Runs in the notebook's kernel before any cell (an IPython startup file).
HOOK = r'''
import json, resource, sys, time
sys.path.insert(0, {tests!r})
import cuda_standin
cuda_standin.install()
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode
from lecturelib import runtime, train
from lecturelib.train import trainer


class Full(int):
    """A capped step count that remembers the uncapped one."""
    def __new__(cls, capped, full):
        obj = super().__new__(cls, capped)
        obj.full = int(full)
        return obj

    def __getnewargs__(self):  # copies and pickles (a recipe deep-copied) keep it
        return int(self), self.full

    # Counts derived from one (chapter 10 trains run.steps // 2, then the rest) keep
    # theirs: capped with capped, full with full.
    def __floordiv__(self, other):
        return Full(int(self) // int(other), self.full // _full(other))

    def __sub__(self, other):
        return Full(int(self) - int(other), self.full - _full(other))

    def __rsub__(self, other):
        return Full(int(other) - int(self), _full(other) - self.full)


def _full(n):
    return n.full if isinstance(n, Full) else int(n)


_capped_sizes, _cap_steps = runtime.capped_sizes, runtime.cap_steps


def capped_sizes(sizes, cap):
    out = _capped_sizes(sizes, cap)
    for name, value in out.items():
        full = sizes[name]
        if type(value) is int and type(full) is int and value != full:
            out[name] = Full(value, full)
    return out


def cap_steps(n):
    capped = _cap_steps(n)
    return Full(capped, n) if capped != n else capped


runtime.capped_sizes, runtime.cap_steps = capped_sizes, cap_steps
for _module in list(sys.modules.values()):
    if getattr(_module, "cap_steps", None) is _cap_steps:
        _module.cap_steps = cap_steps


NO_KERNEL = {{"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
             "_unsafe_view", "lift_fresh"}}  # allocations and views launch nothing


class Launches(TorchDispatchMode):
    """Counts the CUDA kernels a GPU would launch: one per ATen operation, except views
    and allocations; inside a recurrent layer and an optimizer step, see below."""
    count = 0
    quiet = 0  # > 0: inside a recurrent layer's forward or backward (counted apart)
    optimizer_ops = None  # a list while an optimizer steps: its operations, apart

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        on_gpu = any(cuda_standin.is_cuda(a) for a in tree_leaves((args, kwargs)))
        if on_gpu and not (func.is_view or func.overloadpacket.__name__ in NO_KERNEL
                           or Launches.quiet):
            if Launches.optimizer_ops is not None:
                Launches.optimizer_ops.append(1)
            else:
                Launches.count += 1
        return func(*args, **(kwargs or {{}}))


HOOKS = None  # a list during a training step: the gradient hooks to remove after it


# cuDNN runs a recurrent layer as one input projection and about two kernels per time step
# (the recurrent product, the fused gates) for each layer and direction, about three per
# step backward. The CPU runs it as a dozen operations per step, which are not counted.
def _rnn_forward(forward):
    def counted(self, input, hx=None):
        data = input.data if hasattr(input, "batch_sizes") else input
        if hasattr(input, "batch_sizes"):
            steps = len(input.batch_sizes)
        else:
            steps = data.shape[1 if self.batch_first and data.dim() == 3 else 0]
        paths = self.num_layers * (2 if self.bidirectional else 1)
        Launches.quiet += 1
        try:
            out = forward(self, input, hx)
        finally:
            Launches.quiet -= 1
        Launches.count += paths * (1 + 2 * steps)
        params = tuple(p for p in self.parameters() if p.requires_grad)
        y, h = out
        outputs = [y.data if hasattr(y, "batch_sizes") else y,
                   *(h if isinstance(h, tuple) else (h,))]
        outputs = tuple(t for t in outputs if t.requires_grad)
        if HOOKS is not None and params and outputs:  # in a training step
            def start(grad):  # the first gradient that reaches the layer's outputs
                Launches.quiet += 1

            def end(grads):  # every parameter's gradient is in
                Launches.quiet = max(0, Launches.quiet - 1)
                Launches.count += paths * (2 + 3 * steps)

            graph = torch.autograd.graph
            HOOKS.append(graph.register_multi_grad_hook(outputs, start, mode="any"))
            HOOKS.append(graph.register_multi_grad_hook(params, end))
        return out
    return counted


for _cls in (torch.nn.RNN, torch.nn.LSTM, torch.nn.GRU):
    _cls.forward = _rnn_forward(_cls.forward)


# On CUDA, PyTorch's optimizers that have a foreach implementation use it: one kernel per
# operation for up to 36 tensors at a time (multi_tensor_apply), where the stand-in's
# tensors take the loop over parameters. A fused optimizer (the book's AdamW on CUDA) runs
# a few multi-tensor operations per step, each counted as one kernel per 36 tensors. An
# optimizer without either (Muon) is counted as is.
def _optimizer_pre(optimizer, args, kwargs):
    Launches.optimizer_ops = []


def _optimizer_post(optimizer, args, kwargs):
    ops, Launches.optimizer_ops = len(Launches.optimizer_ops or []), None
    n = sum(p.grad is not None for g in optimizer.param_groups for p in g["params"])
    if optimizer.defaults.get("fused") and n:  # each multi-tensor op once, as on CUDA
        Launches.count += ops * -(-n // 36)
    elif "foreach" in optimizer.defaults and optimizer.defaults["foreach"] is not False and n:
        Launches.count += round(ops / n) * -(-n // 36)
    else:
        Launches.count += ops


from torch.optim.optimizer import (register_optimizer_step_post_hook,
                                   register_optimizer_step_pre_hook)

register_optimizer_step_pre_hook(_optimizer_pre)
register_optimizer_step_post_hook(_optimizer_post)


BASE_KB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
FITS = []
STEPS = []  # (flops, launches, syncs) of each training step of the current fit
LOG_EVERY = [1]  # the current fit's log_every: one read-back per logging step
_train_step, _fit = trainer.Trainer.train_step, train.fit


def train_step(self):
    global HOOKS
    Launches.quiet, Launches.optimizer_ops, HOOKS = 0, None, []
    flops, ops = FlopCounterMode(display=False), Launches.count
    LOG_EVERY[0] = self.log_every
    try:
        with flops, Launches(), cuda_standin.count_syncs() as syncs:
            out = _train_step(self)
    finally:
        for handle in HOOKS:  # a parameter's hooks would otherwise fire on every step
            handle.remove()
        HOOKS = None
    STEPS.append((flops.get_total_flops(), Launches.count - ops, syncs.n))
    return out


def fit(*args, steps, **kwargs):
    STEPS.clear()
    t0 = time.perf_counter()
    out = _fit(*args, steps=steps, **kwargs)
    # the first step's one-off work (optimizer state, lazy initialisation) is left out
    # where later steps were measured
    measured = STEPS[1:] or STEPS or [(0, 0, 0)]
    FITS.append(dict(desc=kwargs.get("desc", "training"), steps_run=len(STEPS),
                     steps_full=getattr(steps, "full", int(steps)),
                     flops_per_step=sum(f for f, _, _ in measured) / len(measured),
                     ops_per_step=sum(o for _, o, _ in measured) / len(measured),
                     syncs_per_step=sum(s for _, _, s in measured) / len(measured),
                     log_every=LOG_EVERY[0],
                     cpu_seconds=time.perf_counter() - t0))
    return out


trainer.Trainer.train_step = train_step
train.fit = fit


def dump(path):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(path, "w") as f:
        json.dump(dict(fits=FITS, peak_mb=(peak - BASE_KB) / 1024), f)
'''


def syncs_of(fit: dict) -> float:
    """A training run's host-device syncs at its full steps: those inside the steps, and
    the trainer's one read-back per logging step."""
    steps = fit["steps_full"]
    return fit["syncs_per_step"] * steps + math.ceil(steps / fit["log_every"])


def estimate(counts: dict) -> dict:
    """Scale each training run's counts to its uncapped steps; time from FLOPs and launches."""
    flops = sum(f["flops_per_step"] * f["steps_full"] for f in counts["fits"])
    ops = sum(f["ops_per_step"] * f["steps_full"] for f in counts["fits"])
    syncs = sum(syncs_of(f) for f in counts["fits"])
    return {
        "flops": flops,
        "launches": ops,
        "syncs": syncs,
        "t4_seconds": flops / R_FLOPS + ops * TAU + syncs * SIGMA,
        "peak_mb": round(counts["peak_mb"]),
        "fits": len(counts["fits"]),
        "runs": [{"desc": f["desc"], "steps": f["steps_full"],
                  "flops_per_step": f["flops_per_step"],
                  "launches_per_step": f["ops_per_step"],
                  "syncs_per_step": f["syncs_per_step"], "log_every": f["log_every"]}
                 for f in counts["fits"]],
        "fit_steps_full": sum(f["steps_full"] for f in counts["fits"]),
    }


def run_chapter(nb: Path, data: str, cache: str, ipython: Path) -> dict:
    import nbformat
    from nbclient import NotebookClient

    out = ipython / f"{nb.stem}.counts.json"
    notebook = nbformat.read(nb, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(f"dump({str(out)!r})"))
    env = {
        **os.environ,
        "LECTURELIB_PROFILE": "gpu",
        "LECTURELIB_STEPS_CAP": str(CAP),
        "LECTURELIB_PROGRESS": "off",
        "LECTURELIB_DATA": data,
        "LECTURELIB_CACHE": cache,
        "MPLBACKEND": "agg",
        "IPYTHONDIR": str(ipython),
    }
    old = dict(os.environ)
    os.environ.update(env)
    try:
        t0 = time.perf_counter()
        NotebookClient(notebook, timeout=1800, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
        seconds = time.perf_counter() - t0
    finally:
        os.environ.clear()
        os.environ.update(old)
    errors = [f"{o['ename']}: {o['evalue']}" for c in notebook.cells
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    if not out.exists():  # the startup hook or the kernel failed: say where
        sys.exit(f"{nb.stem}: no counts were written; first error: "
                 f"{errors[0] if errors else 'none in the cells (see the kernel log)'}")
    counts = json.loads(out.read_text())
    outside = "backward()" in nb.read_text() or "optimizer.step()" in nb.read_text()
    return {"chapter": nb.stem, **estimate(counts), "capped_cpu_seconds": round(seconds, 1),
            "trains_outside_fit": outside, "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapter numbers (default: all)")
    parser.add_argument("--out", type=Path, default=RESULT)
    parser.add_argument("--update", action="store_true",
                        help="re-estimate the chapters given; keep the record's other rows")
    args = parser.parse_args()
    data = os.environ.get("LECTURELIB_DATA")
    if not data:
        sys.exit("set LECTURELIB_DATA to the folder of the book's data sets")
    notebooks = [ROOT / nb for nb in toc_notebooks(ROOT)]
    if args.chapters:
        notebooks = [nb for nb in notebooks if nb.name[:2] in args.chapters]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        ipython = Path(tmp) / "ipython"
        startup = ipython / "profile_default" / "startup"
        startup.mkdir(parents=True)
        (startup / "00-t4-estimate.py").write_text(HOOK.format(tests=str(ROOT / "tests")))
        for nb in notebooks:
            # a cache of its own: the chapter opened alone in a fresh runtime, as a
            # student does, trains what it needs (chapter 11's GPT, fit_once's runs)
            row = run_chapter(nb, data, str(Path(tmp) / f"cache-{nb.stem}"), ipython)
            print(json.dumps(row), flush=True)
            runs.append(row)
    failed = {r["chapter"]: r["errors"] for r in runs if r["errors"]}
    if failed:  # a chapter that stopped early would be estimated too low
        sys.exit("not recorded: cells failed in " + json.dumps(failed, indent=1))
    command = "python benchmarks/t4_estimate.py " + " ".join(sys.argv[1:])
    if args.update:  # the other chapters' rows as they were recorded
        old = json.loads(args.out.read_text())
        again = {r["chapter"] for r in runs}
        runs = [r for r in old["runs"] if r["chapter"] not in again] + runs
        runs.sort(key=lambda r: r["chapter"])
        command = f"{old['command']}; then {command}"
    records.save(
        {
            "benchmark": "t4_estimate",
            "what": (
                "each chapter's gpu profile on a T4, estimated from a capped run on the CPU: "
                "FLOPs / R + kernel launches x tau + host-device syncs x sigma, training "
                "steps scaled to the profile's"
            ),
            "command": command,
            "machine": records.machine(),
            "assumptions": {"R_flops_per_s": R_FLOPS, "tau_s_per_launch": TAU,
                            "sigma_s_per_sync": SIGMA, "steps_cap": CAP},
            "runs": runs,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
