"""A foreground sweep followed until it ends (`spotrun sweep RECIPE ...` without --detach):
each trial's changes and evaluations as lines, a progress line for the live ones, the
leaderboard at the end; Ctrl-C detaches and the sweep goes on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spotrun.cli.lazy import stderr_console, stdout_console
from spotrun.cli.sweep_print import print_board
from spotrun.core.exitcodes import FAILURE, SUCCESS
from spotrun.core.lazy import lazy_module
from spotrun.core.waiting import pause

if TYPE_CHECKING:
    from rich.console import Console

    from spotrun.cli import sweep_view
    from spotrun.cost import bills
    from spotrun.service import sweeps as service
    from spotrun.store import sweeps as sweep_store
else:  # the service layer, the sweep store and the bills (pydantic, ledger, run control:
    # ~0.15 s) stay off `sweep run -h` and --help: imported at their first use
    sweep_view = lazy_module("spotrun.cli.sweep_view")
    bills = lazy_module("spotrun.cost.bills")
    service = lazy_module("spotrun.service.sweeps")
    sweep_store = lazy_module("spotrun.store.sweeps")

out: Console = stdout_console()  # imported at first use: `spotrun --help` stays fast
err: Console = stderr_console()


def follow_sweep(ledger: Any, sweep_id: str) -> int:
    """Print each trial's changes until the sweep ends; Ctrl-C detaches."""
    store = sweep_store.SweepStore(ledger)
    seen: dict[int, str] = {}
    run_ids: dict[int, str] = {}

    def price(index: int) -> float | None:
        found = bills.run_cost(ledger, ledger.get_run(run_ids[index]))
        return None if found is None else float(found)

    view = sweep_view.TrialsView(
        out, price
    )  # each trial's evaluations; a progress line for the live ones
    try:
        while True:
            sweep = store.get(sweep_id)
            watched = []
            for trial in store.trials(sweep_id):
                run = None if trial.run_id is None else ledger.get_run(trial.run_id)
                state = trial.status.value if run is None else run.state.value
                if trial.status.value == "pruned":
                    state = "pruned"
                if seen.get(trial.index) != state:
                    seen[trial.index] = state
                    shown = ", ".join(f"{k}={v}" for k, v in trial.params.items())
                    shown = shown or "values chosen at launch"  # a searched sweep's
                    view.line(f"trial {trial.index} ({shown}): {state}")
                if run is not None:
                    run_ids[trial.index] = run.id
                    watched.append((trial.index, run.run_dir, not run.is_terminal))
            view.poll(watched)
            if sweep.is_over:
                view.close()
                c = service.counts(store, sweep)
                out.print(f"sweep {sweep.state.value}: {sweep.message or ''}", markup=False)
                out.print(", ".join(f"{k} {v}" for k, v in c.items() if v), markup=False)
                print_board(ledger, sweep)
                return SUCCESS if sweep.state is sweep_store.SweepState.COMPLETED else FAILURE
            pause(0.5)  # the sweep's trials, looked at again
    except KeyboardInterrupt:
        view.close()
        err.print(f"\ndetached; the sweep goes on. `spotrun sweep stop {sweep_id}` stops it.")
        return 130
    finally:
        view.close()
