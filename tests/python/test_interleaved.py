"""scripts/interleaved.py, the side-by-side timing of the PyTorch measurements (bench_torch_op.py, model_e2e.py):
Student's t, the per-round ratio's median, interval and extremes, the shuffled order of a round and when a run
stops. Standard library only."""
import itertools
import math

import pytest


@pytest.fixture(scope="module")
def interleaved(load_script):
    return load_script("interleaved")


def test_student_t_is_the_table_then_its_expansion(interleaved):
    assert interleaved.student_t_975(1) == 12.706
    assert interleaved.student_t_975(30) == 2.042
    assert abs(interleaved.student_t_975(31) - 2.0395) < 2e-4
    assert abs(interleaved.student_t_975(120) - 1.9799) < 2e-4
    assert abs(interleaved.student_t_975(100000) - 1.95996) < 1e-4
    with pytest.raises(ValueError):
        interleaved.student_t_975(0)


def test_ratio_statistics_on_known_rounds(interleaved):
    # Log ratios +-0.1 around ln 1.2: geometric mean 1.2, median of the ratios between the middle two.
    torch_us = [1.2 * math.exp(0.1), 1.2 * math.exp(-0.1), 1.2 * math.exp(0.1), 1.2 * math.exp(-0.1)]
    r = interleaved.ratio(torch_us, [1.0] * 4)
    assert r.rounds == 4
    assert r.geomean == pytest.approx(1.2)
    assert r.median == pytest.approx((1.2 * math.exp(0.1) + 1.2 * math.exp(-0.1)) / 2)
    sd = math.sqrt(4 * 0.01 / 3)
    half = 3.182 * sd / 2
    assert r.half_width == pytest.approx(half)
    assert (r.low, r.high) == (pytest.approx(1.2 * math.exp(-half)), pytest.approx(1.2 * math.exp(half)))
    assert (r.min, r.max) == (pytest.approx(1.2 * math.exp(-0.1)), pytest.approx(1.2 * math.exp(0.1)))
    assert "x1.2" in str(r) and "4 rounds" in str(r)
    with pytest.raises(ValueError, match="paired rounds"):
        interleaved.ratio([1, 2], [1])
    with pytest.raises(ValueError, match="positive and finite"):
        interleaved.ratio([1, 0], [1, 1])


def test_rounds_shuffle_the_order_and_stop_at_the_target(interleaved):
    order = []

    def subject(name, t):
        return lambda: order.append(name) or t

    times = interleaved.run_rounds({"a": subject("a", 2.0), "b": subject("b", 1.0)}, [("a", "b")], seed=3,
                                   min_rounds=6, max_rounds=50)
    # Constant times: the interval has no width, so the run stops as soon as min_rounds ran.
    assert times == {"a": [2.0] * 6, "b": [1.0] * 6}
    rounds = [tuple(order[i:i + 2]) for i in range(0, len(order), 2)]
    assert set(rounds) == {("a", "b"), ("b", "a")}  # both orders occur
    order.clear()
    interleaved.run_rounds({"a": subject("a", 2.0), "b": subject("b", 1.0)}, [("a", "b")], seed=3, min_rounds=6)
    assert [tuple(order[i:i + 2]) for i in range(0, len(order), 2)] == rounds  # the seed fixes the order


def test_noisy_rounds_stop_on_the_time_budget_or_the_round_cap(interleaved):
    noise = itertools.cycle([0.8, 1.25, 1.1, 0.9])
    now = [0.0]

    def clock():
        now[0] += 1.0
        return now[0]

    subjects = {"a": lambda: next(noise), "b": lambda: 1.0}
    times = interleaved.run_rounds(subjects, [("a", "b")], seed=0, min_rounds=4, max_rounds=1000, max_seconds=10.0,
                                   target=1e-6, clock=clock)
    # The clock ticks a second per reading: read at the start and after each round from the 4th on, it reads 10 s
    # elapsed after round 13, where the budget stops the run.
    assert len(times["a"]) == 13
    times = interleaved.run_rounds(subjects, [("a", "b")], seed=0, min_rounds=4, max_rounds=5, max_seconds=1e9,
                                   target=1e-6)
    assert len(times["a"]) == 5
    with pytest.raises(ValueError, match="at least 2 rounds"):
        interleaved.run_rounds(subjects, [("a", "b")], seed=0, min_rounds=1)
    with pytest.raises(ValueError, match="not one of the subjects"):
        interleaved.run_rounds(subjects, [("a", "c")], seed=0)
