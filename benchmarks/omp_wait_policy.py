"""How OpenMP's idle threads wait, measured on the book's CPU workloads, quiet and contended.

PyTorch's CPU kernels run on an OpenMP thread team. Between parallel regions an idle thread
either spins (burning its core, ready at once) or sleeps (cheap, slow to wake). GNU OpenMP
(libgomp, which torch's Linux wheels use) spins for ``GOMP_SPINCOUNT`` iterations before
sleeping by default (300,000 when the thread count does not exceed the cores); ``OMP_WAIT_POLICY
=ACTIVE`` spins without bound and ``PASSIVE`` sleeps at once. Small models launch thousands of
short parallel regions per second, so the policy decides how much of each step is spent
waking threads; and a thread that spins forever steals the core of any other process.

Each policy runs, each in a fresh process (the policy is read when the OpenMP runtime starts):

- ``gpt``: chapter 11's cpu recipe (``pretrain.RECIPES["cpu"]``) for ``--steps`` steps,
  training time only;
- ``tiled``: chapter 15's tiled attention forward (``flash.tiled_forward``, causal, b=1, h=8,
  d=64, L=1024) and ``F.scaled_dot_product_attention`` on the same inputs (median of 5).

``quiet`` runs alone; ``contended`` runs beside one busy process that does small matrix
products on one thread (another notebook, a browser, the build's renderer). Usage:
``LECTURELIB_DATA=... python benchmarks/omp_wait_policy.py`` writes
``benchmarks/results/omp_wait_policy.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lecturelib import records

RESULT = Path(__file__).resolve().parent / "results" / "omp_wait_policy.json"

# What each policy sets; "" leaves libgomp at its default (an unknown value is ignored).
POLICIES = {
    "default (bounded spin)": {"OMP_WAIT_POLICY": "", "GOMP_SPINCOUNT": ""},
    "GOMP_SPINCOUNT=10000": {"OMP_WAIT_POLICY": "", "GOMP_SPINCOUNT": "10000"},
    "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": ""},
    "ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": ""},
}

CHILD = r"""
import json, statistics, sys, time
import torch
workload, steps = sys.argv[1], int(sys.argv[2])
if workload == "gpt":
    from lecturelib.pretraining import pretrain
    vocab, train_ids, val_ids = pretrain.shakespeare()
    recipe = pretrain.with_steps(pretrain.RECIPES["cpu"], steps)
    start = time.perf_counter()
    pretrain.train_gpt(recipe, len(vocab), train_ids, val_ids[:4096], evals=1,
                       progress=False)
    print(json.dumps({"seconds": time.perf_counter() - start}))
else:
    import torch.nn.functional as F
    from lecturelib.efficiency import flash
    q, k, v = (torch.randn(1, 8, 1024, 64) for _ in range(3))
    def tiled():
        flash.tiled_forward(q, k, v, True, block_q=256, block_k=512)
    def sdpa():
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = {}
    with torch.inference_mode():
        for name, fn in (("tiled", tiled), ("sdpa", sdpa)):
            fn()
            times = []
            for _ in range(5):
                t0 = time.perf_counter(); fn(); times.append(time.perf_counter() - t0)
            out[name + "_seconds"] = statistics.median(times)
    print(json.dumps(out))
"""

BUSY = r"""
import torch
torch.set_num_threads(1)
a = torch.randn(64, 64)
while True:
    a = torch.tanh(a @ a)
"""


def child(workload: str, steps: int, policy: dict) -> dict:
    env = {**os.environ, **policy}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, workload, str(steps)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--conditions", nargs="+", default=["quiet", "contended"])
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()
    runs = []
    for condition in args.conditions:
        busy = None
        if condition == "contended":
            busy = subprocess.Popen(
                [sys.executable, "-c", BUSY],
                env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
            )
            time.sleep(2)
        try:
            for name, policy in POLICIES.items():
                for workload in ("gpt", "tiled"):
                    row = {"condition": condition, "policy": name, "workload": workload}
                    row.update(child(workload, args.steps, policy))
                    print(json.dumps(row), flush=True)
                    runs.append(row)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    records.save(
        {
            "benchmark": "omp_wait_policy",
            "what": (
                "chapter 11's cpu recipe (training seconds for --steps steps) and chapter "
                "15's tiled attention and SDPA (median forward seconds, L=1024), under each "
                "OpenMP wait policy, alone and beside one busy single-thread process"
            ),
            "command": "python benchmarks/omp_wait_policy.py " + " ".join(sys.argv[1:]),
            "machine": records.machine(),
            "steps": args.steps,
            "runs": runs,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
