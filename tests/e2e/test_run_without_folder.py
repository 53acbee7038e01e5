"""A run the ledger knows whose folder is missing (recorded by an older spotrun before its
folder, the process killed in between) is driven to an end, not retried for ever with a
FileNotFoundError in controller.log every 10 s (issue 38, point 7)."""

from __future__ import annotations

import shutil

from spotrun.core.config import LaunchSpec, load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for


def test_a_planned_run_without_its_folder_is_driven(env: Env) -> None:
    with Ledger(load_settings(env.home)) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", name="no-folder"))
    assert run.run_dir.is_dir()  # made with its row
    shutil.rmtree(run.run_dir)
    env.cli("ls", check=True)  # any command starts the home's controller for the live run

    def ended() -> bool:
        with Ledger(load_settings(env.home)) as ledger:
            return ledger.get_run(run.id).is_terminal

    wait_for(ended, timeout=60, what="the run without a folder to be driven to an end")
    log = (env.home / "controller.log").read_text()
    assert "FileNotFoundError" not in log, log[-2000:]
