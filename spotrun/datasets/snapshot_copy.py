"""On the instance: copy a snapshot volume's data set to the NVMe instance store (when the
controller decided that is faster: spotrun.datasets.placement), resumably, many files at once.

Files already there with the same size are kept, so a copy cut short goes on where it was; a
marker says when the whole copy is done. Without a mounted instance store the data set is read
from the volume where it is mounted.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from spotrun.core.safe_paths import part_path
from spotrun.datasets.layout import STATE_DIR, _read_json, _write_json
from spotrun.datasets.progress import fmt_bytes
from spotrun.datasets.roots import STAGED_FOLDER, instance_store_mounts
from spotrun.datasets.spec import SnapshotData
from spotrun.datasets.stager import check_space, exclusive

COPY_THREADS = 16  # files copied at once (copy_file_range: the kernel moves the bytes)
RESERVE_BYTES = 1 << 30


def _files(src: Path) -> list[tuple[str, int]]:
    found = []
    for folder, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if d != STATE_DIR and d != "lost+found"]
        for name in names:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                found.append((path.relative_to(src).as_posix(), path.stat().st_size))
    return found


def _store_root() -> Path | None:
    try:
        mounts = instance_store_mounts(Path("/proc/mounts").read_text())
    except OSError:
        return None
    writable = [m for m in mounts if os.access(m, os.W_OK)]
    return max(writable, key=lambda m: shutil.disk_usage(m).free) if writable else None


def copy_to_instance_store(
    src: Path,
    spec: SnapshotData,
    log: Callable[[str], None],
    store_root: Path | None = None,
) -> Path:
    """The data set's folder on the instance store (copied there once), or `src` itself when
    this machine has no instance store mounted."""
    root = store_root if store_root is not None else _store_root()
    if root is None:
        log(f"{spec.uri}: no instance store is mounted here; reading it from the volume")
        return src
    dest = root / STAGED_FOLDER / spec.snapshot_id / (spec.folder or "_root")
    with exclusive(dest.with_name(dest.name + ".lock")):  # one copier; torchrun ranks wait
        return _copy(src, dest, spec, log)


def _copy(src: Path, dest: Path, spec: SnapshotData, log: Callable[[str], None]) -> Path:
    marker = dest / STATE_DIR / "complete.json"
    done = _read_json(marker)
    if done is not None and done.get("source") == spec.uri:
        return dest
    files = _files(src)
    total = sum(size for _, size in files)
    todo = []
    for rel, size in files:
        try:
            if (dest / rel).stat().st_size == size:
                continue
        except FileNotFoundError:
            pass
        todo.append((rel, size))
    check_space(dest, sum(size for _, size in todo), RESERVE_BYTES, spec.uri)
    log(
        f"copying {spec.uri} to the instance store ({dest}): {len(files):,} files, "
        f"{fmt_bytes(total)}" + (f" ({len(files) - len(todo):,} already there)" if todo else "")
    )
    for folder in sorted({str(Path(rel).parent) for rel, _ in todo}):
        (dest / folder).mkdir(parents=True, exist_ok=True)

    def copy(item: tuple[str, int]) -> None:
        part = part_path(dest / item[0])
        shutil.copyfile(src / item[0], part)
        os.replace(part, dest / item[0])

    with ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="copy") as pool:
        for _ in pool.map(copy, todo):
            pass
    marker.parent.mkdir(parents=True, exist_ok=True)
    _write_json(marker, {"source": spec.uri, "files": len(files), "bytes": total})
    log(f"copied {spec.uri} to the instance store: {fmt_bytes(total)}")
    return dest
