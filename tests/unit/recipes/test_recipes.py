"""Every shipped recipe: it validates, says what it was measured to reach and how, declares
its resources, takes overrides, and trains a few steps on the CPU on a tiny ImageFolder that
the test writes with the recipe's number of classes (its methods, model surgery included,
acting as they would at full size)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from spotrun.core.errors import UsageError
from spotrun.recipes import Recipe, get_recipe, recipe_names
from spotrun.train.build import build_trainer
from spotrun.train.callbacks import Callback
from spotrun.train.events import Event
from spotrun.train.state import State
from tests.unit.train.tiny import StopAt

IMAGE_RECIPES = [
    "cifar10-baseline",
    "cifar10-fast",
    "resnet50-baseline",
    "resnet50-fast",
    "resnet101-fast",
]


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Decoded-image caches go to a fresh SPOTRUN_HOME; torch on one thread (tiny models)."""
    monkeypatch.setenv("SPOTRUN_HOME", str(tmp_path / "home"))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def write_image_folder(root: Path, classes: int, *, train_per_class: int, eval_count: int) -> Path:
    """root/train/cNNNN/*.jpg for every class; root/val/ holds `eval_count` images of the
    first classes. Each class has its own mean colour, so a few steps can learn something."""
    rng = np.random.default_rng(0)
    colours = rng.integers(40, 216, size=(classes, 3))
    for split, count in (("train", classes * train_per_class), ("val", eval_count)):
        for i in range(count):
            label = i % classes
            noise = rng.integers(-30, 30, size=(36, 36, 3))
            pixels = np.clip(colours[label] + noise, 0, 255).astype(np.uint8)
            folder = root / split / f"c{label:04d}"
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels).save(folder / f"{i // classes:02d}.jpg", quality=90)
    return root


@pytest.fixture(scope="module")
def cifar_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cifar-like")
    return write_image_folder(root, 10, train_per_class=8, eval_count=20)


@pytest.fixture(scope="module")
def imagenet_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imagenet-like")
    return write_image_folder(root, 1000, train_per_class=1, eval_count=8)


# ------------------------------------------------------------------ what they state
@pytest.mark.parametrize("name", recipe_names())
def test_recipe_states_result_command_and_resources(name: str) -> None:
    recipe = get_recipe(name, data_here=False)
    assert recipe.name == name
    assert recipe.result and recipe.measured_with and recipe.target is not None
    assert "PENDING" not in recipe.result + recipe.measured_with
    if name in IMAGE_RECIPES:
        assert recipe.resources.gpus >= 1 and recipe.resources.gpu_memory_gb
        assert recipe.augment.flip


def test_imagenet_recipes_are_unmeasured_and_say_so() -> None:
    for name in ("resnet50-baseline", "resnet50-fast", "resnet101-fast"):
        recipe = get_recipe(name, data_here=False)
        assert "unmeasured" in recipe.result, name
        assert recipe.resources.gpus == 8 and recipe.data == "imagenet"


def test_baselines_use_no_speed_up_method_but_the_step_schedule() -> None:
    for name in ("cifar10-baseline", "resnet50-baseline"):
        assert list(get_recipe(name, data_here=False).methods) == ["step_decay"]


def test_resnet50_baseline_is_the_standard_recipe() -> None:
    r = get_recipe("resnet50-baseline", data_here=False)
    assert r.batch_size == 1024  # the global batch, on any number of GPUs
    assert r.lr == pytest.approx(0.1 * r.batch_size / 256) and r.weight_decay == 1e-4
    assert r.epochs == 90 and r.image_size == 224 and r.model == "resnet50"
    milestones = r.methods["step_decay"]["milestones"]
    assert [round(m * r.epochs) for m in milestones] == [30, 60, 80]


def test_resnet50_fast_resizes_progressively_and_tests_larger() -> None:
    from spotrun.train.methods.progressive_resizing import bucket_sizes

    r = get_recipe("resnet50-fast", data_here=False)
    pr = r.methods["progressive_resizing"]
    assert r.image_size is not None and r.eval_image_size is not None
    sizes = bucket_sizes(r.image_size, pr["initial_scale"], pr["buckets"], pr["size_multiple"])
    assert sizes == [128, 160, 192, 224]
    assert r.eval_image_size > r.image_size
    wanted = {"blurpool", "ema", "label_smoothing", "channels_last", "mixed_precision"}
    assert wanted <= set(r.methods)


# ------------------------------------------------------------------ overrides
def test_overrides_reach_model_options_methods_and_resources() -> None:
    r = get_recipe(
        "cifar10-fast",
        [
            'model_options={"widths": [16, 32, 32]}',
            "methods.tta.translate=0",
            "methods.ema=null",
            "resources.gpus=2",
            "epochs=3",
        ],
        data_here=False,
    )
    assert r.model_options == {"widths": [16, 32, 32]} and r.epochs == 3
    assert r.methods["tta"] == {"flips": True, "translate": 0} and "ema" not in r.methods
    assert r.resources.gpus == 2


@pytest.mark.parametrize(
    ("name", "item", "fragment"),
    [
        ("cifar10-baseline", "methods.one_cycle={}", "cannot be used together"),
        ("resnet50-fast", "methods.progressive_resizing.finish_frac=0.2", "greater than delay"),
        ("resnet50-baseline", "methods.step_decay.milestones=[0.9,0.5]", "increasing"),
    ],
)
def test_bad_overrides_are_refused(name: str, item: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        get_recipe(name, [item], data_here=False)


def test_missing_named_data_is_refused_with_the_layout(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="data set 'imagenet' is not in the data folder"):
        get_recipe("resnet50-fast")


# ------------------------------------------------------------------ a few steps each
class Seen(Callback):
    """What the model was fed: input sides at each step, and the evaluations."""

    def __init__(self) -> None:
        self.sides: list[int] = []
        self.evals: list[dict[str, float]] = []

    def on_event(self, event: Event, state: State) -> None:
        if event is Event.BEFORE_FORWARD and state.inputs is not None:
            self.sides.append(int(state.inputs.shape[-1]))
        elif event is Event.EVAL_END:
            self.evals.append(dict(state.metrics))


def _train(recipe: Recipe, run_dir: Path, callbacks: list[Callback]) -> State:
    trainer = build_trainer(recipe, run_dir, extra_callbacks=callbacks)
    result = trainer.fit()
    if result.interrupted:  # stopped after a few steps: evaluate what it has
        trainer.evaluate()
    return trainer.state


@pytest.mark.parametrize("name", ["cifar10-baseline", "cifar10-fast"])
def test_cifar_recipe_trains_on_a_tiny_image_folder(
    name: str, cifar_like: Path, tmp_path: Path
) -> None:
    shrink = (
        'model_options={"stem": "cifar", "width": 4}'
        if name == "cifar10-baseline"
        else 'model_options={"widths": [8, 16, 16]}'
    )
    recipe = get_recipe(
        name,
        [
            f"data={cifar_like}",
            "image_size=32",
            "data_workers=0",
            "batch_size=20",
            "epochs=2",
            "threads=1",
            shrink,
        ]
        + (["methods.patch_whitening.num_images=40"] if name == "cifar10-fast" else []),
    )
    seen = Seen()
    state = _train(recipe, tmp_path / "run", [seen])
    assert state.step == 2 * 4 and len(seen.evals) == 2  # 80 images / 20, two epochs
    assert set(seen.sides) == {32}
    assert all(np.isfinite(e["train_loss"]) and 0 <= e["test_acc"] <= 1 for e in seen.evals)
    assert (tmp_path / "run" / "metrics.jsonl").exists()


@pytest.mark.parametrize("name", ["resnet50-baseline", "resnet50-fast", "resnet101-fast"])
def test_imagenet_recipe_trains_a_few_steps_on_1000_classes(
    name: str, imagenet_like: Path, tmp_path: Path
) -> None:
    # Streamed from the folder (image_cache=off), as full ImageNet would be; 64 px images
    # make progressive resizing's buckets 32, 40, 48, 64 px.
    recipe = get_recipe(
        name,
        [
            f"data={imagenet_like}",
            "image_size=64",
            "eval_image_size=72",
            "image_cache=off",
            "data_workers=0",
            "batch_size=4",
            "eval_batch_size=8",
            "threads=1",
            "model_options.width=8",
        ]
        + (["methods.progressive_resizing.size_multiple=8"] if "fast" in name else []),
    )
    seen = Seen()
    steps = 3
    state = _train(recipe, tmp_path / "run", [seen, StopAt(steps)])
    assert state.step == steps and len(seen.evals) == 1
    assert np.isfinite(seen.evals[0]["test_acc"])
    if "fast" in name:
        assert seen.sides == [32] * steps  # the first bucket: 64 px * 128/224, in 8s
    else:
        assert seen.sides == [64] * steps


# ------------------------------------------------------------------ recipes show
def test_show_lists_every_method_with_all_options_in_application_order() -> None:
    from spotrun.recipes.describe import describe_recipe

    text = "\n".join(describe_recipe(get_recipe("resnet50-fast", data_here=False)))
    assert "8 GPUs with >= 24 GB each" in text
    assert "1,024 images per step = 8 GPUs x 128, or 4 GPUs x 128 x 2 accumulated" in text
    assert "train 224 px, test 256 px" in text
    methods = text[text.index("methods") :].splitlines()[1:]
    names = [m.split()[0] for m in methods]
    assert names[:2] == ["warmup_decay", "blurpool"] and names[-1] == "ema"
    assert set(names) == set(get_recipe("resnet50-fast", data_here=False).methods)
    # defaults are filled in: what is printed is what would run
    assert "mixed_precision       precision=auto init_scale=65536" in text
    assert "unmeasured" in text


def test_show_through_the_command_line(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**os.environ, "SPOTRUN_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    shown = subprocess.run(
        [sys.executable, "-m", "spotrun", "recipes", "show", "cifar10-baseline"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown.startswith("cifar10-baseline: CIFAR-10, ResNet-18")
    assert "step_decay  milestones=[0.5, 0.75] gamma=0.1 warmup_frac=0" in shown
    assert "pad 4 px (zeros) and crop back; mirror half the images" in shown


def test_gpt2_small_recipes_are_gpt2_small_and_unmeasured() -> None:
    from spotrun.train.models import build_model

    for name in ("gpt2-small-baseline", "gpt2-small-fast"):
        r = get_recipe(name, data_here=False)
        assert "unmeasured" in r.result and r.resources.gpus >= 1, name
        assert r.text is not None and r.text.tokenizer == "gpt2" and r.text.block_size == 1024
        with torch.device("meta"):  # shapes only: no 124M parameters in memory
            model = build_model(r.model, 50_257, **r.model_options)
        # GPT-2 small's published size: 12 x 768, 12 heads, 1,024 positions, tied embedding.
        assert sum(p.numel() for p in model.parameters()) == 124_439_808, name
    baseline = get_recipe("gpt2-small-baseline", data_here=False)
    assert set(baseline.methods) == {"warmup_decay", "grad_clipping"}
    fast = get_recipe("gpt2-small-fast", data_here=False)
    assert {"rotary", "qk_norm", "fused_attention", "mixed_precision"} <= set(fast.methods)
    assert fast.num_classes % 64 == 0 and fast.num_classes >= 50_257
    from spotrun.recipes.describe import describe_recipe

    shown = "\n".join(describe_recipe(fast))
    assert "gpt2 tokens in windows of 1,024, 1,000 steps an epoch" in shown
    assert (
        "a vocabulary of 50,304" in shown
        and (
            "96 windows of 1,024 tokens per step = 8 GPUs x 12, or 4 GPUs x 12 x 2 accumulated "
            "(98,304 tokens per step)"
        )
        in shown
    )
