"""`spotrun sample RUN` by the run's name: its plain forms skip typer (spotrun/cli/
sample_quick.py), the ledger's light read finds the run's folder, not the run's full status
(which imports the launch machinery, ~0.4 s before the first character), and the text is the
text the full CLI samples from the folder itself; a value typer refuses still gets typer's
one-line error; the plain forms' options and defaults are the typer command's."""

from __future__ import annotations

from inspect import signature

from typer.models import OptionInfo

from spotlab.harness import Env
from spotrun.cli.sample_quick import READERS, SampleWords, plain_sample
from spotrun.cli.training import sample
from spotrun.core.config import load_settings
from spotrun.recipes import get_recipe
from spotrun.store.ledger import Ledger
from spotrun.train.build import train_recipe
from tests.unit.cli.cli_probe import run_probe
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
print(json.dumps({"code": code, "ours": ours, "typer": "typer" in sys.modules}))
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
    said, found = run_probe(env, PROBE, *words, "verse")
    assert found["code"] == 0 and not found["typer"]
    assert "spotrun.service.lookup" in found["ours"]
    assert "spotrun.service.runs" not in found["ours"]
    # `--tokens=30`: not a plain form, so typer's command answers, from the folder
    by_folder = env.cli("sample", "--prompt", "Thou", "--tokens=30", str(run_dir), check=True)
    assert "\n".join(said) + "\n" == by_folder.stdout
    assert by_folder.stdout.startswith("Thou")
    refused = env.cli("sample", "verse", "--tokens", "0")
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert refused.stderr.startswith("error: ") and "--tokens" in refused.stderr


def test_plain_forms_take_the_typer_commands_options_and_defaults() -> None:
    typer_options = {
        name: (tuple(info.param_decls or ())[0], info.default)
        for name, info in ((p.name, p.default) for p in signature(sample).parameters.values())
        if isinstance(info, OptionInfo)
    }
    plain = {
        field: (option, getattr(SampleWords(""), field)) for option, (field, _) in READERS.items()
    }
    assert plain == typer_options
    words = ["--seed", "3", "verse", "--top-k", "5", "--temperature", "0"]
    assert plain_sample(words) == SampleWords("verse", top_k=5, temperature=0.0, seed=3)
    for not_plain in (
        ["verse", "--tokens=3"],
        ["verse", "-h"],
        ["a", "b"],
        [],
        ["verse", "--seed"],
    ):
        assert plain_sample(not_plain) is None, not_plain
