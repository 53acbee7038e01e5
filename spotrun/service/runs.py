"""The library surface of spotrun: what the CLI calls, and what scripts can call directly.

Every function takes the user's words (recipe names, run references) and returns typed
records; errors are SpotrunErrors with a message fit to show as is. This module holds a run's
life as the user drives it (launch, status, stop, gc) and re-exports the rest of the surface
from the modules that hold it: preparing a launch (service.prepare), prices, logs, attach and
exec, the cost report (spotrun.cost.cost_report) and reading runs (service.lookup). Data sets
(`data push`, `data ls`) are spotrun.service.datasets.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from spotrun.cloud.by_name import find_orphans, launch_caveat, remove_orphans
from spotrun.core.errors import NotFoundError, StateError, UsageError
from spotrun.core.interrupts import interrupts_deferred
from spotrun.core.launch_request import LaunchRequest
from spotrun.core.lazy import lazy_module
from spotrun.drive import supervisor
from spotrun.recipes import Recipe, get_recipe, recipe_names
from spotrun.service.follow import FollowFrom, Update, follow
from spotrun.service.logs import log_path, node_log_paths, read_log
from spotrun.service.lookup import RunStatus, open_ledger, run_status, run_summary
from spotrun.service.prepare import (
    LaunchPlan,
    check_cluster_quota,
    check_job_data,
    check_launchable,
    check_multi_node,
    check_nodes,
    check_remote_data,
    dry_run,
    prepare_job_launch,
    prepare_launch,
)
from spotrun.service.prices import PriceTable, catalog_prices, prices
from spotrun.service.stopping import stop
from spotrun.store.ledger import (
    Ledger,
    RunRecord,
    new_run_id,
)

if TYPE_CHECKING:
    from spotrun.cost.bills import run_cost
    from spotrun.cost.cost_report import (
        GROUPINGS,
        CostReport,
        cost_report,
        cost_rows,
        provider_prices,
        write_cost_plot,
    )
    from spotrun.service.attach import ExecWindow, attach_command, exec_command
else:
    # re-exported at their first read: attach's tmux client (libtmux, ~80 ms), the billing
    # rules and the cost report's pricing are off the paths of launch, stop and status
    _attach = lazy_module("spotrun.service.attach")
    _bills = lazy_module("spotrun.cost.bills")
    _cost_report = lazy_module("spotrun.cost.cost_report")
    _REEXPORTED_LATER = {
        "run_cost": _bills,
        **dict.fromkeys(("ExecWindow", "attach_command", "exec_command"), _attach),
        **dict.fromkeys(
            ("GROUPINGS", "CostReport", "cost_report", "cost_rows", "provider_prices")
            + ("write_cost_plot",),
            _cost_report,
        ),
    }

    def __getattr__(name: str) -> Any:
        if name in _REEXPORTED_LATER:
            return getattr(_REEXPORTED_LATER[name], name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The library surface: defined here, or re-exported from the module that holds it.
__all__ = [
    "GROUPINGS",
    "CostReport",
    "ExecWindow",
    "FollowFrom",
    "GcReport",
    "LaunchPlan",
    "LaunchRequest",
    "PriceTable",
    "RunStatus",
    "Update",
    "attach_command",
    "catalog_prices",
    "check_cluster_quota",
    "check_job_data",
    "check_launchable",
    "check_multi_node",
    "check_nodes",
    "check_remote_data",
    "cost_report",
    "cost_rows",
    "dry_run",
    "exec_command",
    "find_run",
    "follow",
    "gc",
    "launch",
    "log_path",
    "new_run_id",
    "node_log_paths",
    "open_ledger",
    "parse_since",
    "prepare_job_launch",
    "prepare_launch",
    "prices",
    "provider_prices",
    "read_log",
    "recipes",
    "run_cost",
    "run_status",
    "run_summary",
    "stop",
    "write_cost_plot",
]


# -------------------------------------------------------------------- launch
def launch(
    ledger: Ledger,
    prepared: LaunchPlan,
    *,
    prewarmed: supervisor.Prewarmed | None = None,
    run_id: str | None = None,
) -> RunRecord:
    """Record the run with its folder and hand it to a new supervisor (or to `prewarmed`);
    returns at once.

    The run and its folder appear together or not at all, and a recorded run is handed on
    even when Ctrl-C comes meanwhile (its KeyboardInterrupt is raised once the run is handed
    on, or once the folder is taken away again). A caller that chose `run_id` then learns from
    `find_run` which of the two it got."""
    run_id = run_id or new_run_id()
    folder = ledger.settings.runs_dir / run_id
    if folder.exists():  # not ours to take away below
        raise StateError(f"a run folder {folder} already exists", hint="launch again")
    started = False
    try:
        # The folder first: whoever finds the run in the ledger (the home's controller looks
        # every second) finds its folder too.
        folder.mkdir(parents=True)
        ledger.create_run(prepared.spec, run_id=run_id, plan=prepared.plan)
        with interrupts_deferred():
            started = True
            _hand_on(ledger, run_id, prepared, prewarmed)
    except BaseException:
        with interrupts_deferred():
            if not _recorded(ledger, run_id):
                shutil.rmtree(folder, ignore_errors=True)
            elif not started:  # recorded just before the interrupt (or error) came
                _hand_on(ledger, run_id, prepared, prewarmed)
        raise
    return ledger.get_run(run_id)


def _hand_on(
    ledger: Ledger, run_id: str, prepared: LaunchPlan, prewarmed: supervisor.Prewarmed | None
) -> None:
    """A recorded run's plan noted, and the run handed to its supervisor."""
    run = ledger.get_run(run_id)
    try:
        ledger.add_event(run.id, "plan", prepared.plan.reason)
        lacking = launch_caveat(run.spec.cloud, ledger.settings)
        if lacking:
            ledger.add_event(run.id, "plan", lacking)
    finally:  # a recorded run is driven whatever became of its notes
        pid = prewarmed.hand(run) if prewarmed else supervisor.spawn(ledger.settings, run)
        ledger.set_supervisor(run.id, pid)


def _recorded(ledger: Ledger, run_id: str) -> bool:
    """Whether the run's row is committed. A Ctrl-C inside COMMIT's wait for a busy ledger
    leaves its transaction open: rolled back here, so that the row is committed or gone."""
    if ledger.db.in_transaction:
        ledger.db.execute("ROLLBACK")
    return find_run(ledger, run_id) is not None


def find_run(ledger: Ledger, run_id: str) -> RunRecord | None:
    """The run with this exact id, or None when the ledger has none."""
    try:
        return ledger.get_run(run_id)
    except NotFoundError:
        return None


# ------------------------------------------------------------------------ gc
@dataclass(frozen=True)
class GcReport:
    orphans: list[Any]  # the cloud's Orphan (spotrun.cloud.by_name), in removal order
    removed: dict[Any, str | None]  # orphan -> None when removed, else why not; {} = listed


def gc(ledger: Ledger, *, remove: bool = False) -> GcReport:
    """What spotrun made on AWS that no live run owns (every configured region); with
    `remove`, remove it too."""
    live = {run.id for run in ledger.active_runs()}
    orphans = find_orphans(ledger.settings, live)
    removed = remove_orphans(ledger.settings, orphans) if remove and orphans else {}
    return GcReport(orphans, removed)


# ---------------------------------------------------------------------- cost
def parse_since(text: str) -> float:
    """A --since value: a UTC date (2025-06-01) or date and time (2025-06-01T12:00)."""
    raw = text.strip()
    try:
        when = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith("Z") else raw)
    except ValueError:
        raise UsageError(
            f"--since '{text}' is not a date", hint="give YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


# ------------------------------------------------------------------- recipes
def recipes() -> list[Recipe]:
    # listing and showing recipes must work on a machine without their data
    return [get_recipe(name, data_here=False) for name in recipe_names()]
