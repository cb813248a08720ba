"""Train a model once for the whole book: `fit_once`.

Several chapters train the same model with the same recipe: chapter 3 compares its LSTM with
chapter 2's character RNN, chapter 5 its attention model with chapter 4's translator. The
first chapter to train it keeps the trained weights and the `History` in the cache;
a later chapter that asks for the same run (the same starting weights, the same recipe)
loads them instead of training again:

    hist = train.fit_once("char-rnn", recipe, model, lambda: train.fit(model, ...))

The run is named by `name`, the `recipe` (a dict of whatever the training depends on
beyond the model's starting weights: the data, the steps, the learning rate ...), a hash of
the model's starting weights (its architecture and seed), the device type, the CPU
threads, the steps cap
and the versions of lecturelib and torch. The file is a checksummed checkpoint
(`lecturelib.train.checkpoint`), written only after training finished, and only
when training changed `model` (a `fit` that trains a copy is refused: the weights
cached are `model`'s).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from lecturelib.train import checkpoint as ckpt
from lecturelib.train.batches import model_device
from lecturelib.train.trainer import History
from lecturelib.validate import check_callable, check_type, describe


def weights_digest(model: nn.Module) -> str:
    """A hash of `model`'s state (every parameter and buffer: names, shapes, dtypes,
    bytes)."""
    digest = hashlib.sha256()
    for key, value in model.state_dict().items():
        digest.update(key.encode())
        digest.update(str((tuple(value.shape), value.dtype)).encode())
        digest.update(
            value.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy()
        )
    return digest.hexdigest()


def run_key(name: str, recipe: dict, model: nn.Module) -> str:
    """A hash of everything a training run of `model` with `recipe` depends on."""
    from lecturelib import runtime
    from lecturelib.version import __version__

    described = {
        "name": name,
        "recipe": recipe,
        "model": type(model).__qualname__,
        "weights": weights_digest(model),
        "device": model_device(model).type,
        "threads": torch.get_num_threads(),  # CPU sums come out in another order
        "steps_cap": runtime.steps_cap(),
        "lecturelib": __version__,
        "torch": torch.__version__,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[
        :16
    ]


def run_path(name: str, recipe: dict, model: nn.Module) -> Path:
    """Where `fit_once` keeps the run (under the data cache's `trained` folder)."""
    from lecturelib.data import cache_dir

    return cache_dir() / "trained" / f"{name}-{run_key(name, recipe, model)}.pt"


def fit_once(
    name: str, recipe: dict, model: nn.Module, fit: Callable[[], History]
) -> History:
    """`fit()`, which trains `model` and returns its History, run once per `name`,
    `recipe` and starting weights of `model`: the first call trains and caches the
    weights and the History; a later call, in this chapter or another, loads the
    weights into `model` and returns the History recorded then.

    `fit` must train `model` itself, the object given here, in place: the weights
    cached are `model`'s after `fit()`. A `fit` that leaves `model` unchanged
    (it trained a copy, say) is refused, and nothing is cached."""
    check_fit_once(name, recipe, model, fit)
    path = run_path(name, recipe, model)
    if not path.exists():
        with ckpt.exclusive(path, name):  # a chapter beside this one may be training it
            if not path.exists():
                return _fit_and_cache(name, model, fit, path)
    state = ckpt.load(path, map_location=model_device(model))
    model.load_state_dict(state["model"])
    print(
        f"{name}: trained before from the same weights with the same recipe; "
        f"loaded from the cache ({path.parent.name}/{path.name})"
    )
    return History.from_dict(state["history"])


def _fit_and_cache(name: str, model: nn.Module, fit, path: Path) -> History:
    start = weights_digest(model)
    hist = fit()
    if not isinstance(hist, History):
        raise TypeError(
            f"fit must return the History of train.fit; got {describe(hist)}"
        )
    check_trained(name, model, start)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    ckpt.save(path, {"model": state, "history": hist.to_dict()})
    return hist


def check_trained(name: str, model: nn.Module, start: str) -> None:
    """`fit()` must have changed `model`'s weights (`start`: their digest
    before), or there is nothing trained to cache."""
    if weights_digest(model) == start:
        raise ValueError(
            f"{name}: fit() returned a History but left model's weights unchanged, so "
            "there is no trained model to cache; fit must train the model given to "
            "fit_once in place (not a copy of it, and with a learning rate above 0); "
            "nothing was cached"
        )


def check_fit_once(name, recipe, model, fit) -> None:
    """The arguments of `fit_once`."""
    check_type(name, "name", str, "a run's name (str)")
    if not name or os.sep in name or name.startswith("."):
        raise ValueError(f"name must be a file-name-safe run name; got {name!r}")
    check_type(recipe, "recipe", dict, "a dict of what the training depends on")
    try:
        json.dumps(recipe, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"recipe must hold only numbers, strings, bools, None, lists and dicts; {e}"
        ) from None
    check_type(model, "model", nn.Module, "an nn.Module")
    check_callable(fit, "fit (a function that trains model)")
