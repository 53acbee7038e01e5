"""Push a workdir to an instance, incrementally: only new or changed files travel.

The instance keeps a manifest of what was pushed (size, mtime, sha256 per file) beside the
workdir. A push asks for it and, in the same round trip, for the workdir's files as they are
now; a file the job changed since (its size or mtime no longer what the manifest says) counts as
unknown and is sent again. The new and changed files go as one tar.gz and one command unpacks
them; files that were pushed before and are gone here are deleted there. Files the job made
itself are never touched.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from spotrun.core.errors import RemoteError
from spotrun.core.rundir import PUSH_MANIFEST_FILE
from spotrun.jobs.workdir import Entry, Manifest, WorkFile, manifest, write_archive
from spotrun.remote.runner import Runner

_SEPARATOR = "--spotrun-workdir--"


@dataclass(frozen=True)
class PushResult:
    sent: list[str]
    deleted: list[str]
    unchanged: int
    sent_bytes: int  # the files' own sizes
    archive_bytes: int  # what travelled

    def describe(self) -> str:
        if not self.sent and not self.deleted:
            return f"workdir unchanged on the instance ({self.unchanged} files)"
        return (
            f"workdir pushed: {len(self.sent)} new or changed file(s), {self.sent_bytes:,} bytes "
            f"({self.archive_bytes:,} compressed), {self.unchanged} unchanged, "
            f"{len(self.deleted)} deleted"
        )


def remote_manifest(runner: Runner, state_dir: str, workdir: str) -> tuple[Manifest, set[str]]:
    """What the instance holds as pushed (the manifest entries its files still match), and
    every path the last push recorded, whatever the job did to them since."""
    q = shlex.quote
    command = (
        f"mkdir -p {q(state_dir)} {q(workdir)} || exit 1; "
        f"cat {q(state_dir + '/' + PUSH_MANIFEST_FILE)} 2>/dev/null; echo; echo {_SEPARATOR}; "
        f"cd {q(workdir)} && "
        "find . \\( -type f -o -type l \\) -printf '%P\\0%s\\0%T@\\0'; exit 0"
    )
    out = runner.run(command, timeout_s=120).check("reading the instance's workdir").stdout
    head, _, listing = out.partition(_SEPARATOR + "\n")
    try:
        recorded = json.loads(head.strip() or "{}")
    except ValueError:
        recorded = {}  # a damaged manifest: everything is sent again
    fields = listing.split("\0")
    present: dict[str, tuple[int, int]] = {}
    for i in range(0, len(fields) - 2, 3):
        present[fields[i]] = (int(fields[i + 1]), int(float(fields[i + 2])))
    if not isinstance(recorded, dict):
        recorded = {}
    held: Manifest = {}
    for path, value in recorded.items():
        try:
            entry = Entry(int(value[0]), int(value[1]), str(value[2]))
        except (TypeError, ValueError, IndexError):
            continue
        if present.get(path) == (entry.size, entry.mtime):
            held[path] = entry
    return held, set(recorded)


def push_workdir(
    runner: Runner, root: Path, files: list[WorkFile], state_dir: str, workdir: str
) -> PushResult:
    """Make `workdir` on the instance hold `files` of `root` as they are here."""
    local = manifest(root, files)
    held, previously = remote_manifest(runner, state_dir, workdir)
    send = [f for f in files if f.path not in held or held[f.path].sha256 != local[f.path].sha256]
    # What this push leaves: unchanged files keep what the instance had recorded for them.
    after = {path: held.get(path, entry) for path, entry in local.items()}
    deleted = sorted(p for p in previously if p not in local)
    if not send and not deleted and set(held) == set(local):
        return PushResult([], [], len(files), 0, 0)
    q = shlex.quote
    archive_bytes = 0
    with tempfile.TemporaryDirectory(prefix="spotrun-push-") as scratch:
        steps = [f"mkdir -p {q(workdir)}", f"cd {q(workdir)}"]
        if deleted:
            listing = Path(scratch) / "deleted"
            listing.write_bytes(b"\0".join(p.encode(errors="surrogateescape") for p in deleted))
            runner.put(listing, f"{state_dir}/push-deleted.tmp")
            steps.append(f"xargs -0 -r rm -f -- < {q(state_dir + '/push-deleted.tmp')}")
        if send:
            archive = Path(scratch) / "push-tar.tmp"
            write_archive(root, send, archive)
            archive_bytes = archive.stat().st_size
            runner.put(archive, f"{state_dir}/push-tar.tmp")
            steps.append(f"tar -xzf {q(state_dir + '/push-tar.tmp')} --no-same-owner")
        record = Path(scratch) / PUSH_MANIFEST_FILE
        record.write_text(json.dumps({p: e.to_list() for p, e in after.items()}, sort_keys=True))
        manifest_path = f"{state_dir}/{PUSH_MANIFEST_FILE}"
        runner.put(record, f"{manifest_path}.new")
        steps.append(
            f"rm -f {q(state_dir + '/push-tar.tmp')} {q(state_dir + '/push-deleted.tmp')} && "
            f"mv {q(manifest_path + '.new')} {q(manifest_path)}"
        )
        result = runner.run(" && ".join(steps), timeout_s=600)
        if not result.ok:
            raise RemoteError(
                "unpacking the workdir on the instance failed: "
                + " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
            )
    return PushResult(
        [f.path for f in send],
        deleted,
        len(files) - len(send),
        sum(f.size for f in send),
        archive_bytes,
    )
