"""The local Runner answers as the SSH runner does: the same text for the same bytes."""

from __future__ import annotations

from pathlib import Path

from spotrun.remote.local import LocalRunner
from tests.helpers import wait_for


def test_text_is_the_bytes_decoded_as_ssh_decodes_them() -> None:
    command = r"printf 'a\r\nb\377c\n'; printf 'warn\377\n' >&2; exit 3"
    text = LocalRunner().run(command)
    raw = LocalRunner().run_bytes(command)
    assert raw.stdout == b"a\r\nb\xffc\n"
    # Newlines as written (no \r\n -> \n) and an undecodable byte replaced, not an error.
    assert text.stdout == "a\r\nb\ufffdc\n" == raw.stdout.decode(errors="replace")
    assert text.stderr == raw.stderr == "warn\ufffd\n"
    assert text.exit_code == raw.exit_code == 3 and not text.ok


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return True
    return state == "Z"  # ended, waiting for its new parent to reap it


def test_a_command_past_its_timeout_ends_with_its_children() -> None:
    # The child holds stdout open: unless its session is ended, the answer waits for it.
    result = LocalRunner().run("sleep 600 & echo $!; wait", timeout_s=1)
    assert result.exit_code == 124 and result.stderr.endswith("(timed out)")
    child = int(result.stdout)
    wait_for(lambda: _gone(child), timeout=30, what="the timed-out command's child to end")
