"""The provider contract, one suite run against every provider: the local cloud, and AWS in
the lab (moto's EC2 API + real sshd hosts). What the controller relies on, and nothing more."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from spotlab.fixtures import use_lab
from spotrun.agent.session import session_name
from spotrun.cloud.aws import AwsProvider
from spotrun.cloud.base import Instance, InstanceRequest, Provider
from spotrun.cloud.local import LocalProvider
from spotrun.core.config import Resources, Settings, load_settings
from spotrun.remote.job import JobDriver
from spotrun.remote.probe import Probe, Tail, run_probe
from spotrun.remote.runner import CommandResult
from spotrun.store.ledger import new_run_id
from tests.conftest import Env
from tests.helpers import wait_for


@dataclass
class Case:
    provider: Provider
    settings: Settings
    resources: Resources


@pytest.fixture(params=["local", "aws"])
def case(request: pytest.FixtureRequest, env: Env) -> Iterator[Case]:
    if request.param == "local":
        settings = load_settings(env.home)
        yield Case(LocalProvider(settings), settings, Resources())
        return
    lab = request.getfixturevalue("make_lab")(bucket=False)
    with use_lab(env, lab):
        settings = load_settings(env.home)
        yield Case(AwsProvider(settings), settings, Resources())


def _launch(case: Case, run_id: str) -> list[Instance]:
    offer = case.provider.offers(case.resources)[0]
    return case.provider.launch(InstanceRequest(run_id, offer))


def test_offers_fit_and_come_cheapest_first(case: Case) -> None:
    offers = case.provider.offers(case.resources)
    assert offers
    assert all(o.provider == case.provider.name and o.gpus >= case.resources.gpus for o in offers)
    prices = [o.usd_per_hour for o in offers]
    assert prices == sorted(prices)


def test_launch_reconciles_and_terminate_is_final(case: Case) -> None:
    run_id = new_run_id()
    first = _launch(case, run_id)
    again = _launch(case, run_id)  # the same request again: finds, does not create
    assert len(first) == 1 and [i.id for i in again] == [i.id for i in first]
    described = case.provider.describe(run_id)
    assert [i.id for i in described if i.is_live] == [first[0].id]
    assert all(i.run_id == run_id and i.provider == case.provider.name for i in described)

    ended = case.provider.terminate(run_id)
    assert [i.id for i in ended] == [first[0].id] and not ended[0].is_live
    assert not [i for i in case.provider.describe(run_id) if i.is_live]
    assert case.provider.terminate(run_id) == []  # safe to repeat


def test_a_ready_instance_runs_commands_files_and_jobs(case: Case, tmp_path: Path) -> None:
    provider = case.provider
    run_id = new_run_id()
    (instance,) = provider.wait_ready(_launch(case, run_id), 30)
    runner = provider.runner(instance)
    try:
        result = runner.run("echo out; echo err >&2; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
        # Cut short at the timeout, the command's children too: a runner that waited for
        # the command (or for a child holding its output open) would not answer for 600 s.
        answers: list[CommandResult] = []
        call = threading.Thread(
            target=lambda: answers.append(runner.run("sleep 600; echo late", timeout_s=0.5)),
            daemon=True,
        )
        call.start()
        call.join(timeout=120)
        assert not call.is_alive(), "run() waited past its timeout"
        assert answers[0].exit_code == 124 and "late" not in answers[0].stdout
        # run_bytes: the bytes as written (NUL, CR LF, no UTF-8), and the same bound
        raw = runner.run_bytes("printf 'a\\0b\\377\\r\\n'; echo err >&2; exit 4")
        assert (raw.exit_code, raw.stdout, raw.stderr) == (4, b"a\0b\xff\r\n", "err\n")
        assert runner.run_bytes("sleep 600", timeout_s=0.5).exit_code == 124

        remote_dir = provider.run_dir(instance, run_id)
        source = tmp_path / "sent.bin"
        source.write_bytes(bytes(range(256)) * 400)
        runner.put(source, f"{remote_dir}/files/sent.bin")
        runner.get(f"{remote_dir}/files/sent.bin", tmp_path / "back.bin")
        assert (tmp_path / "back.bin").read_bytes() == source.read_bytes()

        provider.bootstrap(instance, runner)
        driver = JobDriver(
            runner, provider.spotrun_command(instance), remote_dir, session_name(run_id)
        )
        job = "echo contract-job; while [ ! -e go ]; do sleep 0.1; done; exit 7"
        assert driver.start(["sh", "-c", job], {"LANG": "C.UTF-8"})
        wait_for(
            lambda: "contract-job" in runner.run(f"cat {remote_dir}/job.log").stdout,
            timeout=30,
            what="the job's first line",
        )
        running = driver.status()
        assert running.alive and not running.finished and not running.lost
        # The controller's poll: the same status, the listing and the log's new bytes at once
        polled = run_probe(runner, Probe(remote_dir, driver.session, tails=(Tail("job.log", 1),)))
        assert polled.status == running and polled.files is not None
        assert "job.log" in [f.path for f in polled.files]
        assert polled.tails["job.log"].startswith(b"ontract-job\n")
        runner.run(f"touch {remote_dir}/go").check("letting the job end")
        # the wrapper writes its exit code, then its session ends: wait for both
        status = wait_for(
            lambda: (s := driver.status()).finished and not s.alive and s,
            timeout=30,
            what="the job's end",
        )
        assert status.exit_code == 7
        assert run_probe(runner, Probe(remote_dir, driver.session)).status == status
        assert "contract-job" in runner.run(f"cat {remote_dir}/job.log").stdout
    finally:
        provider.terminate(run_id)
