"""The workdir a job ships to its instance: which files, how big, what they hash to.

In a git work tree the files are git's own answer (`git ls-files --cached --others
--exclude-standard`: tracked files, and untracked ones .gitignore lets through); elsewhere the
.gitignore files are read by spotrun.jobs.gitignore. A workdir over the size limit is refused before
anything is launched, naming what makes it big.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import tarfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from spotrun.core.errors import UsageError
from spotrun.core.home import default_home
from spotrun.core.rundir import HOME_VAR
from spotrun.jobs import gitignore

MB = 1_000_000


@dataclass(frozen=True)
class WorkFile:
    path: str  # POSIX, relative to the workdir
    size: int
    mtime: int  # whole seconds: what a tar archive keeps
    is_link: bool


@dataclass(frozen=True)
class Entry:
    """What the instance holds of a file: its size, mtime and content hash."""

    size: int
    mtime: int
    sha256: str

    def to_list(self) -> list[object]:
        return [self.size, self.mtime, self.sha256]


Manifest = dict[str, Entry]


def resolve_workdir(path: str | Path, base: Path | None = None) -> Path:
    """An existing folder, absolute; relative paths are taken from `base` (default: cwd)."""
    given = Path(path).expanduser()
    folder = (given if given.is_absolute() else (base or Path.cwd()) / given).resolve()
    if not folder.exists():
        raise UsageError(f"workdir {path} does not exist ({folder})")
    if not folder.is_dir():
        raise UsageError(f"workdir {path} is not a folder ({folder})")
    return folder


def _git_files(root: Path) -> list[str] | None:
    """git's list of the files to ship, or None when `root` is not inside a git work tree."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        inside = subprocess.run(
            [git, "-C", str(root), "rev-parse", "--is-inside-work-tree"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        listed = subprocess.run(
            [git, "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            capture_output=True,
            timeout=120,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"cannot list the files of workdir {root} with git: {exc}") from exc
    return sorted({p for p in listed.stdout.decode(errors="surrogateescape").split("\0") if p})


def _home_inside(root: Path, home: Path | None) -> str | None:
    """SPOTRUN_HOME's path relative to the workdir when it lies inside it, else None."""
    try:
        return (home or default_home()).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return None


def list_files(root: Path, home: Path | None = None) -> list[WorkFile]:
    """The files of the workdir that ship, sorted by path. SPOTRUN_HOME (default: this
    process's) never ships when it lies inside the workdir: its private keys and ledger are
    not the job's, and reading the ledger's files here would drop this process's SQLite locks
    on them (closing any descriptor of a file drops its POSIX locks), so another process could
    checkpoint and delete the WAL under a live connection and its writes would be lost."""
    names = _git_files(root)
    if names is None:
        names = sorted(gitignore.walk(root))
    inside = _home_inside(root, home)
    if inside == ".":
        raise UsageError(
            f"the workdir {root} is {HOME_VAR} itself: spotrun's state cannot ship as a job",
            hint="give the folder of your code as --workdir",
        )
    if inside is not None:
        names = [n for n in names if n != inside and not n.startswith(inside + "/")]
    files = []
    for name in names:
        path = root / name
        try:
            st = path.lstat()
        except OSError:
            continue  # tracked by git but deleted here
        is_link = path.is_symlink()
        if not is_link and not path.is_file():
            continue  # a submodule's folder: it ships only as its own workdir
        files.append(WorkFile(name, st.st_size, int(st.st_mtime), is_link))
    return files


def _human(size: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


def describe_size(files: list[WorkFile], top: int = 3) -> str:
    """The biggest top-level entries (folders summed), and the biggest files inside folders."""
    by_entry: dict[str, int] = defaultdict(int)
    for f in files:
        head, sep, _ = f.path.partition("/")
        by_entry[head + ("/" if sep else "")] += f.size
    entries = sorted(by_entry.items(), key=lambda kv: -kv[1])[:top]
    text = "biggest: " + ", ".join(f"{name} {_human(size)}" for name, size in entries)
    nested = sorted((f for f in files if "/" in f.path), key=lambda f: -f.size)[:top]
    if nested:
        text += "; biggest files: " + ", ".join(f"{f.path} {_human(f.size)}" for f in nested)
    return text


def check_size(root: Path, files: list[WorkFile], limit_mb: float) -> int:
    """The workdir's total size; a UsageError naming what is large when it is over the limit."""
    total = sum(f.size for f in files)
    if total > limit_mb * MB:
        raise UsageError(
            f"workdir {root} is {_human(total)} in {len(files)} files, over the "
            f"{_human(limit_mb * MB)} limit; {describe_size(files)}",
            hint="list what the job does not need in .gitignore, or raise workdir_max_mb "
            "in config.toml",
        )
    return total


def _sha256(path: Path, is_link: bool) -> str:
    if is_link:
        return hashlib.sha256(os.readlink(path).encode(errors="surrogateescape")).hexdigest()
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest(root: Path, files: list[WorkFile]) -> Manifest:
    return {f.path: Entry(f.size, f.mtime, _sha256(root / f.path, f.is_link)) for f in files}


def write_archive(root: Path, files: list[WorkFile], dest: Path) -> None:
    """A tar.gz of `files`, with the mtimes the manifest records and no local owner names."""
    with (
        open(dest, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar,
    ):
        for f in files:
            info = tar.gettarinfo(str(root / f.path), arcname=f.path)
            info.mtime = f.mtime
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                with open(root / f.path, "rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
