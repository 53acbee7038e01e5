"""The run's tmux session on the machine the job runs on, through libtmux."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from spotrun.core.lazy import lazy_module

if TYPE_CHECKING:
    import libtmux
    from libtmux import exc as libtmux_exc
else:  # libtmux (~70 ms): paid by the calls that talk to tmux, not by every importer (a launch)
    libtmux = lazy_module("libtmux")
    libtmux_exc = lazy_module("libtmux.exc")

SESSION_PREFIX = "spotrun-"


def session_name(run_id: str) -> str:
    return f"{SESSION_PREFIX}{run_id}"


def socket_path() -> Path:
    """tmux's default server socket, named explicitly.

    Plain `tmux` inside a tmux pane talks to the server in $TMUX, which may be another one; the
    explicit path makes spotrun find its sessions from anywhere, and `tmux ls` still shows them.
    """
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return Path(base) / f"tmux-{os.getuid()}" / "default"


def tmux_argv() -> list[str]:
    return ["tmux", "-S", str(socket_path())]


def _server() -> libtmux.Server:
    return libtmux.Server(socket_path=socket_path())


def session_exists(name: str) -> bool:
    try:
        return bool(_server().has_session(name, exact=True))
    except libtmux_exc.LibTmuxException:
        return False


def start_session(name: str, command: str, cwd: str) -> None:
    """A detached session running `command`. No environment is given here: `new-session -e`
    puts values on tmux's command line, readable by every user (the wrapper reads an env
    file instead)."""
    # tmux makes its socket folder itself only when it picks the path; with -S we make it.
    socket_path().parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _server().new_session(
        session_name=name,
        window_name="job",
        window_command=command,
        start_directory=cwd,
        attach=False,
        x=200,
        y=50,
    )


def kill_session(name: str) -> bool:
    """Kill the session if it exists; True if it did."""
    if not session_exists(name):
        return False
    try:
        _server().kill_session(name)
    except libtmux_exc.LibTmuxException:
        return session_exists(name) is False
    return True


def capture(name: str, lines: int = 2000) -> str:
    """The session's visible history (the last `lines` lines)."""
    server = _server()
    result = server.cmd("capture-pane", "-p", "-t", f"={name}:", "-S", f"-{lines}")
    return "\n".join(result.stdout)


def new_window(session: str, window: str, command: str, cwd: str) -> None:
    """A new window in `session` running `command` (it inherits the session's environment)."""
    _server().cmd("new-window", "-d", "-t", f"={session}:", "-n", window, "-c", cwd, command)
