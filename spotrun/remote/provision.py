"""Bootstrap an instance over any Runner: push spotrun's code, run the provision script.

The code travels as one deterministic tar.gz of the `spotrun` package, named by its content
hash: an instance that already has this exact code (a repeated bootstrap, or an image baked
with it) is not sent it again. The provision script inside the package (provision/provision.sh)
is the same one ami/ runs, and is idempotent.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import shlex
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


@lru_cache(maxsize=1)
def code_bundle() -> CodeBundle:
    """The spotrun package as a tar.gz whose bytes depend on file contents only."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for path in sorted(p for p in PACKAGE_DIR.rglob("*") if p.is_file() and _wanted(p)):
            name = f"spotrun/{path.relative_to(PACKAGE_DIR).as_posix()}"
            info = tarfile.TarInfo(name)
            data = path.read_bytes()
            info.size = len(data)
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    digest = hashlib.sha256(raw.getvalue()).hexdigest()[:16]
    compressed = io.BytesIO()
    with gzip.GzipFile(fileobj=compressed, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    path = Path(tempfile.gettempdir()) / f"spotrun-code-{digest}.tar.gz"
    if not path.exists():
        tmp = path.with_name(f"{path.name}.{digest}.tmp")
        tmp.write_bytes(compressed.getvalue())
        tmp.replace(path)
    return CodeBundle(digest, path, len(compressed.getvalue()))


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
