"""The library behind the commands, imported the first time a command body uses it.

`spotrun --help` and `spotrun ls` must answer fast, so the command modules name the library
(`api.launch(...)`) and the run supervisor through the lazy stand-ins here (spotrun/cli/lazy.py);
type checkers see the real modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotrun.cli.lazy import lazy_module

if TYPE_CHECKING:
    from spotrun.core import config
    from spotrun.core.config import Settings
    from spotrun.drive import supervisor
    from spotrun.service import datasets
    from spotrun.service import runs as api
else:
    # reading runs (ls, status, logs, completion) needs only service.lookup
    _reads = {
        name: "spotrun.service.lookup" for name in ("open_ledger", "run_status", "run_summary")
    }
    _reads["stop"] = "spotrun.service.stopping"  # a stop needs none of the launch machinery
    api = lazy_module("spotrun.service.runs", light=_reads)
    supervisor = lazy_module("spotrun.drive.supervisor")
    # data push and data ls: the packer (PIL) without the run machinery, and never for the rest
    datasets = lazy_module("spotrun.service.datasets")
    config = lazy_module("spotrun.core.config")  # pydantic (~60 ms): only what reads settings

__all__ = ["api", "datasets", "load_settings", "supervisor"]


def load_settings() -> Settings:
    return config.load_settings()
