"""`spotrun logs`: a run's job output, read here (the run folder's job.log, and each node's of
a multi-node run), followed until the run ends when asked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spotrun.control import cluster
from spotrun.core.errors import UsageError
from spotrun.core.rundir import JOB_LOG_FILE
from spotrun.core.waiting import SYSTEM_CLOCK, Clock
from spotrun.store.ledger import Ledger, RunRecord


def log_path(run: RunRecord) -> Path:
    return run.run_dir / JOB_LOG_FILE


def node_log_paths(run: RunRecord, node: str | None) -> list[tuple[str, Path]]:
    """The job logs `logs --node` reads: node 0's (the default), node K's, or every node's,
    each with the label its lines get ("" for one log)."""
    if node is None:
        return [("", log_path(run))]
    ids = cluster.read_layout(run.run_dir) or [""]
    paths = [cluster.local_dir(run.run_dir, i) / JOB_LOG_FILE if i else log_path(run) for i in ids]
    if node == "all":
        return [(f"[node {k}] ", path) for k, path in enumerate(paths)]
    if not node.isdigit() or int(node) >= len(paths):
        raise UsageError(
            f"--node {node}: run {run.name} has nodes 0 to {len(paths) - 1}",
            hint="give a node number, or --node all",
        )
    return [("", paths[int(node)])]


def read_log(
    ledger: Ledger,
    ref: str,
    *,
    follow_log: bool = False,
    poll_s: float = 0.25,
    node: str | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> Iterator[str]:
    """The job's output; with follow_log, keeps yielding new output until the run ends.

    `node`: a multi-node run's node number, or "all" (every node's lines, labelled)."""
    run = ledger.resolve(ref)
    offsets: dict[Path, int] = {}
    partial: dict[Path, str] = {}
    while True:
        fresh = False
        for label, path in node_log_paths(run, node):  # again each time: nodes get replaced
            try:
                with open(path, "rb") as fh:
                    fh.seek(offsets.get(path, 0))
                    data = fh.read()
            except FileNotFoundError:
                data = b""
            if not data:
                continue
            fresh = True
            offsets[path] = offsets.get(path, 0) + len(data)
            text = data.decode(errors="replace")
            if not label:
                yield text
                continue
            text = partial.pop(path, "") + text  # whole lines only, each with its node
            lines = text.split("\n")
            if lines[-1]:
                partial[path] = lines[-1]
            yield "".join(f"{label}{line}\n" for line in lines[:-1])
        if not follow_log:
            return
        run = ledger.get_run(run.id)
        if run.is_terminal and not fresh:
            return
        clock.sleep(poll_s)
