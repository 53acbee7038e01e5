"""A helper process started on an instance once: detached from the SSH session that starts it,
and not again while the process its pid file names still runs (a restarted controller, or a
replacement's second start, must not make a second watcher or uploader)."""

from __future__ import annotations

import shlex

from spotrun.remote.runner import Runner


def start_once(
    runner: Runner, folder: str, command: str, *, pid_file: str, log_file: str, what: str
) -> None:
    """Run the shell text `command` in `folder` (made if missing) under setsid, its output
    appended to `log_file` there, unless `pid_file` there names a live process. RemoteError
    naming `what` when the start itself fails."""
    place = shlex.quote(folder)
    script = (
        f"mkdir -p {place} && cd {place} && "
        f"{{ test -f {pid_file} && kill -0 $(cat {pid_file}) 2>/dev/null || "
        f"{{ setsid nohup {command} >> {log_file} 2>&1 < /dev/null & echo $! > {pid_file}; }}; }}"
    )
    runner.run(script, timeout_s=60).check(what)
