"""Chapter 14's speed target: generation with a KV cache against full recomputation.

The book's cpu GPT (``pretrain.pretrained("cpu")``: character-level tiny Shakespeare,
d_model 64, 4 layers, RoPE) generates 512 new characters greedily after a 16-character
prompt, once with ``kvcache.generate(use_cache=True)`` (a prefill, then one decode step
per token) and once recomputing the whole prefix at every step, for one sequence and for
a batch of 8, with one and two threads, in the same process (tiny decode steps are often
faster on one thread). Both methods run through the same forward function in two modes:
``eager`` (``kvcache.cached_forward`` as it is) and ``compiled``
(``torch.compile(kvcache.cached_forward, dynamic=True)``, compiled and warmed up
before timing, afresh for each thread count and batch). In
eager mode a decode step of this small model is about a hundred PyTorch calls of a few
microseconds each, whatever their size, so recomputing a short prefix costs about as
much as a cached step; compiling fuses those calls for both methods alike. Every step is
timed; the time to generate the first ``n`` tokens is the sum of the first ``n`` steps,
and the time of one step at length ``n`` the median of the 16 steps up to ``n``. Both
methods must produce the same tokens, and logits equal to float rounding. The target:
the cache is >= 10x faster at 512 new tokens (total time, each method at its faster
mode and thread count).

Usage: ``LECTURELIB_DATA=... python benchmarks/kv_cache.py`` (about five minutes on two
cores, one of them compiling) writes ``benchmarks/results/kv_cache.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from itertools import accumulate
from pathlib import Path

import lecturelib  # noqa: F401
import torch

from lecturelib import records
from lecturelib.efficiency import kvcache
from lecturelib.pretraining import pretrain

RESULT = Path(__file__).resolve().parent / "results" / "kv_cache.json"
TARGET = 10.0
LENGTHS = (32, 64, 128, 256, 512)


def step_time(seconds: list[float], n: int) -> float:
    """The median time of the 16 steps up to step ``n`` (one step is too noisy)."""
    return statistics.median(seconds[max(1, n - 16) : n])


def measure(model, val_ids, mode, forward, threads, batch, n_new) -> list[dict]:
    """Generate ``n_new`` tokens with the cache and by recomputation; one row per
    length in ``LENGTHS``."""
    torch.set_num_threads(threads)
    prompt = torch.stack([val_ids[i * 100 : i * 100 + 16] for i in range(batch)])
    kvcache.generate(model, prompt, 8, forward=forward)  # warm-up
    ids_c, logits_c, sec_c = kvcache.generate(model, prompt, n_new, forward=forward)
    ids_r, logits_r, sec_r = kvcache.generate(model, prompt, n_new, use_cache=False,
                                              forward=forward)
    assert torch.equal(ids_c, ids_r)
    cum_c, cum_r = list(accumulate(sec_c)), list(accumulate(sec_r))
    rows = [
        {
            "mode": mode,
            "threads": threads,
            "batch": batch,
            "new_tokens": n,
            "cache_seconds": cum_c[n - 1],
            "recompute_seconds": cum_r[n - 1],
            "speedup": cum_r[n - 1] / cum_c[n - 1],
            "step_speedup": step_time(sec_r, n) / step_time(sec_c, n),
        }
        for n in LENGTHS
        if n <= n_new
    ]
    rows[-1]["max_logit_diff"] = (logits_c - logits_r).abs().max().item()
    print(
        f"{mode}, {threads} threads, batch {batch}: {n_new} tokens, cache "
        f"{cum_c[-1]:.2f} s, recompute {cum_r[-1]:.2f} s, speed-up "
        f"{cum_r[-1] / cum_c[-1]:.1f}x, max |logit diff| {rows[-1]['max_logit_diff']:.1e}",
        flush=True,
    )
    return rows


def best_speedups(rows: list[dict]) -> dict[str, float]:
    """Per batch: the fastest recomputation over the fastest cached generation."""
    return {
        f"batch {b}": min(r["recompute_seconds"] for r in rows if r["batch"] == b)
        / min(r["cache_seconds"] for r in rows if r["batch"] == b)
        for b in sorted({r["batch"] for r in rows})
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-new", type=int, default=512)
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()
    model, vocab = pretrain.pretrained("cpu", progress=False)
    _, _, val_ids = pretrain.shakespeare()
    runs, compile_seconds = [], []
    for mode in ("eager", "compiled"):
        for threads, batch in ((1, 1), (2, 1), (1, 8), (2, 8)):
            forward = None
            if mode == "compiled":  # compiled afresh for each thread count and batch
                torch.set_num_threads(threads)
                torch._dynamo.reset()
                forward = torch.compile(kvcache.cached_forward, dynamic=True)
                start = time.perf_counter()
                prompt = val_ids[: 16 * batch].view(batch, 16)
                for use_cache in (True, False):  # the prefill and decode graphs
                    kvcache.generate(model, prompt, 24, use_cache=use_cache,
                                     forward=forward)
                compile_seconds.append(time.perf_counter() - start)
            runs += measure(model, val_ids, mode, forward, threads, batch, args.n_new)
    final = [r for r in runs if r["new_tokens"] == args.n_new]
    speedups = best_speedups(final)
    eager_speedups = best_speedups([r for r in final if r["mode"] == "eager"])
    record = {
        "benchmark": "kv_cache",
        "what": "greedy generation with the book's cpu GPT: wall time to generate "
        "n new "
        "characters with a KV cache and by recomputing the prefix, same run, "
        "same tokens",
        "target": f"the cache is >= {TARGET:.0f}x faster at {args.n_new} new tokens "
        "(each method at its faster mode and thread count)",
        "target_met": all(v >= TARGET for v in speedups.values()),
        "best_speedup_by_batch": speedups,
        "eager_speedup_by_batch": eager_speedups,
        "compile_seconds": max(compile_seconds),
        "runs": runs,
        "load_average": os.getloadavg(),
        "command": "python benchmarks/kv_cache.py " + " ".join(sys.argv[1:]),
        "plot": {
            "bars": "best_speedup_by_batch",
            "log": True,
            "ylabel": f"speed-up at {args.n_new} new tokens (x)",
            "caption": "time of full recomputation over time with the KV cache, "
            "one sequence and a batch of 8",
        },
        "machine": records.machine(),
    }
    records.save(record, args.out)
    print(f"target met: {record['target_met']}; wrote {args.out}")


if __name__ == "__main__":
    main()
