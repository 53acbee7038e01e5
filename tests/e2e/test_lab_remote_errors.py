"""A lab host that answers but whose command fails is told apart from one that is silent: the
first is a RemoteCommandError (recovery must not count it toward aws.unreachable_s and replace
an instance that answers), the second a plain RemoteError."""

from __future__ import annotations

import pytest

from spotlab import Lab
from spotrun.core.errors import RemoteCommandError, RemoteError
from spotrun.remote.probe import Probe, run_probe
from tests.conftest import Env
from tests.e2e.lab_instance import one_instance

pytestmark = pytest.mark.slow


def test_a_failed_command_is_an_answer_and_a_stopped_host_is_silence(
    aws_env: Env, lab: Lab
) -> None:
    with one_instance(aws_env.home, lab, "r-answers") as (runner, host):
        with pytest.raises(RemoteCommandError, match="exit code 3: oops"):
            runner.run("echo oops >&2; exit 3").check("the step")
        # The controller's poll of a run folder whose listing fails: a folder mounted inside
        # itself (the host's own mount namespace), which find refuses as a loop.
        folder = "/tmp/answers-run"
        runner.run(f"mkdir -p {folder}/loop && mount --bind {folder} {folder}/loop").check("set up")
        with pytest.raises(RemoteCommandError, match="listing .* failed with exit code"):
            run_probe(runner, Probe(run_dir=folder))
        host.stop()
        with pytest.raises(RemoteError) as silent:
            runner.run("true", timeout_s=5)
        assert not isinstance(silent.value, RemoteCommandError)
