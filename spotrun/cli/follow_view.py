"""The foreground view of a run (`launch`, `resume`): its stages, events, evaluations, your
command's own output, and a progress line inside each epoch.

On a terminal the progress line is one live line under the others (rich); piped, it becomes a
plain line now and then, so a log file still shows how training went.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotrun.cli.lazy import real_console
from spotrun.core.display_words import HEADLINE, show_metric, show_metrics
from spotrun.core.durations import show_duration
from spotrun.core.exitcodes import FAILURE, SUCCESS
from spotrun.core.lazy import lazy_module
from spotrun.core.money import show_usd
from spotrun.core.rundir import RECIPE_FILE
from spotrun.core.runstates import RunState
from spotrun.core.terminal_text import printable

if TYPE_CHECKING:
    from rich.console import Console

    from spotrun.cost import bills
    from spotrun.service import follow as follows
    from spotrun.service.follow import FollowFrom
else:  # the bills and the ledger's tables (~30 ms) stay off ls, which imports this module
    bills = lazy_module("spotrun.cost.bills")
    follows = lazy_module("spotrun.service.follow")

PLAIN_EVERY_S = 10.0  # piped: a progress line at most this often
COST_EVERY_S = 5.0  # the cost so far is priced again at most this often


fmt_duration = show_duration  # the views' one duration format (spotrun/core/durations.py)


def fmt_metrics(metrics: dict[str, Any]) -> str:
    """A run's headline metrics, named and formatted as on every screen (core/display_words)."""
    return show_metrics(metrics, HEADLINE)


def progress_line(p: dict[str, Any], cost_usd: float | None, now: float) -> str:
    """epoch k/N, step in the epoch, speed, ETA, accuracy and cost so far, in one line."""
    parts = [f"epoch {p.get('epoch', '?')}/{p.get('epochs', '?')}"]
    if p.get("phase") == "eval":
        parts.append("evaluating")
    else:
        parts.append(f"step {p.get('batch', '?')}/{p.get('batches', '?')}")
    per_s = p.get("per_s")
    if isinstance(per_s, (int, float)):
        unit = "img" if p.get("unit") == "images" else "samples"
        parts.append(f"{per_s:,.0f} {unit}/s")
    eta = p.get("eta_s")
    if isinstance(eta, (int, float)):
        at = p.get("at")
        left = eta - (now - at) if isinstance(at, (int, float)) else eta
        parts.append(f"ETA {fmt_duration(max(0.0, left))}")
    acc = p.get("test_acc")
    if isinstance(acc, (int, float)):
        parts.append(show_metric("test_acc", acc))
    if cost_usd is not None:
        parts.append(f"{show_usd(cost_usd)} so far")
    return "  ".join(parts)


class ProgressShown:
    """Where the progress line goes: a live line on a terminal, plain lines now and then."""

    def __init__(self, console: Console) -> None:
        # late: rich (~20 ms) only when a run is followed; ls and --help import this module
        from rich.live import Live
        from rich.text import Text

        console = real_console(console)
        self._text = Text
        self.console = console
        self.live = (
            Live(Text(""), console=console, auto_refresh=False, transient=True)
            if console.is_terminal
            else None
        )
        self._plain_at = 0.0
        if self.live is not None:
            self.live.start()

    def line(self, text: str) -> None:
        """A line above the progress line (or just a line, piped)."""
        self.console.print(text, markup=False, highlight=False)

    def progress(self, text: str) -> None:
        if self.live is not None:
            self.live.update(self._text(text), refresh=True)
            return
        now = time.monotonic()
        if now - self._plain_at >= PLAIN_EVERY_S:
            self._plain_at = now
            self.console.print(f"{'':>9} {'':<13} {text}", markup=False, highlight=False)

    def close(self) -> None:
        if self.live is not None:
            self.live.update(self._text(""), refresh=True)
            self.live.stop()
            self.live = None


def follow_run(
    ledger: Any,
    run_id: str,
    out: Console,
    err: Console,
    *,
    start: FollowFrom | None = None,
    quiet: bool = False,
) -> int:
    """Show the run until it ends; its exit code (0 only if it succeeded, 130 on Ctrl-C)."""
    shown: ProgressShown | None = None
    try:  # from the first line: a Ctrl-C at any moment says how the run goes on
        run = ledger.get_run(run_id)
        t0 = run.created_at
        shown = ProgressShown(out)
        cost: float | None = None
        priced_at = 0.0
        epochs: int | None = None
        # a resumed run's progress.json is its last job's until the new job reports
        stale_before = time.time() if start is not None else None
        for update in follows.follow(ledger, run_id, start=start, output=False if quiet else None):
            stamp = f"[{fmt_duration(max(0.0, update.at - t0)):>7}]"
            if update.kind == "state":
                shown.line(f"{stamp} {update.state.value:<13} {printable(update.text)}")
            elif quiet and update.kind != "end":
                continue
            elif update.kind == "event":
                shown.line(f"{stamp} {'':<13} {printable(update.text)}")
            elif update.kind == "output":
                for line in update.text.splitlines():
                    shown.line(printable(line))
            elif update.kind == "metrics":
                m = update.metrics
                epochs = epochs or _epoch_total(run.run_dir)
                of = f"/{epochs}" if epochs else ""
                line = f"epoch {m.get('epoch', '?')}{of}  {fmt_metrics(m)}"
                if "elapsed_s" in m:
                    line += f"  ({fmt_duration(float(m['elapsed_s']))} training)"
                shown.line(printable(f"{stamp} {'':<13} {line}"))
            elif update.kind == "progress":
                if stale_before is not None and _reported_before(update.metrics, stale_before):
                    continue
                if time.monotonic() - priced_at >= COST_EVERY_S:
                    priced_at = time.monotonic()
                    found = bills.run_cost(ledger, ledger.get_run(run_id))
                    cost = None if found is None else float(found)
                shown.progress(progress_line(update.metrics, cost, time.time()))
            else:
                shown.close()
                return _summary(ledger, run_id, out)
    except KeyboardInterrupt:
        if shown is not None:
            shown.close()
        run = ledger.get_run(run_id)
        err.print(f"\ndetached from {run.name}; {detached_note(run)}", markup=False)
        return 130
    finally:
        if shown is not None:
            shown.close()
    return FAILURE


def _reported_before(progress: dict[str, Any], moment: float) -> bool:
    at = progress.get("at")
    return not isinstance(at, int | float) or at < moment


def detached_note(run: Any) -> str:
    """How a run left running in the background goes on, and how to follow or stop it."""
    return (
        "it goes on detached under its supervisor: follow it with "
        f"`spotrun logs -f {run.name}`, stop it with `spotrun stop {run.name}`"
    )


def _epoch_total(run_dir: Path) -> int | None:
    """The recipe's epochs, from the recipe.json its trainer wrote (None: your own command)."""
    try:
        epochs = json.loads((run_dir / RECIPE_FILE).read_text()).get("epochs")
    except (OSError, ValueError, AttributeError):
        return None
    return epochs if isinstance(epochs, int) else None


def _summary(ledger: Any, run_id: str, out: Console) -> int:
    final = ledger.get_run(run_id)
    cost = ledger.run_cost_usd(run_id)
    summary = fmt_metrics(final.last_metrics)
    out.print(
        f"{final.state.value} in {fmt_duration(final.duration_s())}"
        + (f": {summary}" if summary else "")
        + f"  cost {show_usd(cost)}"
        + (
            f"\n{printable(final.message)}"
            if final.state is not RunState.SUCCEEDED and final.message
            else ""
        ),
        markup=False,
        highlight=False,
    )
    return SUCCESS if final.state is RunState.SUCCEEDED else FAILURE
