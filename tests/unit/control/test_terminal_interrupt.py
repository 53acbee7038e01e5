"""A job ended by SIGINT (Ctrl-C in an attached terminal) reads as a stop from the terminal,
with the step `resume` goes on from; a sweep's trial is not offered a resume."""

from __future__ import annotations

import zipfile
from dataclasses import replace
from pathlib import Path

from spotrun.control.job_end import interrupted_from_terminal
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.store.ledger import Ledger


def test_sigint_reads_as_a_stop_from_the_terminal(tmp_path: Path) -> None:
    ledger = Ledger(load_settings(tmp_path / "home"))
    run = ledger.create_run(LaunchSpec(recipe="digits-fast", name="long"))
    said = "interrupted from the terminal (Ctrl-C)"
    assert interrupted_from_terminal(run, 1) is None and interrupted_from_terminal(run, 0) is None
    assert interrupted_from_terminal(run, 130) == (
        f"{said}; `spotrun resume long` starts it again (no checkpoint yet)"
    )
    (run.run_dir / "checkpoints").mkdir()
    with zipfile.ZipFile(run.run_dir / "checkpoints" / "ckpt-000000044.pt", "w") as whole:
        whole.writestr("data.pkl", b"weights")
    (run.run_dir / "checkpoints" / "ckpt-000000066.pt").write_bytes(b"torn")  # not whole
    expected = f"{said}; `spotrun resume long` goes on from step 44"
    assert interrupted_from_terminal(run, 130) == expected
    assert interrupted_from_terminal(run, -2) == expected  # the signal itself
    trial = replace(run, sweep_id="s0123456789")  # the same run as a sweep's trial
    assert interrupted_from_terminal(trial, 130) == f"{said} at step 44"  # its sweep decides
