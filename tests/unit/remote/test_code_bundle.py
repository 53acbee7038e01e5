"""The code archive an instance is sent carries bytecode the instance's python can use as is.

Without it every fresh instance compiled each spotrun module it imported (the agent, the
watcher, the trainer: ~0.3 s of CPU per lab host). The archive is unpacked by the real tar
(sources dated 1970, as the archive's members are) and imported by a fresh interpreter that
may write bytecode, as on an instance.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spotlab.harness import REPO

BUNDLE = (
    "from spotrun.remote.provision import code_bundle; b = code_bundle(); print(b.digest, b.path)"
)


def _bundle(tmp: Path) -> tuple[str, Path]:
    env = {**os.environ, "TMPDIR": str(tmp)}  # a fresh archive, built by this python
    done = subprocess.run(
        [sys.executable, "-c", BUNDLE], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    digest, path = done.stdout.split()
    return digest, Path(path)


def _import(code_dir: Path, module: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(code_dir)
    return subprocess.run(
        [sys.executable, "-v", "-c", f"import {module} as m; print(getattr(m, 'CHANGED', 0))"],
        capture_output=True,
        text=True,
        env=env,
        cwd=code_dir,
    )


def test_an_unpacked_archive_imports_from_its_bytecode_and_a_changed_source_wins(
    tmp_path: Path,
) -> None:
    archives = tmp_path / "tmp"
    archives.mkdir()
    digest, archive = _bundle(archives)
    assert _bundle(archives) == (digest, archive)  # the archive found: the same code, same name
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(code_dir)], check=True)

    done = _import(code_dir, "spotrun.agent.main")
    assert done.returncode == 0, done.stderr
    pyc = (
        code_dir / "spotrun" / "agent" / "__pycache__" / f"main.{sys.implementation.cache_tag}.pyc"
    )
    assert f"code object from '{pyc}'" in done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("# created")]

    source = code_dir / "spotrun" / "agent" / "gpus.py"
    source.write_text(source.read_text() + "\nCHANGED = 1\n")  # same date, other bytes
    done = _import(code_dir, "spotrun.agent.gpus")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
