"""`spotrun sample RUN` by the run's name: the ledger's light read finds its folder, not the
run's full status (which imports the launch machinery, ~0.4 s before the first character),
and the text is the text sampled from the folder itself."""

from __future__ import annotations

import json
import subprocess
import sys

from spotlab.harness import REPO, Env
from spotrun.core.config import load_settings
from spotrun.recipes import get_recipe
from spotrun.store.ledger import Ledger
from spotrun.train.build import train_recipe
from tests.unit.train.test_sample_loading import TINY, VERSE

# The CLI as a user runs it (spotrun/cli/entry.py's way in, then the full CLI); its last line:
# the spotrun modules it loaded, as JSON.
PROBE = """
import json, sys
from spotrun.cli.entry import quick_answer
code = quick_answer(sys.argv[1:])
if code is None:
    from spotrun.cli.main import _run
    code = _run(sys.argv[1:])
ours = sorted(m for m in sys.modules if m.startswith("spotrun."))
print(json.dumps({"code": code, "ours": ours}))
"""


def test_sample_by_name_reads_the_ledger_without_the_launch_machinery(env: Env) -> None:
    env.cli("launch", "--cmd", "true", "--name", "verse", check=True, timeout=300)
    ledger = Ledger(load_settings(env.home))
    run_dir = ledger.resolve("verse").run_dir
    ledger.close()
    text = env.home / "verse.txt"
    text.write_text(VERSE * 30)
    train_recipe(get_recipe("shakespeare-fast", [f"data={text}", *TINY]), run_dir)
    words = ["sample", "--prompt", "Thou", "--tokens", "30"]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *words, "verse"],
        capture_output=True,
        text=True,
        env=env.vars,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    *said, loaded = proc.stdout.splitlines()
    found = json.loads(loaded)
    assert found["code"] == 0
    assert "spotrun.service.lookup" in found["ours"]
    assert "spotrun.service.runs" not in found["ours"]
    by_folder = env.cli(*words, str(run_dir), check=True)
    assert "\n".join(said) + "\n" == by_folder.stdout
    assert by_folder.stdout.startswith("Thou")
