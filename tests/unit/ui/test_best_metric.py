"""The runs page's best metric, read as a run's metrics.jsonl grows (spotrun.ui.best_metric)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from spotrun.ui.best_metric import BestMetrics


def _append(path: Path, *records: dict[str, object]) -> None:
    with open(path, "a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)


def test_the_best_follows_the_lines_appended_and_a_file_a_resume_rewrote(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    best = BestMetrics()
    assert best.best(path) is None  # no file yet
    _append(path, {"step": 1, "test_loss": 2.0})
    assert best.best(path) == {"metric": "test_loss", "value": 2.0}
    _append(path, {"step": 2, "test_loss": 1.5, "test_acc": 0.4}, {"step": 3, "test_acc": 0.3})
    assert best.best(path) == {"metric": "test_acc", "value": 0.4}  # accuracy first
    with open(path, "a") as fh:
        fh.write('{"step": 4, "test_acc": 0.9')  # a torn last line waits for its end
    assert best.best(path) == {"metric": "test_acc", "value": 0.4}
    with open(path, "a") as fh:
        fh.write("}\n")
    assert best.best(path) == {"metric": "test_acc", "value": 0.9}

    # a resume keeps the lines up to its checkpoint: the best of the dropped ones goes too,
    # whether the file was shortened in place or replaced by a new one
    kept = path.read_text().splitlines()[:2]
    path.write_text("\n".join(kept) + "\n")
    assert best.best(path) == {"metric": "test_acc", "value": 0.4}
    replaced = tmp_path / "new.jsonl"
    replaced.write_text(json.dumps({"step": 1, "test_acc": 0.2}) + "\n" + "x" * 400 + "\n")
    os.replace(replaced, path)
    assert best.best(path) == {"metric": "test_acc", "value": 0.2}
    path.unlink()
    assert best.best(path) is None
