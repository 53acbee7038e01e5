"""A job's output never speaks to the user's terminal: escape sequences and control characters
in its last lines are stripped from the failure messages launch and status print (issue 18,
class 6; the tab/newline names of the same class: tests/unit/datasets/test_hostile_names.py)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from spotrun.core.terminal_text import printable
from tests.conftest import Env

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(max_codepoint=0x2FF)))
def test_printable_text_holds_no_control_character(text: str) -> None:
    assert not _CONTROL.search(printable(text))
    assert printable("plain words, 1.5 %") == "plain words, 1.5 %"


def test_escape_sequences_in_a_failed_job_reach_no_terminal(env: Env) -> None:
    command = r"printf 'bad \033]0;pwned\007\033[2J\033[31mred\033[0m\r\n\x9b1m end\n'; exit 3"
    launched = env.cli("launch", "--cmd", command, "--cloud", "local", timeout=180)
    assert launched.returncode != 0
    assert "job exited with code 3" in launched.stdout, launched.stdout
    (run,) = env.runs()
    status = env.cli("status", run["id"])
    for text in (launched.stdout, launched.stderr, status.stdout, env.cli("ls").stdout):
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text, repr(text)
    assert "bad" in status.stdout and "red" in status.stdout
