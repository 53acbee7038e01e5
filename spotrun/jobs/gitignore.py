""".gitignore rules, for a workdir that is not a git work tree (git itself answers otherwise).

The common part of gitignore(5): one pattern a line, `#` comments, `!` re-includes, a trailing
`/` matches folders only, a pattern with a `/` before its end is anchored to the folder of its
.gitignore (otherwise it matches a name at any depth), `*` `?` `[...]` within one path segment,
`**` across segments. Rules of deeper .gitignore files and later lines win. As in git, nothing
inside an ignored folder can be re-included, and `.git` is never shipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ALWAYS_IGNORED = frozenset({".git"})


@dataclass(frozen=True)
class Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool  # matched against the path from the .gitignore's folder, not the name

    def matches(self, rel: str, name: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        return bool(self.regex.fullmatch(rel if self.anchored else name))


def _segment_glob(text: str) -> str:
    """A glob without `**` as a regex in which no wildcard crosses a `/`."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = text.find("]", i + 2 if text[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = text[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
                i = end
        elif c == "\\" and i + 1 < len(text):
            i += 1
            out.append(re.escape(text[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def glob_to_regex(pattern: str) -> str:
    parts = pattern.split("/")
    pieces: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            pieces.append(".*" if last else "(?:.*/)?")
        else:
            pieces.append(_segment_glob(part) + ("" if last else "/"))
    return "".join(pieces)


def parse_line(line: str) -> Rule | None:
    text = line.rstrip("\n").rstrip("\r")
    if not text.strip() or text.startswith("#"):
        return None
    while text.endswith(" ") and not text.endswith("\\ "):
        text = text[:-1]
    negate = text.startswith("!")
    if negate or text.startswith("\\!") or text.startswith("\\#"):
        text = text[1:]
    dir_only = text.endswith("/")
    text = text.rstrip("/")
    if not text:
        return None
    anchored = "/" in text
    text = text.lstrip("/")
    return Rule(re.compile(glob_to_regex(text)), negate, dir_only, anchored)


def read_rules(path: Path) -> list[Rule]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [rule for rule in (parse_line(line) for line in lines) if rule is not None]


@dataclass(frozen=True)
class _Scope:
    base: str  # the .gitignore's folder, relative to the root ("" for the root)
    rules: list[Rule]


def _ignored(scopes: list[_Scope], rel: str, name: str, is_dir: bool) -> bool:
    verdict = False
    for scope in scopes:  # outermost first: deeper files win, as later lines do
        sub = rel[len(scope.base) + 1 :] if scope.base else rel
        for rule in scope.rules:
            if rule.matches(sub, name, is_dir):
                verdict = not rule.negate
    return verdict


def walk(root: Path) -> Iterator[str]:
    """Every file (and symlink) under `root` that the .gitignore files there let through, as
    a POSIX path relative to `root`. Symlinks are listed, never followed."""
    stack: list[tuple[str, list[_Scope]]] = [("", [])]
    while stack:
        rel_dir, scopes = stack.pop()
        folder = root / rel_dir if rel_dir else root
        own = read_rules(folder / ".gitignore")
        if own:
            scopes = [*scopes, _Scope(rel_dir, own)]
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if entry.name in ALWAYS_IGNORED or _ignored(scopes, rel, entry.name, is_dir):
                continue
            if is_dir:
                stack.append((rel, scopes))
            elif entry.is_file(follow_symlinks=False) or entry.is_symlink():
                yield rel
