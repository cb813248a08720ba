"""lecturelib.train.checkpoint: atomic, checksummed files that refuse to load corrupt."""

from __future__ import annotations

import pytest
import torch

from lecturelib import train
from lecturelib.train import checkpoint
from lecturelib.train.checkpoint import CheckpointError


def _state():
    torch.manual_seed(0)
    return {"model": torch.nn.Linear(64, 64).state_dict(), "step": 7, "name": "run"}


def test_round_trip(tmp_path):
    state = _state()
    checkpoint.save(tmp_path / "a" / "c.pt", state)
    back = checkpoint.load(tmp_path / "a" / "c.pt")
    assert back["step"] == 7 and back["name"] == "run"
    assert all(torch.equal(back["model"][k], v) for k, v in state["model"].items())
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["c.pt"]


@pytest.mark.parametrize("damage, why", [
    (lambda b: b[: len(b) // 2], "cannot be read"),                # truncated
    (lambda b: b"", "cannot be read"),                              # emptied
    (lambda b: b"not a checkpoint", "cannot be read"),
])
def test_damaged_files_are_refused_with_the_file_named(tmp_path, damage, why):
    path = tmp_path / "c.pt"
    checkpoint.save(path, _state())
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CheckpointError, match=rf"checkpoint {path}.*is corrupt: .*{why}"):
        checkpoint.load(path)


def test_a_flipped_byte_in_the_weights_is_caught(tmp_path):
    path = tmp_path / "c.pt"
    state = _state()
    checkpoint.save(path, state)
    raw = bytearray(path.read_bytes())
    # the weights are stored raw inside the file: find a run of them and flip one bit
    needle = state["model"]["weight"].numpy().tobytes()[:64]
    at = bytes(raw).find(needle)
    assert at > 0
    raw[at + 10] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="SHA-256 does not match"):
        checkpoint.load(path)


def test_a_failed_save_leaves_neither_a_temp_file_nor_a_damaged_checkpoint(tmp_path):
    path = tmp_path / "c.pt"
    checkpoint.save(path, _state())
    good = path.read_bytes()
    with pytest.raises(Exception):
        checkpoint.save(path, {"bad": lambda: 0})  # not serialisable
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


def test_a_directory_is_refused_before_training(tmp_path):
    calls = []

    def batch(step):
        calls.append(step)
        return torch.ones(2, 1), torch.ones(2, 1)

    with pytest.raises(ValueError, match="is a directory"):
        train.fit(torch.nn.Linear(1, 1), batch, lambda m, b: (m(b[0]) - b[1]).pow(2).mean(),
                  steps=2, checkpointing=train.Checkpointing(tmp_path), progress=False)
    assert calls == []


def test_a_corrupt_checkpoint_stops_resume(tmp_path):
    path = tmp_path / "c.pt"
    path.write_bytes(b"")
    with pytest.raises(CheckpointError, match="is corrupt"):
        train.fit(torch.nn.Linear(1, 1), lambda s: (torch.ones(2, 1), torch.ones(2, 1)),
                  lambda m, b: (m(b[0]) - b[1]).pow(2).mean(), steps=2, checkpointing=train.Checkpointing(path, resume=True), progress=False)
