"""Bootstrap an instance over any Runner: push spotrun's code, run the provision script.

The code travels as one deterministic tar.gz of the `spotrun` package, named by its content
hash: an instance that already has this exact code (a repeated bootstrap, or an image baked
with it) is not sent it again. The provision script inside the package (provision/provision.sh)
is the same one ami/ runs, and is idempotent.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import marshal
import os
import shlex
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import spotrun
from spotrun.remote.runner import Runner

PACKAGE_DIR = Path(spotrun.__file__).resolve().parent
PROVISION_SCRIPT = "spotrun/provision/provision.sh"


@dataclass(frozen=True)
class CodeBundle:
    digest: str
    path: Path  # the tar.gz on this machine
    size: int


def _wanted(path: Path) -> bool:
    return "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")


def _member(name: str, data: bytes, mode: int = 0o644) -> tuple[tarfile.TarInfo, io.BytesIO]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    return info, io.BytesIO(data)


def _bytecode(name: str, source: bytes) -> tuple[str, bytes] | None:
    """`name`'s (a package module's path in the archive) bytecode for this python, checked
    against its source's hash at each import (timestamps prove nothing after tar): its path
    in the archive and its bytes, None where there is nothing to compile."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    try:
        code = compile(source, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):  # not ours to judge here: importing it will say
        return None
    flags = 0b11  # hash-based, source checked
    header = importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little")
    folder, _, module = name.rpartition("/")
    pyc = f"{folder}/__pycache__/{module[: -len('.py')]}.{tag}.pyc"
    return pyc, header + importlib.util.source_hash(source) + marshal.dumps(code)


@lru_cache(maxsize=1)
def code_bundle() -> CodeBundle:
    """The spotrun package as a tar.gz named by a digest of its file contents only."""
    raw = io.BytesIO()
    sources: list[tuple[str, bytes]] = []
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for path in sorted(p for p in PACKAGE_DIR.rglob("*") if p.is_file() and _wanted(p)):
            name = f"spotrun/{path.relative_to(PACKAGE_DIR).as_posix()}"
            data = path.read_bytes()
            tar.addfile(*_member(name, data, 0o755 if path.stat().st_mode & 0o111 else 0o644))
            if path.suffix == ".py":
                sources.append((name, data))
    digest = hashlib.sha256(raw.getvalue()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"spotrun-code-{digest}.tar.gz"
    # Compiling and compressing were most of this function's CPU: a process that finds the
    # archive of this digest already written (by an earlier launch) uses it. Named by the
    # digest of the sources it holds and written whole (a rename), so it holds this code.
    if not path.exists():
        # The sources' bytecode too: each instance would otherwise compile every module it
        # imports (measured: ~0.3 s of CPU on a lab host that trains). It goes only into the
        # archive, never into the digest: an instance whose python has another cache tag or
        # magic number ignores it and compiles as before.
        raw.seek(0)
        with tarfile.open(fileobj=raw, mode="a") as tar:
            for name, data in sources:
                compiled = _bytecode(name, data)
                if compiled is not None:
                    tar.addfile(*_member(*compiled))
        compressed = io.BytesIO()
        with gzip.GzipFile(fileobj=compressed, mode="wb", mtime=0, compresslevel=6) as gz:
            gz.write(raw.getvalue())
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(compressed.getvalue())
        tmp.replace(path)
    return CodeBundle(digest, path, path.stat().st_size)


@dataclass(frozen=True)
class Provisioned:
    python: str  # the venv python that runs spotrun on the instance
    code_dir: str
    pushed_code: bool
    output: str


def provision(runner: Runner, *, root: str, python: str, timeout_s: float = 1800.0) -> Provisioned:
    """Make the instance behind `runner` run this spotrun; idempotent."""
    bundle = code_bundle()
    code_dir = f"{root}/code/{bundle.digest}"
    marker = f"{code_dir}/.complete"
    q = shlex.quote
    probe = runner.run(
        f"mkdir -p {q(root)}/code && if test -f {q(marker)}; then echo present; fi", timeout_s=60
    ).check("preparing the instance")
    pushed = "present" not in probe.stdout
    steps = []
    if pushed:
        archive = f"{code_dir}.tar.gz"
        runner.put(bundle.path, archive)
        steps.append(
            f"rm -rf {q(code_dir)} && mkdir -p {q(code_dir)} && "
            f"tar -xzf {q(archive)} -C {q(code_dir)} && rm -f {q(archive)} && touch {q(marker)}"
        )
    steps.append(
        f"bash {q(code_dir + '/' + PROVISION_SCRIPT)} --python {q(python)} --root {q(root)} "
        f"--code {q(code_dir)}"
    )
    result = runner.run(" && ".join(steps), timeout_s=timeout_s).check("the provision script")
    return Provisioned(f"{root}/venv/bin/python", code_dir, pushed, result.stdout)
