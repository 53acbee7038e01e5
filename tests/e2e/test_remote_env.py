"""`--env` values with the controller on another host (issue 38, point 5): they travel as a
0600 file of the host's staging folder, like --env-file, and no process's command line holds
them (this machine's ssh, the host's `spotrun launch`, the job's), while the job still sees
them, over an --env-file's value for the same name (SECURITY.md: no command line carries
them). `controller up` also leaves this home 0700 and the host's home and config private
(point 12). The laptop and its always-on host as in test_remote_controller; the host's local cloud
runs the job."""

from __future__ import annotations

import secrets
import stat
import sys
from pathlib import Path

import pytest

from spotlab.hosts import Host
from tests.conftest import Env
from tests.e2e.test_remote_controller import HOST_HOME, laptop  # noqa: F401  (the fixture)
from tests.helpers import WAIT_SCALE, wait_for

pytestmark = pytest.mark.slow

# The job says what it sees, marks that it runs, and waits for the test to let it end.
JOB = (
    'echo "seen=$SECRET_TOKEN note=$NOTE"; touch /tmp/job-started; '
    "while [ ! -e /tmp/job-release ]; do sleep 0.1; done"
)


def command_lines_holding(needle: bytes, *, but: int) -> list[str]:
    """Every process of this machine (the lab hosts' included: one pid namespace) but `but`
    whose command line holds `needle`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == but:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        if needle in cmdline:
            words = cmdline.replace(b"\0", b" ")[:300]
            found.append(f"{entry.name}: {words!r}")
    return found


def test_env_values_reach_the_job_through_a_private_file_not_a_command_line(
    laptop: tuple[Env, Host, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    env, host, key = laptop
    url = f"ssh://root@{host.address}:{host.spec.port}"
    env.home.chmod(0o755)  # a home made before with the default umask
    env.cli("controller", "up", "--on", url, "--key", str(key), "--python", sys.executable,
            check=True, timeout=300)  # fmt: skip
    # issue 38, point 12: this home is tightened, the host's home and its config are private
    assert stat.S_IMODE(env.home.stat().st_mode) == 0o700
    assert stat.S_IMODE(host.path(HOST_HOME).stat().st_mode) == 0o700
    assert stat.S_IMODE(host.path(f"{HOST_HOME}/config.toml").stat().st_mode) == 0o600
    secret = f"tok-{secrets.token_hex(8)}"
    env_file = tmp_path / "job.env"
    env_file.write_text("NOTE=from the file\nSECRET_TOKEN=overridden by --env\n")
    launch = env.popen(
        "launch", "--cmd", JOB, "--env", f"SECRET_TOKEN={secret}", "--env-file", str(env_file),
        "--cloud", "local", "--name", "secret",
    )  # fmt: skip
    try:
        wait_for(lambda: host.path("/tmp/job-started").exists(), 180, "the job to start")
        # the user's own command (it was typed there) and no other: not the ssh it starts,
        # nor anything on the host
        assert command_lines_holding(secret.encode(), but=launch.pid) == []
        host.path("/tmp/job-release").touch()
        out, err = launch.communicate(timeout=300 * WAIT_SCALE)
    finally:
        if launch.poll() is None:
            launch.kill()
            launch.wait()
    assert launch.returncode == 0, out + err
    assert f"seen={secret} note=from the file" in out, out
    staged = [p for p in host.path(f"{HOST_HOME}/staging").rglob("*") if p.is_file()]
    flags = [p for p in staged if secret in p.read_text()]
    assert len(flags) == 1 and flags[0].stat().st_mode & 0o077 == 0, staged

    multi_line = env.cli("launch", "--cmd", "true", "--env", "A=one\ntwo", "--cloud", "local")
    assert multi_line.returncode == 2 and "spans lines" in multi_line.stderr, multi_line.stderr
    bad_name = env.cli("launch", "--cmd", "true", "--env", "1A=x", "--cloud", "local")
    assert bad_name.returncode == 2 and "--env '1A=x'" in bad_name.stderr, bad_name.stderr
