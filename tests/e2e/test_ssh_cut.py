"""A connection cut under a command that has already ended: paramiko sends a channel's close
through the transport, so on a cut socket closing it raises EOFError. That once escaped from
SshRunner's `finally` and ended a healthy run as "internal error: EOFError" (CI, the scenario
"SSH dropped while syncing"). Closing must be quiet and leave the runner able to reconnect."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from spotlab import Lab
from spotlab.hosts import Host
from spotrun.remote.runner import Runner
from spotrun.remote.ssh import SshRunner, close_channel
from tests.conftest import Env
from tests.e2e.lab_instance import one_instance

RUN_ID = "sshcut000001"


@pytest.fixture
def host(aws_env: Env, lab: Lab) -> Iterator[tuple[Runner, Host]]:
    with one_instance(aws_env.home, lab, RUN_ID) as both:
        yield both


def test_closing_a_channel_on_a_cut_connection_is_quiet_and_the_runner_reconnects(
    host: tuple[Runner, Host],
) -> None:
    runner, lab_host = host
    assert isinstance(runner, SshRunner)
    assert runner.run("echo up").stdout == "up\n"
    transport = runner._transport()
    plain, quiet = (transport.open_session(timeout=10) for _ in range(2))
    for channel in (plain, quiet):
        channel.exec_command("sleep 30")
    # The cut, made so that it stays a cut: the host's sshd is stopped (it cannot answer our
    # end of stream and close the connection, which would let paramiko's reader thread close
    # the channels first), and this side can no longer send.
    lab_host.hang_ssh()
    try:
        transport.sock.shutdown(socket.SHUT_WR)
        with pytest.raises(EOFError):
            plain.close()  # what paramiko does: the reason close_channel exists
        close_channel(quiet)
        assert not transport.is_active()  # given up, so the next command connects anew
    finally:
        lab_host.hang_ssh(False)
    assert runner.run("echo again").stdout == "again\n"
