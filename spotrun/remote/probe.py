"""One look at a run on its instance in one shell command: the job's status, the run folder's
listing, the job's outputs, and the new bytes of the files that only grow.

The controller polls every live run every few seconds. Over SSH each command, and each SFTP
open, read and close, costs round trips through paramiko's Python packetizer: a poll that was
a status command, a `find` and an SFTP read per grown file is now one command, and SFTP is
left to new files and files changed whole (checkpoints, JSON reports).

The answer is binary and framed, so that no file name (any byte but NUL) or content (any
byte) can pass for the framing. In order:

    session=N\\0 EXIT\\0          the job's status, when asked (spotrun.remote.job.status_shell)
    L\\0 (PATH\\0SIZE\\0MTIME\\0)* \\0 FIND_STATUS\\0      the run folder's files (N\\0: no folder)
    (./PATH\\0SIZE\\0MTIME\\0)* \\0                        the outputs, when the job declares some
    SIZE\\0COUNT\\0 [COUNT bytes AFTER\\0]                per growing file asked for, in order
    E\\0                                                 the end: an answer cut short is refused

A growing file's SIZE is taken before its bytes are read and COUNT of them follow (the file
may grow meanwhile: no more than COUNT are sent). Should it shrink meanwhile (replaced), the
bytes are padded to COUNT, and AFTER, its size once read, tells the parser to drop them.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from spotrun.core.errors import RemoteCommandError
from spotrun.core.rundir import WORKDIR_DIR
from spotrun.remote.job import JobStatus, parse_status, status_shell
from spotrun.remote.listing import (
    FIND_FIELDS,
    OWN_FUNCTION,
    RemoteFile,
    output_files,
    remote_file,
)
from spotrun.remote.runner import Runner

# The most of one growing file a poll brings; the rest comes with the next poll.
MAX_TAIL_BYTES = 64 << 20
PROBE_TIMEOUT_S = 120.0
_ANSWER_BLOCK = 4 << 20  # the answer is held and written in blocks of this many bytes

# The file opened once as fd 3 and checked (listing's _own: itself, no link on its path, a
# plain file); its size, then at most COUNT bytes from OFFSET (padded should it shrink), then
# its size again. Anything else answers size -1 and no bytes.
_TAIL_FUNCTION = (
    '_sto() { s=-1; _own "$1" && s=$(stat -L -c %s /proc/self/fd/3 2>/dev/null) || s=-1; n=0; '
    '[ "$s" -gt "$2" ] && n=$((s - $2)); '
    f'[ "$n" -gt {MAX_TAIL_BYTES} ] && n={MAX_TAIL_BYTES}; '
    'printf \'%s\\0%s\\0\' "$s" "$n"; [ "$n" -gt 0 ] || return 0; '
    '{ tail -c +$(($2 + 1)) <&3 2>/dev/null | head -c "$n"; head -c "$n" /dev/zero; } '
    '| head -c "$n"; a=$(stat -L -c %s /proc/self/fd/3 2>/dev/null) || a=-1; '
    "printf '%s\\0' \"$a\"; return 0; }; "
    # a FIFO opened for reading would wait for a writer: only a plain file is opened
    '_st() { if [ -f "$1" ] && [ ! -L "$1" ] && _sto "$@" 3<"$1"; then :; '
    "else printf '%s\\0%s\\0' -1 0; fi; }; "
)


@dataclass(frozen=True)
class Tail:
    """A growing file the local side holds: its path in the run folder, its local size."""

    path: str
    offset: int


@dataclass(frozen=True)
class Probe:
    run_dir: str  # on the instance
    session: str | None = None  # the job's tmux session: its status is asked first
    outputs: tuple[str, ...] = ()  # the job's outputs, relative to its workdir
    tails: tuple[Tail, ...] = ()


@dataclass(frozen=True)
class ProbeAnswer:
    status: JobStatus | None  # None when no session was asked about
    files: list[RemoteFile] | None  # the run folder's files, all listed; None: no folder (yet)
    outputs: list[RemoteFile]  # relative to the workdir
    tails: dict[str, bytes]  # path -> its bytes from the Tail's offset (whole reads only)


def probe_command(probe: Probe) -> str:
    q = shlex.quote
    parts = [status_shell(probe.run_dir, probe.session) + "; "] if probe.session else []
    parts.append(
        # a run folder that is a link (the job swapped it) is none: never listed through
        f"if [ ! -L {q(probe.run_dir)} ] && cd {q(probe.run_dir)} 2>/dev/null; then printf 'L\\0'; "
        f"find . -type f {FIND_FIELDS}; printf '\\0%d\\0' $?; "
    )
    if probe.outputs:
        starts = " ".join(q("./" + p) for p in probe.outputs)  # ./: a '-' name is no option
        parts.append(
            f"(cd {WORKDIR_DIR} 2>/dev/null && find {starts} -type f "
            "-printf '%p\\0%s\\0%T@\\0' 2>/dev/null); printf '\\0'; "
        )
    if probe.tails:
        parts.append(OWN_FUNCTION + "top=$(pwd -P); " + _TAIL_FUNCTION)
        parts.extend(f"_st {q(t.path)} {int(t.offset)}; " for t in probe.tails)
    parts.append("else printf 'N\\0'; fi; printf 'E\\0'")
    # One write of the whole answer, not one per printf: each write would travel as an SSH
    # packet of its own, and each packet costs the controller's Python its decrypt and MAC.
    return "{ " + "".join(parts) + f"; }} | dd bs={_ANSWER_BLOCK} iflag=fullblock 2>/dev/null"


def run_probe(runner: Runner, probe: Probe) -> ProbeAnswer:
    """Ask the instance, in one command."""
    result = runner.run_bytes(probe_command(probe), timeout_s=PROBE_TIMEOUT_S)
    result.check(f"polling {probe.run_dir}")
    return parse_answer(probe, result.stdout, stderr=result.stderr)


def parse_answer(probe: Probe, raw: bytes, *, stderr: str = "") -> ProbeAnswer:
    """The answer to `probe_command(probe)`; RemoteCommandError (the instance answered) when
    it is garbled or cut short."""
    read = _Fields(raw)
    status = None
    if probe.session:
        session = read.text()
        status = parse_status(session, read.text(), said=raw[-300:].decode(errors="replace"))
    files: list[RemoteFile] | None = None
    outputs: list[RemoteFile] = []
    tails: dict[str, bytes] = {}
    folder = read.text()
    if folder == "L":
        files = read.listing()
        code = read.number()
        if code != 0:  # as a failed `find` always was: the poll failed
            tail = " | ".join(stderr.strip().splitlines()[-5:])
            raise RemoteCommandError(
                f"listing {probe.run_dir} failed with exit code {code}: {tail}"
            )
        if probe.outputs:
            outputs = output_files(read.listing())
        for want in probe.tails:
            size, count = read.number(), read.number()
            if count <= 0:
                continue
            data = read.take(count)
            after = read.number()
            if size >= want.offset + count and after >= want.offset + count:
                tails[want.path] = data  # else it shrank while read: padding, not its bytes
    elif folder != "N":
        raise RemoteCommandError(f"the instance's answer about {probe.run_dir} is garbled")
    if read.text() != "E" or not read.done():
        raise RemoteCommandError(f"the instance's answer about {probe.run_dir} was cut short")
    return ProbeAnswer(status, files, outputs, tails)


class _Fields:
    """A cursor over the answer: NUL-ended fields and counted bytes."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.at = 0

    def field(self) -> bytes:
        end = self.raw.find(b"\0", self.at)
        if end < 0:
            raise RemoteCommandError("the instance's answer was cut short")
        value = self.raw[self.at : end]
        self.at = end + 1
        return value

    def text(self) -> str:
        return self.field().decode(errors="replace")

    def number(self) -> int:
        value = self.field()
        try:
            return int(value)
        except ValueError:
            raise RemoteCommandError(f"the instance's answer is garbled: {value[:40]!r}") from None

    def take(self, count: int) -> bytes:
        if self.at + count > len(self.raw):
            raise RemoteCommandError("the instance's answer was cut short")
        value = self.raw[self.at : self.at + count]
        self.at += count
        return value

    def listing(self) -> list[RemoteFile]:
        """find's triples, up to the empty field that ends them."""
        files = []
        while path := self.text():
            files.append(remote_file(path, self.text(), self.text()))
        return files

    def done(self) -> bool:
        return self.at == len(self.raw)
