"""`spotrun plot RUN...`: training curves of runs, or of a sweep's trials, in one PNG."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path

import typer

from spotrun.cli.render import err
from spotrun.service import curves
from spotrun.service.lookup import open_ledger


class XAxis(str, Enum):
    """What a curve is drawn against (help lists the choices)."""

    step = "step"
    time = "time"  # training seconds
    cost = "cost"


def plot(
    runs: list[str] = typer.Argument(
        ..., metavar="RUN...", help="runs (name or id prefix), or a sweep (all its trials)"
    ),
    metric: str | None = typer.Option(
        None, "--metric", "-m", help="what to draw (default test_acc; any logged metric)"
    ),
    x: XAxis = typer.Option(XAxis.step, "--x", help="the x axis: step, time (training s) or cost"),
    output: Path = typer.Option(Path("curves.png"), "-o", "--output", metavar="FILE.png"),
    as_json: bool = typer.Option(False, "--json", help="print the points instead of drawing"),
) -> None:
    """Overlay runs' training curves (a metric against step, training time or cost).

    \b
    Examples:
      spotrun plot digits-fast-1a2b3c4d
      spotrun plot run-a run-b --metric test_loss --x time -o loss.png
      spotrun plot my-sweep --x cost
    """
    if not as_json:
        curves.check_png_path(output)  # before any work: a bad path is refused at once
    ledger = open_ledger()
    found = curves.collect(ledger, runs, metric=metric, x=x.value)
    for note in found.notes:
        err.print(note, markup=False)
    if as_json:
        points = [
            {"run": c.run_id, "name": c.label, "legend": c.legend, "x": c.xs, "y": c.ys}
            for c in found.curves
        ]
        data = {"metric": found.metric, "x": found.x, "curves": points}
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    curves.write_png(found, output)
    err.print(
        f"wrote {output}: {found.metric} against {found.x} for {len(found.curves)} run(s)",
        markup=False,
    )
