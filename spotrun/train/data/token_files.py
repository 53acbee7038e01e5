"""Token files: a split's token ids as raw uint16 files, read in place, and what they hold.

`spotrun data push TEXT s3://... --tokenizer gpt2` writes this layout (spotrun.datasets.
token_push), and staging rebuilds it on the instance:

    train/tokens-00000.bin ...   token ids, uint16 little-endian, one stream cut into files
    train/tokens.json            {"tokenizer", "dtype", "files", "tokens", "chars", "vocab"}
    val/...                      the same for the validation split

The files are memory-mapped, not read: a corpus of billions of tokens stays on disk and
the page cache, and training windows are gathered from it (across file ends too: the split is
one stream).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from spotrun.core.errors import DataError
from spotrun.train.data.source import TOKENS_META

TOKEN_DTYPE = "uint16"  # GPT-2's 50,257 ids and bytes' 256 fit
TRAIN = "train"
VAL = "val"


def token_file_name(index: int) -> str:
    return f"tokens-{index:05d}.bin"


@dataclass(frozen=True)
class TokenMeta:
    tokenizer: str
    files: list[str]
    tokens: int
    chars: int  # characters of the text these tokens encode (for nats per character)
    dtype: str = TOKEN_DTYPE
    vocab: str | None = None  # the char tokenizer's sorted characters (id = index)

    def to_json(self) -> str:
        fields = {k: v for k, v in self.__dict__.items() if v is not None}
        return json.dumps(fields, indent=1, sort_keys=True) + "\n"


__all__ = ["TOKENS_META", "TokenMeta", "TokenSequence", "is_token_folder", "token_file_name"]


def is_token_folder(path: Path) -> bool:
    return path.is_dir() and (path / TRAIN / TOKENS_META).is_file()


def read_meta(split_dir: Path) -> TokenMeta:
    path = split_dir / TOKENS_META
    try:
        data = json.loads(path.read_text())
        meta = TokenMeta(
            tokenizer=str(data["tokenizer"]),
            files=[str(f) for f in data["files"]],
            tokens=int(data["tokens"]),
            chars=int(data["chars"]),
            dtype=str(data["dtype"]),
            vocab=None if data.get("vocab") is None else str(data["vocab"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(
            f"{path} is not a token file description ({exc})",
            hint="push the text again: spotrun data push TEXT s3://BUCKET/NAME --tokenizer gpt2",
        ) from exc
    if meta.dtype != TOKEN_DTYPE or any("/" in f or f.startswith(".") for f in meta.files):
        raise DataError(f"{path}: unexpected dtype or file names", hint="push the text again")
    return meta


class TokenSequence:
    """One split's token ids: in-memory ids, or memory-mapped files read as one stream."""

    def __init__(self, parts: list[np.ndarray]) -> None:
        self.parts = [p for p in parts if len(p)]
        self.ends = np.cumsum([len(p) for p in self.parts]) if self.parts else np.zeros(0)
        self.length = int(self.ends[-1]) if self.parts else 0

    @classmethod
    def of(cls, tokens: torch.Tensor | TokenSequence) -> TokenSequence:
        if isinstance(tokens, TokenSequence):
            return tokens
        return cls([tokens.numpy()])

    @classmethod
    def open(cls, split_dir: Path) -> tuple[TokenSequence, TokenMeta]:
        meta = read_meta(split_dir)
        parts: list[np.ndarray] = []
        for name in meta.files:
            path = split_dir / name
            if not path.is_file() or path.stat().st_size % 2:
                raise DataError(f"{path} is missing or cut short", hint="stage the data again")
            if path.stat().st_size:
                parts.append(np.memmap(path, dtype="<u2", mode="r"))
        sequence = cls(parts)
        if sequence.length != meta.tokens:
            raise DataError(
                f"{split_dir} holds {sequence.length:,} tokens; {TOKENS_META} says {meta.tokens:,}",
                hint="stage the data again",
            )
        return sequence, meta

    def __len__(self) -> int:
        return self.length

    def span(self, start: int, length: int) -> np.ndarray:
        """Tokens [start, start + length) as one int64 array (joined across file ends)."""
        first = int(np.searchsorted(self.ends, start, side="right"))
        pieces = []
        while length > 0:
            begin = int(self.ends[first - 1]) if first else 0
            part = self.parts[first][start - begin : start - begin + length]
            pieces.append(part)
            start += len(part)
            length -= len(part)
            first += 1
        return np.concatenate(pieces).astype(np.int64)

    def rows(self, starts: torch.Tensor, length: int) -> torch.Tensor:
        """(len(starts), length) token ids, row i starting at starts[i]."""
        if len(self.parts) == 1:  # one array: a single gather, no Python loop per row
            index = starts.numpy()[:, None] + np.arange(length)
            return torch.from_numpy(self.parts[0][index].astype(np.int64))
        return torch.from_numpy(np.stack([self.span(int(s), length) for s in starts.tolist()]))

    def head(self, count: int | None = None) -> torch.Tensor:
        """The first `count` tokens (all of them for None) in memory."""
        count = self.length if count is None else min(count, self.length)
        return torch.from_numpy(self.span(0, count)) if count else torch.zeros(0, dtype=torch.long)
