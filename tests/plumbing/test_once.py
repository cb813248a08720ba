"""train.fit_once: a run made by several chapters is trained once and loaded after."""

from __future__ import annotations

import re
import threading
import time

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lecturelib import train
from lecturelib.runtime import STEPS_CAP_ENV
from lecturelib.train import once
from lecturelib.train.checkpoint import CheckpointError

X, Y = torch.randn(16, 3, generator=torch.Generator().manual_seed(1)), torch.randn(16, 1)


def make(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(3, 1)


def trainer(model, steps=5, calls=None):
    def fit():
        if calls is not None:
            calls.append(1)
        return train.fit(model, [(X, Y)], lambda m, b: F.mse_loss(m(b[0]), b[1]),
                         steps=steps, lr=0.1, progress=False)
    return fit


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURELIB_CACHE", str(tmp_path))
    monkeypatch.delenv(STEPS_CAP_ENV, raising=False)
    return tmp_path


def test_the_second_run_loads_what_the_first_trained(capsys):
    calls = []
    first = make()
    hist = train.fit_once("toy", {"steps": 5}, first, trainer(first, calls=calls))
    second = make()  # another chapter builds the same model the same way
    assert not torch.equal(second.weight, first.weight)
    again = train.fit_once("toy", {"steps": 5}, second, trainer(second, calls=calls))
    assert calls == [1]  # trained once
    assert re.search(r"toy: trained before from the same weights with the same recipe; "
                     r"loaded from the cache \(trained/toy-[0-9a-f]{16}\.pt\)",
                     capsys.readouterr().out)
    for a, b in zip(first.state_dict().values(), second.state_dict().values()):
        assert torch.equal(a, b)
    assert again == hist and len(hist.train_loss) == 5 and hist.seconds > 0


@pytest.mark.parametrize("change", ["recipe", "seed", "name", "architecture", "cap"])
def test_a_different_run_trains_again(change, monkeypatch):
    calls = []
    model = make()
    train.fit_once("toy", {"steps": 5}, model, trainer(model, calls=calls))
    name, recipe, other = "toy", {"steps": 5}, make()
    if change == "recipe":
        recipe = {"steps": 6}
    elif change == "seed":
        other = make(seed=1)
    elif change == "name":
        name = "toy2"
    elif change == "architecture":
        torch.manual_seed(0)
        other = nn.Sequential(nn.Linear(3, 1))
    else:
        monkeypatch.setenv(STEPS_CAP_ENV, "2")
    train.fit_once(name, recipe, other, trainer(other, calls=calls))
    assert calls == [1, 1]


def test_nothing_is_kept_when_training_fails(cache):
    model = make()

    def fit():
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        train.fit_once("toy", {}, model, fit)
    assert not any(cache.rglob("*.pt"))
    with pytest.raises(TypeError, match=r"fit must return the History of train.fit; "
                                        r"got float 1.0"):
        train.fit_once("toy", {}, model, lambda: 1.0)
    assert not any(cache.rglob("*.pt"))


def test_a_fit_that_trains_a_copy_is_refused_and_nothing_is_cached(cache):
    import copy

    model = make()
    before = [v.clone() for v in model.state_dict().values()]
    trained = copy.deepcopy(model)
    with pytest.raises(ValueError, match=r"toy: fit\(\) returned a History but left "
                                         r"model's weights unchanged.*not a copy of it"):
        train.fit_once("toy", {}, model, trainer(trained))
    assert not any(cache.rglob("*.pt"))  # untrained weights never pass as trained
    assert all(torch.equal(a, b) for a, b in zip(before, model.state_dict().values()))
    assert not torch.equal(trained.weight, model.weight)  # the copy did train
    hist = train.fit_once("toy", {}, model, trainer(model))  # in place: cached
    assert len(hist.train_loss) == 5 and len(list(cache.rglob("*.pt"))) == 1


def test_a_corrupt_file_is_refused_by_name():
    model = make()
    train.fit_once("toy", {}, model, trainer(model))
    path = once.run_path("toy", {}, make())
    path.write_bytes(path.read_bytes()[:100])
    fresh = make()
    with pytest.raises(CheckpointError, match=re.escape(str(path))):
        train.fit_once("toy", {}, fresh, trainer(fresh))


CASES = [
    (lambda: train.fit_once(3, {}, make(), lambda: None), TypeError,
     r"name must be a run's name \(str\); got int 3"),
    (lambda: train.fit_once("", {}, make(), lambda: None), ValueError,
     r"name must be a file-name-safe run name; got ''"),
    (lambda: train.fit_once("a/b", {}, make(), lambda: None), ValueError,
     r"name must be a file-name-safe run name; got 'a/b'"),
    (lambda: train.fit_once("toy", [5], make(), lambda: None), TypeError,
     r"recipe must be a dict of what the training depends on; got list"),
    (lambda: train.fit_once("toy", {"x": torch.ones(1)}, make(), lambda: None), TypeError,
     r"recipe must hold only numbers, strings, bools, None, lists and dicts"),
    (lambda: train.fit_once("toy", {"x": float("nan")}, make(), lambda: None), TypeError,
     r"recipe must hold only numbers, strings, bools, None, lists and dicts"),
    (lambda: train.fit_once("toy", {}, "model", lambda: None), TypeError,
     r"model must be an nn.Module; got str 'model'"),
    (lambda: train.fit_once("toy", {}, make(), None), TypeError,
     r"fit \(a function that trains model\) must be callable; got None"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_run_being_trained_beside_is_waited_for_and_loaded(capsys):
    """Two chapters executed side by side that need the same run: the second waits for
    the first to cache it, then loads it (trained once, not twice)."""
    calls, started = [], threading.Event()
    first, second = make(), make()
    slow = trainer(first, calls=calls)

    def fit_slowly():
        started.set()
        time.sleep(0.5)  # still training when the other asks for the run
        return slow()

    other = threading.Thread(
        target=train.fit_once, args=("toy", {"steps": 5}, first, fit_slowly))
    other.start()
    started.wait()
    train.fit_once("toy", {"steps": 5}, second, trainer(second, calls=calls))
    other.join()
    assert calls == [1]
    out = capsys.readouterr().out
    assert "another process is training toy: waiting for it" in out
    assert "toy: trained before from the same weights with the same recipe" in out
    for a, b in zip(first.state_dict().values(), second.state_dict().values()):
        assert torch.equal(a, b)
