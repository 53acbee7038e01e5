"""How the commands print: the two consoles, tables, JSON, CSV, money and UTC times.

Durations and metrics are rendered by spotrun/cli/follow_view.py (fmt_duration, fmt_metrics).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from spotrun.cli.lazy import stderr_console, stdout_console
from spotrun.core.money import show_usd

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as RichTable

out: Console = stdout_console()  # wide when piped: tables are not folded at 80 columns
err: Console = stderr_console()


def Table(**options: Any) -> RichTable:  # noqa: N802 - stands in for rich's class, imported late
    from rich.table import Table as RichTable  # late: rich (~18 ms) off --help, which imports us

    return RichTable(**options)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def print_csv(records: list[dict[str, Any]]) -> None:
    """Rows as CSV with a header from the first row's keys; a list cell is joined by ';'."""
    import csv  # late: only --csv needs it, and ls imports this module

    if not records:
        return
    writer = csv.DictWriter(sys.stdout, fieldnames=list(records[0]), lineterminator="\n")
    writer.writeheader()
    for record in records:
        writer.writerow({k: ";".join(v) if isinstance(v, list) else v for k, v in record.items()})


def money(value: float | None) -> str:
    """USD by the one rule of spotrun/core/money.py ("-": not known)."""
    return "-" if value is None else show_usd(value)


def iso_minute(ts: float) -> str:
    """A UTC time to the minute, e.g. 2026-12-04 13:20 UTC."""
    from datetime import datetime, timezone  # late: as csv above; ls prints no dates

    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
