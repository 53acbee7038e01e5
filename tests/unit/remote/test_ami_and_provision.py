"""ami/ and the launch path share one provision script; keep them in step."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from spotrun.remote.provision import PROVISION_SCRIPT, code_bundle

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / PROVISION_SCRIPT


def test_provision_script_is_valid_bash_and_in_the_bundle() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    import tarfile

    with tarfile.open(code_bundle().path) as tar:
        member = tar.getmember(PROVISION_SCRIPT)
        assert member.mode & 0o111  # executable, as in the checkout


def test_the_packer_template_runs_the_same_script_with_options_it_knows() -> None:
    template = (REPO / "ami" / "spotrun.pkr.hcl").read_text()
    assert 'source      = "${path.root}/../spotrun"' in template
    calls = re.findall(r"provision/provision\.sh([^\"]*)\"", template)
    assert calls, "the template must run the provision script"
    known = set(re.findall(r"^\s+(--[a-z-]+)\)", SCRIPT.read_text(), flags=re.M))
    used = {flag for call in calls for flag in re.findall(r"--[a-z-]+", call)}
    assert used and used <= known, (used, known)
    assert "base-oss-nvidia-driver-gpu-ubuntu-22.04" in template
    assert 'http_tokens   = "required"' in template and "encrypted             = true" in template
