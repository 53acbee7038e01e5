"""`spotrun logs`: a run's job output, read here (the run folder's job.log, and each node's of
a multi-node run), followed until the run ends when asked."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from spotrun.control import cluster
from spotrun.core.errors import UsageError
from spotrun.core.rundir import JOB_LOG_FILE
from spotrun.core.waiting import SYSTEM_CLOCK, Clock
from spotrun.store.ledger import Ledger, RunRecord

TAIL_BLOCK = 64 * 1024  # bytes read at a time, from the end, for --tail


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


def last_lines_start(fh: BinaryIO, lines: int) -> int:
    """Where the last `lines` lines of an open file start, read backwards a block at a time
    (a job's log may be large); a last line without its newline counts as a line."""
    end = fh.seek(0, os.SEEK_END)
    if lines == 0:
        return end
    at, wanted = end, lines
    fh.seek(max(0, end - 1))
    if end and fh.read(1) == b"\n":
        wanted += 1  # the final newline ends the last line, it starts none
    while at > 0:
        size = min(TAIL_BLOCK, at)
        at -= size
        fh.seek(at)
        block = fh.read(size)
        count = block.count(b"\n")
        if count >= wanted:
            cut = len(block)
            for _ in range(wanted):
                cut = block.rindex(b"\n", 0, cut)
            return at + cut + 1
        wanted -= count
    return 0


def read_log(
    ledger: Ledger,
    ref: str,
    *,
    follow_log: bool = False,
    poll_s: float = 0.25,
    node: str | None = None,
    tail: int | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> Iterator[str]:
    """The job's output; with follow_log, keeps yielding new output until the run ends.

    `node`: a multi-node run's node number, or "all" (every node's lines, labelled).
    `tail`: of the output already there, only the last `tail` lines (each node's)."""
    run = ledger.resolve(ref)
    offsets: dict[Path, int] = {}
    partial: dict[Path, str] = {}
    while True:
        fresh = False
        for label, path in node_log_paths(run, node):  # again each time: nodes get replaced
            try:
                with open(path, "rb") as fh:
                    if path not in offsets and tail is not None:
                        offsets[path] = last_lines_start(fh, tail)
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
