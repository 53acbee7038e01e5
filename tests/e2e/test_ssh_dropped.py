"""A dropped SFTP session (its server process gone, the connection kept) or a dropped
connection (the host went away) is at worst a RemoteError for a file call, never a bare
EOFError from closing the dead session; the next call after opens a fresh one. Likewise a
command's channel closed on a cut connection: paramiko sends the close through the transport,
so on a cut socket it raises EOFError, which once escaped SshRunner's `finally` and ended a
healthy run as "internal error: EOFError" (CI, the scenario "SSH dropped while syncing")."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab.hosts import Host
from spotrun.core.errors import RemoteError
from spotrun.remote.runner import Runner
from spotrun.remote.ssh import SshRunner, close_channel
from tests.conftest import Env
from tests.e2e.lab_instance import one_instance
from tests.helpers import wait_for

RUN_ID = "dropped00001"


@pytest.fixture
def host(aws_env: Env, lab: Lab) -> Iterator[tuple[Runner, Host]]:
    with one_instance(aws_env.home, lab, RUN_ID) as both:
        yield both


def test_a_dropped_sftp_session_is_replaced_by_the_next_call(
    host: tuple[Runner, Host], tmp_path: Path
) -> None:
    runner, machine = host
    runner.run("echo kept > /tmp/kept.txt").check("writing a file")
    runner.get("/tmp/kept.txt", tmp_path / "first.txt")  # the SFTP session is open now
    (server,) = wait_for(lambda: machine.sftp_servers(), timeout=10, what="the SFTP server")
    os.kill(server, signal.SIGKILL)  # the session's channel closes; the connection stays
    wait_for(lambda: not machine.sftp_servers(), timeout=10, what="the SFTP server gone")
    # The client sees the channel closed either before the call (it opens a fresh session
    # then) or during it: a RemoteError, the one error type a caller handles.
    with contextlib.suppress(RemoteError):
        runner.get("/tmp/kept.txt", tmp_path / "second.txt")
    runner.get("/tmp/kept.txt", tmp_path / "third.txt")  # a fresh session
    assert (tmp_path / "third.txt").read_text() == "kept\n"


def test_file_calls_on_a_dropped_connection_are_remote_errors(
    host: tuple[Runner, Host], tmp_path: Path
) -> None:
    runner, machine = host
    runner.run("echo kept > /tmp/kept.txt").check("writing a file")
    runner.get("/tmp/kept.txt", tmp_path / "first.txt")  # the SFTP session is open now
    assert (tmp_path / "first.txt").read_text() == "kept\n"

    machine.stop()  # sshd and every session of it end: the connection is dropped
    with pytest.raises(RemoteError):
        runner.get("/tmp/kept.txt", tmp_path / "second.txt")
    with pytest.raises(RemoteError):
        runner.put(tmp_path / "first.txt", "/tmp/again.txt")

    machine.start(boot_again=True)  # the same machine: its host key, a fresh /tmp

    def answers() -> bool:
        try:
            return runner.run("echo back > /tmp/back.txt").exit_code == 0
        except RemoteError:  # sshd not listening yet
            return False

    wait_for(answers, timeout=30, what="the host answering again")
    runner.get("/tmp/back.txt", tmp_path / "third.txt")
    assert (tmp_path / "third.txt").read_text() == "back\n"


def test_closing_a_channel_on_a_cut_connection_is_quiet_and_the_runner_reconnects(
    host: tuple[Runner, Host],
) -> None:
    runner, machine = host
    assert isinstance(runner, SshRunner)
    assert runner.run("echo up").stdout == "up\n"
    transport = runner._transport()
    plain, quiet = (transport.open_session(timeout=10) for _ in range(2))
    for channel in (plain, quiet):
        channel.exec_command("sleep 30")
    # The cut, made so that it stays a cut: the host's sshd is stopped (it cannot answer our
    # end of stream and close the connection, which would let paramiko's reader thread close
    # the channels first), and this side can no longer send.
    machine.hang_ssh()
    try:
        transport.sock.shutdown(socket.SHUT_WR)
        with pytest.raises(EOFError):
            plain.close()  # what paramiko does: the reason close_channel exists
        close_channel(quiet)
        assert not transport.is_active()  # given up, so the next command connects anew
    finally:
        machine.hang_ssh(False)
    assert runner.run("echo again").stdout == "again\n"
