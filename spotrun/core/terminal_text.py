"""Text from a job (its log's last lines, its metrics) made safe to print on a terminal.

A job's output may hold escape sequences (colours, cursor moves, a title change, or worse: some
terminals act on OSC and DCS sequences). Anything of the job's that spotrun prints passes
through `printable`: every control character (C0, DEL, C1) becomes a space, ANSI escape
sequences are dropped whole, so the message reads the same and the terminal does nothing."""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), other two-byte ESC sequences
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """`text` without escape sequences and control characters (tab kept; newlines kept only
    if asked)."""
    text = _ESCAPES.sub("", text)
    text = _CONTROLS.sub(" ", text)
    return text if keep_newlines else text.replace("\n", " ")
