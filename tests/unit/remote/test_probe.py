"""The controller's one-command poll (spotrun.remote.probe) run by real shells, bash and dash
(an instance's login shell may be either): its framing holds for any file name and content,
a file that grows or shrinks while it is read, and files or folders that are missing."""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

import pytest

from spotrun.core.errors import RemoteError
from spotrun.core.rundir import EXIT_FILE
from spotrun.remote.local import LocalRunner
from spotrun.remote.probe import Probe, Tail, parse_answer, run_probe
from spotrun.remote.runner import BytesResult, CommandResult
from spotrun.remote.sync import pull_run_dir

# Names the framing must keep whole: separators of other formats, a leading '-', quotes.
ODD_NAMES = [
    "plain.log",
    "tab\there.log",
    "new\nline.log",
    "-starts-with-dash.log",
    'it\'s "quoted" $HOME `x`.jsonl',
    "back\\slash.log",
    "L",
    "E",
    "N",
    "ünïcode ✓.log",
    "sub dir/inner\n.log",
]


class ShellRunner(LocalRunner):
    """LocalRunner through another shell (dash as /bin/sh), with `path` first on PATH."""

    def __init__(self, shell: str, path: Path | None = None) -> None:
        self.shell = shell
        self.path = path

    def _wrap(self, command: str) -> str:
        prefix = f"PATH={shlex.quote(str(self.path))}:$PATH; " if self.path else ""
        return f"exec {self.shell} -c {shlex.quote(prefix + command)}"

    def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult:
        return super().run(self._wrap(command), timeout_s=timeout_s)

    def run_bytes(self, command: str, *, timeout_s: float | None = None) -> BytesResult:
        return super().run_bytes(self._wrap(command), timeout_s=timeout_s)


@pytest.fixture(params=["bash", "sh"])
def shell(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_odd_names_and_binary_content_come_through_whole(tmp_path: Path, shell: str) -> None:
    run_dir = tmp_path / "run"
    contents = {}
    for i, name in enumerate(ODD_NAMES):
        path = run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        # NULs, newlines and bytes that are no UTF-8, in what the tails bring
        contents[name] = bytes(range(256)) + f"\0{i}\nE\0L\0".encode() + b"\xff\xfe" * i
        path.write_bytes(contents[name])
    offsets = {name: 7 + i for i, name in enumerate(ODD_NAMES)}
    tails = tuple(Tail(name, offsets[name]) for name in ODD_NAMES)
    answer = run_probe(ShellRunner(shell), Probe(str(run_dir), tails=tails))
    assert answer.files is not None
    assert sorted(f.path for f in answer.files) == sorted(ODD_NAMES)
    assert {f.path: f.size for f in answer.files} == {n: len(c) for n, c in contents.items()}
    assert answer.tails == {name: contents[name][offsets[name] :] for name in ODD_NAMES}
    assert answer.status is None and answer.outputs == []


def test_a_file_that_grows_between_its_size_and_its_read(tmp_path: Path, shell: str) -> None:
    """Only the bytes up to the size told before them come (the framing says how many); the
    rest comes with the next poll."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    log = run_dir / "job.log"
    log.write_bytes(b"line 1\nline 2\n")
    shims = _stat_shim(tmp_path, then=f"printf 'line 3\\n' >> {shlex.quote(str(log))}")
    runner = ShellRunner(shell, path=shims)
    first = run_probe(runner, Probe(str(run_dir), tails=(Tail("job.log", 7),)))
    assert first.tails == {"job.log": b"line 2\n"}
    assert log.read_bytes() == b"line 1\nline 2\nline 3\n"  # it did grow meanwhile
    again = run_probe(runner, Probe(str(run_dir), tails=(Tail("job.log", 14),)))
    assert again.tails == {"job.log": b"line 3\n"}


def test_a_file_that_shrinks_while_read_brings_nothing(tmp_path: Path, shell: str) -> None:
    """Replaced by a shorter file between its size and its read: the padded bytes are not
    taken for its content; the next poll lists it shorter (and sync fetches it whole)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    log = run_dir / "job.log"
    log.write_bytes(b"0123456789" * 10)
    shims = _stat_shim(tmp_path, then=f"printf 'new\\n' > {shlex.quote(str(log))}")
    answer = run_probe(
        ShellRunner(shell, path=shims), Probe(str(run_dir), tails=(Tail("job.log", 40),))
    )
    assert answer.tails == {}
    assert answer.files is not None and [f.path for f in answer.files] == ["job.log"]


def test_missing_files_folders_and_sessions(tmp_path: Path, shell: str) -> None:
    runner = ShellRunner(shell)
    gone = tmp_path / "not-there"
    answer = run_probe(runner, Probe(str(gone), "no-such-session", ("out",), (Tail("a.log", 3),)))
    assert answer.files is None and answer.outputs == [] and answer.tails == {}
    assert answer.status is not None and answer.status.lost  # no session, no exit record

    run_dir = tmp_path / "run"
    (run_dir / "workdir").mkdir(parents=True)
    (run_dir / EXIT_FILE).write_text('{"exit_code": 3}')
    (run_dir / "a.log").write_text("abc")  # not grown past its offset
    probe = Probe(
        str(run_dir), "no-such-session", ("out", "-x"), (Tail("a.log", 3), Tail("b.log", 1))
    )
    answer = run_probe(runner, probe)
    assert answer.status is not None and answer.status.exit_code == 3 and not answer.status.alive
    assert answer.files is not None and answer.outputs == [] and answer.tails == {}

    (run_dir / "workdir" / "out" / "deep").mkdir(parents=True)
    (run_dir / "workdir" / "out" / "deep" / "r.txt").write_text("r")
    (run_dir / "workdir" / "-x").write_text("x")
    (run_dir / "workdir" / "out" / "half.part").write_text("h")
    answer = run_probe(runner, probe)
    assert sorted(f.path for f in answer.outputs) == ["-x", "out/deep/r.txt"]


def test_an_answer_cut_short_or_garbled_is_refused() -> None:
    probe = Probe("/r", "s", tails=(Tail("a.log", 1),))
    whole = b"session=1\0\0L\0a.log\x005\x001.5\0\0" + b"0\x005\x004\0abcd5\0E\0"
    assert parse_answer(probe, whole).tails == {"a.log": b"abcd"}
    for cut in (len(whole) - 1, len(whole) - 3, 30, 12, 0):
        with pytest.raises(RemoteError, match="cut short|garbled"):
            parse_answer(probe, whole[:cut])
    with pytest.raises(RemoteError, match="garbled"):
        parse_answer(probe, whole.replace(b"1.5", b"x"))
    with pytest.raises(RemoteError, match="no answer"):
        parse_answer(probe, b"motd\0" + whole)
    with pytest.raises(RemoteError, match="exit code 1: find: boom"):
        parse_answer(probe, whole.replace(b"\0\x000\0", b"\0\x001\0", 1), stderr="find: boom\n")


def test_sync_appends_what_the_poll_read_and_fetches_the_rest_whole(tmp_path: Path) -> None:
    remote, local = tmp_path / "instance", tmp_path / "here"
    remote.mkdir()
    (remote / "metrics.jsonl").write_bytes(b'{"step": 1}\n')
    (remote / "state.json").write_text("{}")
    first = pull_run_dir(LocalRunner(), str(remote), local, final=False)
    assert (first.appended_bytes, sorted(first.fetched)) == (0, ["metrics.jsonl", "state.json"])
    with open(remote / "metrics.jsonl", "ab") as fh:
        fh.write(b'{"step": 2}\n')
    (remote / "state.json").write_text('{"a": 1}')
    second = pull_run_dir(LocalRunner(), str(remote), local, final=False)
    assert (second.appended_bytes, second.whole_bytes) == (12, 8)
    assert (local / "metrics.jsonl").read_bytes() == (remote / "metrics.jsonl").read_bytes()
    (remote / "metrics.jsonl").write_bytes(b'{"step": 9}\n')  # a fresh instance's: shorter
    (remote / "state.json").unlink()
    third = pull_run_dir(LocalRunner(), str(remote), local, final=True)
    assert (third.fetched, third.appended_bytes, third.whole_bytes) == (["metrics.jsonl"], 0, 12)
    assert (local / "state.json").read_text() == '{"a": 1}'  # deleted there, kept here


def test_names_are_never_run_as_commands(tmp_path: Path, shell: str) -> None:
    run_dir = tmp_path / "run $(touch PWNED1); x"
    (run_dir / "workdir").mkdir(parents=True)
    (run_dir / "a'b;touch PWNED2;.log").write_text("0123")
    (run_dir / "workdir" / "o`touch PWNED3`").write_text("o")
    probe = Probe(
        str(run_dir),
        "s$(touch PWNED4)",
        ("o`touch PWNED3`",),
        (Tail("a'b;touch PWNED2;.log", 1),),
    )
    answer = run_probe(ShellRunner(shell), probe)
    assert answer.tails == {"a'b;touch PWNED2;.log": b"123"}
    assert [f.path for f in answer.outputs] == ["o`touch PWNED3`"]
    assert not [p for p in tmp_path.rglob("PWNED*")] and not Path("PWNED1").exists()


def _stat_shim(tmp_path: Path, *, then: str) -> Path:
    """A `stat` first on PATH that runs `then` after its first answer: the file changes
    between the size the poll tells and the bytes it reads."""
    shims = tmp_path / "shims"
    shims.mkdir()
    marker = tmp_path / "stat-ran"
    real = "/usr/bin/stat" if Path("/usr/bin/stat").exists() else "/bin/stat"
    shim = shims / "stat"
    shim.write_text(
        "#!/bin/sh\n"
        f'{real} "$@" || exit $?\n'
        f"[ -e {shlex.quote(str(marker))} ] && exit 0\n"
        f": > {shlex.quote(str(marker))}\n"
        f"{then}\n"
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    return shims
