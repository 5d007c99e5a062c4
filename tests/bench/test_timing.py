"""Warm-up, repeat policy and the untimed setup around each timed region."""

import time

import pytest

from gmlp_check.bench.timing import RepeatPolicy, WallClock, measure


def test_fixed_repeats_ignore_the_pace():
    assert RepeatPolicy(warmup=1, repeats=7).count(iteration_s=100.0) == 7


@pytest.mark.parametrize(
    "iteration_s, expected",
    [(10.0, 3), (0.1, 5), (1e-6, 20)],  # slow: the minimum; fast: the maximum
)
def test_auto_repeats_fit_the_target_within_bounds(iteration_s, expected):
    policy = RepeatPolicy(warmup=1, min_repeats=3, max_repeats=20, target_s=0.5)
    assert policy.count(iteration_s) == expected


def test_setup_runs_untimed_around_every_repeat_and_warmup_is_not_sampled():
    log = []
    samples = measure(
        WallClock(),
        lambda: log.append("region"),
        policy=RepeatPolicy(warmup=2, repeats=3),
        before=lambda: log.append("before"),
        after=lambda: log.append("after"),
    )
    assert log == ["before", "region", "after"] * 5
    assert len(samples.times_ms) == 3
    assert samples.warmup == 2


def test_wall_clock_times_the_region_and_not_its_setup():
    samples = measure(
        WallClock(),
        lambda: time.sleep(0.02),
        policy=RepeatPolicy(warmup=1, repeats=3),
        before=lambda: time.sleep(0.05),
    )
    assert all(t >= 20.0 for t in samples.times_ms)
    # the 50 ms setup is outside the timed region (generous bound for a loaded CI machine)
    assert samples.median_ms < 50.0
    assert WallClock.comparable is False
