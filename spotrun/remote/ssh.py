"""A Runner over SSH (paramiko): shell commands, SFTP put/get, host keys verified.

Host keys are pinned per instance id on first use: the first connection to an instance records
its key under SPOTRUN_HOME, and every later connection must present the same key or it is
refused. Keying by instance id (not by address) matters on a cloud, where addresses are reused
by later instances. A pin that exists but cannot be read or parsed refuses the connection
(LocalFileError naming the file): it is never taken for "not pinned" and pinned again.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import BinaryIO

import paramiko

from spotrun.core.errors import LocalFileError, RemoteError
from spotrun.remote.fetch import local_fault
from spotrun.remote.runner import BytesResult, CommandResult

_EOF_WAIT_S = 2.0  # after the exit status, how long stragglers of output may take
_WAIT_S = 0.25  # the longest a command's reader sleeps between looks at its deadline
_IDLE_WAKE_S = 2.0  # how often an idle connection's reader thread wakes (paramiko: 0.1 s)
_CHUNK = 1 << 16


class HostKeyPins:
    """Pinned host keys, one file per instance id, in OpenSSH public-key form."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, instance_id: str) -> Path:
        return self.directory / f"{instance_id}.pub"

    def pinned(self, instance_id: str) -> paramiko.PKey | None:
        """The key pinned for the instance; None when none is (no file). LocalFileError when
        its file cannot be read or is not a key: the connection is refused, never re-pinned."""
        path = self.path(instance_id)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise self._refused(instance_id, f"cannot be read ({exc})") from exc
        try:
            kind, data = text.split()[:2]
            return paramiko.PKey.from_type_string(kind, base64.b64decode(data, validate=True))
        except (ValueError, binascii.Error, paramiko.SSHException, paramiko.UnknownKeyType) as exc:
            raise self._refused(instance_id, "is not a host key") from exc

    def _refused(self, instance_id: str, what: str) -> LocalFileError:
        path = self.path(instance_id)
        return LocalFileError(
            f"the host key pinned for instance {instance_id} in {path} {what}: connection refused",
            hint=f"restore that file; or, if {instance_id} is surely the instance spotrun "
            "launched, delete it and the next connection pins the key the instance shows",
        )

    def pin(self, instance_id: str, key: paramiko.PKey) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(instance_id)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"{key.get_name()} {key.get_base64()}\n")
        os.replace(tmp, path)

    def known_hosts_line(self, instance_id: str, host: str, port: int) -> str | None:
        key = self.pinned(instance_id)
        if key is None:
            return None
        return f"{_host_key_name(host, port)} {key.get_name()} {key.get_base64()}"


def _host_key_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


class _PinOnFirstUse(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]
    def __init__(self, pins: HostKeyPins, instance_id: str) -> None:
        self.pins = pins
        self.instance_id = instance_id

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        self.pins.pin(self.instance_id, key)


SFTP_STALL_S = 60.0  # the longest an SFTP request may wait for an answer


def close_channel(channel: paramiko.Channel) -> None:
    """Close a command's channel, quietly when the connection is already cut: paramiko sends
    the close through the transport, and a cut socket makes that an EOFError (or OSError) that
    would escape from a `finally` as the supervisor's "internal error". The transport is
    closed as well then, so that the next call reconnects."""
    try:
        channel.close()
    except (OSError, EOFError, paramiko.SSHException):
        channel.get_transport().close()


class SshRunner:
    """Runs commands on one instance over one SSH connection, reconnecting when it drops.

    paramiko reports a connection cut mid-transfer as EOFError: every call turns it, like
    OSError and SSHException, into a RemoteError (an instance reclaimed mid-provision)."""

    def __init__(
        self,
        host: str,
        port: int,
        user: str,
        key_file: Path,
        *,
        instance_id: str,
        pins: HostKeyPins,
        connect_timeout_s: float = 15.0,
    ) -> None:
        self.host = host
        self.port = port
        self.user = user
        self.key_file = key_file
        self.instance_id = instance_id
        self.pins = pins
        self.connect_timeout_s = connect_timeout_s
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.RLock()
        # One SFTP request at a time: threads sharing this runner (a sweep's packed trials)
        # would otherwise read each other's answers and wait forever.
        self._sftp_lock = threading.Lock()

    @property
    def where(self) -> str:
        return f"instance {self.instance_id} ({self.user}@{self.host}:{self.port})"

    # ------------------------------------------------------------ connection
    def _transport(self) -> paramiko.Transport:
        with self._lock:
            client = self._client
            transport = client.get_transport() if client is not None else None
            if transport is not None and transport.is_active():
                return transport
            self.close()
            self._client = self._connect()
            transport = self._client.get_transport()
            assert transport is not None
            transport.set_keepalive(30)
            # paramiko's reader thread wakes every 0.1 s to look for a close or a keepalive
            # due: a controller holding 100 idle connections spent ~2% of a core on that.
            transport.sock.settimeout(_IDLE_WAKE_S)
            return transport

    def _connect(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        pinned = self.pins.pinned(self.instance_id)
        if pinned is not None:
            client.get_host_keys().add(
                _host_key_name(self.host, self.port), pinned.get_name(), pinned
            )
        client.set_missing_host_key_policy(_PinOnFirstUse(self.pins, self.instance_id))
        try:
            key = paramiko.Ed25519Key.from_private_key_file(str(self.key_file))
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise RemoteError(f"cannot read the run's SSH key {self.key_file}: {exc}") from exc
        try:
            client.connect(
                self.host,
                port=self.port,
                username=self.user,
                pkey=key,
                timeout=self.connect_timeout_s,
                banner_timeout=self.connect_timeout_s,
                auth_timeout=self.connect_timeout_s,
                allow_agent=False,
                look_for_keys=False,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise RemoteError(
                f"{self.where} presented host key {exc.key.fingerprint}, "
                "not the key pinned when spotrun first connected to it: connection refused",
                hint="if the instance was legitimately rebuilt, delete "
                f"{self.pins.path(self.instance_id)}",
            ) from exc
        except paramiko.AuthenticationException as exc:
            client.close()
            raise RemoteError(f"{self.where} refused the run's SSH key: {exc}") from exc
        except (OSError, EOFError, paramiko.SSHException) as exc:
            client.close()
            # some (EOFError: the host closed it mid-handshake) say nothing: name the kind
            raise RemoteError(
                f"cannot connect to {self.where}: {exc or type(exc).__name__}"
            ) from exc
        return client

    def connect(self) -> None:
        """Connect now (verifying or pinning the host key)."""
        self._transport()

    def close(self) -> None:
        with self._lock:
            if self._sftp is not None:
                # closing a session the server already dropped can fail the same way again
                with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                    self._sftp.close()
                self._sftp = None
            if self._client is not None:
                self._client.close()
                self._client = None

    # --------------------------------------------------------------- commands
    def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult:
        code, out, err = self._exec(command, timeout_s)
        return CommandResult(command, code, out.decode(errors="replace"), err)

    def run_bytes(self, command: str, *, timeout_s: float | None = None) -> BytesResult:
        return BytesResult(command, *self._exec(command, timeout_s))

    def _exec(self, command: str, timeout_s: float | None) -> tuple[int, bytes, str]:
        """The command's exit code, its stdout as bytes and its stderr as text; 124 when it
        ran past `timeout_s`."""
        try:
            # bounded: a host that hangs (a stopped sshd, a dead link) answers with an error
            channel = self._transport().open_session(timeout=self.connect_timeout_s)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self.close()
            raise RemoteError(f"lost the connection to {self.where}: {exc}") from exc
        deadline = None if timeout_s is None else time.monotonic() + timeout_s

        def late() -> bool:
            return deadline is not None and time.monotonic() > deadline

        out, err = bytearray(), bytearray()
        exited_at: float | None = None
        try:
            # recv() wakes when output comes, at EOF, or after _WAIT_S: no polling meanwhile
            channel.settimeout(_WAIT_S)
            channel.exec_command(command)
            while not late():
                while channel.recv_stderr_ready():
                    err += channel.recv_stderr(_CHUNK)
                try:
                    chunk: bytes | None = channel.recv(_CHUNK)
                except TimeoutError:
                    chunk = None
                if chunk:
                    out += chunk
                elif chunk == b"":  # EOF: all it wrote has come; its exit status with or after
                    while not channel.status_event.wait(_WAIT_S) and not late():
                        continue
                    break
                elif channel.exit_status_ready():
                    # It exited with its output still open (a child left in the background):
                    # done once the status has waited a while with nothing more arriving.
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at > _EOF_WAIT_S:
                        break
            while channel.recv_stderr_ready():
                err += channel.recv_stderr(_CHUNK)
            if not channel.exit_status_ready():  # ran past its deadline
                channel.close()
                return 124, bytes(out), err.decode(errors="replace") + "\n(timed out)"
            code = channel.recv_exit_status()
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self.close()
            raise RemoteError(
                f"lost the connection to {self.where} running a command: {exc}"
            ) from exc
        finally:
            close_channel(channel)
        return code, bytes(out), err.decode(errors="replace")

    # ------------------------------------------------------------------ files
    def _sftp_client(self) -> paramiko.SFTPClient:
        with self._lock:
            transport = self._transport()
            if self._sftp is None or self._sftp.get_channel() is None or self._sftp.sock.closed:
                self._sftp = paramiko.SFTPClient.from_transport(transport)
                if self._sftp is None:
                    raise RemoteError(f"{self.where} offers no SFTP")
                # every read bounded: a host that stops answering mid-transfer raises instead
                # of holding this run (and its thread of the controller) for ever
                channel = self._sftp.get_channel()
                if channel is not None:
                    channel.settimeout(SFTP_STALL_S)
            return self._sftp

    def _drop_sftp(self, exc: BaseException) -> None:
        """After a timeout (or a broken session) the SFTP session may answer late: never
        reuse it. A missing file leaves it as it is."""
        if not isinstance(exc, (TimeoutError, EOFError, paramiko.SSHException)):
            return
        with self._lock:
            if self._sftp is not None:
                # closing a session the server already dropped can fail the same way again
                with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                    self._sftp.close()
                self._sftp = None

    def put(self, local: Path, remote: str) -> None:
        try:
            with self._sftp_lock:
                sftp = self._sftp_client()
                if local.is_dir():
                    self._put_tree(sftp, local, remote)
                else:
                    self._mkdirs(sftp, os.path.dirname(remote))
                    sftp.put(str(local), remote)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self._drop_sftp(exc)
            raise RemoteError(f"cannot copy {local} to {self.where}:{remote}: {exc}") from exc

    def _put_tree(self, sftp: paramiko.SFTPClient, local: Path, remote: str) -> None:
        self._mkdirs(sftp, remote)
        for item in sorted(local.iterdir()):
            target = f"{remote}/{item.name}"
            if item.is_dir():
                self._put_tree(sftp, item, target)
            else:
                sftp.put(str(item), target)

    def _mkdirs(self, sftp: paramiko.SFTPClient, remote_dir: str) -> None:
        if not remote_dir:
            return
        parts = remote_dir.rstrip("/").split("/")
        for i in range(1, len(parts) + 1):
            path = "/".join(parts[:i]) or "/"
            try:
                sftp.stat(path)
            except FileNotFoundError:
                sftp.mkdir(path)

    def get(self, remote: str, local: Path) -> None:
        """Copy a file or folder home; links there are never followed (a folder's are left
        out). What this machine cannot write is a LocalFileError, never the instance's."""
        try:
            with self._sftp_lock:
                sftp = self._sftp_client()
                mode = sftp.lstat(remote).st_mode or 0
                if stat.S_ISLNK(mode):
                    raise RemoteError(f"{self.where}:{remote} is a link: not copied")
                if stat.S_ISDIR(mode):
                    self._get_tree(sftp, remote, local)
                else:
                    self._get_file(sftp, remote, local)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self._drop_sftp(exc)
            raise RemoteError(f"cannot copy {self.where}:{remote} to {local}: {exc}") from exc

    def _get_tree(self, sftp: paramiko.SFTPClient, remote: str, local: Path) -> None:
        try:
            local.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise local_fault(str(local), exc) from exc
        for attr in sftp.listdir_attr(remote):  # each entry as lstat sees it
            source = f"{remote}/{attr.filename}"
            if stat.S_ISDIR(attr.st_mode or 0):
                self._get_tree(sftp, source, local / attr.filename)
            elif stat.S_ISREG(attr.st_mode or 0):
                self._get_file(sftp, source, local / attr.filename)

    def _get_file(self, sftp: paramiko.SFTPClient, remote: str, local: Path) -> None:
        # a short temporary name: a 255-byte name with a suffix would be too long here
        try:
            local.parent.mkdir(parents=True, exist_ok=True)
            handle, tmp = tempfile.mkstemp(dir=local.parent, prefix=".", suffix=".part")
        except OSError as exc:
            raise local_fault(str(local), exc) from exc
        try:
            with os.fdopen(handle, "wb", buffering=0) as out, sftp.open(remote, "rb") as source:
                source.prefetch()
                while chunk := source.read(_CHUNK):
                    _write_here(out, chunk, local)
            _replace_here(tmp, local)
        finally:
            with contextlib.suppress(FileNotFoundError):  # renamed into place: nothing left
                os.unlink(tmp)


def _write_here(out: BinaryIO, chunk: bytes, local: Path) -> None:
    try:
        out.write(chunk)
    except OSError as exc:
        raise local_fault(str(local), exc) from exc


def _replace_here(tmp: str, local: Path) -> None:
    try:
        os.replace(tmp, local)
    except OSError as exc:
        raise local_fault(str(local), exc) from exc


def banner_answers(host: str, port: int, timeout_s: float = 2.0) -> bool:
    """True when an SSH server answers on host:port with its version banner."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            data = b""
            while b"\n" not in data and len(data) < 512:
                chunk = sock.recv(256)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return False
    return any(line.startswith(b"SSH-") for line in data.splitlines())
