"""The run's tmux session on the machine the job runs on, through the tmux command itself.

Plain `tmux` calls, not libtmux: every `spotrun agent` call (start, stop, exec, each a process
of its own) asks tmux one or two questions, and importing libtmux took 0.14 s of such a call's
0.2 s of CPU (measured), where starting a tmux client takes a few milliseconds.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from spotrun.core.errors import RemoteCommandError

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


def _tmux(*args: str) -> subprocess.CompletedProcess[str]:
    """One tmux command on spotrun's server; $TMUX left out, as a nested client refuses some
    commands inside another server's pane."""
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    try:
        return subprocess.run(
            [*tmux_argv(), *args],
            capture_output=True,
            text=True,
            errors="backslashreplace",
            env=env,
            check=False,
        )
    except OSError as exc:  # no tmux on this machine
        raise RemoteCommandError(f"tmux could not be run: {exc}") from exc


def session_exists(name: str) -> bool:
    """True if the session `name` (exactly that name, not a prefix of another) is live."""
    try:
        return _tmux("has-session", "-t", f"={name}").returncode == 0
    except RemoteCommandError:
        return False


def start_session(name: str, command: str, cwd: str) -> None:
    """A detached session running `command`. No environment is given here: `new-session -e`
    puts values on tmux's command line, readable by every user (the wrapper reads an env
    file instead)."""
    # tmux makes its socket folder itself only when it picks the path; with -S we make it.
    socket_path().parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    window = ["-n", "job", "-c", str(Path(cwd).expanduser()), "-x", "200", "-y", "50"]
    done = _tmux("new-session", "-d", "-s", name, *window, command)
    if done.returncode != 0 or done.stderr.strip():
        raise RemoteCommandError(f"tmux new-session {name}: {done.stderr.strip()}")


def kill_session(name: str) -> bool:
    """Kill the session if it exists; True if it did."""
    if not session_exists(name):
        return False
    if _tmux("kill-session", "-t", f"={name}").returncode != 0:
        return session_exists(name) is False
    return True


def capture(name: str, lines: int = 2000) -> str:
    """The session's visible history (the last `lines` lines)."""
    out = _tmux("capture-pane", "-p", "-t", f"={name}:", "-S", f"-{lines}").stdout
    return out.rstrip("\n")


def new_window(session: str, window: str, command: str, cwd: str) -> None:
    """A new window in `session` running `command` (it inherits the session's environment)."""
    _tmux("new-window", "-d", "-t", f"={session}:", "-n", window, "-c", cwd, command)
