"""`spotrun cost --plot`: cumulative cost over time per run, above the spot prices behind it.

The spend of a run is piecewise linear (its slope is the sum of the prices in force), so the
points where it bends, which RunBill.curve gives, draw it exactly; each price step shows as a
bend above and as a step in the price panel below, on the same time axis.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from spotrun.core.errors import UsageError
from spotrun.cost.bills import RunBill
from spotrun.cost.price_history import PriceHistory

MAX_LEGEND = 12


def _when(at: int) -> datetime:
    return datetime.fromtimestamp(at, timezone.utc)


def price_series(bills: list[RunBill]) -> dict[str, tuple[PriceHistory, int, int]]:
    """Each spot history the runs were billed from, over the span they used it."""
    series: dict[str, tuple[PriceHistory, int, int]] = {}
    for run_bill in bills:
        for b in run_bill.bills:
            if b.history is None or not b.billed_s:
                continue
            key = f"{b.usage.instance_type} in {b.usage.zone}"
            start, stop = b.usage.start, b.billed_stop
            if key in series:
                _, a, z = series[key]
                start, stop = min(start, a), max(stop, z)
            series[key] = (b.history, start, stop)
    return series


def check_plot_path(path: Path) -> None:
    """Refuse a bad --plot path before any work is done."""
    if path.suffix.lower() != ".png":
        raise UsageError(f"--plot writes a PNG; give a file name ending in .png, not '{path}'")
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: the folder {path.parent} does not exist")


def write_plot(path: Path, bills: list[RunBill]) -> None:
    check_plot_path(path)
    priced = [b for b in bills if any(i.usage.market != "local" for i in b.bills)]
    # Free local runs would only draw flat lines and stretch the time axis; show them alone.
    curves = [(b.run.name, b.curve()) for b in (priced or bills)]
    curves = [(name, curve) for name, curve in curves if curve]
    if not curves:
        raise UsageError("no run in the report has instances to plot")

    # why: matplotlib is heavy to import; only a plot pays for it
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # heavy, as above (after use("Agg"): no display)

    fig, (top, bottom) = plt.subplots(
        2, 1, sharex=True, figsize=(10, 6.5), gridspec_kw={"height_ratios": [3, 1.3]}
    )
    for name, curve in curves:
        top.plot([_when(t) for t, _ in curve], [float(v) for _, v in curve], marker=".", label=name)
    series = price_series(bills)
    for key, (history, start, stop) in series.items():
        pieces = history.segments(start, stop)
        xs = [_when(a) for a, _, _ in pieces] + [_when(stop)]
        ys = [float(p) for _, _, p in pieces] + [float(pieces[-1][2])]
        (line,) = bottom.step(xs, ys, where="post", label=key)
        for a, _, _ in pieces[1:]:  # each price change, where the cost curves bend
            top.axvline(_when(a), color=line.get_color(), linestyle=":", linewidth=0.8)
    top.set_ylabel("cumulative cost (USD)")
    top.set_title("Cost over time per run (as billed: spot price in force each second)")
    top.grid(True, alpha=0.3)
    if len(curves) <= MAX_LEGEND:
        top.legend(loc="upper left", fontsize="small")
    bottom.set_ylabel("spot USD/hour")
    bottom.set_xlabel("time (UTC)")
    bottom.grid(True, alpha=0.3)
    if series:
        bottom.legend(loc="upper left", fontsize="small")
    else:
        bottom.text(
            0.5,
            0.5,
            "no spot price history (local or on-demand only)",
            ha="center",
            va="center",
            transform=bottom.transAxes,
        )
    fig.autofmt_xdate()
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110, format="png")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)
