"""Token data for language models: a text file, tokenised, split, and cut into windows.

* Tokenisation: `char` (the sorted set of characters in the file, as nanoGPT's
  shakespeare_char), `byte` (UTF-8 bytes, 256 ids, any text) or `gpt2` (GPT-2's 50,257-token
  BPE, gpt2_bpe.py). `data` may also be a folder of token files (token_files.py), what
  `spotrun data push TEXT --tokenizer gpt2|char|byte` makes, s3:// ones staged here first (a
  char folder carries its vocabulary).
* Split: contiguous; the last `val_fraction` of the characters is held out for validation.
* Training batches: each step's global batch is `batch_size` windows of block_size + 1 tokens
  at random offsets, drawn from a generator seeded by (seed, epoch) alone; each rank takes a
  contiguous 1/world_size of every step's windows. So the windows and their order depend on
  neither the number of processes nor a restart (a resumed run draws exactly the windows the
  uninterrupted one would have); an "epoch" is `steps_per_epoch` such steps.
* Evaluation: the validation split cut into consecutive non-overlapping windows (the same every
  time), so validation loss is comparable across runs and steps.

Inputs are (B, T) token ids; targets are the next tokens flattened to (B*T,), matching the GPT
model's flattened logits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch

from spotrun.core.config import load_settings
from spotrun.core.errors import UsageError
from spotrun.core.rundir import VOCABULARY_FILE
from spotrun.datasets.prepare import local_data
from spotrun.datasets.spec import is_remote
from spotrun.train.batch_plan import plan_batches
from spotrun.train.data.gpt2_bpe import GPT2_VOCAB, decode_gpt2, encode_gpt2
from spotrun.train.data.source import resolve_text_file
from spotrun.train.data.token_files import TRAIN, VAL, TokenSequence, is_token_folder

if TYPE_CHECKING:
    from spotrun.recipes.base import Recipe

TokenizerName = Literal["char", "byte", "gpt2"]


@dataclass(frozen=True)
class Tokenizer:
    """Text <-> token ids; `chars` is the char vocabulary (None for bytes and gpt2)."""

    kind: TokenizerName
    chars: str | None = None

    @classmethod
    def fit(cls, kind: TokenizerName, text: str) -> Tokenizer:
        return cls(kind, "".join(sorted(set(text))) if kind == "char" else None)

    @property
    def vocab_size(self) -> int:
        if self.kind == "gpt2":
            return GPT2_VOCAB
        return len(self.chars) if self.chars is not None else 256

    def encode(self, text: str) -> torch.Tensor:
        if self.kind == "gpt2":
            return torch.tensor(encode_gpt2(text), dtype=torch.long)
        if self.chars is None:
            return torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).long()
        index = {c: i for i, c in enumerate(self.chars)}
        unknown = sorted(set(text) - index.keys())
        if unknown:
            raise UsageError(
                f"text has characters outside the vocabulary: {''.join(unknown[:10])!r}",
                hint="use the byte tokenizer (--set text.tokenizer=byte) for arbitrary text",
            )
        return torch.tensor([index[c] for c in text], dtype=torch.long)

    def decode(self, ids: list[int]) -> str:
        if self.kind == "gpt2":
            return decode_gpt2(ids)
        if self.chars is None:
            return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")
        return "".join(self.chars[i] for i in ids if 0 <= i < len(self.chars))


def write_vocabulary(run_dir: Path, tokenizer: Tokenizer) -> None:
    """A char vocabulary into the run folder: `spotrun sample` decodes with it wherever the
    text came from (a token folder staged on an instance, a file the laptop lacks)."""
    if tokenizer.chars is not None:
        record = {"tokenizer": tokenizer.kind, "chars": tokenizer.chars}
        (run_dir / VOCABULARY_FILE).write_text(json.dumps(record) + "\n")


def read_vocabulary(run_dir: Path) -> Tokenizer | None:
    """The run folder's char vocabulary; None when the run has none (byte, gpt2, older runs)."""
    path = run_dir / VOCABULARY_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        return Tokenizer("char", str(record["chars"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} is not a vocabulary ({exc})", hint="remove it") from exc


def read_text(path: Path) -> str:
    if not path.is_file():
        raise UsageError(f"text data '{path}': no such file", hint="give a UTF-8 .txt file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path} is not UTF-8 text ({exc})", hint="give a UTF-8 .txt file"
        ) from exc


@dataclass(frozen=True)
class TextSplit:
    tokenizer: Tokenizer
    train: torch.Tensor | TokenSequence  # token ids, 1-D
    val: torch.Tensor | TokenSequence
    val_chars: int  # characters in the validation text (for nats per character)


def split_text(text: str, kind: TokenizerName, val_fraction: float = 0.1) -> TextSplit:
    """Tokenise `text`; the last `val_fraction` of its characters is the validation split."""
    cut = int(len(text) * (1.0 - val_fraction))
    tokenizer = Tokenizer.fit(kind, text)
    return TextSplit(
        tokenizer, tokenizer.encode(text[:cut]), tokenizer.encode(text[cut:]), len(text) - cut
    )


class TextWindows:
    """Training batches: this rank's share of `steps` global batches of random windows per
    epoch, fixed by (seed, epoch); `batch_size` is the global batch."""

    def __init__(
        self,
        tokens: torch.Tensor | TokenSequence,
        *,
        block_size: int,
        batch_size: int,
        steps: int,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        device_batch: int | None = None,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        if len(tokens) < block_size + 2:
            raise UsageError(
                f"the training text has {len(tokens)} tokens, fewer than block_size + 2",
                hint="use a longer text or a smaller block_size",
            )
        self.tokens = TokenSequence.of(tokens)  # windows are gathered, never copied out whole
        self.window = block_size + 1
        self.count = len(tokens) - block_size  # window starts: 0 .. len - block_size - 1
        self.plan = plan_batches(batch_size, world_size, device_batch)
        self.steps = steps
        self.seed = seed
        self.rank = rank
        self.tokenizer = tokenizer  # what made the ids (the run folder records a char one)

    def __len__(self) -> int:
        return self.steps

    def offsets(self, epoch: int) -> torch.Tensor:
        """(steps, share) window starts of `epoch` for this rank: its columns of the whole
        job's (steps, global batch) draw."""
        gen = torch.Generator().manual_seed((self.seed * 1_000_003 + epoch) * 1009)
        every = torch.randint(self.count, (self.steps, self.plan.global_batch), generator=gen)
        return every[:, self.plan.rows(self.rank)]

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        offsets = self.offsets(epoch)
        for i in range(start, self.steps):
            w = self.tokens.rows(offsets[i], self.window)
            yield w[:, :-1].contiguous(), w[:, 1:].reshape(-1)


class EvalWindows:
    """The validation split as consecutive windows of block_size (this rank's share of them)."""

    def __init__(
        self,
        tokens: torch.Tensor | TokenSequence,
        *,
        block_size: int,
        batch_size: int,
        chars: int,
        max_tokens: int | None = None,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        # Tokens per character of the whole split: nats/char = nats/token * tokens/char.
        self.tokens_per_char = len(tokens) / max(1, chars)
        sequence = TokenSequence.of(tokens)
        tokens = sequence.head(None if max_tokens is None else max_tokens + 1)
        count = (len(tokens) - 1) // block_size
        if count < 1:
            raise UsageError(
                f"the validation text has {len(tokens)} tokens, fewer than block_size + 1",
                hint="use a longer text, a larger val_fraction or a smaller block_size",
            )
        starts = torch.arange(count) * block_size
        self.inputs = torch.stack([tokens[s : s + block_size] for s in starts.tolist()])
        self.targets = torch.stack([tokens[s + 1 : s + 1 + block_size] for s in starts.tolist()])
        self.inputs, self.targets = self.inputs[rank::world_size], self.targets[rank::world_size]
        self.batch_size = batch_size

    def __len__(self) -> int:
        return -(-len(self.inputs) // self.batch_size)

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for i in range(start * self.batch_size, len(self.inputs), self.batch_size):
            j = i + self.batch_size
            yield self.inputs[i:j], self.targets[i:j].reshape(-1)


def text_data(
    recipe: Recipe, *, rank: int = 0, world_size: int = 1
) -> tuple[TextWindows, EvalWindows]:
    """Train and eval sources of a language-model recipe (its `text` settings, its data file)."""
    text = recipe.text
    assert text is not None
    split = load_split(recipe.data, text.tokenizer, text.val_fraction)
    if split.tokenizer.vocab_size > recipe.num_classes:
        raise UsageError(
            f"{recipe.data} has {split.tokenizer.vocab_size} distinct tokens; the model's "
            f"vocabulary (num_classes) is {recipe.num_classes}",
            hint=f"--set num_classes={split.tokenizer.vocab_size}",
        )
    train = TextWindows(
        split.train,
        block_size=text.block_size,
        batch_size=recipe.batch_size,
        steps=text.steps_per_epoch,
        seed=recipe.seed,
        rank=rank,
        world_size=world_size,
        device_batch=recipe.device_batch,
        tokenizer=split.tokenizer,
    )
    evaluation = EvalWindows(
        split.val,
        block_size=text.block_size,
        batch_size=recipe.eval_batch(),
        chars=split.val_chars,
        max_tokens=text.eval_tokens,
        rank=rank,
        world_size=world_size,
    )
    return train, evaluation


def load_split(data: str, tokenizer: TokenizerName, val_fraction: float) -> TextSplit:
    """A text file tokenised here, or a folder of token files (an s3:// one staged first)."""
    settings = load_settings()
    if is_remote(data):
        data = local_data(data, settings.home)
    folder = Path(data).expanduser()
    if not is_token_folder(folder) and is_token_folder(settings.data_path / data):
        folder = settings.data_path / data
    if not is_token_folder(folder):
        path = resolve_text_file(data, settings.data_path)
        return split_text(read_text(path), tokenizer, val_fraction)
    train, meta = TokenSequence.open(folder / TRAIN)
    val, val_meta = TokenSequence.open(folder / VAL)
    if meta.tokenizer != tokenizer:
        raise UsageError(
            f"{data} holds {meta.tokenizer} tokens; the recipe's tokenizer is {tokenizer}",
            hint=f"--set text.tokenizer={meta.tokenizer}, or push the text with --tokenizer "
            f"{tokenizer}",
        )
    if tokenizer == "char" and not meta.vocab:
        raise UsageError(
            f"{data} holds char tokens without their vocabulary",
            hint="push the text again: spotrun data push TEXT s3://BUCKET/NAME --tokenizer char",
        )
    return TextSplit(Tokenizer(tokenizer, meta.vocab), train, val, val_meta.chars)
