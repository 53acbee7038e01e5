"""`spotrun gc`: spotrun-tagged AWS resources that no live run owns, listed or removed."""

from __future__ import annotations

import typer

from spotrun.cli.library import api
from spotrun.cli.render import err, out


def gc_command(
    yes: bool = typer.Option(False, "--yes", help="remove what is listed (default: only list)"),
) -> None:
    """List (and with --yes remove) spotrun-tagged AWS resources that no live run owns.

    \b
    Examples:
      spotrun gc
      spotrun gc --yes
    """
    ledger = api.open_ledger()
    report = api.gc(ledger, remove=yes)
    if not report.orphans:
        out.print("nothing of spotrun's is left without a live run")
        return
    for orphan in report.orphans:
        line = f"{orphan.kind:<15} {orphan.id:<24} {orphan.region:<12} run {orphan.run_id}"
        if orphan.detail:
            line += f"  ({orphan.detail})"
        if yes:
            why = report.removed.get(orphan)
            line += "  removed" if why is None else f"  NOT removed: {why}"
        out.print(line, highlight=False)
    if not yes:
        err.print(f"{len(report.orphans)} resource(s); run `spotrun gc --yes` to remove them")
    elif any(why is not None for why in report.removed.values()):
        raise typer.Exit(1)
