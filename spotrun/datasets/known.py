"""The small public data sets `spotrun data get NAME` fetches: where from, how big, which hash.

Each entry is a file the recipes find by name in the data folder, so that a recipe's data is
one command away on a fresh machine. The sha256 is the file's own (a wrong one is refused).
"""

from __future__ import annotations

from dataclasses import dataclass

from spotrun.core.suggest import did_you_mean


@dataclass(frozen=True)
class KnownDataSet:
    name: str  # what `spotrun data get` takes
    file_name: str  # what it is called in the data folder (the recipes' `data=`)
    url: str  # its public home
    sha256: str
    size: int  # bytes
    about: str  # one line: what it is, for which recipes

    def get_command(self) -> str:
        return f"spotrun data get {self.name}"


KNOWN_DATA_SETS: tuple[KnownDataSet, ...] = (
    KnownDataSet(
        name="tinyshakespeare",
        file_name="tinyshakespeare.txt",
        url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
        sha256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
        size=1_115_394,
        about="Shakespeare's plays as 1.1 MB of text (Karpathy, char-rnn): shakespeare-*",
    ),
)


def known_names() -> list[str]:
    return [entry.name for entry in KNOWN_DATA_SETS]


def find_known(name: str) -> KnownDataSet | None:
    """The entry `name` names: its own name or its file's name in the data folder."""
    for entry in KNOWN_DATA_SETS:
        if name in (entry.name, entry.file_name):
            return entry
    return None


def unknown_name_hint(name: str) -> str:
    close = did_you_mean(name, known_names())
    known = f"known: {', '.join(known_names())}"
    return f"{close} ({known})" if close else known


def get_hint(data: str) -> str | None:
    """The exact command that puts `data` (a recipe's `data=` value) in the data folder, or
    None when spotrun does not know where it comes from."""
    entry = find_known(data)
    return None if entry is None else entry.get_command()
