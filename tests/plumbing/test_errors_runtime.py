"""lecturelib.runtime refuses bad input with a message that names the argument, what was expected
and what was given."""

from __future__ import annotations

import re

import pytest
import torch

from lecturelib import runtime, sizes
from lecturelib.runtime import PROFILE_ENV, RECORD_ENV, STEPS_CAP_ENV, setup

SIZES = {"smoke": {"n": 1}, "cpu": {"n": 2}, "gpu": {"n": 3}}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    monkeypatch.delenv(RECORD_ENV, raising=False)
    monkeypatch.delenv(STEPS_CAP_ENV, raising=False)


CASES = [
    (lambda: runtime.seconds(3), TypeError, r"fn must be callable; got int 3"),
    (lambda: runtime.seconds(print, repeats=0), ValueError,
     r"repeats must be an int >= 1; got int 0"),
    (lambda: runtime.seconds(print, warmup=-1), ValueError,
     r"warmup must be an int >= 0; got int -1"),
    (lambda: runtime.resolve_profile("fast"), ValueError,
     r"profile must be one of smoke, cpu, gpu, auto; got 'fast'"),
    (lambda: runtime.resolve_profile(1), TypeError,
     r"profile must be a str, one of smoke, cpu, gpu, auto; got int"),
    (lambda: runtime.pick_device("auto"), ValueError,
     r"profile must be a resolved profile, one of smoke, cpu, gpu \(see resolve_profile\); "
     r"got 'auto'"),
    (lambda: runtime.pick_device(None), ValueError, r"resolved profile.*got None"),
    (lambda: runtime.seed_everything(1.5), ValueError,
     r"seed must be an int in -9223372036854775808\.\.18446744073709551615; got float 1.5"),
    (lambda: runtime.seed_everything(True), ValueError, r"seed must be an int in .*; got bool True"),
    (lambda: runtime.seed_everything("0"), ValueError, r"seed must be an int in .*; got str '0'"),
    (lambda: runtime.seed_everything(2**64), ValueError,
     r"seed must be an int in -9223372036854775808\.\.18446744073709551615; "
     r"got int 18446744073709551616"),
    (lambda: setup("smoke", 0.5, quiet=True), ValueError, r"seed must be an int in .*; got float 0.5"),
    (lambda: setup("gpux", quiet=True), ValueError, r"profile must be one of .*got 'gpux'"),
    (lambda: setup("smoke", chapter="11", quiet=True), TypeError,
     r"chapter must be an int, a chapter number; got str '11'"),
    (lambda: setup("smoke", chapter=3.0, quiet=True), TypeError, r"chapter must be an int"),
    (lambda: setup("smoke", chapter=True, quiet=True), TypeError, r"got bool True"),
    (lambda: setup("smoke", chapter=22, quiet=True), ValueError,
     r"chapter must be a chapter number, one of 1\.\.21; got int 22"),
    (lambda: setup("smoke", sizes=SIZES, chapter=1, quiet=True), ValueError,
     r"give setup\(\) the sizes or a chapter, not both"),
    (lambda: sizes.table(0), ValueError, r"one of 1\.\.21; got int 0"),
    (lambda: setup("smoke", sizes=[1, 2, 3], quiet=True), TypeError,
     r"sizes must be a dict of profile -> dict; got list"),
    (lambda: setup("smoke", sizes={"smoke": {}, "cpu": {}}, quiet=True), ValueError,
     r"sizes needs exactly the profiles \['smoke', 'cpu', 'gpu'\]; missing \['gpu'\], "
     r"unknown \[\]"),
    (lambda: setup("smoke", sizes={**SIZES, "tpu": {"n": 4}}, quiet=True), ValueError,
     r"missing \[\], unknown \['tpu'\]"),
    (lambda: setup("smoke", sizes={**SIZES, "cpu": [("n", 2)]}, quiet=True), TypeError,
     r"sizes\['cpu'\] must be a dict of name -> size; got list"),
    (lambda: setup("smoke", sizes={p: {"n-steps": 1} for p in SIZES}, quiet=True), ValueError,
     r"sizes\['smoke'\] keys must be names such as 'n_steps' .*; got 'n-steps'"),
    (lambda: setup("smoke", sizes={**SIZES, "gpu": {"m": 3}}, quiet=True), ValueError,
     r"every profile must set the same sizes"),
    (lambda: setup("smoke", cpu_threads=0, quiet=True), ValueError,
     r"cpu_threads must be an int >= 1; got int 0"),
    (lambda: setup("smoke", cpu_threads=1.0, quiet=True), ValueError,
     r"cpu_threads must be an int >= 1; got float 1.0"),
    (lambda: setup("smoke", cpu_threads=True, quiet=True), ValueError,
     r"cpu_threads must be an int >= 1; got bool True"),
    (lambda: setup("smoke", quiet="yes"), TypeError, r"quiet must be a bool; got str 'yes'"),
    (lambda: runtime.environment_line("smoke"), TypeError,
     r"run must be the Run that setup\(\) returns; got str"),
    (lambda: setup("smoke", sizes=SIZES, quiet=True).m, AttributeError,
     r"this chapter has no size 'm'; its sizes are \['n'\]"),
    (lambda: setup("smoke", sizes={p: {"capped": 1} for p in SIZES}, quiet=True),
     ValueError, r"sizes\['smoke'\] may not be named like the Run's own attributes "
     r"\['capped', 'device', 'profile', 'seed', 'sizes', 'steps_cap'\]; got 'capped'"),
    (lambda: runtime.is_step_count(3), TypeError,
     r"name must be a size's name \(str\); got int 3"),
    (lambda: runtime.capped_sizes([("steps", 3)], 2), TypeError,
     r"sizes must be a dict of name -> size; got list"),
    (lambda: runtime.capped_sizes({"steps": 3}, 0), ValueError,
     r"cap must be an int >= 1; got int 0"),
    (lambda: runtime.capped_sizes({"steps": 3}, 2.0), ValueError,
     r"cap must be an int >= 1; got float 2.0"),
    (lambda: runtime.cap_steps(2.5), ValueError,
     r"n \(a number of steps\) must be an int >= 0; got float 2.5"),
    (lambda: setup("smoke", quiet=True).cap_steps(1.0), ValueError,
     r"n \(a number of steps\) must be an int >= 0; got float 1.0"),
    (lambda: runtime.cap_steps(-1), ValueError,
     r"n \(a number of steps\) must be an int >= 0; got int -1"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
    torch.set_num_threads(1)


@pytest.mark.parametrize("value", ["0", "-1", "2.5", "two", "4,2"])
def test_an_omp_num_threads_that_is_not_a_positive_integer_is_refused(monkeypatch, value):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    message = (r"\$OMP_NUM_THREADS must be a positive integer \(the CPU threads to use\), "
               rf"or unset; got '{re.escape(value)}'")
    for call in (runtime.cpu_cores, lambda: setup("smoke", quiet=True)):
        with pytest.raises(ValueError, match=message):
            call()
    torch.set_num_threads(1)


def test_a_bad_environment_value_is_named_as_such(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV, "tpu")
    with pytest.raises(ValueError, match=rf"\${PROFILE_ENV} must be one of .*got 'tpu'"):
        runtime.resolve_profile("cpu")


@pytest.mark.parametrize("value", ["2.5", "two", "0", "-1", "True", "1e3", "+2", "²"])
def test_a_steps_cap_that_is_not_a_positive_integer_is_refused(monkeypatch, value):
    monkeypatch.setenv(STEPS_CAP_ENV, value)
    message = (rf"\${STEPS_CAP_ENV} must be a positive integer \(the training steps kept "
               rf"per loop\), or unset; got '{re.escape(value)}'")
    for call in (runtime.steps_cap, lambda: runtime.cap_steps(10),
                 lambda: setup("smoke", sizes=SIZES, quiet=True)):
        with pytest.raises(ValueError, match=message):
            call()
    torch.set_num_threads(1)
