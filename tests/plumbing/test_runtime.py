"""lecturelib.runtime: profiles, sizes, seeding, the environment line, the build record."""

from __future__ import annotations

import json

import pytest
import torch

from lecturelib import runtime
from lecturelib.runtime import (
    PROFILE_ENV,
    RECORD_ENV,
    STEPS_CAP_ENV,
    resolve_profile,
    setup,
)

SIZES = {
    "smoke": {"n_steps": 2, "d_model": 8},
    "cpu": {"n_steps": 20, "d_model": 16},
    "gpu": {"n_steps": 200, "d_model": 64},
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    monkeypatch.delenv(RECORD_ENV, raising=False)
    monkeypatch.delenv(STEPS_CAP_ENV, raising=False)


@pytest.mark.parametrize("profile", ["smoke", "cpu", "gpu"])
def test_resolve_explicit_profile(profile):
    assert resolve_profile(profile) == profile


def test_resolve_auto_follows_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_profile("auto") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_profile("auto") == "gpu"


def test_resolve_auto_is_cpu_on_this_machine():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    assert resolve_profile() == "cpu"


def test_env_override_wins(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV, "smoke")
    assert resolve_profile("gpu") == "smoke"
    assert resolve_profile("auto") == "smoke"


def test_unknown_profile_names_the_valid_ones():
    with pytest.raises(ValueError, match="smoke, cpu, gpu, auto") as err:
        resolve_profile("fast")
    assert "'fast'" in str(err.value)


def test_bad_env_value_is_reported_as_the_env_variable(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV, "tpu")
    with pytest.raises(ValueError, match="smoke, cpu, gpu, auto") as err:
        resolve_profile("cpu")
    assert PROFILE_ENV in str(err.value) and "'tpu'" in str(err.value)


@pytest.mark.parametrize("profile", ["smoke", "cpu"])
def test_setup_exposes_the_sizes_of_the_resolved_profile(profile):
    run = setup(profile, 0, sizes=SIZES, quiet=True)
    assert run.profile == profile
    assert run.sizes == SIZES[profile]
    assert (run.n_steps, run.d_model) == (SIZES[profile]["n_steps"], SIZES[profile]["d_model"])


def test_setup_follows_the_env_override(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV, "smoke")
    run = setup("cpu", 0, sizes=SIZES, quiet=True)
    assert run.profile == "smoke" and run.n_steps == SIZES["smoke"]["n_steps"]


def test_unknown_size_lists_the_sizes():
    run = setup("smoke", 0, sizes=SIZES, quiet=True)
    with pytest.raises(AttributeError, match="lr") as err:
        _ = run.lr
    assert "['d_model', 'n_steps']" in str(err.value)


def test_setup_without_sizes():
    run = setup("smoke", 3, quiet=True)
    assert run.sizes == {} and run.seed == 3


def test_sizes_missing_a_profile():
    sizes = {k: v for k, v in SIZES.items() if k != "gpu"}
    with pytest.raises(ValueError, match="missing \\['gpu'\\]"):
        setup("smoke", 0, sizes=sizes, quiet=True)


def test_sizes_with_an_unknown_profile():
    with pytest.raises(ValueError, match="unknown \\['tpu'\\]"):
        setup("smoke", 0, sizes={**SIZES, "tpu": SIZES["gpu"]}, quiet=True)


def test_sizes_with_unequal_keys():
    sizes = {**SIZES, "cpu": {"n_steps": 20}}
    with pytest.raises(ValueError, match="same sizes"):
        setup("smoke", 0, sizes=sizes, quiet=True)


def test_seed_makes_torch_rand_reproducible():
    setup("smoke", 7, quiet=True)
    a = torch.rand(5)
    setup("smoke", 7, quiet=True)
    b = torch.rand(5)
    setup("smoke", 8, quiet=True)
    c = torch.rand(5)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_seed_must_be_an_int():
    with pytest.raises(ValueError):  # an int is a value with a range (validate.check_int)
        runtime.seed_everything(1.5)


def test_setup_prints_one_line_with_profile_and_device(capsys):
    run = setup("smoke", 0, sizes=SIZES)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) == 1 and out.endswith("\n")
    assert "profile smoke" in lines[0] and f"device {run.device}" in lines[0]
    assert "seed 0" in lines[0]


def test_quiet_setup_prints_nothing(capsys):
    setup("smoke", 0, quiet=True)
    assert capsys.readouterr().out == ""


def test_setup_writes_the_build_record(monkeypatch, tmp_path):
    record = tmp_path / "record.json"
    monkeypatch.setenv(RECORD_ENV, str(record))
    setup("smoke", 5, quiet=True)
    assert json.loads(record.read_text()) == {"profile": "smoke", "device": "cpu", "seed": 5}


def test_no_record_without_the_env_variable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    setup("smoke", 0, quiet=True)
    assert list(tmp_path.iterdir()) == []


def test_smoke_runs_on_cuda_where_there_is_one_and_never_on_mps(monkeypatch):
    """make test on a GPU machine executes the chapters' CUDA path in the smoke profile."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.pick_device("smoke") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert runtime.pick_device("smoke") == torch.device("cpu")
    assert runtime.pick_device("cpu") == torch.device("mps")
    assert setup("smoke", 0, quiet=True).device == torch.device("cpu")


def test_glue_stores_plain_python_numbers(monkeypatch):
    import numpy as np
    import torch

    import lecturelib

    stored = {}
    monkeypatch.setattr("myst_nb.glue",
                        lambda name, value, display=True: stored.update({name: value}))
    lecturelib.glue("a", np.float64(1.5))
    lecturelib.glue("b", torch.tensor(2))
    lecturelib.glue("c", 3.25)
    assert stored == {"a": 1.5, "b": 2, "c": 3.25}
    assert all(type(v) in (float, int) for v in stored.values())


def test_setup_caps_cpu_threads():
    import torch

    import lecturelib

    lecturelib.setup("smoke", 0, cpu_threads=1, quiet=True)
    assert torch.get_num_threads() == 1
    with pytest.raises(ValueError, match="cpu_threads"):
        lecturelib.setup("smoke", 0, cpu_threads=0, quiet=True)


def test_setup_takes_its_share_of_the_cores_from_omp_num_threads(monkeypatch):
    """Two notebooks side by side on two cores each set OMP_NUM_THREADS=1, and setup keeps
    it; unset, setup uses every core; cpu_threads caps either."""
    import os

    import torch

    import lecturelib
    from lecturelib import runtime

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    lecturelib.setup("smoke", 0, quiet=True)
    assert runtime.cpu_cores() == 1 and torch.get_num_threads() == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert runtime.cpu_cores() == max(1, os.cpu_count() or 1)
    lecturelib.setup("smoke", 0, quiet=True)
    assert torch.get_num_threads() == runtime.cpu_cores()
    monkeypatch.setenv("OMP_NUM_THREADS", " 3 ")
    lecturelib.setup("smoke", 0, cpu_threads=2, quiet=True)
    assert runtime.cpu_cores() == 3 and torch.get_num_threads() == 2
    torch.set_num_threads(1)


def test_seconds_is_the_fastest_timed_call_after_the_warmup():
    import time

    from lecturelib import runtime

    delays = iter([0.05, 0.02, 0.001, 0.03])  # the warm-up call is the slowest
    calls = []

    def fn():
        calls.append(1)
        time.sleep(next(delays))

    best = runtime.seconds(fn, repeats=3, warmup=1)
    assert len(calls) == 4
    assert 0.001 <= best < 0.015  # the third call, not the warm-up's 0.05



def test_collector_paused_pauses_the_collector_and_restores_it():
    import gc

    assert gc.isenabled()
    with runtime.collector_paused():
        assert not gc.isenabled()
        with runtime.collector_paused():  # nested: the inner block does not restore it
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError), runtime.collector_paused():
        raise KeyError("an error inside the block")
    assert gc.isenabled()
    gc.disable()  # paused already: the block leaves it paused
    try:
        with runtime.collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_setup_is_imported_on_first_use_and_the_book_tooling_starts_without_torch():
    import subprocess
    import sys

    import lecturelib

    assert lecturelib.setup is runtime.setup and lecturelib.Run is runtime.Run
    assert {"Run", "setup", "glue", "glue_all"} <= set(dir(lecturelib))
    with pytest.raises(AttributeError, match="no attribute 'stup'"):
        lecturelib.stup
    code = ("import sys, booktools.execute; assert 'torch' not in sys.modules\n"
            "from lecturelib import setup; assert 'torch' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)

# The steps cap (LECTURELIB_STEPS_CAP): the gpu profile's configuration, barely trained.

CAPPED = {
    "smoke": {"steps": 3, "lm_steps": 3, "sgns_epochs": 0.5, "n_eval": 8, "gpt_evals": 1,
              "time_repeats": 1, "unmask_steps": [1, 2], "warmup": 1, "eval_tokens": None,
              "d_model": 8, "n_steps_total": 5, "steps_per_eval": 2, "max_iters": 5},
    "cpu": {"steps": 30, "lm_steps": 30, "sgns_epochs": 1.0, "n_eval": 64, "gpt_evals": 5,
            "time_repeats": 3, "unmask_steps": [1, 2, 4], "warmup": 10, "eval_tokens": 4096,
            "d_model": 16, "n_steps_total": 50, "steps_per_eval": 10, "max_iters": 50},
    "gpu": {"steps": 3000, "lm_steps": 2500, "sgns_epochs": 4.0, "n_eval": 1024,
            "gpt_evals": 20, "time_repeats": 5, "unmask_steps": [1, 2, 3, 6], "warmup": 100,
            "eval_tokens": None, "d_model": 512, "n_steps_total": 5000,
            "steps_per_eval": 100, "max_iters": 900},
}


@pytest.mark.parametrize("name, expected", [
    ("steps", True), ("lm_steps", True), ("mem_max_steps", True), ("sgns_epochs", True),
    ("epochs", True), ("train_iters", True), ("gpt_evals", True), ("time_repeats", True),
    ("repeats", True), ("n_eval", True), ("n_evals", True), ("n_eval_batches", True),
    ("warmup", False), ("eval_tokens", False), ("n_steps_total", False),
    ("steps_per_eval", False), ("upsteps", False), ("d_model", False), ("n_test", False),
    ("batch_steps_x", False), ("msteps", False),
])
def test_the_naming_rule_of_step_counts(name, expected):
    assert runtime.is_step_count(name) is expected


def test_capped_sizes_caps_numbers_that_count_steps_and_nothing_else():
    got = runtime.capped_sizes(CAPPED["gpu"], 2)
    assert got == {**CAPPED["gpu"], "steps": 2, "lm_steps": 2, "sgns_epochs": 2.0,
                   "n_eval": 2, "gpt_evals": 2, "time_repeats": 2, "max_iters": 2}
    assert type(got["sgns_epochs"]) is float and type(got["steps"]) is int
    assert got["unmask_steps"] is CAPPED["gpu"]["unmask_steps"]  # lists are settings
    assert runtime.capped_sizes(CAPPED["smoke"], 2)["sgns_epochs"] == 0.5  # below the cap
    assert runtime.capped_sizes(CAPPED["smoke"], 2)["gpt_evals"] == 1
    assert runtime.capped_sizes(CAPPED["gpu"], None) == CAPPED["gpu"]
    assert runtime.capped_sizes({"steps": True}, 2) == {"steps": True}  # a bool is no count


def test_without_the_cap_setup_is_unchanged(capsys):
    run = setup("gpu", 0, sizes=CAPPED)
    assert run.sizes == CAPPED["gpu"] and not run.capped and run.steps_cap is None
    assert run.cap_steps(7000) == 7000
    assert "capped" not in capsys.readouterr().out


def test_the_cap_keeps_the_gpu_sizes_and_caps_the_step_counts(monkeypatch, capsys):
    monkeypatch.setenv(PROFILE_ENV, "gpu")
    monkeypatch.setenv(STEPS_CAP_ENV, "2")
    run = setup("auto", 0, sizes=CAPPED)
    assert run.profile == "gpu" and run.capped and run.steps_cap == 2
    assert (run.d_model, run.warmup, run.steps_per_eval) == (512, 100, 100)
    assert (run.steps, run.lm_steps, run.sgns_epochs, run.n_eval) == (2, 2, 2.0, 2)
    assert "profile gpu · steps capped at 2 ·" in capsys.readouterr().out
    assert (run.cap_steps(7000), run.cap_steps(1)) == (2, 1)  # derived step counts
    monkeypatch.setenv(STEPS_CAP_ENV, "")  # empty: unset
    assert not setup("gpu", 0, sizes=CAPPED, quiet=True).capped


def test_the_cap_is_in_the_build_record(monkeypatch, tmp_path):
    record = tmp_path / "record.json"
    monkeypatch.setenv(RECORD_ENV, str(record))
    monkeypatch.setenv(STEPS_CAP_ENV, "3")
    setup("smoke", 5, quiet=True)
    assert json.loads(record.read_text())["steps_cap"] == 3


def test_cap_steps_for_library_recipes(monkeypatch):
    assert runtime.steps_cap() is None and runtime.cap_steps(4000) == 4000
    monkeypatch.setenv(STEPS_CAP_ENV, " 2 ")
    assert runtime.steps_cap() == 2
    assert (runtime.cap_steps(4000), runtime.cap_steps(1), runtime.cap_steps(0)) == (2, 1, 0)


@pytest.mark.parametrize("profile, cap, trained", [
    ("smoke", None, False), ("cpu", None, True), ("gpu", None, True),
    ("cpu", 2, False), ("gpu", 2, False),
])
def test_trained_means_a_profile_that_trains_and_no_steps_cap(profile, cap, trained):
    run = runtime.Run(profile, torch.device("cpu"), 0, {}, cap)
    assert run.trained is trained
