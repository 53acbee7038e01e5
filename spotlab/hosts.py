"""A lab host: a real sshd on an instance's 127.0.0.N address, in its own mount and PID space.

`unshare --mount --propagation private --pid --mount-proc` gives each host its own view of
/root and /tmp (bind mounts of per-host folders: its own home, its own tmux server) and its own
process tree. The host's first process is started with `--kill-child=SIGKILL`, so killing the
unshare process ends every process on the host at once (tmux servers, jobs, uploaders), as
terminating an instance does. sshd runs as `/usr/sbin/sshd -D -e -f CONFIG`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from spotlab.clock import offset_env

SSHD = "/usr/sbin/sshd"
HOST_HOME = "/root"  # where the host's home folder is mounted; the lab logs in as root
LAB_DIR = ".lab"  # inside the host's home: sshd's own files
# The environment a host's first process starts with, as init would give it. (Not the test
# process's: that holds the user's AWS credentials, which no instance may ever see.)
BOOT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}


def write_host_key(path: Path) -> str:
    """A new Ed25519 host key at `path`; returns its public line (type and base64)."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    path.write_bytes(pem)
    path.chmod(0o600)
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    path.with_suffix(".pub").write_text(public + "\n")
    return public


# Set in every SSH session of every host, beside the lab's own variables: instances have CPUs of
# their own, the hosts share this machine's few, where torch's OpenMP threads spinning while they
# wait for work took half of a training job's CPU time (passive waiting, identical results).
SESSION_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}


@dataclass
class HostSpec:
    instance_id: str
    address: str
    port: int
    authorized_key: str | None
    env: dict[str, str]  # set in every SSH session (sshd SetEnv)
    home_config: str | None = None  # written to ~/.spotrun/config.toml on the host
    # Folders under /root or /tmp the "image" must keep (a pyenv python, a checkout's venv),
    # mounted read-only: the host's own /root and /tmp hide this machine's.
    image_paths: tuple[str, ...] = ()
    # CPU priority of everything on the host; >0 keeps many hosts' jobs from starving the
    # controller side on a small machine, where real instances would have CPUs of their own.
    nice: int = 0
    # How far the host's wall clock is off the lab's, in seconds (spotlab.clock): every Python
    # process of its SSH sessions (the agent, the job, the watcher) reads time.time() so far
    # off. Its metadata service's times agree with it (the notice's "time" included).
    clock_offset_s: float = 0.0


class Host:
    """One instance's machine. `mode`: "ssh" (sshd), "silent" (accepts, never says a word)."""

    def __init__(self, spec: HostSpec, root: Path, *, mode: str = "ssh") -> None:
        self.spec = spec
        self.root = root
        self.home = root / "home"
        self.tmp = root / "tmp"
        self.mode = mode
        self.log_path = root / "sshd.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._silent: socket.socket | None = None
        self._silent_thread: threading.Thread | None = None
        self.host_key_public = ""

    @property
    def instance_id(self) -> str:
        return self.spec.instance_id

    @property
    def address(self) -> str:
        return self.spec.address

    @property
    def alive(self) -> bool:
        if self.mode == "silent":
            return self._silent is not None
        return self._proc is not None and self._proc.poll() is None

    def path(self, inside: str) -> Path:
        """Where a path of the host (under /root or /tmp) is on this machine."""
        for mount, local in ((HOST_HOME, self.home), ("/tmp", self.tmp)):
            if inside == mount or inside.startswith(mount + "/"):
                return local / inside[len(mount) :].lstrip("/")
        raise ValueError(f"{inside} is not under the host's own {HOST_HOME} or /tmp")

    # ---------------------------------------------------------------- start
    def start(self, new_host_key: bool = False, *, boot_again: bool = False) -> None:
        """Boot the host. `boot_again`: the same machine after a stop: its home's files (the
        root volume) and host key as they were, /tmp empty, no process of before."""
        if self.mode == "silent":
            self._start_silent()
            return
        if boot_again:
            shutil.rmtree(self.tmp, ignore_errors=True)
        lab = self.home / LAB_DIR
        lab.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.tmp.chmod(0o1777)
        key_file = lab / "host_ed25519"
        if new_host_key or not key_file.exists():
            self.host_key_public = write_host_key(key_file)
        else:
            self.host_key_public = key_file.with_suffix(".pub").read_text().strip()
        (lab / "authorized_keys").write_text((self.spec.authorized_key or "") + "\n")
        if self.spec.home_config is not None and not boot_again:
            config = self.home / ".spotrun" / "config.toml"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(self.spec.home_config)
        inside = f"{HOST_HOME}/{LAB_DIR}"
        session_env = {**SESSION_ENV, **self.spec.env}
        if self.spec.clock_offset_s:
            session_env = offset_env(self.spec.clock_offset_s, session_env)
        set_env = " ".join(f'"{k}={v}"' for k, v in sorted(session_env.items()))
        lines = [
            f"ListenAddress {self.address}:{self.spec.port}",
            f"HostKey {inside}/host_ed25519",
            f"PidFile {inside}/sshd.pid",
            f"AuthorizedKeysFile {inside}/authorized_keys",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "PrintMotd no",
            "PrintLastLog no",
            "UseDNS no",
            "LogLevel ERROR",
            "MaxStartups 64:30:128",
            "MaxSessions 64",
            "Subsystem sftp internal-sftp",
        ]
        if set_env:
            lines.append(f"SetEnv {set_env}")
        (lab / "sshd_config").write_text("\n".join(lines) + "\n")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        keep = []
        for source in self.spec.image_paths:
            under_tmp = not source.startswith(HOST_HOME + "/")
            target = (
                self.tmp / Path(source).relative_to("/tmp")
                if under_tmp
                else self.home / Path(source).relative_to(HOST_HOME)
            )
            target.mkdir(parents=True, exist_ok=True)
            keep.append(f"mount --bind {source} {target} && mount -o remount,bind,ro {target} && ")
        script = (
            "".join(keep)
            + f"mount --rbind {self.home} {HOST_HOME} && mount --rbind {self.tmp} /tmp && "
            f"exec {SSHD} -D -e -f {inside}/sshd_config"
        )
        log = open(self.log_path, "ab")
        self._proc = subprocess.Popen(
            [
                *(["nice", "-n", str(self.spec.nice)] if self.spec.nice else []),
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--pid",
                "--mount-proc",
                "--kill-child=SIGKILL",
                "--",
                "/bin/sh",
                "-c",
                script,
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env=BOOT_ENV,  # a machine of its own: nothing of this process's environment
        )
        log.close()

    def _start_silent(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.address, self.spec.port))
        sock.listen(16)
        self._silent = sock
        held: list[socket.socket] = []

        def accept() -> None:
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    break
                held.append(conn)  # hold it open and say nothing, as a hung boot does
            for conn in held:
                conn.close()

        self._silent_thread = threading.Thread(
            target=accept, name=f"silent-{self.instance_id}", daemon=True
        )
        self._silent_thread.start()

    # ----------------------------------------------------------------- stop
    def stop(self) -> None:
        """Kill the host and everything running on it."""
        if self._silent is not None:
            with contextlib.suppress(OSError):  # not connected: closing is all there is
                self._silent.shutdown(socket.SHUT_RDWR)
            self._silent.close()
            self._silent = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()  # --kill-child: the host's PID namespace dies with it
            self._proc.wait(timeout=10)
            self._proc = None

    def _tree(self) -> list[tuple[int, str, str]]:
        """Every process of the host: (pid, its name, its command line as ps shows it)."""
        if self._proc is None:
            return []
        found, todo = [], [self._proc.pid]
        while todo:
            pid = todo.pop()
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                name = Path(f"/proc/{pid}/comm").read_text().strip()
                args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            todo += [int(c) for c in children]
            found.append((pid, name, args.strip()))
        return found

    def _sshd_pids(self) -> list[int]:
        """The host's sshd processes: the listener and one per connection."""
        return [pid for pid, name, _ in self._tree() if name == "sshd"]

    def sftp_servers(self) -> list[int]:
        """The host's SFTP sessions: sshd runs internal-sftp in a process of its own for each."""
        return [pid for pid, _, args in self._tree() if args.endswith("@internal-sftp")]

    def hang_ssh(self, hung: bool = True) -> None:
        """Stop (hung) or continue every sshd of the host: connections stay open and new ones
        are accepted by the kernel, but nothing answers (a host that hangs); its jobs go on."""
        for pid in self._sshd_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP if hung else signal.SIGCONT)

    def restart(self, *, new_host_key: bool = False) -> None:
        self.stop()
        self.start(new_host_key=new_host_key)
        self.wait_listening()

    def wait_listening(self, timeout_s: float = 10.0) -> None:
        """Block until sshd sends its banner (it takes some 10 ms after the start)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((self.address, self.spec.port), timeout=1) as sock:
                    if sock.recv(4) == b"SSH-":
                        return
            except OSError:
                pass  # not listening yet
            time.sleep(0.01)
        raise TimeoutError(f"sshd of {self.instance_id} did not answer on {self.address}")

    def remove_files(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
