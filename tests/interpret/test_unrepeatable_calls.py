"""metatrace.interpret.calls.unrepeatable_calls: Python's and NumPy's random numbers drawn in traced code,
and clocks read by the user's traced code, raise a clear error naming the call and the line
(thunder baked the first value into the entry); torch's random ops, values drawn or read outside
the jitted function, and clock reads inside installed packages (logging) still work."""

from __future__ import annotations

import datetime
import logging
import random
import time

import numpy as np
import pytest
import torch

import thunder

from metatrace.interpret.calls.unrepeatable_calls import ClockCallError, RandomCallError

SYMBOLIC = "symbolic values"


def _error_of(fn, *args) -> BaseException:
    with pytest.raises(Exception) as excinfo:
        thunder.jit(fn, cache=SYMBOLIC)(*args)
    error = excinfo.value
    return error if isinstance(error, (RandomCallError, ClockCallError)) else error.__cause__


def draws_with_random(x):
    return x * random.random()


def test_random_random_raises(enabled):
    assert isinstance(_error_of(draws_with_random, torch.ones(2)), RandomCallError)


def test_the_error_names_the_call(enabled):
    assert "random.random() draws a new number" in str(_error_of(draws_with_random, torch.ones(2)))


def test_the_error_names_the_users_line(enabled):
    line = draws_with_random.__code__.co_firstlineno + 1
    assert f"test_unrepeatable_calls.py:{line}" in str(_error_of(draws_with_random, torch.ones(2)))


class LayerDrop(torch.nn.Module):
    """The pattern of older Hugging Face encoders: skip a layer with probability ``layerdrop``."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 4)
        self.layerdrop = 0.5

    def forward(self, x):
        if self.training and random.uniform(0, 1) < self.layerdrop:
            return x
        return self.layer(x)


def test_a_layerdrop_written_with_random_uniform_raises(enabled):
    assert "random.uniform()" in str(_error_of(LayerDrop(), torch.randn(2, 4)))


def test_a_random_instance_raises(enabled):
    rng = random.Random(0)
    assert isinstance(_error_of(lambda x: x * rng.gauss(0, 1), torch.ones(2)), RandomCallError)


def test_numpy_random_raises(enabled):
    assert "numpy.rand()" in str(_error_of(lambda x: x * float(np.random.rand()), torch.ones(2)))


def test_a_numpy_generator_raises(enabled):
    gen = np.random.default_rng(0)
    assert isinstance(_error_of(lambda x: x * float(gen.random()), torch.ones(2)), RandomCallError)


def test_torch_random_ops_still_trace(enabled):
    jf = thunder.jit(lambda x: x * torch.rand(x.shape), cache=SYMBOLIC)
    assert jf(torch.ones(3)).shape == (3,)


def test_a_number_drawn_outside_is_a_symbolic_input(enabled):
    def scaled(x, p):
        return x * p

    jf = thunder.jit(scaled, cache=SYMBOLIC)
    rng = random.Random(0)
    for _ in range(3):
        p = rng.random()
        torch.testing.assert_close(jf(torch.ones(2), p), scaled(torch.ones(2), p))
    assert thunder.cache_misses(jf) == 1


def test_the_random_state_is_untouched_by_the_error(enabled):
    # thunder never ran the call: the user's random stream is where it was
    random.seed(0)
    expected = random.Random(0).random()
    _error_of(draws_with_random, torch.ones(2))
    assert random.random() == expected


def test_a_generator_seeded_inside_the_function_is_deterministic_and_allowed(enabled):
    def fn(x):
        rng = random.Random(0)
        return x * rng.random()

    jf = thunder.jit(fn, cache=SYMBOLIC)
    for _ in range(2):
        torch.testing.assert_close(jf(torch.ones(2)), fn(torch.ones(2)))


# ---------------------------------------------------------------------------------------------
# Clocks
# ---------------------------------------------------------------------------------------------


def times_out(x):
    return x * 2 if time.time() > 0 else x


@pytest.mark.parametrize("clock", [time.time, time.perf_counter, time.monotonic_ns, datetime.datetime.now],
                         ids=["time", "perf_counter", "monotonic_ns", "datetime.now"])
def test_a_clock_read_in_users_code_raises(enabled, clock):
    assert isinstance(_error_of(lambda x: (clock(), x * 1)[1], torch.ones(2)), ClockCallError)


def test_the_clock_error_names_the_call(enabled):
    assert "time.time() returns a new value on every call" in str(_error_of(times_out, torch.ones(2)))


def test_the_clock_error_names_the_users_line(enabled):
    line = times_out.__code__.co_firstlineno + 1
    assert f"test_unrepeatable_calls.py:{line}" in str(_error_of(times_out, torch.ones(2)))


def test_a_time_read_outside_is_a_symbolic_input(enabled):
    def scaled(x, t):
        return x * 2 if t > 0 else x

    jf = thunder.jit(scaled, cache=SYMBOLIC)
    for _ in range(3):
        t = time.time()
        torch.testing.assert_close(jf(torch.ones(2), t), scaled(torch.ones(2), t))
    assert thunder.cache_misses(jf) == 1


# A logger of its own, outside logging's manager (pytest's capture handlers format records with
# attribute stores that thunder's interpreter cannot trace), with a handler that drops records.
LOG = logging.Logger("metatrace.tests.unrepeatable_calls", logging.INFO)
LOG.addHandler(logging.NullHandler())


def logs_and_doubles(x):
    LOG.warning("forward of %d rows", x.shape[0])  # logging stamps the record with time.time_ns()
    return x * 2


def test_a_log_call_in_the_users_code_compiles_once_over_sizes(enabled):
    jf = thunder.jit(logs_and_doubles, cache=SYMBOLIC)
    for n in (2, 3, 5):
        torch.testing.assert_close(jf(torch.ones(n)), logs_and_doubles(torch.ones(n)))
    assert thunder.cache_misses(jf) == 1
