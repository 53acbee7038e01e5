"""Where a recipe's data lives and whether it is laid out as expected (no torch, no decoding).

`data=` takes one of:

* `digits`: the 8x8 digits set that scikit-learn ships;
* a name such as `cifar10`, looked up in the data folder (setting `data_dir`, default
  SPOTRUN_HOME/data) as a folder or a .tar / .tar.gz / .tgz archive;
* a path to an ImageFolder, a CIFAR-10 python folder, or an archive of either.

Everything here only lists folders and reads archive headers, so launch can run it before
anything starts; the full index of a split is built by `index_split` when training begins.
"""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from spotrun.core.errors import UsageError
from spotrun.core.rundir import HOME_VAR
from spotrun.datasets.known import get_hint

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".webp", ".ppm", ".tif", ".tiff"})
TRAIN_SPLIT = "train"
EVAL_SPLITS = ("val", "test")  # the first that exists is the evaluation split
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
CIFAR_TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR_TEST_FILE = "test_batch"
CIFAR_FOLDER = "cifar-10-batches-py"  # the folder inside the official cifar-10-python.tar.gz

IMAGE_FOLDER_LAYOUT = (
    "DATA/train/<class>/<image>.jpg and DATA/val/<class>/<image>.jpg "
    "(test/ in place of val/ works too; .png, .webp, .bmp as well)"
)
CIFAR_LAYOUT = f"a CIFAR-10 python folder ({CIFAR_FOLDER}: data_batch_1..5 and test_batch)"
EXPECTED = (
    f"expected an ImageFolder, {IMAGE_FOLDER_LAYOUT}; or {CIFAR_LAYOUT}; or a tar archive of either"
)

# Names a data set may have in the data folder; the first that exists wins.
NAMED_SETS: dict[str, tuple[str, ...]] = {
    "cifar10": ("cifar10", "cifar10-jpeg", "cifar-10-python", CIFAR_FOLDER),
}

# Archive members read to recognise its layout before unpacking it.
PEEK_MEMBERS = 2000

Kind = Literal["digits", "image-folder", "cifar-batches"]


@dataclass(frozen=True)
class DataLocation:
    kind: Kind
    path: Path | None = None  # the folder or archive; None for digits
    archive: bool = False


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def _looks_like_path(spec: str) -> bool:
    return "/" in spec or os.sep in spec or spec.startswith((".", "~")) or is_archive(Path(spec))


def resolve_data(spec: str, data_dir: Path) -> DataLocation:
    """The data set `spec` names, checked to exist and to have a known layout."""
    spec = spec.strip()
    if spec == "digits":
        return DataLocation("digits")
    if not spec:
        raise UsageError("data is empty", hint="--set data=digits, a data set name, or a path")
    if _looks_like_path(spec):
        path = Path(spec).expanduser()
        if not path.exists():
            raise UsageError(f"data '{spec}': no such file or folder", hint=EXPECTED)
        return classify(path)
    for candidate in NAMED_SETS.get(spec, (spec,)):
        for suffix in ("", *ARCHIVE_SUFFIXES):
            path = data_dir / f"{candidate}{suffix}"
            if path.exists():
                return classify(path)
    raise UsageError(
        f"data set '{spec}' is not in the data folder {data_dir}",
        hint=f"put it there as {spec}/ or {spec}.tar.gz, point data_dir in {HOME_VAR}/"
        f"config.toml at the folder that holds it, or give a path: --set data=/path/to/{spec}",
    )


def classify(path: Path) -> DataLocation:
    """What kind of data set `path` holds; a UsageError naming the expected layout if none."""
    if path.is_dir():
        if (path / CIFAR_TRAIN_FILES[0]).exists() or (path / CIFAR_TEST_FILE).exists():
            check_cifar_folder(path)
            return DataLocation("cifar-batches", path)
        if (path / CIFAR_FOLDER).is_dir():
            check_cifar_folder(path / CIFAR_FOLDER)
            return DataLocation("cifar-batches", path / CIFAR_FOLDER)
        check_image_folder(path)
        return DataLocation("image-folder", path)
    if path.is_file() and is_archive(path):
        return DataLocation(peek_archive(path), path, archive=True)
    raise UsageError(
        f"data '{path}' is neither a folder nor a .tar / .tar.gz archive", hint=EXPECTED
    )


def check_cifar_folder(folder: Path) -> None:
    missing = [n for n in (*CIFAR_TRAIN_FILES, CIFAR_TEST_FILE) if not (folder / n).is_file()]
    if missing:
        raise UsageError(
            f"{folder} looks like a CIFAR-10 python folder but lacks {', '.join(missing)}",
            hint=f"expected {CIFAR_LAYOUT}, as unpacked from cifar-10-python.tar.gz",
        )


# ---------------------------------------------------------------- ImageFolder
def image_folder_root(path: Path) -> Path:
    """`path`, or its one subfolder that holds train/ (archives often wrap a top folder)."""
    if (path / TRAIN_SPLIT).is_dir():
        return path
    subdirs = [p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    if len(subdirs) == 1 and (subdirs[0] / TRAIN_SPLIT).is_dir():
        return subdirs[0]
    return path


def split_dirs(path: Path) -> tuple[Path, Path]:
    """(train folder, evaluation folder) of an ImageFolder, or a UsageError naming the layout."""
    root = image_folder_root(path)
    train = root / TRAIN_SPLIT
    if not train.is_dir():
        raise UsageError(f"{root} has no train/ folder", hint=f"expected {IMAGE_FOLDER_LAYOUT}")
    for name in EVAL_SPLITS:
        if (root / name).is_dir():
            return train, root / name
    raise UsageError(
        f"{root} has train/ but neither val/ nor test/", hint=f"expected {IMAGE_FOLDER_LAYOUT}"
    )


def class_names(split: Path) -> list[str]:
    names = sorted(e.name for e in os.scandir(split) if e.is_dir() and not e.name.startswith("."))
    if not names:
        raise UsageError(f"{split} has no class folders", hint=f"expected {IMAGE_FOLDER_LAYOUT}")
    return names


def is_image_name(name: str) -> bool:
    return not name.startswith(".") and os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES


def _has_image(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return any(e.is_file() and is_image_name(e.name) for e in entries)


def check_image_folder(path: Path) -> None:
    """A quick check (fast even for ImageNet): splits, classes, images in the first class."""
    for split in split_dirs(path):
        first = class_names(split)[0]
        if not _has_image(split / first):
            raise UsageError(
                f"{split / first} holds no images", hint=f"expected {IMAGE_FOLDER_LAYOUT}"
            )


@dataclass(frozen=True)
class SplitIndex:
    """Every image of one split: paths relative to `root`, labels indexing `classes`."""

    root: Path
    classes: tuple[str, ...]
    files: tuple[str, ...]
    labels: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.files)

    def path(self, i: int) -> Path:
        return self.root / self.files[i]


def index_split(split: Path, classes: list[str] | None = None) -> SplitIndex:
    """Index `split`; with `classes` (the training split's), labels follow that list."""
    found = class_names(split)
    if classes is None:
        classes = found
    else:
        unknown = sorted(set(found) - set(classes))
        if unknown:
            raise UsageError(
                f"{split} has classes that train/ lacks: {', '.join(unknown[:5])}",
                hint="the evaluation split's class folders must be among the training split's",
            )
    files: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        folder = split / name
        if not folder.is_dir():
            continue
        with os.scandir(folder) as entries:
            members = sorted(e.name for e in entries if e.is_file() and is_image_name(e.name))
        if not members and split.name == TRAIN_SPLIT:
            raise UsageError(f"{folder} holds no images", hint=f"expected {IMAGE_FOLDER_LAYOUT}")
        files.extend(f"{name}/{m}" for m in members)
        labels.extend([label] * len(members))
    if not files:
        raise UsageError(f"{split} holds no images", hint=f"expected {IMAGE_FOLDER_LAYOUT}")
    return SplitIndex(split, tuple(classes), tuple(files), tuple(labels))


# ------------------------------------------------------------------ archives
def peek_archive(path: Path) -> Kind:
    """The layout inside a tar archive, judged from its first members (no unpacking)."""
    saw_split = False
    try:
        with tarfile.open(path, "r|*") as tar:
            for count, member in enumerate(tar):
                parts = Path(member.name).parts
                if parts and parts[-1] in (*CIFAR_TRAIN_FILES, CIFAR_TEST_FILE):
                    return "cifar-batches"
                if member.isfile() and is_image_name(parts[-1]) and len(parts) >= 3:
                    saw_split = saw_split or parts[-3] in (TRAIN_SPLIT, *EVAL_SPLITS)
                    if saw_split:
                        return "image-folder"
                if count >= PEEK_MEMBERS:
                    break
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UsageError(f"{path} is not a readable tar archive ({exc})", hint=EXPECTED) from exc
    raise UsageError(f"{path} holds no recognisable data set in its first members", hint=EXPECTED)


def check_data(spec: str, data_dir: Path) -> None:
    """Raise a UsageError if `spec` does not name data that is here and laid out as expected."""
    resolve_data(spec, data_dir)


def resolve_text_file(spec: str, data_dir: Path) -> Path:
    """A language-model recipe's text file: `spec` as a path, else that name in the data folder."""
    for path in (Path(spec).expanduser(), data_dir / spec):
        if path.is_file():
            return path
    fetch = get_hint(spec)
    raise UsageError(
        f"text data '{spec}': no such file, here or in the data folder {data_dir}",
        hint=f"get it with `{fetch}`"
        if fetch
        else "give a UTF-8 .txt file (--set data=path/to/text.txt), or token files from "
        "`spotrun data push TEXT s3://BUCKET/NAME --tokenizer gpt2` (--set data=s3://...)",
    )


# A folder of token files (spotrun.train.data.token_files) has this description in train/.
TOKENS_META = "tokens.json"


def check_text_file(spec: str, data_dir: Path) -> None:
    """A language model's data: a text file, or a folder of token files, here or by name."""
    for folder in (Path(spec).expanduser(), data_dir / spec):
        if (folder / TRAIN_SPLIT / TOKENS_META).is_file():
            return
    resolve_text_file(spec, data_dir)


def pin_data_paths(overrides: list[str]) -> list[str]:
    """`overrides` with a relative `data=PATH` made absolute against this process's folder.

    A launched job runs in its run folder, not where `spotrun launch` was typed, so a relative
    path (`--set data=../shared/data/cifar10-jpeg.tar.gz`) would name another place there.
    Names from the data folder (`data=cifar10`) and absolute paths pass unchanged."""
    pinned = []
    for item in overrides:
        key, sep, value = item.partition("=")
        spec = value.strip()
        remote = spec.startswith(("s3://", "snapshot:"))  # staged on the instance, not here
        if key.strip() == "data" and sep and not remote and _looks_like_path(spec):
            path = Path(spec).expanduser()
            if not path.is_absolute():
                item = f"data={path.resolve()}"
            elif spec != value:
                item = f"data={spec}"
        pinned.append(item)
    return pinned
