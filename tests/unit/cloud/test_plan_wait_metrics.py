from __future__ import annotations

from pathlib import Path

import pytest

from spotrun.cloud.base import Offer
from spotrun.cloud.plan import make_plan
from spotrun.core.config import Resources
from spotrun.core.errors import UsageError
from spotrun.core.metrics_file import MetricsTail
from spotrun.core.waiting import WaitTimeout, poll_until, wait_until


def offer(itype: str, zone: str, gpus: int, price: float, model: str = "A10G") -> Offer:
    return Offer(
        "aws", itype, "us-east-1", zone, gpus, model, 24.0, 8 * gpus, 32.0 * gpus, price, price * 3
    )


OFFERS = [
    offer("g5.xlarge", "us-east-1a", 1, 0.40),
    offer("g5.xlarge", "us-east-1b", 1, 0.35),
    offer("g5.12xlarge", "us-east-1a", 4, 2.10),
    offer("p4d.24xlarge", "us-east-1a", 8, 9.80, "A100"),
    offer("g5.48xlarge", "us-east-1c", 8, 6.50),
]


def test_cheapest_fitting_offer_first() -> None:
    plan = make_plan(Resources(gpus=1), OFFERS)
    assert [(o.instance_type, o.zone) for o in plan.offers[:2]] == [
        ("g5.xlarge", "us-east-1b"),
        ("g5.xlarge", "us-east-1a"),
    ]
    assert "cheapest of 5" in plan.reason


def test_filters() -> None:
    assert make_plan(Resources(gpus=8), OFFERS).chosen.instance_type == "g5.48xlarge"
    assert (
        make_plan(Resources(gpus=8, gpu_model="a100"), OFFERS).chosen.instance_type
        == "p4d.24xlarge"
    )
    assert make_plan(Resources(gpus=1, zone="us-east-1c"), OFFERS).chosen.gpus == 8


def test_nothing_fits_names_what_exists() -> None:
    with pytest.raises(UsageError, match="no offer has 16 GPU.*1, 4, 8"):
        make_plan(Resources(gpus=16), OFFERS)
    with pytest.raises(UsageError, match="no offer has 1 GPU.*>= 80 GB per GPU"):
        make_plan(Resources(gpus=1, gpu_memory_gb=80), OFFERS)


def test_gpu_memory_and_model_bind_only_when_gpus_are_asked_for() -> None:
    cpu = Offer("local", "local", "local", "host", 0, None, None, 2, 8.0, 0.0, 0.0)
    # a GPU recipe switched to the CPU with --set resources.gpus=0 keeps its GPU memory field
    assert make_plan(Resources(gpus=0, gpu_memory_gb=16), [cpu]).chosen is cpu
    assert make_plan(Resources(gpus=0, gpu_model="A100"), [cpu]).chosen is cpu
    assert make_plan(Resources(gpus=1, gpu_memory_gb=16), OFFERS).chosen.gpu_memory_gb == 24.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_until_backs_off_and_times_out() -> None:
    clock = FakeClock()
    calls = []
    with pytest.raises(WaitTimeout, match="gave up waiting for thing after 10 s"):
        wait_until(lambda: calls.append(1), timeout_s=10, what="thing", clock=clock)
    assert clock.sleeps[0] == pytest.approx(0.1) and max(clock.sleeps) <= 2.0
    assert sum(clock.sleeps) == pytest.approx(10.0)


def test_wait_until_returns_the_answer() -> None:
    answers = iter([None, False, "ready"])
    assert wait_until(lambda: next(answers), timeout_s=5, what="x", clock=FakeClock()) == "ready"


def test_poll_until_answers_whether_the_condition_held_in_time() -> None:
    clock = FakeClock()
    answers = iter([False, False, True])
    assert poll_until(lambda: next(answers), timeout_s=5, interval_s=0.5, clock=clock)
    assert clock.sleeps == [0.5, 0.5]  # steady, no backoff
    clock = FakeClock()
    assert not poll_until(lambda: False, timeout_s=2, interval_s=0.5, clock=clock)
    assert sum(clock.sleeps) == pytest.approx(2.0)  # checked once more at the deadline


def test_metrics_tail_reads_complete_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    assert tail.read_new() == []
    path.write_text('{"step": 1}\n{"step": 2')
    assert tail.read_new() == [{"step": 1}]
    with open(path, "a") as fh:
        fh.write("}\n")
    assert tail.read_new() == [{"step": 2}]
    path.write_text('{"step": 1}\n')  # rewritten shorter by a resume
    assert tail.read_new() == [{"step": 1}]
