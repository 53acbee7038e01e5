"""Shared by the CIFAR-10 benchmarks: train recipes through the real `spotrun train` command,
a few at a time side by side, and read each one's time to a target accuracy.

Each run is its own process (`python -m spotrun train NAME --run-dir D --set ...`), so every
run starts from the same clean state and the measure is the product's own: the trainer's
`elapsed_s` (training time plus the evaluations before, not counting data loading) at the
first evaluation at or past the target. A run may be stopped once it reaches the target (it
gets SIGTERM, checkpoints and exits 75, as on a spot notice), which saves the rest of its
schedule when only the time to target is wanted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spotrun.core.metrics_file import MetricsTail  # noqa: E402
from spotrun.core.waiting import Backoff, wait_until  # noqa: E402

# Where the real images are for a checkout beside the shared folder (main/ or wt/NAME/ has to
# pass --data, since ../shared is relative to the repository it was made for).
DEFAULT_DATA = REPO.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"
POLL = Backoff(first_s=0.5, factor=1.0, max_s=0.5)
EXIT_CHECKPOINTED = 75


@dataclass(frozen=True)
class Job:
    """One training run: a recipe with overrides, under a label for the tables."""

    label: str
    recipe: str
    overrides: tuple[str, ...]
    seed: int = 0


@dataclass
class Outcome:
    job: Job
    rows: list[dict[str, Any]] = field(default_factory=list)
    # The run's process CPU seconds (start-up included) when each row was seen: a measure
    # that other work on the machine barely moves, beside the wall-clock elapsed_s.
    cpu_s: list[float | None] = field(default_factory=list)
    wall_s: float = 0.0
    stopped_at_target: bool = False
    exit_code: int | None = None
    device: dict[str, Any] | None = None  # the run's device.json: what auto chose, and why

    def time_to(self, target: float) -> float | None:
        """elapsed_s at the first evaluation at or past `target`; None if never reached."""
        for row in self.rows:
            if float(row["test_acc"]) >= target:
                return float(row["elapsed_s"])
        return None

    def cpu_to(self, target: float) -> float | None:
        for row, cpu in zip(self.rows, self.cpu_s):
            if float(row["test_acc"]) >= target:
                return cpu
        return None

    def epochs_to(self, target: float) -> int | None:
        for row in self.rows:
            if float(row["test_acc"]) >= target:
                return int(row["epoch"])
        return None

    @property
    def final_acc(self) -> float:
        return float(self.rows[-1]["test_acc"]) if self.rows else float("nan")

    @property
    def best_acc(self) -> float:
        return max((float(r["test_acc"]) for r in self.rows), default=float("nan"))

    @property
    def ok(self) -> bool:
        # Stopped at its target: it checkpoints and exits 75; or, when the target came at its
        # last evaluation, the SIGTERM can land after training ended and end it outright.
        stopped = (EXIT_CHECKPOINTED, 0, -signal.SIGTERM)
        return self.exit_code == 0 or (self.stopped_at_target and self.exit_code in stopped)


@dataclass
class _Live:
    job: Job
    process: subprocess.Popen[bytes]
    tail: MetricsTail
    started: float
    log: IO[bytes]
    outcome: Outcome
    stop_sent: bool = False


def bench_environment(home: Path) -> dict[str, str]:
    """The environment every run gets: the same as this process's (the GLIBC_TUNABLES that
    bench/_env.py set included), this checkout's code, one shared decoded-image cache."""
    return {**os.environ, "SPOTRUN_HOME": str(home), "PYTHONPATH": str(REPO)}


def job_command(job: Job, run_dir: Path) -> list[str]:
    sets = [f"seed={job.seed}", *job.overrides]
    args = [sys.executable, "-m", "spotrun", "train", job.recipe, "--run-dir", str(run_dir)]
    for item in sets:
        args += ["--set", item]
    return args


def run_jobs(
    jobs: Sequence[Job],
    *,
    parallel: int,
    home: Path,
    target: float | None = None,
    stop_at_target: bool = False,
    on_row: Callable[[Job, dict[str, Any]], None] | None = None,
    timeout_s: float = 4 * 3600,
) -> list[Outcome]:
    """Run `jobs` in order, `parallel` at a time; each Outcome in the order of `jobs`."""
    env = bench_environment(home)
    scratch = Path(tempfile.mkdtemp(prefix="spotrun-bench-runs-"))
    pending = list(enumerate(jobs))
    live: dict[int, _Live] = {}
    outcomes: dict[int, Outcome] = {}

    def start(index: int, job: Job) -> None:
        run_dir = scratch / f"{index:02d}-{job.label.replace(' ', '_')}-s{job.seed}"
        run_dir.mkdir(parents=True)
        log = open(run_dir / "stdout.log", "wb")  # closed when the run ends
        process = subprocess.Popen(
            job_command(job, run_dir), env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
        )
        tail = MetricsTail(run_dir / "metrics.jsonl")
        live[index] = _Live(job, process, tail, time.perf_counter(), log, Outcome(job))

    def step() -> bool:
        """Read new metrics, stop runs at their target, reap the finished; True if any did."""
        changed = False
        for index, run in list(live.items()):
            for row in run.tail.read_new():
                run.outcome.rows.append(row)
                run.outcome.cpu_s.append(process_cpu_seconds(run.process.pid))
                changed = True
                if on_row is not None:
                    on_row(run.job, row)
                reached = target is not None and float(row["test_acc"]) >= target
                if stop_at_target and reached and not run.stop_sent:
                    run.process.send_signal(signal.SIGTERM)
                    run.stop_sent = True
                    run.outcome.stopped_at_target = True
            code = run.process.poll()
            if code is not None:
                for row in run.tail.read_new():
                    run.outcome.rows.append(row)
                    run.outcome.cpu_s.append(None)
                run.outcome.exit_code = code
                run.outcome.device = _device_record(run.tail.path.parent)
                run.outcome.wall_s = time.perf_counter() - run.started
                run.log.close()
                if not run.outcome.ok:  # a failure: print its log's end
                    tail = (Path(run.log.name)).read_text(errors="replace")[-2000:]
                    print(f"!! {run.job.label} seed {run.job.seed} exited {code}:\n{tail}")
                outcomes[index] = run.outcome
                del live[index]
                changed = True
        return changed

    deadline = time.monotonic() + timeout_s
    # A benchmark run in the background ignores SIGINT; SIGTERM must clean up as well.
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        while pending or live:
            while pending and len(live) < parallel:
                start(*pending.pop(0))
            wait_until(
                step, timeout_s=max(1.0, deadline - time.monotonic()), what="a run", backoff=POLL
            )
    finally:  # interrupted or timed out: leave no training process behind
        for run in live.values():
            run.process.kill()
            run.process.wait()
            run.log.close()
        shutil.rmtree(scratch)  # run folders: checkpoints and logs (failures printed above)
        signal.signal(signal.SIGTERM, previous)
    return [outcomes[i] for i in range(len(jobs))]


def _device_record(run_dir: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((run_dir / "device.json").read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through run_jobs' cleanup


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process (Linux /proc); None where unavailable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (name) "
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def warm_cache(home: Path, recipe: str, overrides: Sequence[str]) -> None:
    """Decode the data set once into `home`'s cache before the runs start, so runs started
    side by side do not each decode it (decoding happens before the clocks start anyway)."""
    from spotrun.recipes import get_recipe
    from spotrun.train.data.loading import load_data

    before = os.environ.get("SPOTRUN_HOME")
    os.environ["SPOTRUN_HOME"] = str(home)
    try:
        started = time.perf_counter()
        load_data(get_recipe(recipe, list(overrides)))
        print(f"data ready in the cache in {time.perf_counter() - started:.1f} s", flush=True)
    finally:
        if before is None:
            os.environ.pop("SPOTRUN_HOME", None)
        else:
            os.environ["SPOTRUN_HOME"] = before


def median_or_none(values: Sequence[float | None]) -> float | None:
    """The median, or None when any run missed (a median over misses would flatter)."""
    if not values or any(v is None for v in values):
        return None
    return statistics.median(v for v in values if v is not None)


def fmt_s(value: float | None) -> str:
    return "missed" if value is None else f"{value:.1f}"


def fmt_pct(value: float) -> str:
    return f"{100 * value:.2f}%"


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"
