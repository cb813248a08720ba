"""Chapter 15's targets: tiled attention in plain PyTorch against naive attention and
``F.scaled_dot_product_attention`` (SDPA) on the CPU, and the Triton kernel on a GPU.

CPU part (b 1, h 8, d_head 64, causal, fp32): for each length L, each method runs in
two fresh processes that create q, k, v and warm up on a short input. The first warms up
at length L and measures the forward time (median of ``--repeats``); the second measures
the *extra* peak memory of one call: the growth of the process's peak resident set above
the inputs (``ru_maxrss``), with large blocks allocated straight from the kernel so that
the resident set follows what is alive. Naive attention runs up to ``--naive-max`` (its
L×L scores need gigabytes beyond that).

The targets at L = 4096: tiled is >= 9x faster than naive, within 1.3x of SDPA, and uses
<= 1/50 of naive's extra peak memory.

GPU part (only where CUDA is available; skipped otherwise): the Triton kernel of
``lecturelib.efficiency.flash_triton`` against SDPA in fp16, b 4, h 16, d_head 64, causal and not,
in TFLOP/s.

Usage: ``python benchmarks/flash_attention.py`` (about 5 minutes on two quiet cores)
writes ``benchmarks/results/flash_attention.json``; ``--lengths 256 512 --repeats 1``
for a quick run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import lecturelib  # noqa: F401
import torch

from lecturelib import records

RESULT = Path(__file__).resolve().parent / "results" / "flash_attention.json"
METHODS = ("naive", "tiled", "sdpa")
SHAPE = dict(b=1, h=8, d=64)
BLOCKS = dict(block_q=256, block_k=512)

CHILD = r"""
import json, resource, statistics, sys, time
import lecturelib, torch, torch.nn.functional as F
from lecturelib.efficiency import flash
method, L, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
blocks = json.loads(sys.argv[4])
b, h, d = 1, 8, 64
def call(q, k, v):
    if method == "naive":
        return flash.naive_attention(q, k, v, causal=True)
    if method == "tiled":
        n = q.shape[-2]
        bq, bk = min(blocks["block_q"], n), min(blocks["block_k"], n)
        return flash.tiled_forward(q, k, v, True, block_q=bq, block_k=bk)[0]
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
with torch.inference_mode():
    call(*(torch.randn(b, h, 256, d) for _ in range(3)))          # load the code paths
    q, k, v = (torch.randn(b, h, L, d) for _ in range(3))
    kib = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.argv[5] == "memory":
        before = kib()
        call(q, k, v)
        print(json.dumps({"extra_peak_mib": (kib() - before) / 1024}))
    else:
        call(q, k, v)                                             # warm up at size L
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call(q, k, v)
            times.append(time.perf_counter() - start)
        print(json.dumps({"seconds": statistics.median(times)}))
"""

# Memory is measured in a process of its own in which large blocks go straight to the
# kernel and back (no growing heap), so the peak RSS follows what is alive; time in a
# process with the default allocator, which reuses memory as a long-running program
# does.
TIME_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}  # as when this record was first made
MEMORY_ENV = {**TIME_ENV, "MALLOC_MMAP_THRESHOLD_": "131072"}


def _child(method: str, length: int, repeats: int, mode: str) -> dict:
    args = [method, str(length), str(repeats), json.dumps(BLOCKS), mode]
    env = {**os.environ, **(MEMORY_ENV if mode == "memory" else TIME_ENV)}
    done = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True,
                          text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(method: str, length: int, repeats: int) -> dict:
    """The median forward time (after a warm-up) and the extra peak memory."""
    return {**_child(method, length, repeats, "time"),
            **_child(method, length, repeats, "memory")}


def cpu_runs(lengths, naive_max: int, repeats: int) -> list[dict]:
    runs = []
    for length in lengths:
        for method in METHODS:
            if method == "naive" and length > naive_max:
                continue
            row = {
                "method": method,
                "L": length,
                **SHAPE,
                "causal": True,
                "dtype": "float32",
                **measure(method, length, repeats),
            }
            runs.append(row)
            print(
                f"{method:6s} L={length:5d} {row['seconds']:8.3f} s "
                f"{row['extra_peak_mib']:9.1f} MiB",
                flush=True,
            )
    return runs


def gpu_runs(lengths) -> list[dict]:
    """TFLOP/s of the Triton kernel and SDPA on CUDA (empty without CUDA or Triton)."""
    from lecturelib.efficiency import flash_triton

    if not torch.cuda.is_available():
        return []
    kernel, message = flash_triton.triton_kernel(interpret=False)
    print(message)
    if kernel is None:
        return []
    import torch.nn.functional as F

    runs = []
    b, h, d = 4, 16, 64
    for causal in (False, True):
        for length in lengths:
            q, k, v = (
                torch.randn(b, h, length, d, device="cuda", dtype=torch.float16)
                for _ in range(3)
            )
            methods = {
                "triton": lambda: kernel(q, k, v, causal, 128, 64),
                "sdpa": lambda: F.scaled_dot_product_attention(
                    q, k, v, is_causal=causal
                ),
            }
            ref = methods["sdpa"]()
            assert (methods["triton"]() - ref).abs().max().item() < 2e-2
            for name, fn in methods.items():
                ms = _cuda_ms(fn)
                runs.append(
                    {
                        "method": name,
                        "L": length,
                        "b": b,
                        "h": h,
                        "d": d,
                        "causal": causal,
                        "dtype": "float16",
                        "seconds": ms / 1e3,
                        "tflops": flash_triton.tflops(length, d, h, b, causal, ms / 1e3),
                    }
                )
                print(
                    f"{name:6s} causal={causal!s:5} L={length:5d} {ms:7.3f} ms "
                    f"{runs[-1]['tflops']:6.1f} TFLOP/s",
                    flush=True,
                )
    return runs


def _cuda_ms(fn, repeats: int = 20) -> float:
    for _ in range(3):
        fn()
    start, end = (
        torch.cuda.Event(enable_timing=True),
        torch.cuda.Event(enable_timing=True),
    )
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def targets(runs: list[dict], at: int = 4096) -> dict | None:
    """The three CPU ratios at L = ``at`` (None where a method is missing there)."""
    by = {r["method"]: r for r in runs if r["L"] == at}
    if not all(m in by for m in METHODS):
        return None
    return {
        "L": at,
        "speedup_over_naive": by["naive"]["seconds"] / by["tiled"]["seconds"],
        "time_vs_sdpa": by["tiled"]["seconds"] / by["sdpa"]["seconds"],
        "memory_vs_naive": by["tiled"]["extra_peak_mib"]
        / by["naive"]["extra_peak_mib"],
        # the ceiling of the first target: PyTorch's fused C++ kernel against naive
        "sdpa_speedup_over_naive": by["naive"]["seconds"] / by["sdpa"]["seconds"],
    }


def _triton_version() -> dict:
    try:
        import triton
    except ImportError:
        return {}
    return {"triton": triton.__version__}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--lengths", type=int, nargs="*", default=[512, 1024, 2048, 4096, 8192]
    )
    parser.add_argument("--naive-max", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--gpu-lengths", type=int, nargs="*", default=[1024, 2048, 4096, 8192]
    )
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()
    runs = cpu_runs(args.lengths, args.naive_max, args.repeats)
    ratios = targets(runs)
    record = {
        "benchmark": "flash_attention",
        "what": "causal attention forward, b 1, h 8, d_head 64, fp32 on the CPU: time "
        "(median after a warm-up) and extra peak memory (growth of the peak RSS during "
        "one call, in a separate process), each method in its own processes; on CUDA "
        "the Triton kernel vs SDPA (fp16)",
        "target": "at L = 4096 tiled is >= 9x faster than naive, within 1.3x of SDPA, "
        "and uses <= 1/50 of naive's extra peak memory",
        "target_met": None
        if ratios is None
        else bool(
            ratios["speedup_over_naive"] >= 9
            and ratios["time_vs_sdpa"] <= 1.3
            and ratios["memory_vs_naive"] <= 1 / 50
        ),
        "ratios": ratios,
        "blocks": BLOCKS,
        "runs": runs,
        "gpu_runs": gpu_runs(args.gpu_lengths),
        "command": "python benchmarks/flash_attention.py " + " ".join(sys.argv[1:]),
        "plot": {
            "x": "L",
            "y": "seconds",
            "label": "method",
            "xlabel": "sequence length L",
            "ylabel": "forward time (s)",
            "log": True,
            "caption": "causal attention forward time on the CPU against length",
        },
        "machine": records.machine(
            load=" ".join(f"{x:.2f}" for x in os.getloadavg()), **_triton_version()
        ),
    }
    records.save(record, args.out)
    print(f"ratios {ratios}; target met: {record['target_met']}; wrote {args.out}")


if __name__ == "__main__":
    main()
