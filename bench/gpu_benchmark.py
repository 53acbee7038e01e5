"""The recipes' GPU figures, in one go (about 8-12 minutes on one H100/H200, an estimate):

1. cifar10-fast on the real CIFAR-10 images, as shipped (10 epochs, evaluated once at the
   end): seconds per run and the test accuracy reached, over --runs seeds after one warm-up
   epoch; how many runs reached the recipe's 94% target.
2. resnet50-fast's training images per second on one GPU at each progressive-resizing size
   (128, 160, 192, 224 px; its bf16, channels_last, BlurPool, EMA... all on) and evaluation
   images per second at its 256 px test size, on synthetic data; resnet50-baseline's at 224 px
   (fp32, no methods) for reference; resnet101-fast's likewise; peak GPU memory for each (the
   recipes claim 24 GB per GPU is enough); and, from those rates, the GPU
   time of one epoch of each recipe on 8 GPUs assuming linear scaling and no data-loading
   stall (an estimate, labelled as such: ImageNet decoding often is the bottleneck).
3. gpt2-small-baseline against gpt2-small-fast (bench/gpu_gpt2.py): tokens per second and
   peak memory at 124M parameters, and the time to a fixed training loss on tiny Shakespeare
   in GPT-2 tokens (--text, --target-loss, --loss-steps).
4. FSDP (bench/gpu_fsdp.py): what fsdp=auto decides for gpt2-small-fast at 124M and 1.5B on
   this GPU, and tokens per second and peak memory per GPU with fsdp off (DDP) and on over
   every GPU of the machine; with one GPU those figures are printed as unmeasured.

    python bench/gpu_benchmark.py --data PATH/cifar10-jpeg.tar.gz     # needs an NVIDIA GPU
    python bench/gpu_benchmark.py --dry-run --data TINY_IMAGE_FOLDER  # CPU, tiny sizes

--dry-run runs every code path on the CPU with tiny nets and sizes (the test suite does this),
so the script is known to work before a GPU machine is rented; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spotrun.recipes import Recipe, get_recipe  # noqa: E402
from spotrun.train.batch_plan import BatchPlan  # noqa: E402
from spotrun.train.build import build_trainer, make_optimizer, seed_everything  # noqa: E402
from spotrun.train.callbacks import Callback  # noqa: E402
from spotrun.train.device import detect_capabilities  # noqa: E402
from spotrun.train.events import Event  # noqa: E402
from spotrun.train.methods import build_methods  # noqa: E402
from spotrun.train.methods.auto import resolve_methods  # noqa: E402
from spotrun.train.methods.progressive_resizing import bucket_sizes  # noqa: E402
from spotrun.train.models import build_model  # noqa: E402
from spotrun.train.state import State  # noqa: E402
from spotrun.train.trainer import Trainer  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"
DEFAULT_TEXT = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"
IMAGENET_TRAIN_IMAGES = 1_281_167


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ------------------------------------------------------------------ 1. cifar10-fast
@dataclass
class CifarRun:
    seed: int
    build_s: float  # data on the device (cached decode), model, methods (the whitening init)
    fit_s: float  # every training step and the final evaluation, synchronised
    elapsed_s: float  # the trainer's own clock at its final evaluation
    test_acc: float


def cifar_overrides(data: Path, dry_run: bool, extra: list[str]) -> list[str]:
    sets = [f"data={data}", *extra]
    if dry_run:
        sets += [
            'model_options={"widths": [4, 8, 8]}',
            "epochs=1",
            "batch_size=20",
            "eval_batch_size=20",
            "methods.patch_whitening.num_images=40",
        ]
    recipe = get_recipe("cifar10-fast", sets, data_here=False)
    # One evaluation, at the end, as airbench times its runs.
    return [*sets, f"eval_every_epochs={recipe.epochs}"]


def one_cifar_run(recipe: Recipe, device: torch.device) -> CifarRun:
    with tempfile.TemporaryDirectory() as tmp:
        sync(device)
        started = time.perf_counter()
        trainer = build_trainer(recipe, Path(tmp))
        trainer.checkpointer = None  # a checkpoint per epoch is not what is being timed
        sync(device)
        built = time.perf_counter()
        result = trainer.fit()
        sync(device)
        done = time.perf_counter()
    return CifarRun(
        recipe.seed,
        built - started,
        done - built,
        float(result.metrics["elapsed_s"]),
        float(result.metrics["test_acc"]),
    )


def cifar_part(
    data: Path, runs: int, device: torch.device, dry_run: bool, extra: list[str]
) -> None:
    sets = cifar_overrides(data, dry_run, extra)
    recipe = get_recipe("cifar10-fast", sets)
    target = recipe.target.value if recipe.target else 0.94
    print(
        f"\n== cifar10-fast on {data.name}: spotrun train cifar10-fast "
        + " ".join(f"--set '{s}'" for s in sets)
    )
    # Warm-up: CUDA context, cuDNN's algorithm choice, the decoded-image cache.
    warm = one_cifar_run(
        get_recipe("cifar10-fast", [*sets, "epochs=1", "eval_every_epochs=1"]), device
    )
    print(f"warm-up (1 epoch, not counted): {warm.build_s + warm.fit_s:.1f} s")
    results = []
    for seed in range(runs):
        run = one_cifar_run(get_recipe("cifar10-fast", [*sets, f"seed={seed}"]), device)
        results.append(run)
        print(
            f"seed {seed}: {run.fit_s:.2f} s training + final eval (trainer clock {run.elapsed_s:.2f} s; "
            f"set-up {run.build_s:.2f} s), test_acc {100 * run.test_acc:.2f}%",
            flush=True,
        )
    accs = [r.test_acc for r in results]
    reached = sum(a >= target for a in accs)
    print(
        f"cifar10-fast over {runs} runs: median {statistics.median(r.fit_s for r in results):.2f} s, "
        f"test_acc mean {100 * statistics.mean(accs):.2f}% (min {100 * min(accs):.2f}%, "
        f"max {100 * max(accs):.2f}%); {reached}/{runs} at or past {100 * target:.0f}%"
    )


# ------------------------------------------------------------------ 2. images per second
class SyntheticBatches:
    """The same random batch `count` times, already on the device: the model's rate alone."""

    def __init__(
        self, count: int, batch: int, side: int, classes: int, device: torch.device
    ) -> None:
        gen = torch.Generator().manual_seed(0)
        self.x = torch.randn(batch, 3, side, side, generator=gen).to(device)
        self.y = torch.randint(0, classes, (batch,), generator=gen).to(device)
        self.count = count
        self.plan = BatchPlan(batch)  # one process, the whole batch in one pass

    def __len__(self) -> int:
        return self.count

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for _ in range(start, self.count):
            yield self.x, self.y


class StepClock(Callback):
    """Synchronised time from the end of step `warmup` to the end of the last step."""

    def __init__(self, warmup: int, device: torch.device) -> None:
        self.warmup = warmup
        self.device = device
        self.started = 0.0
        self.seconds = 0.0

    def on_event(self, event: Event, state: State) -> None:
        if event is not Event.BATCH_END:
            return
        if state.step == self.warmup:
            sync(self.device)
            self.started = time.perf_counter()
        elif state.step == state.total_steps:
            sync(self.device)
            self.seconds = time.perf_counter() - self.started


@dataclass
class Rate:
    what: str
    side: int
    images_per_s: float
    peak_gib: float


def _trainer(
    recipe: Recipe, data: SyntheticBatches, device: torch.device, clock: StepClock | None
) -> Trainer:
    seed_everything(0)
    model = build_model(recipe.model, recipe.num_classes, **recipe.model_options).to(device)
    # Fixed sizes here: progressive resizing would shrink the synthetic batches again.
    methods = {k: v for k, v in recipe.methods.items() if k != "progressive_resizing"}
    return Trainer(
        model=model,
        optimizer=make_optimizer(model, recipe),
        train_data=data,
        eval_data=None,
        max_epochs=1,
        algorithms=build_methods(methods),
        callbacks=[clock] if clock else [],
        device=device,
    )


def train_rate(recipe: Recipe, side: int, steps: int, warmup: int, device: torch.device) -> Rate:
    per_gpu = recipe.device_batch or recipe.batch_size  # one GPU's part of the global batch
    data = SyntheticBatches(warmup + steps, per_gpu, side, recipe.num_classes, device)
    clock = StepClock(warmup, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    _trainer(recipe, data, device, clock).fit()
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0
    return Rate(f"{recipe.name} train", side, steps * per_gpu / clock.seconds, peak)


def eval_rate(recipe: Recipe, side: int, steps: int, device: torch.device) -> Rate:
    batch = recipe.eval_batch_size or recipe.batch_size
    train = SyntheticBatches(
        1, recipe.device_batch or recipe.batch_size, 32, recipe.num_classes, device
    )
    trainer = _trainer(recipe, train, device, None)
    trainer.eval_data = SyntheticBatches(1, batch, side, recipe.num_classes, device)
    trainer.evaluate()  # warm-up
    trainer.eval_data = SyntheticBatches(steps, batch, side, recipe.num_classes, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    sync(device)
    started = time.perf_counter()
    trainer.evaluate()
    sync(device)
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0
    return Rate(f"{recipe.name} eval", side, steps * batch / seconds, peak)


def epoch_gpu_seconds(recipe: Recipe, rate_at: dict[int, float], gpus: int) -> float:
    """GPU time of the whole run at these per-GPU rates, sizes following the recipe's
    progressive schedule (an estimate: linear scaling, no data-loading stall)."""
    from spotrun.train.methods.options import ProgressiveResizingOptions
    from spotrun.train.methods.progressive_resizing import progressive_size

    full = recipe.image_size or 224
    options = recipe.methods.get("progressive_resizing")
    per_epoch = IMAGENET_TRAIN_IMAGES / gpus
    total = 0.0
    for epoch in range(recipe.epochs):
        if options is None:
            side = full
        else:
            o = ProgressiveResizingOptions.model_validate(options)
            side = progressive_size(
                full,
                (epoch + 0.5) / recipe.epochs,
                initial_scale=o.initial_scale,
                delay_frac=o.delay_frac,
                finish_frac=o.finish_frac,
                buckets=o.buckets,
                size_multiple=o.size_multiple,
            )
        total += per_epoch / rate_at[side]
    return total


def _shrunk(name: str, dry_run: bool) -> Recipe:
    sets = (
        [
            "model_options.width=8",
            "image_size=64",
            "eval_image_size=72",
            "batch_size=4",
            "eval_batch_size=4",
        ]
        if dry_run
        else []
    )
    recipe = get_recipe(name, sets, data_here=False)
    if dry_run and "progressive_resizing" in recipe.methods:
        recipe = get_recipe(
            name, [*sets, "methods.progressive_resizing.size_multiple=8"], data_here=False
        )
    return recipe


def fast_rates(
    recipe: Recipe, device: torch.device, steps: int, warmup: int
) -> tuple[list[Rate], dict[int, float]]:
    """Training rates at each progressive size, then the evaluation rate at the test size."""
    pr = recipe.methods["progressive_resizing"]
    full = recipe.image_size or 224
    sides = bucket_sizes(full, pr["initial_scale"], pr["buckets"], pr["size_multiple"])
    rates: list[Rate] = []
    at: dict[int, float] = {}
    for side in dict.fromkeys(sides):
        rate = train_rate(recipe, side, steps, warmup, device)
        at[side] = rate.images_per_s
        rates.append(rate)
        print(f"  {rate.what} at {side} px: {rate.images_per_s:,.0f} images/s", flush=True)
    rate = eval_rate(recipe, recipe.eval_image_size or full, steps, device)
    print(f"  {rate.what} at {rate.side} px: {rate.images_per_s:,.0f} images/s", flush=True)
    return [*rates, rate], at


def throughput_part(device: torch.device, dry_run: bool, steps: int, warmup: int) -> None:
    fast, deeper = _shrunk("resnet50-fast", dry_run), _shrunk("resnet101-fast", dry_run)
    base = _shrunk("resnet50-baseline", dry_run)
    print(
        f"\n== images/s on one {device_name(device)}, synthetic data, {fast.device_batch or fast.batch_size} images per step "
        f"(the recipes' per-GPU batch); {warmup} warm-up steps, then {steps} timed"
    )
    rates, fast_at = fast_rates(fast, device, steps, warmup)
    base_rate = train_rate(base, base.image_size or 224, steps, warmup, device)
    print(
        f"  {base_rate.what} at {base_rate.side} px: {base_rate.images_per_s:,.0f} images/s",
        flush=True,
    )
    deeper_rates, deeper_at = fast_rates(deeper, device, steps, warmup)
    print("\n| what | side (px) | images/s per GPU | peak GPU memory (GiB) |")
    print("|---|--:|--:|--:|")
    for r in [*rates, base_rate, *deeper_rates]:
        print(f"| {r.what} | {r.side} | {r.images_per_s:,.0f} | {r.peak_gib:.1f} |")
    gpus = fast.resources.gpus
    fast_s = epoch_gpu_seconds(fast, fast_at, gpus)
    base_s = epoch_gpu_seconds(base, {base.image_size or 224: base_rate.images_per_s}, gpus)
    deeper_s = epoch_gpu_seconds(deeper, deeper_at, gpus)
    print(
        f"\nestimate from these rates (linear scaling to {gpus} GPUs, no data-loading stall, "
        f"evaluation not counted): resnet50-fast's {fast.epochs} epochs {fast_s / 60:.1f} min of "
        f"training; resnet50-baseline's {base.epochs} epochs {base_s / 60:.1f} min "
        f"({base_s / fast_s:.1f}x); resnet101-fast's {deeper.epochs} epochs {deeper_s / 60:.1f} min"
    )


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (dry run)"


def print_auto_choices(device: torch.device) -> None:
    """What `auto` picks for each recipe on this device, and why (the trainer's own rule)."""
    caps = detect_capabilities(str(device))
    print(f"device: {caps.line()}")
    for name in ("cifar10-fast", "resnet50-fast", "gpt2-small-fast"):
        recipe = get_recipe(name, data_here=False)
        chosen = resolve_methods(recipe.methods, caps).choices
        print(f"  {name}: " + "; ".join(c.line() for c in chosen))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the CIFAR-10 images")
    parser.add_argument("--runs", type=int, default=3, help="cifar10-fast runs (seeds)")
    parser.add_argument("--steps", type=int, default=50, help="timed steps per size")
    parser.add_argument("--warmup", type=int, default=15, help="untimed steps before them")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes: test the script")
    parser.add_argument(
        "--cifar-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override cifar10-fast for a variant (e.g. batch_size=512), repeatable",
    )
    parser.add_argument("--skip-cifar", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-gpt2", action="store_true")
    parser.add_argument("--skip-fsdp", action="store_true")
    parser.add_argument("--text", type=Path, default=DEFAULT_TEXT, help="gpt2 time-to-loss text")
    parser.add_argument("--target-loss", type=float, default=5.0, help="gpt2 training loss")
    parser.add_argument("--loss-steps", type=int, default=300, help="gpt2 steps to train")
    args = parser.parse_args()
    if args.dry_run:
        device = torch.device("cpu")
        runs, steps, warmup = 1, 2, 1
        # Tiny sizes: one thread is fastest, and OpenMP threads that wait on each other on a
        # busy machine make the dry run ten times slower.
        torch.set_num_threads(1)
    elif torch.cuda.is_available():
        device = torch.device("cuda", 0)
        runs, steps, warmup = args.runs, args.steps, args.warmup
        torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick its fastest kernels
    else:
        sys.exit(
            "no CUDA GPU here: run this on a GPU machine, or pass --dry-run to test it on the CPU"
        )
    cuda = torch.version.cuda or "none"
    print(f"{device_name(device)}; torch {torch.__version__}, CUDA {cuda}")
    print_auto_choices(device)
    started = time.perf_counter()
    if not args.skip_cifar:
        if not args.data.exists():
            sys.exit(f"no data at {args.data}: pass --data PATH (cifar10-jpeg.tar.gz)")
        cifar_part(args.data.resolve(), runs, device, args.dry_run, args.cifar_set)
    if not args.skip_throughput:
        throughput_part(device, args.dry_run, steps, warmup)
    if not args.skip_gpt2:
        from bench.gpu_gpt2 import gpt2_part  # its own module: this file is long enough

        if not args.text.exists():
            sys.exit(f"no text at {args.text}: pass --text PATH (tinyshakespeare.txt)")
        gpt2_part(
            device,
            dry_run=args.dry_run,
            steps=steps,
            warmup=warmup,
            text=args.text.resolve(),
            target_loss=args.target_loss,
            loss_steps=4 if args.dry_run else args.loss_steps,
        )
    if not args.skip_fsdp:
        from bench.gpu_fsdp import fsdp_part  # its own module, like gpu_gpt2's

        if not args.text.exists():
            sys.exit(f"no text at {args.text}: pass --text PATH (tinyshakespeare.txt)")
        fsdp_part(device, dry_run=args.dry_run, steps=steps, warmup=warmup, text=args.text)
    print(f"\nbenchmark took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
