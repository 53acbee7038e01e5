"""What each dashboard page shows, as plain JSON-ready dicts built from the service layer.

Every function takes an open ledger and the page's words (run and sweep references, filters)
and returns data only; the app serialises it. Nothing here renders a job's environment: the
values of a run's `--env` (and its own command's envs) are masked wherever a run's text could
repeat them (its log, events, messages, recipe).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from spotrun.core.errors import SpotrunError
from spotrun.core.metrics_file import read_all
from spotrun.core.rundir import JOB_LOG_FILE, METRICS_FILE, PROGRESS_FILE, RECIPE_FILE
from spotrun.cost import reports
from spotrun.cost.plot import price_series
from spotrun.service import curves as curve_service
from spotrun.service.runs import cost_report, run_status, run_summary
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.sweeps import SweepStore
from spotrun.sweep import board
from spotrun.ui.best_metric import BestMetrics

MASK = "[hidden]"
MIN_SECRET_CHARS = 4  # shorter values ("1", "on") would mask ordinary words, not secrets
LOG_TAIL_BYTES = 16_384
MARKED_EVENTS = ("spot", "budget")  # events drawn on a run's curves
# kept across requests (all on the server's event loop): each poll reads only what is new
_BEST = BestMetrics()


# ---------------------------------------------------------------------- secrets
def secret_values(run: RunRecord) -> set[str]:
    """The values of the run's job environment: never shown on any page."""
    try:
        spec = run.spec
    except (ValueError, SpotrunError):
        return set()
    values = set(spec.env.values())
    if spec.job is not None:
        values |= set(spec.job.envs.values())
    return {v for v in values if len(v) >= MIN_SECRET_CHARS}


def masked(text: str, secrets: set[str]) -> str:
    for value in sorted(secrets, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def masked_json(data: Any, secrets: set[str]) -> str:
    """`data` as JSON with every secret masked, also inside JSON's escaped strings."""
    text = json.dumps(data, default=str)
    escaped = {json.dumps(s)[1:-1] for s in secrets} | secrets
    return masked(text, escaped)


# ---------------------------------------------------------------------- runs page
def runs_page(
    ledger: Ledger,
    *,
    state: str | None = None,
    sweep: str | None = None,
    since: float | None = None,
) -> dict[str, Any]:
    sweeps = {s.id: s.name for s in SweepStore(ledger).all()}
    sweep_id = _sweep_id(ledger, sweep) if sweep else None
    runs = ledger.list_runs(include_all=True, sweep_id=sweep_id, since=since)
    if state:
        runs = [r for r in runs if r.state.value == state]
    now = time.time()
    rows = [_run_row(ledger, run, sweeps, now) for run in reversed(runs)]
    return {
        "runs": rows,
        "states": sorted({r.state.value for r in ledger.list_runs(include_all=True)}),
        "sweeps": [{"id": i, "name": n} for i, n in sweeps.items()],
    }


def _sweep_id(ledger: Ledger, ref: str) -> str:
    return SweepStore(ledger).resolve(ref).id


def _run_row(ledger: Ledger, run: RunRecord, sweeps: dict[str, str], now: float) -> dict[str, Any]:
    summary = run_summary(ledger, run)
    elapsed = run.duration_s(now)
    eta = None if run.is_terminal else _eta_s(run.run_dir)
    cost = summary["cost_usd"]
    projected = None
    if cost is not None:
        projected = cost if eta is None or elapsed <= 0 else cost * (elapsed + eta) / elapsed
    offer = run.plan.offers[0] if run.plan is not None and run.plan.offers else None
    instance = ledger.instances(run.id)[-1:] if not run.is_terminal or offer is None else []
    kind = instance[0].instance_type if instance else (offer.instance_type if offer else "")
    zone = instance[0].zone if instance else (offer.zone if offer else None)
    return {
        "id": run.id,
        "name": run.name,
        "what": _what(run),
        "state": run.state.value,
        "cloud": run.cloud,
        "type": kind,
        "zone": zone or "",
        "created": summary["created"],
        "elapsed_s": round(elapsed, 1),
        "eta_s": None if eta is None else round(eta, 1),
        "cost_usd": cost,
        "projected_usd": None if projected is None else round(projected, 6),
        "best": _best(run),
        "sweep": sweeps.get(run.sweep_id or "", ""),
        "message": masked(run.message or "", secret_values(run)),
    }


def _what(run: RunRecord) -> str:
    """The recipe (with its overrides) or the run's own command."""
    try:
        spec = run.spec
    except (ValueError, SpotrunError):
        return run.recipe
    if spec.job is not None and spec.job.recipe is None:
        command = spec.job.run or " ".join(spec.job.argv or [])
        return masked(command, secret_values(run))
    return " ".join([run.recipe, *spec.overrides])


def _eta_s(run_dir: Path) -> float | None:
    try:
        progress = json.loads((run_dir / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return None
    eta = progress.get("eta_s") if isinstance(progress, dict) else None
    return float(eta) if isinstance(eta, (int, float)) and not isinstance(eta, bool) else None


def _best(run: RunRecord) -> dict[str, Any] | None:
    """The best test accuracy the run reached (else its lowest test loss), from its metrics."""
    return _BEST.best(run.run_dir / METRICS_FILE)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---------------------------------------------------------------------- a run
def run_page(ledger: Ledger, ref: str) -> dict[str, Any]:
    status = run_status(ledger, ref)
    run = status.run
    secrets = secret_values(run)
    metrics = read_all(run.run_dir / METRICS_FILE)
    names = sorted({k for r in metrics for k, v in r.items() if _is_number(v)} - {"step", "epoch"})
    return {
        "summary": {**_run_row(ledger, run, _sweep_names(ledger), time.time())},
        "metrics": names,
        "transitions": [
            {
                "at": t.at,
                "from": None if t.from_state is None else t.from_state.value,
                "to": t.to_state.value,
                "reason": masked(t.reason or "", secrets),
            }
            for t in status.transitions
        ],
        "events": [
            {"at": e.at, "kind": e.kind, "message": masked(e.message, secrets)}
            for e in status.events
        ],
        "instances": [
            {
                "id": i.id,
                "type": i.instance_type,
                "market": i.market,
                "zone": i.zone or "",
                "state": i.state,
                "launched_at": i.launched_at,
                "terminated_at": i.terminated_at,
                "end_reason": i.end_reason or "",
                "price": _hourly(status.cost_lines, i.id),
            }
            for i in status.instances
        ],
        "cost_lines": [
            {
                "kind": c.kind,
                "instance": c.instance_id or "",
                "quantity": c.quantity,
                "unit": c.unit,
                "usd": c.usd,
                "on_demand_usd": c.on_demand_usd,
            }
            for c in status.cost_lines
        ],
        "cost_usd": status.cost_usd,
        "log": masked(_tail(run.run_dir / JOB_LOG_FILE), secrets),
        "recipe": masked(_recipe(run.run_dir), secrets),
        "tensorboard": None,  # filled in by the app when TensorBoard is installed
    }


def _sweep_names(ledger: Ledger) -> dict[str, str]:
    return {s.id: s.name for s in SweepStore(ledger).all()}


def _hourly(lines: list[Any], instance_id: str) -> float | None:
    """USD per hour the instance was billed at, on average (its compute lines)."""
    mine = [c for c in lines if c.instance_id == instance_id and c.unit == "instance-s"]
    seconds = sum(c.quantity for c in mine)
    return round(sum(c.usd for c in mine) * 3600 / seconds, 6) if seconds else None


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - LOG_TAIL_BYTES))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _recipe(run_dir: Path) -> str:
    try:
        return json.dumps(json.loads((run_dir / RECIPE_FILE).read_text()), indent=2)
    except (OSError, ValueError):
        return ""


# ---------------------------------------------------------------------- curves
def curves_page(ledger: Ledger, refs: list[str], metric: str | None, x: str) -> dict[str, Any]:
    """Curves of runs overlaid, each labelled by its run's name, with the moments of its
    interruptions, replacements and budget events placed on the same x axis."""
    try:
        found = curve_service.collect(ledger, refs, metric=metric, x=x)
    except SpotrunError as exc:
        return {"metric": metric, "x": x, "curves": [], "notes": [exc.user_message()]}
    out = []
    for curve in found.curves:
        run = ledger.get_run(curve.run_id)
        out.append(
            {
                "run": curve.run_id,
                "name": curve.label,
                "x": curve.xs,
                "y": curve.ys,
                "marks": _marks(ledger, run, found.x),
            }
        )
    return {"metric": found.metric, "x": found.x, "curves": out, "notes": found.notes}


def _marks(ledger: Ledger, run: RunRecord, axis: str) -> list[dict[str, Any]]:
    """Interruptions, replacements and budget events, at their place on the curve's x axis."""
    status = run_status(ledger, run.id)
    moments: list[tuple[float, str, str]] = []
    for t in status.transitions:
        if t.to_state.value == "interrupted":
            moments.append((t.at, "interruption", t.reason or "interrupted"))
    for e in status.events:
        if e.kind in MARKED_EVENTS:
            kind = "interruption" if "notice" in e.message else e.kind
            moments.append((e.at, kind, e.message))
    for inst in status.instances[1:]:
        if inst.launched_at is not None:
            moments.append((inst.launched_at, "replacement", f"replacement {inst.id}"))
    if not moments:
        return []
    now = time.time()
    periods = reports.running_periods(status.transitions, now)
    metrics = [r for r in read_all(run.run_dir / METRICS_FILE) if _is_number(r.get("elapsed_s"))]
    bill = None
    if axis == "cost":
        bill = _bill(ledger, run, now)
    secrets = secret_values(run)
    marks = []
    for at, kind, text in sorted(moments):
        trained = _trained_s(at, periods)
        if axis == "time":
            x: float | None = trained
        elif axis == "step":
            x = _step_at(trained, metrics)
        else:
            x = None if bill is None else float(bill.total_until(int(at)))
        if x is not None:
            marks.append({"x": x, "kind": kind, "text": masked(text, secrets), "at": at})
    return marks


def _bill(ledger: Ledger, run: RunRecord, now: float) -> Any:
    report = cost_report(ledger, run.id, now=now)
    return report.bills[0] if report.bills else None


def _trained_s(at: float, periods: list[tuple[float, float]]) -> float:
    """How many seconds the job had run in the state `running` by the moment `at`."""
    return sum(max(0.0, min(b, at) - a) for a, b in periods if a < at)


def _step_at(trained: float, metrics: list[dict[str, Any]]) -> float | None:
    """The step the trainer was at after `trained` seconds, between its evaluations."""
    if not metrics:
        return None
    before = [r for r in metrics if float(r["elapsed_s"]) <= trained]
    after = [r for r in metrics if float(r["elapsed_s"]) > trained]
    if not before:
        return float(metrics[0].get("step") or 0)
    if not after:
        return float(before[-1].get("step") or 0)
    a, b = before[-1], after[0]
    ta, tb = float(a["elapsed_s"]), float(b["elapsed_s"])
    share = (trained - ta) / (tb - ta) if tb > ta else 0.0
    step_a, step_b = float(a.get("step") or 0), float(b.get("step") or 0)
    return step_a + share * (step_b - step_a)


# ---------------------------------------------------------------------- a sweep
def sweep_page(ledger: Ledger, ref: str) -> dict[str, Any]:
    store = SweepStore(ledger)
    sweep = store.resolve(ref)
    entries = board.leaderboard(ledger, sweep)
    metric = sweep.spec.metric
    rows = board.records(entries, metric)
    for row in rows:
        row["best"] = row.pop(metric, None)
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row["params"] if k not in keys]
    return {
        "id": sweep.id,
        "name": sweep.name,
        "recipe": sweep.recipe,
        "state": sweep.state.value,
        "metric": metric,
        "mode": sweep.spec.mode,
        "params": keys,
        "trials": rows,
        "message": sweep.message or "",
    }


def sweeps_list(ledger: Ledger) -> list[dict[str, Any]]:
    return [
        {"id": s.id, "name": s.name, "recipe": s.recipe, "state": s.state.value}
        for s in SweepStore(ledger).all()
    ]


# ---------------------------------------------------------------------- cost
def cost_page(ledger: Ledger, *, sweep: str | None = None, by: str = "run") -> dict[str, Any]:
    """`spotrun cost`'s report (the same rows and total), each run's cumulative spend over
    time, and the spot price steps it was billed from."""
    report = cost_report(ledger, None, sweep=sweep, by=by)
    rows = [reports.to_record(row, report.by) for row in report.rows]
    total = reports.to_record(report.total, report.by)
    spend = [
        {
            "name": b.run.name,
            "run": b.run.id,
            "sweep": b.run.sweep_id or "",
            "points": [[t, float(v)] for t, v in b.curve()],
        }
        for b in report.bills
    ]
    prices = []
    for key, (history, start, stop) in price_series(report.bills).items():
        pieces = history.segments(start, stop)
        steps = [[a, float(p)] for a, _, p in pieces]
        if pieces:
            steps.append([stop, float(pieces[-1][2])])
        prices.append({"name": key, "steps": steps})
    return {
        "by": report.by,
        "rows": rows,
        "total": total,
        "spend": spend,
        "prices": prices,
        "days": _daily(report.bills),
        "methods": report.methods,
        "errors": report.errors,
    }


def _daily(bills: list[Any]) -> list[dict[str, Any]]:
    """Spend per UTC day, summed over the runs."""
    days: dict[str, float] = {}
    for b in bills:
        previous = 0.0
        for t, value in b.curve():
            day = datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d")
            days[day] = days.get(day, 0.0) + float(value) - previous
            previous = float(value)
    return [{"day": d, "usd": round(v, 6)} for d, v in sorted(days.items())]
