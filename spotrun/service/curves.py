"""`spotrun plot`: training curves of runs (or a sweep's trials) overlaid in one PNG.

Every point is one evaluation from the run's metrics.jsonl. The x axis is the trainer's step,
its training time (elapsed_s: seconds of training, summed over every process lifetime of the
run, so a resumed run does not jump), or the run's cost at the moment it had trained that long
(the same wall-clock mapping `spotrun cost` uses for time to target, priced from the ledger).
"""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from spotrun.core.errors import NotFoundError, SpotrunError, UsageError
from spotrun.core.metrics_file import read_all
from spotrun.core.rundir import METRICS_FILE
from spotrun.cost import reports
from spotrun.cost.bills import bill_run
from spotrun.cost.cost_report import provider_prices
from spotrun.cost.prices import PriceBook
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.pbt_lineage import LineageStore
from spotrun.store.sweeps import SweepStore
from spotrun.sweep.board import source_epoch

XAxis = Literal["step", "time", "cost"]
X_AXES: tuple[XAxis, ...] = ("step", "time", "cost")
X_LABELS = {
    "step": "step (optimizer steps)",
    "time": "training time (s)",
    "cost": "cost so far (USD, as billed)",
}
DEFAULT_METRICS = ("test_acc", "test_loss", "train_loss")
NOT_CURVES = frozenset({"step", "epoch"})


@dataclass(frozen=True)
class Curve:
    run_id: str
    label: str
    xs: list[float]
    ys: list[float]
    legend: str = ""  # what the plot's legend calls it: a sweep trial by its hyperparameters


@dataclass(frozen=True)
class Curves:
    metric: str
    x: XAxis
    curves: list[Curve]
    notes: list[str]  # runs left out, and why


def resolve_runs(ledger: Ledger, refs: list[str]) -> list[RunRecord]:
    """Runs by name or id prefix; a sweep's reference stands for all its trials' runs."""
    if not refs:
        raise UsageError("plot which runs? name one or more runs, or a sweep")
    runs: list[RunRecord] = []
    for ref in refs:
        try:
            found = [ledger.resolve(ref)]
        except NotFoundError as run_error:
            try:
                sweep = SweepStore(ledger).resolve(ref)
            except NotFoundError:
                raise NotFoundError(
                    f"no run or sweep named '{ref}', and no run or sweep id starts with it",
                    hint="`spotrun ls --all` lists runs, `spotrun sweep ls` sweeps",
                ) from run_error
            found = ledger.list_runs(include_all=True, sweep_id=sweep.id)
            if not found:
                raise NotFoundError(f"sweep {sweep.name} has no trial runs yet") from None
        runs.extend(r for r in found if r.id not in {seen.id for seen in runs})
    return runs


def collect(
    ledger: Ledger,
    refs: list[str],
    *,
    metric: str | None = None,
    x: str = "step",
    now: float | None = None,
) -> Curves:
    if x not in X_AXES:
        raise UsageError(f"--x must be one of {', '.join(X_AXES)}, not '{x}'")
    axis: XAxis = "step" if x == "step" else "time" if x == "time" else "cost"
    runs = resolve_runs(ledger, refs)
    records = {run.id: read_all(run.run_dir / METRICS_FILE) for run in runs}
    chosen = metric or _default_metric(records)
    _check_metric(chosen, records)
    now = now if now is not None else time.time()
    book = PriceBook(ledger, provider_prices(ledger.settings)) if axis == "cost" else None
    curves, notes = [], []
    for run in runs:
        points = [r for r in records[run.id] if _number(r.get(chosen)) is not None]
        if not points:
            notes.append(f"{run.name}: no evaluation with {chosen} yet")
            continue
        try:
            xs = _xs(ledger, run, points, axis, book, now)
        except SpotrunError as exc:
            notes.append(f"{run.name}: left out, {exc.user_message()}")
            continue
        ys = [float(r[chosen]) for r in points]
        curves.append(Curve(run.id, run.name, xs, ys, _legend(ledger, run)))
    if not curves:
        raise UsageError(
            f"nothing to plot: {'; '.join(notes)}",
            hint="plot runs once they have evaluated (`spotrun ls` shows their metrics)",
        )
    return Curves(chosen, axis, curves, notes)


def _legend(ledger: Ledger, run: RunRecord) -> str:
    """A sweep trial by its hyperparameters (lr=0.1, wd=0.0005), any other run by its name."""
    trial = SweepStore(ledger).trial_of_run(run.id) if run.sweep_id else None
    if trial is None or not trial.params:
        return run.name
    shown = ", ".join(f"{key}={value}" for key, value in trial.params.items())
    rec = LineageStore(ledger).of_sweep(trial.sweep_id).get(trial.index)
    if rec is None:
        return shown
    # a PBT trial: which one, and whose checkpoint it went on from
    epoch = source_epoch(SweepStore(ledger).get(trial.sweep_id), rec)
    return f"t{trial.index} {shown} from {rec.source(epoch)}"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _default_metric(records: dict[str, list[dict[str, object]]]) -> str:
    present = {key for lines in records.values() for line in lines for key in line}
    for name in DEFAULT_METRICS:
        if name in present:
            return name
    return next(iter(sorted(present - NOT_CURVES)), DEFAULT_METRICS[0])


def _check_metric(metric: str, records: dict[str, list[dict[str, object]]]) -> None:
    present = sorted(
        {
            key
            for lines in records.values()
            for line in lines
            for key, value in line.items()
            if _number(value) is not None
        }
        - NOT_CURVES
    )
    if metric in present or not present:
        return
    close = difflib.get_close_matches(metric, present, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise UsageError(
        f"--metric {metric}: these runs log no such metric",
        hint=f"{hint}they log {', '.join(present)}",
    )


def _xs(
    ledger: Ledger,
    run: RunRecord,
    points: list[dict[str, object]],
    axis: XAxis,
    book: PriceBook | None,
    now: float,
) -> list[float]:
    if axis == "step":
        return [_number(p.get("step")) or 0.0 for p in points]
    train_s = [_number(p.get("elapsed_s")) or 0.0 for p in points]
    if axis == "time":
        return train_s
    assert book is not None
    bill = bill_run(ledger, run, book, now=now)
    periods = reports.running_periods(ledger.transitions(run.id), now)
    xs = []
    for seconds in train_s:
        moment = reports.moment_of(seconds, periods)
        if moment is None:
            raise UsageError("its job never ran, so no moment has a cost")
        xs.append(float(bill.total_until(int(moment))))
    return xs


def check_png_path(path: Path) -> None:
    if path.suffix.lower() != ".png":
        raise UsageError(f"-o writes a PNG; give a file name ending in .png, not '{path}'")
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: the folder {path.parent} does not exist")


def write_png(found: Curves, path: Path) -> None:
    """Draw the curves into `path` (PNG), one line per run, its points marked."""
    check_png_path(path)
    # why: matplotlib is heavy to import; only a plot pays for it
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # heavy, as above (after use("Agg"): no display)

    fig, ax = plt.subplots(figsize=(9, 5.5))
    for curve in found.curves:
        ax.plot(curve.xs, curve.ys, marker=".", label=curve.legend or curve.label)
    ax.set_xlabel(X_LABELS[found.x])
    ax.set_ylabel(found.metric)
    ax.set_title(f"{found.metric} against {found.x}, {len(found.curves)} run(s)")
    ax.grid(True, alpha=0.3)
    if len(found.curves) <= 12:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
