"""Resume in a fresh process, and DistributedDataParallel on 2 CPU processes (gloo)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lecturelib.train import distributed

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "train_tiny.py"


def _run(args: list[str], tmp_path: Path, torchrun: int = 0) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "LECTURELIB_PROGRESS": "off"}
    if torchrun:
        with socket.socket() as s:  # a free port for the rendezvous
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={torchrun}",
               "--master_addr=127.0.0.1", f"--master_port={port}", str(SCRIPT)]
    else:
        cmd = [sys.executable, str(SCRIPT)]
    out = tmp_path / "out.pt"
    done = subprocess.run(cmd + args + ["--out", str(out)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out, weights_only=True)


@pytest.mark.slow
def test_training_2k_steps_equals_k_then_k_more_in_a_fresh_process(tmp_path):
    straight = _run(["--steps", "8"], tmp_path)
    ckpt = str(tmp_path / "ckpt.pt")
    first = _run(["--steps", "4", "--checkpoint", ckpt], tmp_path)
    resumed = _run(["--steps", "8", "--checkpoint", ckpt, "--resume"], tmp_path)
    assert first["loss"] == straight["loss"][:4]
    assert resumed["loss"] == straight["loss"]  # bitwise: data, RNG, optimizer, schedule
    for p, q in zip(straight["params"], resumed["params"]):
        assert torch.equal(p, q)


@pytest.mark.slow
def test_two_gloo_processes_take_the_steps_of_one_process_on_the_whole_batch(tmp_path):
    # without dropout (whose draws depend on how many rows a process holds) the mean of the
    # shards' gradients is the gradient of the whole batch: the same steps up to rounding
    one = _run(["--steps", "3", "--dropout", "0"], tmp_path)
    two = _run(["--steps", "3", "--dropout", "0"], tmp_path, torchrun=2)
    assert one["rows"] == [8] * 3 and two["rows"] == [4] * 3  # each process trains on half
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)
    for p, q in zip(one["params"], two["params"]):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6)
    moved = _run(["--steps", "1", "--dropout", "0"], tmp_path)
    assert not all(torch.equal(p, q) for p, q in zip(moved["params"], two["params"]))


def test_shard_splits_a_list_of_row_values_with_the_tensors_beside_it():
    x, labels = torch.arange(8).view(4, 2), ["a", "b", "c", "d"]
    parts = [distributed.Distributed(r, 2).shard((x, labels)) for r in range(2)]
    assert [p[1] for p in parts] == [["a", "b"], ["c", "d"]]
    assert torch.equal(parts[1][0], x[2:])
    both = distributed.Distributed(1, 2).shard({"x": x, "n": (5, 6, 7, 8)})
    assert both["n"] == (7, 8) and torch.equal(both["x"], x[2:])


def test_shard_splits_every_tensor_by_rank():
    x, y = torch.arange(8).view(4, 2), torch.arange(4)
    parts = [distributed.Distributed(r, 2).shard({"x": x, "pair": (y, 3)}) for r in range(2)]
    assert torch.equal(torch.cat([p["x"] for p in parts]), x)
    assert torch.equal(parts[1]["pair"][0], torch.tensor([2, 3])) and parts[0]["pair"][1] == 3
    with pytest.raises(ValueError, match="cannot be split evenly over 3 processes"):
        distributed.Distributed(0, 3).shard(x)


def test_alone_everything_is_a_no_op():
    alone = distributed.current()
    assert (alone.rank, alone.world, alone.is_main) == (0, 1, True)
    model = torch.nn.Linear(2, 2)
    assert alone.wrap(model) is model and alone.mean(2.5) == 2.5
