"""What a recipe is: a typed, complete description of one training job and its stated result."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from spotrun.core.config import Resources, StrictModel


class Target(StrictModel):
    """The result a recipe aims at: time and cost to reach it are what DAWNBench measured."""

    metric: str = "test_acc"
    value: float
    mode: Literal["max", "min"] = "max"

    def reached(self, metrics: dict[str, Any]) -> bool:
        got = metrics.get(self.metric)
        if not isinstance(got, (int, float)):
            return False
        return got >= self.value if self.mode == "max" else got <= self.value


class Augment(StrictModel):
    """Training-time augmentation of image batches, drawn afresh for every batch.

    Crop, translate and flip run on whole batches on the training device. `crop_scale` is the
    random-resized-crop applied per image while decoding, only for streamed image sets (large
    images of mixed sizes, the ImageNet case); cached sets are already at their final size.
    """

    crop_padding: int = Field(0, ge=0, description="pad by this many pixels, crop back at random")
    padding_mode: Literal["reflect", "zeros"] = "reflect"
    translate: int = Field(0, ge=0, description="random shift of up to this many pixels, 0 fill")
    flip: bool = Field(False, description="random horizontal flip, half the images")
    crop_scale: tuple[float, float] = Field(
        (0.08, 1.0), description="streamed sets: random-resized-crop area fraction range"
    )

    @model_validator(mode="after")
    def _scale_in_order(self) -> Augment:
        low, high = self.crop_scale
        if not 0 < low <= high <= 1:
            raise ValueError("crop_scale must be two fractions with 0 < low <= high <= 1")
        return self


class Text(StrictModel):
    """A language-model task: `data` is a UTF-8 text file, or token files from `spotrun data
    push TEXT --tokenizer gpt2` (a folder, or s3://), cut into token windows."""

    tokenizer: Literal["char", "byte", "gpt2"] = Field(
        "char",
        description="char: the file's own characters; byte: UTF-8 bytes (256 ids); gpt2: "
        "GPT-2's BPE (50,257 ids; pip install 'spotrun[lm]')",
    )
    block_size: int = Field(256, ge=2, description="tokens of context per training window")
    steps_per_epoch: int = Field(100, ge=1, description="random-window batches per epoch")
    val_fraction: float = Field(
        0.1, gt=0, lt=1, description="last fraction of chars held out (token files: at push)"
    )
    eval_tokens: int | None = Field(
        None, ge=2, description="evaluate on the first this many validation tokens; None = all"
    )


Beta = Annotated[float, Field(ge=0, lt=1)]  # an Adam moment's decay per step


class Recipe(StrictModel):
    name: str
    description: str = Field(description="one line: what it trains and how")
    result: str = Field(description="the result it was measured to reach, in words")
    measured_with: str = Field(description="the command that measured the result")
    target: Target | None = None
    resources: Resources = Field(default_factory=Resources)
    multi_node: bool = Field(True, description="False: the recipe refuses --nodes above 1")

    data: str = Field(
        description="'digits'; a data set name looked up in the data folder ('cifar10'); or a "
        "path: an ImageFolder (train/ and val/ or test/ of class folders), a CIFAR-10 python "
        "folder, or a .tar / .tar.gz of either"
    )
    stream_data: bool = Field(
        False,
        description="s3:// sets pushed as shards: start training once the evaluation split and "
        "the first training shard are staged; epoch 1 reads the training shards in order as "
        "they arrive (one process; needs image_size, normalize imagenet or none)",
    )
    image_size: int | None = Field(
        None, ge=8, description="pixels (square) of training images; None = as stored"
    )
    eval_image_size: int | None = Field(None, ge=8, description="test images; None = image_size")
    eval_batch_size: int | None = Field(
        None, ge=1, description="per process; None = device_batch, else batch_size"
    )
    data_workers: int | None = Field(
        None, ge=0, description="image decoding processes; None = CPU count up to 8; 0 = inline"
    )
    image_cache: Literal["auto", "on", "off"] = Field(
        "auto",
        description="on: decode images once into a uint8 cache held in memory; off: decode "
        "every epoch in workers; auto: on when the decoded split fits in 4 GiB",
    )
    normalize: Literal["dataset", "imagenet", "none"] = Field(
        "dataset",
        description="subtract a per-channel mean, divide by its std: the training set's own, "
        "ImageNet's, or none (pixels only scaled to 0..1)",
    )
    augment: Augment = Field(default_factory=Augment)
    text: Text | None = Field(
        None, description="set for a language model: data is a text file, num_classes its vocab"
    )

    model: str
    model_options: dict[str, Any] = Field(default_factory=dict)
    num_classes: int = Field(10, ge=2)

    epochs: int = Field(ge=1)
    batch_size: int = Field(
        ge=1,
        description="the global batch: samples (images, windows) per optimizer step over all "
        "processes, whatever their number; each takes an equal share",
    )
    device_batch: int | None = Field(
        None,
        ge=1,
        description="the most samples one device computes at once: a larger share per device "
        "is accumulated over equal micro-batches before the step; None = the whole share",
    )
    optimizer: Literal["sgd", "adamw", "muon"] = Field(
        "sgd",
        description="muon: hidden layers' matrices by Muon (muon_lr, muon_momentum), "
        "embeddings, output head, biases and gains by AdamW (lr)",
    )
    lr: float = Field(gt=0, description="peak learning rate")
    muon_lr: float = Field(0.02, gt=0, description="optimizer muon: the matrices' peak lr")
    muon_momentum: float = Field(0.95, ge=0, lt=1, description="optimizer muon: Nesterov")
    momentum: float = Field(0.9, ge=0, lt=1)
    nesterov: bool = True
    weight_decay: float = Field(5e-4, ge=0)
    betas: tuple[Beta, Beta] = Field(
        (0.9, 0.999), description="optimizer adamw: the moment decays (nanoGPT char: 0.9, 0.99)"
    )
    seed: int = 0
    eval_every_epochs: int = Field(1, ge=1)
    checkpoint_every_steps: int | None = Field(None, ge=1, description="also at every epoch end")
    threads: int | None = Field(None, ge=1, description="torch CPU threads; None = torch default")
    fsdp: Literal["off", "on", "auto"] = Field(
        "off",
        description="shard weights, gradients and optimizer state over the processes (torch "
        "FSDP, spotrun.train.fsdp); auto: where they would fill over half of one device",
    )

    methods: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="speed-up method name -> its options"
    )

    def eval_batch(self) -> int:
        """Evaluation samples per batch and process."""
        return self.eval_batch_size or self.device_batch or self.batch_size

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "result": self.result}

    @model_validator(mode="after")
    def _stream_data_needs(self) -> Recipe:
        if self.stream_data and self.normalize == "dataset":
            raise ValueError(
                "stream_data starts before the training set is all here: its statistics are "
                "unknown; set normalize=imagenet (or none)"
            )
        return self
