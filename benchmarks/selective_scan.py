"""Chapter 20's speed target: the selective scan, a loop against the parallel and chunked scans.

``scan.selective_scan_ref`` (a loop over time, written like ``selective_scan_ref`` of the
``mamba_ssm`` package), ``scan.selective_scan(method="parallel")`` (Hillis-Steele) and
``scan.selective_scan(method="chunked")`` run on Mamba-sized inputs (batch 2, d_inner 128,
d_state 16, fp32) at several lengths, forward alone (under ``torch.no_grad``) and forward +
backward, all in the same process; each time is the fastest of ``--repeats`` calls after a
warm-up call (the loop's forward + backward at the longest length: one call). All methods must
give the loop's outputs and gradients (checked at every length). Where Triton is installed its
fused forward kernel (``scan.triton_scan``) is checked against the loop, interpreted on a
CPU (small inputs) and, on CUDA, compiled and timed at every length.

The target, at L = 1024 on 2 cores: the fastest scan is >= 10x faster than the loop forward +
backward and >= 2x forward alone.

Usage: ``python benchmarks/selective_scan.py`` (a few minutes on two cores) writes
``benchmarks/results/selective_scan.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

import lecturelib  # noqa: F401
import torch

from lecturelib import records
from lecturelib.state_space import scan

RESULT = Path(__file__).resolve().parent / "results" / "selective_scan.json"
TARGET_BOTH, TARGET_FORWARD = 10.0, 2.0
METHODS = {"loop": scan.selective_scan_ref,
           "parallel": lambda *a: scan.selective_scan(*a, method="parallel"),
           "chunked": lambda *a: scan.selective_scan(*a, method="chunked")}


def inputs(L: int, device="cpu", grad: bool = False, d: int = 128) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(L)
    out = [torch.randn(2, L, d, generator=g), torch.rand(2, L, d, generator=g) * 0.1 + 1e-3,
           -torch.rand(d, 16, generator=g) * 4, torch.randn(2, L, 16, generator=g),
           torch.randn(2, L, 16, generator=g)]
    return [x.to(device).requires_grad_(grad) for x in out]


def fastest(fn, repeats: int, warm: bool = True) -> float:
    if warm:
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def check_equal(L: int) -> None:
    args = inputs(L, grad=True)
    ref = scan.selective_scan_ref(*args)
    grads = torch.autograd.grad(ref.sum(), args)
    for name in ("parallel", "chunked"):
        out = METHODS[name](*args)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
        for g, e in zip(torch.autograd.grad(out.sum(), args), grads):
            torch.testing.assert_close(g, e, atol=1e-3, rtol=1e-3)


def triton_runs(lengths, repeats) -> tuple[str, list[dict]]:
    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed", []
    kernel, message = scan.triton_scan()
    if kernel is None:
        return message, []
    device = "cuda" if torch.cuda.is_available() else "cpu"
    small = inputs(32, device, d=32)
    torch.testing.assert_close(kernel(*small), scan.selective_scan_ref(*small),
                               atol=1e-5, rtol=1e-4)
    if device != "cuda":
        return f"{message}; equal to the loop (L 32, d 32); not timed", []
    runs = []
    for L in lengths:
        args = inputs(L, device)
        torch.testing.assert_close(kernel(*args), scan.selective_scan_ref(*args),
                                   atol=1e-4, rtol=1e-4)

        def call():
            kernel(*args)
            torch.cuda.synchronize()

        runs.append({"method": "triton", "pass": "forward", "L": L,
                     "seconds": fastest(call, repeats), "series": "triton, forward"})
    return f"{message}; equal to the loop at every length", runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()
    runs = []
    for L in args.lengths:
        check_equal(min(L, 256))
        for name, fn in METHODS.items():
            x = inputs(L)
            with torch.no_grad():
                forward = fastest(lambda: fn(*x), args.repeats)
            xg = inputs(L, grad=True)
            slow = name == "loop" and L == max(args.lengths)
            both = fastest(lambda: fn(*xg).sum().backward(), 1 if slow else args.repeats,
                           warm=not slow)
            for kind, seconds in (("forward", forward), ("forward+backward", both)):
                runs.append({"method": name, "pass": kind, "L": L, "seconds": seconds,
                             "series": f"{name}, {kind}"})
            print(f"L {L:5d} {name:9s} forward {forward * 1000:8.1f} ms, "
                  f"forward+backward {both * 1000:9.1f} ms", flush=True)
    triton_message, gpu = triton_runs(args.lengths, args.repeats)
    print(triton_message)
    L = max(args.lengths)
    at = {(r["method"], r["pass"]): r["seconds"] for r in runs if r["L"] == L}
    best = min(("parallel", "chunked"), key=lambda m: at[m, "forward+backward"])
    ratios = {"L": L, "fastest": best,
              "forward": at["loop", "forward"] / at[best, "forward"],
              "forward+backward": at["loop", "forward+backward"]
              / at[best, "forward+backward"]}
    record = {
        "benchmark": "selective_scan",
        "what": "the selective scan (batch 2, d_inner 128, d_state 16, fp32): a loop over "
                "time against a Hillis-Steele parallel scan and a chunked scan, forward and "
                "forward + backward, same run, equal outputs and gradients",
        "target": f"at L = {L}, the fastest scan is >= {TARGET_BOTH:.0f}x the loop's speed "
                  f"forward + backward and >= {TARGET_FORWARD:.0f}x forward alone",
        "target_met": bool(ratios["forward+backward"] >= TARGET_BOTH
                           and ratios["forward"] >= TARGET_FORWARD),
        "ratios": ratios,
        "runs": runs,
        "triton": triton_message,
        "gpu_runs": gpu,
        "load_average": os.getloadavg(),
        "command": "python benchmarks/selective_scan.py " + " ".join(sys.argv[1:]),
        "plot": {"x": "L", "y": "seconds", "label": "series", "xlabel": "sequence length L",
                 "ylabel": "time (s)", "log": True,
                 "caption": "selective scan time on the CPU against length: loop, parallel "
                            "and chunked scans, forward and forward + backward"},
        "machine": records.machine(),
    }
    record["machine"]["load"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    records.save(record, args.out)
    print(f"fastest: {best}; {ratios['forward']:.1f}x forward, "
          f"{ratios['forward+backward']:.1f}x forward + backward; "
          f"target met: {record['target_met']}; wrote {args.out}")


if __name__ == "__main__":
    main()
