"""spotrun/cli/plain_table.py prints exactly what rich prints, or declines.

Each case lays the same table out twice: with plain_table, and with rich's Console made as
spotrun's stdout console is (spotrun/cli/lazy.py), on a pipe and on a real terminal (a pty),
under the environment variables rich reads. Where plain_table answers, the text must be rich's
byte for byte; it must answer for the tables `spotrun ls` prints every day.
"""

from __future__ import annotations

import io
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import pytest
from rich._emoji_codes import EMOJI
from rich.console import Console
from rich.table import Table

from spotrun.cli.lazy import PIPED_WIDTH
from spotrun.cli.plain_table import plain_cell, plain_table
from spotrun.cli.run_list import HEADERS

LS_ROW = [
    "c59c0278bcdb",
    "bench-0",
    "digits-fast",
    "local",
    "succeeded",
    "2026-12-05 22:02:00",
    "12.3s",
    "$0.00",
    "acc 97.2%  loss 0.101  step 560",
]

ENVIRONMENTS: list[dict[str, str]] = [
    {},
    {"TERM": "xterm-256color"},
    {"TERM": "dumb"},
    {"TERM": "unknown", "LINES": "30", "COLUMNS": "150"},
    {"NO_COLOR": "1"},
    {"FORCE_COLOR": "1"},
    {"FORCE_COLOR": ""},
    {"FORCE_COLOR": "1", "TERM": "dumb"},
    {"TTY_COMPATIBLE": "0"},
    {"TTY_COMPATIBLE": "1", "TERM": "dumb"},
    {"COLUMNS": "100"},
    {"COLUMNS": "300"},
    {"COLUMNS": "0"},
    {"COLUMNS": "wide"},
    {"COLUMNS": "120", "LINES": "40"},
]


@contextmanager
def _terminal() -> Iterator[TextIO]:
    """The writing end of a pseudo-terminal: isatty() is true, as on a user's screen."""
    leader, follower = os.openpty()
    stream = os.fdopen(follower, "w")
    try:
        yield stream
    finally:
        stream.close()
        os.close(leader)


def _rich(headers: list[str], rows: list[list[str]], stream: TextIO, env: dict[str, str]) -> str:
    """What spotrun's stdout console (spotrun/cli/lazy.py) prints for the table on `stream`."""
    buffer = io.StringIO()
    console = Console(
        file=stream,
        highlight=False,
        soft_wrap=True,
        width=None if stream.isatty() else PIPED_WIDTH,
        _environ=env,
    )
    console.file = buffer  # the decisions above were made for `stream`; the text comes here
    table = Table(box=None, pad_edge=False)
    for col in headers:
        table.add_column(col, no_wrap=col in ("ID", "STATE"))
    for row in rows:
        table.add_row(*row)
    console.print(table)
    return buffer.getvalue()


def _compare(headers: list[str], rows: list[list[str]], env: dict[str, str]) -> list[bool]:
    """plain_table against rich on a pipe and on a terminal; which of the two it answered."""
    answered = []
    for terminal in (False, True):
        with _terminal() if terminal else open(os.devnull, "w") as stream:  # noqa: SIM115
            ours = plain_table(headers, rows, stream, environ=env)
            if ours is not None:
                assert ours == _rich(headers, rows, stream, env), (env, terminal, rows)
            answered.append(ours is not None)
    return answered


LS_ROWS = [LS_ROW, [*LS_ROW[:4], "running", "", "1h02m", "?", ""]]  # a table 123 wide


@pytest.mark.parametrize(
    "env", ENVIRONMENTS, ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items())
)
def test_ls_tables_match_rich(env: dict[str, str]) -> None:
    _compare(list(HEADERS), LS_ROWS, env)


def test_answers_the_everyday_ls() -> None:
    # piped; and on terminals wide enough (COLUMNS: this test's own fds are not terminals)
    assert _compare(list(HEADERS), LS_ROWS, {})[0]
    for env in ({"COLUMNS": "300"}, {"TERM": "xterm-256color", "COLUMNS": "123"}):
        assert _compare(list(HEADERS), LS_ROWS, env) == [True, True], env
    # one column narrower than the table: rich's to lay out
    assert _compare(list(HEADERS), LS_ROWS, {"COLUMNS": "122"}) == [True, False]


def test_declines_what_only_rich_can_lay_out() -> None:
    with open(os.devnull, "w") as pipe:
        for cell in ("[bold]x[/]", "a:smile:b", "日本", "tab\there", "x" * 250):
            assert plain_table(["A", "B"], [["1", cell]], pipe) is None, cell
    for cell in ("[", ":100:", "é", "\x1b[1m", "12:30 then :ok:"):
        assert not plain_cell(cell), cell
    for cell in ("2026-12-05 22:02:00", "acc 97.2%  loss 0.101", "$1,234.50", "a\\b", ""):
        assert plain_cell(cell), cell


def test_no_emoji_has_a_clock_field_for_a_name() -> None:
    # plain_cell lets ':' through only between two-digit fields of a time (`22:02:00`)
    assert not [name for name in EMOJI if len(name) == 2 and name.isdigit()]


def test_random_tables_match_rich() -> None:
    rng = random.Random(21)
    plain, tricky = "abcXYZ019 -_.%$/\\()=+*", "abc :[]é日"

    def cell() -> str:
        alphabet = tricky if rng.random() < 0.05 else plain
        return "".join(rng.choices(alphabet, k=rng.randint(0, 30)))

    answered = 0
    for _ in range(300):
        columns = rng.randint(1, 6)
        headers = ["".join(rng.choices("ABCDE", k=rng.randint(1, 8))) for _ in range(columns)]
        rows = [[cell() for _ in range(columns)] for _ in range(rng.randint(1, 4))]
        env = rng.choice(ENVIRONMENTS)
        answered += sum(_compare(headers, rows, env))
    assert answered > 100  # most of them are plain enough to answer
