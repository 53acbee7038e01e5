"""A sweep's leaderboard: its trials ranked by the metric, with hyperparameters, time, cost and
cost to target; as rows for a table, JSON, CSV, and a PNG of metric against cost.

Cost and time come from the cost report of the sweep's runs (spotrun.cost.cost_report), so a
leaderboard and `spotrun cost --sweep` always agree.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from spotrun.core.errors import UsageError
from spotrun.core.metrics_file import read_all
from spotrun.core.rundir import METRICS_FILE
from spotrun.cost.cost_report import cost_report
from spotrun.cost.reports import Row
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.pbt_lineage import LineageRecord, LineageStore
from spotrun.store.sweeps import SweepRecord, SweepStore, TrialRecord, TrialStatus
from spotrun.sweep import pbt


@dataclass(frozen=True)
class Entry:
    rank: int | None  # None: no value of the metric yet
    trial: TrialRecord
    run: RunRecord | None
    status: str  # pending, skipped, pruned, or the run's state
    best: float | None  # the best value of the metric the trial reached
    epochs: int  # evaluations' last epoch
    time_s: float | None  # running time (as its instances ran)
    cost_usd: float | None
    time_to_target_s: float | None
    cost_to_target_usd: float | None
    lineage: LineageRecord | None = None  # a PBT trial's start: whose checkpoint, which values
    source_epoch: int | None = None  # the epoch of that checkpoint

    @property
    def source(self) -> str | None:
        """Where a PBT trial started: t3@epoch2 (its own member's last trial, or a donor's)."""
        return None if self.lineage is None else self.lineage.source(self.source_epoch)

    def lineage_record(self) -> dict[str, Any] | None:
        rec = self.lineage
        if rec is None:
            return None
        return {
            "from": self.source,
            "trial": rec.parent_index,
            "epoch": self.source_epoch,
            "step": rec.step,
            "checkpoint": rec.checkpoint,
            "sha256": rec.sha256,
            "exploited": rec.exploited,
            "member": rec.member,
            "generation": rec.generation,
            "parent_value": rec.parent_value,
            "params_before": rec.params_before,
            "params_after": rec.params_after,
        }

    def to_record(self, metric: str) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "trial": self.trial.index,
            "run": None if self.run is None else self.run.name,
            "run_id": None if self.run is None else self.run.id,
            "status": self.status,
            "params": dict(self.trial.params),
            metric: self.best,
            "epochs": self.epochs,
            "time_s": None if self.time_s is None else round(self.time_s, 1),
            "cost_usd": self.cost_usd,
            "time_to_target_s": self.time_to_target_s,
            "cost_to_target_usd": self.cost_to_target_usd,
            "reason": self.trial.reason,
            "lineage": self.lineage_record(),
        }


def _best(records: list[dict[str, Any]], metric: str, mode: str) -> tuple[float | None, int]:
    values = [
        float(r[metric])
        for r in records
        if isinstance(r.get(metric), (int, float)) and math.isfinite(float(r[metric]))
    ]
    epochs = max((int(r["epoch"]) for r in records if isinstance(r.get("epoch"), int)), default=0)
    if not values:
        return None, epochs
    return (max(values) if mode == "max" else min(values)), epochs


def _usd(amount: Fraction) -> float:
    return round(float(amount), 6)  # trials of a short sweep cost fractions of a cent


def _status(trial: TrialRecord, run: RunRecord | None) -> str:
    if trial.status in (TrialStatus.PRUNED, TrialStatus.SKIPPED, TrialStatus.PENDING):
        return str(trial.status.value)
    return "launched" if run is None else str(run.state.value)


def leaderboard(ledger: Ledger, sweep: SweepRecord, *, now: float | None = None) -> list[Entry]:
    """Every trial of the sweep, best first; trials without a value of the metric last."""
    store = SweepStore(ledger)
    trials = store.trials(sweep.id)
    costs: dict[str, Row] = {}
    if any(t.run_id for t in trials):
        report = cost_report(ledger, sweep=sweep.id, now=now or time.time())
        costs = {row.run.id: row for row in report.rows if row.run is not None}
    spec = sweep.spec
    lineage = LineageStore(ledger).of_sweep(sweep.id) if spec.search == "pbt" else {}
    unranked: list[Entry] = []
    for trial in trials:
        run = None if trial.run_id is None else ledger.get_run(trial.run_id)
        best, epochs = (None, 0)
        if run is not None:
            best, epochs = _best(read_all(run.run_dir / METRICS_FILE), spec.metric, spec.mode)
        row = costs.get(run.id) if run is not None else None
        priced = row is not None and row.error is None
        reach = None if row is None else row.target
        unranked.append(
            Entry(
                rank=None,
                trial=trial,
                run=run,
                status=_status(trial, run),
                best=best,
                epochs=epochs,
                time_s=float(row.amounts.instance_s) if row is not None and priced else None,
                cost_usd=_usd(row.amounts.total) if row is not None and priced else None,
                time_to_target_s=None if reach is None else round(reach.wall_s, 1),
                cost_to_target_usd=None if reach is None else _usd(reach.usd),
                lineage=lineage.get(trial.index),
                source_epoch=source_epoch(sweep, lineage.get(trial.index)),
            )
        )
    sign = -1.0 if spec.mode == "max" else 1.0
    scored = sorted(
        (e for e in unranked if e.best is not None),
        key=lambda e: (sign * (e.best or 0.0), e.cost_usd or 0.0, e.trial.index),
    )
    ranked = [_with_rank(e, i + 1) for i, e in enumerate(scored)]
    return ranked + [e for e in unranked if e.best is None]


def source_epoch(sweep: SweepRecord, rec: LineageRecord | None) -> int | None:
    """The epoch a PBT trial's starting checkpoint was written at: its parent's last."""
    if rec is None or rec.checkpoint is None:
        return None
    return pbt.segment_epochs(sweep.spec, rec.generation - 1)


def _with_rank(entry: Entry, rank: int) -> Entry:
    return replace(entry, rank=rank)


@dataclass(frozen=True)
class SpendPoint:
    """The sweep's best value once a trial had ended, against what its ended trials cost."""

    trial: int  # the trial whose end this is
    spent_usd: float  # every ended trial's cost, up to and including this one
    best: float | None  # the best value of the metric among them
    improved: bool  # this trial set the best


def best_by_spend(entries: list[Entry], mode: str) -> list[SpendPoint]:
    """Best-so-far against dollars spent, one point per ended trial in the order they ended:
    what a sweep bought with its money, and when more money stopped buying better results."""
    ended = [e for e in entries if e.run is not None and e.run.ended_at is not None]
    ended.sort(key=lambda e: (e.run.ended_at if e.run is not None else 0.0, e.trial.index))
    points: list[SpendPoint] = []
    spent, best = 0.0, None
    for e in ended:
        spent += e.cost_usd or 0.0
        better = e.best is not None and (
            best is None or (e.best > best if mode == "max" else e.best < best)
        )
        if better:
            best = e.best
        points.append(SpendPoint(e.trial.index, round(spent, 6), best, better))
    return points


def records(entries: list[Entry], metric: str) -> list[dict[str, Any]]:
    return [e.to_record(metric) for e in entries]


def flat_records(entries: list[Entry], metric: str) -> list[dict[str, Any]]:
    """One flat row per trial (each hyperparameter its own column): what --csv prints."""
    keys: list[str] = []
    for e in entries:
        keys += [k for k in e.trial.params if k not in keys]
    rows = []
    pbt_sweep = any(e.lineage is not None for e in entries)
    for e in entries:
        rec = e.to_record(metric)
        params = rec.pop("params")
        del rec["lineage"]
        if pbt_sweep:  # a population's trials: where each started, as `status` shows it
            rec["from"] = e.source
        rows.append(
            {
                **{k: rec[k] for k in ("rank", "trial", "run", "status", metric)},
                **{k: params.get(k) for k in keys},
                **{k: v for k, v in rec.items() if k not in ("rank", "trial", "run", "status")},
            }
        )
    return rows


def check_plot_path(path: Path) -> None:
    if path.suffix.lower() != ".png":
        raise UsageError(f"--plot writes a PNG; give a file name ending in .png, not '{path}'")
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: the folder {path.parent} does not exist")


def write_plot(path: Path, sweep: SweepRecord, entries: list[Entry]) -> int:
    """Metric against cost, one point per trial with both; returns the points drawn."""
    check_plot_path(path)
    points = [e for e in entries if e.best is not None and e.cost_usd is not None]
    if not points:
        raise UsageError(
            f"sweep {sweep.name} has no trial with both a {sweep.spec.metric} and a cost yet"
        )
    # why: matplotlib is heavy to import; only a plot pays for it
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # heavy, as above (after use("Agg"): no display)

    fig, ax = plt.subplots(figsize=(8, 5.5))
    by_status: dict[str, list[Entry]] = {}
    for e in points:
        by_status.setdefault(e.status, []).append(e)
    for status, group in sorted(by_status.items()):
        ax.scatter(
            [float(e.cost_usd or 0.0) for e in group],
            [float(e.best or 0.0) for e in group],
            label=status,
            s=36,
        )
    for e in points[:10]:  # label the best ten with their hyperparameters (and PBT's source)
        label = ", ".join(f"{k}={v}" for k, v in e.trial.params.items())
        label += "" if e.source is None else f" from {e.source}"
        ax.annotate(
            label,
            (float(e.cost_usd or 0.0), float(e.best or 0.0)),
            fontsize=7,
            xytext=(4, 3),
            textcoords="offset points",
        )
    ax.set_xlabel("trial cost (USD, as billed)")
    ax.set_ylabel(f"best {sweep.spec.metric} ({sweep.spec.mode})")
    ax.set_title(f"sweep {sweep.name}: {sweep.spec.metric} against cost per trial")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110, format="png")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)
    return len(points)
