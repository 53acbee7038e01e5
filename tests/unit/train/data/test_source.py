"""Finding data by name or path and refusing wrong layouts with a message naming the right one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spotrun.core.errors import UsageError
from spotrun.recipes import get_recipe
from spotrun.train.data.source import index_split, pin_data_paths, resolve_data, split_dirs
from tests.conftest import Env
from tests.e2e.test_bad_input import assert_one_line_error
from tests.unit.train.data.images import CLASSES, make_cifar_batches, make_image_folder, tar_folder

REPO = Path(__file__).resolve().parents[4]


def test_digits_needs_no_folder(tmp_path: Path) -> None:
    assert resolve_data("digits", tmp_path).kind == "digits"


def test_a_path_to_an_image_folder(tmp_path: Path) -> None:
    make_image_folder(tmp_path / "set")
    loc = resolve_data(str(tmp_path / "set"), tmp_path / "elsewhere")
    assert (loc.kind, loc.path, loc.archive) == ("image-folder", tmp_path / "set", False)


def test_a_name_is_looked_up_in_the_data_folder(tmp_path: Path) -> None:
    make_image_folder(tmp_path / "src")
    tar_folder(tmp_path / "src", tmp_path / "cifar10-jpeg.tar.gz")
    loc = resolve_data("cifar10", tmp_path)
    assert (loc.kind, loc.path, loc.archive) == (
        "image-folder",
        tmp_path / "cifar10-jpeg.tar.gz",
        True,
    )
    make_image_folder(tmp_path / "mine")
    assert resolve_data("mine", tmp_path).path == tmp_path / "mine"


def test_cifar_python_folder_archive_and_parent(tmp_path: Path) -> None:
    make_cifar_batches(tmp_path / "cifar-10-batches-py")
    assert resolve_data(str(tmp_path), tmp_path).path == tmp_path / "cifar-10-batches-py"
    loc = resolve_data(str(tmp_path / "cifar-10-batches-py"), tmp_path)
    assert loc.kind == "cifar-batches"
    archive = tar_folder(
        tmp_path / "cifar-10-batches-py", tmp_path / "c.tar.gz", "cifar-10-batches-py"
    )
    assert resolve_data(str(archive), tmp_path).kind == "cifar-batches"


def test_an_archive_with_a_top_folder(tmp_path: Path) -> None:
    make_image_folder(tmp_path / "set")
    archive = tar_folder(tmp_path / "set", tmp_path / "set.tgz", "wrapped")
    assert resolve_data(str(archive), tmp_path).kind == "image-folder"


def _message(exc: pytest.ExceptionInfo[UsageError]) -> str:
    return exc.value.user_message()


@pytest.mark.parametrize(
    ("breakage", "says"),
    [
        ("no-train", "has no train/ folder"),
        ("no-eval", "neither val/ nor test/"),
        ("no-classes", "has no class folders"),
        ("empty-class", "holds no images"),
    ],
)
def test_bad_layouts_name_the_expected_one(tmp_path: Path, breakage: str, says: str) -> None:
    folder = make_image_folder(tmp_path / "set").root
    if breakage == "no-train":
        shutil.rmtree(folder / "train")
    elif breakage == "no-eval":
        shutil.rmtree(folder / "test")
    elif breakage == "no-classes":
        for name in CLASSES:
            shutil.rmtree(folder / "train" / name)
    else:
        for f in (folder / "train" / CLASSES[0]).iterdir():
            f.unlink()
    with pytest.raises(UsageError) as exc:
        resolve_data(str(folder), tmp_path)
    assert says in _message(exc)
    assert "DATA/train/<class>/<image>.jpg" in _message(exc)


def test_full_index_checks_every_class_and_maps_eval_labels(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "set", per_class=3, per_class_test=1).root
    train_dir, eval_dir = split_dirs(folder)
    train = index_split(train_dir)
    assert train.classes == CLASSES and len(train) == 9
    assert train.labels == (0, 0, 0, 1, 1, 1, 2, 2, 2)
    shutil.rmtree(eval_dir / "cat")  # an eval split may lack a class; labels keep train's order
    evaluation = index_split(eval_dir, list(train.classes))
    assert evaluation.labels == (1, 2) and evaluation.files == ("dog/00.png", "frog/00.png")
    (eval_dir / "zebra").mkdir()
    with pytest.raises(UsageError, match="classes that train/ lacks: zebra"):
        index_split(eval_dir, list(train.classes))
    for f in (train_dir / "dog").iterdir():
        f.unlink()
    with pytest.raises(UsageError, match="dog holds no images"):
        index_split(train_dir)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("missing-set", "is not in the data folder"),
        ("./no/such/folder", "no such file or folder"),
        ("notes.txt", "neither a folder nor a .tar"),
        ("broken.tar.gz", "not a readable tar archive"),
        ("other.tar.gz", "no recognisable data set"),
    ],
)
def test_bad_data_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, says: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "broken.tar.gz").write_bytes(b"not gzip at all")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "readme.md").write_text("x")
    tar_folder(tmp_path / "junk", tmp_path / "other.tar.gz")
    if spec == "notes.txt":
        spec = str(tmp_path / spec)
    with pytest.raises(UsageError) as exc:
        resolve_data(spec, tmp_path / "data")
    assert says in _message(exc)


def test_cifar_folder_missing_a_batch(tmp_path: Path) -> None:
    make_cifar_batches(tmp_path / "c")
    (tmp_path / "c" / "data_batch_3").unlink()
    with pytest.raises(UsageError, match="lacks data_batch_3"):
        resolve_data(str(tmp_path / "c"), tmp_path)


def test_recipe_check_refuses_bad_data_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPOTRUN_HOME", str(tmp_path / "home"))
    with pytest.raises(UsageError, match="no train/ folder"):
        get_recipe("digits-fast", [f"data={tmp_path}"])
    with pytest.raises(UsageError, match=r"not in the data folder .*home/data"):
        get_recipe("digits-fast", ["data=cifar10"])
    # the data may live on the instance only: launch can skip the local check
    assert get_recipe("digits-fast", ["data=cifar10"], data_here=False).data == "cifar10"
    make_image_folder(tmp_path / "home" / "data" / "cifar10")
    assert get_recipe("digits-fast", ["data=cifar10"]).data == "cifar10"


def test_data_dir_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'data_dir = "{tmp_path / "sets"}"\n')
    monkeypatch.setenv("SPOTRUN_HOME", str(home))
    make_image_folder(tmp_path / "sets" / "pets")
    assert get_recipe("digits-fast", ["data=pets"]).data == "pets"


def test_checking_data_imports_neither_torch_nor_pillow(tmp_path: Path) -> None:
    make_image_folder(tmp_path / "set")
    code = (
        "import sys\n"
        "from spotrun.recipes import get_recipe\n"
        f"get_recipe('digits-fast', ['data={tmp_path / 'set'}'])\n"
        "print(sorted(m for m in ('torch', 'PIL', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        env={
            "PYTHONPATH": str(REPO),
            "SPOTRUN_HOME": str(tmp_path / "home"),
            "PATH": "/usr/bin:/bin",
        },
    )
    assert out.stdout.strip() == "[]"


def test_launch_with_bad_data_starts_nothing(env: Env, tmp_path: Path) -> None:
    (tmp_path / "set" / "train" / "cat").mkdir(parents=True)
    proc = env.cli("launch", "digits-fast", "--set", f"data={tmp_path / 'set'}")
    assert_one_line_error(proc, 2, "has train/ but neither val/ nor test/", "DATA/train/<class>")
    assert env.runs() == [] and env.sessions() == []


def test_listing_recipes_needs_no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import spotrun.recipes as recipes
    from spotrun.service import runs as api

    monkeypatch.setenv("SPOTRUN_HOME", str(tmp_path / "home"))
    pets = get_recipe("digits-fast", ["data=pets"], data_here=False).model_copy(
        update={"name": "pets-fast"}
    )
    monkeypatch.setitem(recipes._FACTORIES, "pets-fast", lambda: pets)
    assert "pets-fast" in [r.name for r in api.recipes()]
    with pytest.raises(UsageError, match="data set 'pets' is not in the data folder"):
        get_recipe("pets-fast")


def test_launch_pins_a_relative_data_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    items = ["epochs=2", "data=./sets/cifar.tar.gz", "lr=0.1"]
    assert pin_data_paths(items) == [
        "epochs=2",
        f"data={tmp_path.resolve() / 'sets' / 'cifar.tar.gz'}",
        "lr=0.1",
    ]
    assert pin_data_paths(["data=../x"]) == [f"data={tmp_path.resolve().parent / 'x'}"]
    # names from the data folder and absolute paths are left as they are
    for same in (["data=cifar10"], ["data=digits"], [f"data={tmp_path}"], ["methods.ema=null"]):
        assert pin_data_paths(same) == same
