"""The `spotrun` program's way in: the answers that need no typer, then the full CLI.

`spotrun --help` and `spotrun ls` are what a user types most and should answer at once, but
typer, click and the command modules alone cost ~50 ms of CPU. So a plain `--help`/`-h` is
printed from its stored page (spotrun/cli/help_snapshot.py) and a plain `ls [-a|--all]
[--json]` runs `ls`'s own body (spotrun/cli/run_list.py) with the same error handling as
spotrun/cli/main.py; a plain `sample RUN [options]` runs sample's body the same way
(spotrun/cli/sample_quick.py), its first character sooner. Anything else, and all of these
when this home's controller lives on another host or this is a controller instance
(remote.json, idle-stop.json), goes through spotrun/cli/main.py as before.
"""

from __future__ import annotations

import os
import sys

LS_FLAGS = frozenset({"-a", "--all", "--json"})


def main() -> None:
    """Everything spotrun loads happens inside this guard, so a Ctrl-C from the first module
    on is answered ("interrupted: nothing was launched" for a launch, exit 130). Before it,
    only the interpreter's own start-up runs (site, runpy), where no spotrun code has run."""
    try:
        code = quick_answer(sys.argv[1:])
        if code is None:
            from spotrun.cli.main import main as full_cli  # late: typer, every command (~50 ms)

            full_cli()
            return
    except KeyboardInterrupt:
        code = _interrupted()
    except RuntimeError as exc:  # a Ctrl-C while an import made a class surfaces as this
        # late: a small stdlib-only module, loaded already unless the Ctrl-C came first
        from spotrun.core.interrupts import caused_by_interrupt

        if not caused_by_interrupt(exc):
            raise
        code = _interrupted()
    # late: loaded already, unless a Ctrl-C came while it loaded (then loaded again)
    from spotrun.cli.common import leave

    leave(code)


def _interrupted() -> int:
    """Say what an early Ctrl-C left (nothing); the exit code."""
    # late: loaded already, unless the Ctrl-C came while it loaded (then loaded again)
    from spotrun.cli.common import interrupted_early

    return interrupted_early(sys.argv[1:])


def quick_answer(args: list[str]) -> int | None:
    """The exit code of a command answered here, or None for the full CLI."""
    # late: main's Ctrl-C guard covers these (its docstring)
    from spotrun.cli.common import print_error
    from spotrun.core.errors import SpotrunError
    from spotrun.core.rundir import COMPLETE_VAR

    is_help = args in (["--help"], ["-h"])
    is_ls = bool(args) and args[0] == "ls" and set(args[1:]) <= LS_FLAGS
    is_sample = args[:1] == ["sample"]
    if not (is_help or is_ls or is_sample) or os.environ.get(COMPLETE_VAR) or _home_is_special():
        return None
    if is_sample:
        from spotrun.cli.sample_quick import quick_sample  # late: sample only, its plain forms

        return quick_sample(args[1:])
    if is_help:
        from spotrun.cli.help_snapshot import stored_help  # late: --help only (~6 ms)

        page = stored_help()
        if page is None:
            return None
        sys.stdout.write(page)
        return 0
    from spotrun.cli.run_list import show_runs  # late: ls only (~5 ms)

    try:
        show_runs(all_=bool({"-a", "--all"} & set(args)), as_json="--json" in args)
    except SpotrunError as exc:
        print_error(exc.user_message())
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


def _home_is_special() -> bool:
    """Whether the full CLI must see the command: a controller on another host carries out
    the run commands, and a controller instance notes every command as a use."""
    # late: main's Ctrl-C guard covers it
    from spotrun.core.home import IDLE_STOP_FILE, REMOTE_RECORD_FILE, default_home

    home = default_home()
    return (home / REMOTE_RECORD_FILE).exists() or (home / IDLE_STOP_FILE).exists()
