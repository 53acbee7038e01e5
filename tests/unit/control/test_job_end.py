"""A job's end read from its run folder: the wrapper's exit record and the message of a
failed run."""

from __future__ import annotations

import json
from pathlib import Path

from spotrun.control.job_end import exit_code, exit_phase, failure_message, write_exit


def test_the_exit_record_and_the_failure_message(tmp_path: Path) -> None:
    assert exit_code(tmp_path) is None and exit_phase(tmp_path) is None
    assert failure_message(tmp_path, None) == "job ended without an exit code"
    (tmp_path / "exit.json").write_text("[torn")
    assert exit_code(tmp_path) is None
    write_exit(tmp_path, 137)  # a session killed before the wrapper wrote its record
    assert exit_code(tmp_path) == 137 and exit_phase(tmp_path) is None
    (tmp_path / "job.log").write_text("epoch 1\n\x1b[31mTraceback\x1b[0m\n\nValueError: nan\n")
    assert failure_message(tmp_path, 1) == "job exited with code 1: epoch 1 | Traceback | " + (
        "ValueError: nan"
    )
    (tmp_path / "exit.json").write_text(json.dumps({"exit_code": 2, "phase": "setup"}))
    (tmp_path / "setup.log").write_text("pip install nothing-here\nERROR: no such package\n")
    assert exit_phase(tmp_path) == "setup"
    assert failure_message(tmp_path, 2) == (
        "setup failed with exit code 2: pip install nothing-here | ERROR: no such package"
    )
