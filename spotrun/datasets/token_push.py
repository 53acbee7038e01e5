"""`spotrun data push TEXT s3://... --tokenizer gpt2|byte|char`: a text tokenised once, pushed
as token files.

Why at push time and not on the instance: tokenising is CPU work (tiktoken: a few million
tokens per second per core) that every launch, and every spot replacement, would otherwise
pay for on a GPU instance billed by the second, for the same result; uint16 ids take about
half the bytes of the English text they encode (GPT-2 averages ~4 characters a token), so
staging moves less; and the instance needs no tokenizer to train (only `spotrun sample` does).
The cost: the shards are for one tokenizer, which the manifest and each split's tokens.json
name, and the loader refuses a recipe with another.

The text is read twice in chunks, never whole: once to count its characters (the last
`val_fraction` of them is the validation split, as split_text cuts an in-memory text) and
collect the set of them (a char vocabulary is the whole text's sorted characters, as
`Tokenizer.fit` makes it, so the ids are those a run tokenising the file itself would use), once
to tokenise. Chunks end where GPT-2's pre-tokenizer always splits (after a newline that a
non-space follows), so the ids are those of tokenising each split whole.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import numpy as np

from spotrun.core.errors import UsageError
from spotrun.datasets.manifest import MANIFEST_NAME, Manifest, Shard, StoredTokens
from spotrun.datasets.objects import ObjectStore
from spotrun.datasets.progress import fmt_bytes
from spotrun.datasets.push import Member, PlannedShard, PushResult, write_shard
from spotrun.datasets.spec import S3Data
from spotrun.train.data.gpt2_bpe import GPT2_VOCAB, encode_gpt2
from spotrun.train.data.token_files import TOKENS_META, TRAIN, VAL, TokenMeta, token_file_name

PushTokenizer = Literal["gpt2", "byte", "char"]
MAX_CHAR_VOCAB = 1 << 16  # ids are stored as uint16
CHUNK_CHARS = 1 << 22  # characters tokenised at a time (about 4 MB of text)


def count_chars(path: Path, chunk: int = CHUNK_CHARS) -> tuple[int, str]:
    """The text's length in characters and its sorted distinct characters."""
    total = 0
    seen: set[str] = set()
    with open(path, encoding="utf-8") as fh:  # newlines read as read_text reads them
        while piece := fh.read(chunk):
            total += len(piece)
            seen.update(piece)
    return total, "".join(sorted(seen))


def _boundary(buffer: str) -> int:
    """The last index i where buffer[i-1] is a newline between two non-spaces; 0 if none.

    GPT-2's pre-tokenizer always splits there, and gives the same pieces with the text cut
    there: a run of spaces before the newline would instead join it at the end of a cut."""
    at = len(buffer) - 1
    while (at := buffer.rfind("\n", 0, at)) > 0:
        if not buffer[at - 1].isspace() and not buffer[at + 1].isspace():
            return at + 1
    return 0


def text_pieces(path: Path, cut: int, chunk: int = CHUNK_CHARS) -> Iterator[tuple[str, str]]:
    """(split, piece) in order: the text's first `cut` characters as train, the rest as val,
    each cut into pieces of about `chunk` characters that end on pre-token boundaries."""
    done = 0  # characters yielded so far
    buffer = ""
    eof = False
    with open(path, encoding="utf-8") as fh:  # newlines read as read_text reads them
        while True:
            if not eof and len(buffer) < chunk:
                read = fh.read(chunk)
                eof, buffer = not read, buffer + read
                continue
            if done < cut <= done + len(buffer):
                at = cut - done  # the end of the training split: exactly there
            elif eof:
                at = len(buffer)
            else:
                at = _boundary(buffer) or (len(buffer) if len(buffer) >= 8 * chunk else 0)
                if not at:  # no boundary yet (a very long line): read on
                    read = fh.read(chunk)
                    eof, buffer = not read, buffer + read
                    continue
            if at:
                yield (TRAIN if done < cut else VAL), buffer[:at]
            done, buffer = done + at, buffer[at:]
            if eof and not buffer:
                return


def encoder(tokenizer: PushTokenizer, vocab: str = "") -> Callable[[str], np.ndarray]:
    """Text -> uint16 ids; `vocab` (sorted characters) is the char tokenizer's vocabulary."""
    if tokenizer == "gpt2":
        return lambda text: np.asarray(encode_gpt2(text), dtype="<u2")
    if tokenizer == "char":
        points = np.frombuffer(vocab.encode("utf-32-le"), dtype="<u4")

        def encode_chars(text: str) -> np.ndarray:
            # sorted characters are sorted code points: an id is the code point's rank
            codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
            return np.searchsorted(points, codes).astype("<u2")

        return encode_chars
    return lambda text: np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype("<u2")


class _SplitWriter:
    """Token ids of one split into shard files of `shard_tokens` ids, each packed and uploaded
    by the pool as soon as it is full."""

    def __init__(self, split: str, shard_tokens: int, tmp: Path, send: Callable[..., None]):
        self.split = split
        self.shard_tokens = shard_tokens
        self.tmp = tmp / split
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.send = send
        self.pending: list[np.ndarray] = []
        self.buffered = 0
        self.files: list[str] = []
        self.tokens = 0
        self.chars = 0

    def add(self, ids: np.ndarray, chars: int) -> None:
        self.pending.append(ids)
        self.buffered += len(ids)
        self.chars += chars
        while self.buffered >= self.shard_tokens:
            ids = np.concatenate(self.pending)
            self.pending = [ids[self.shard_tokens :]]
            self.buffered = len(self.pending[0])
            self._shard(ids[: self.shard_tokens])

    def close(self, tokenizer: str, vocab: str | None) -> None:
        rest = np.concatenate(self.pending) if self.pending else np.zeros(0, dtype="<u2")
        self.pending, self.buffered = [], 0
        if self.tokens + len(rest) == 0:
            raise UsageError(f"the {self.split} split of the text is empty", hint="a longer text")
        self._shard(rest, last=tokenizer, vocab=vocab)

    def _shard(self, ids: np.ndarray, last: str | None = None, vocab: str | None = None) -> None:
        index = len(self.files)
        name = token_file_name(index)
        path = self.tmp / name
        ids.astype("<u2").tofile(path)
        self.files.append(name)
        self.tokens += len(ids)
        members = [Member(f"{self.split}/{name}", path, path.stat().st_size)]
        if last is not None:  # the split's description goes in its last shard
            meta = self.tmp / TOKENS_META
            described = TokenMeta(last, self.files, self.tokens, self.chars, vocab=vocab)
            meta.write_text(described.to_json())
            members.append(Member(f"{self.split}/{TOKENS_META}", meta, meta.stat().st_size))
        self.send(PlannedShard(f"{self.split}-{index:05d}.tar", self.split, tuple(members)))


def push_text(
    store: ObjectStore,
    text_file: Path,
    dest: S3Data,
    *,
    tokenizer: PushTokenizer = "gpt2",
    val_fraction: float = 0.1,
    shard_size: int = 256 * 10**6,
    parallel: int = 4,
    log: Callable[[str], None] = print,
    work_dir: Path | None = None,
) -> PushResult:
    """Tokenise `text_file` and push its splits as token-file shards under `dest`, manifest last."""
    if not 0 < val_fraction < 1:
        raise UsageError(f"--val-fraction {val_fraction} is not between 0 and 1")
    started = time.monotonic()
    try:
        total, chars = count_chars(text_file)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{text_file} is not UTF-8 text ({exc})") from exc
    vocab = chars if tokenizer == "char" else None
    if vocab is not None and len(vocab) > MAX_CHAR_VOCAB:
        raise UsageError(
            f"{text_file} has {len(vocab):,} distinct characters: char ids are stored as uint16",
            hint="push it with --tokenizer byte or gpt2",
        )
    cut = int(total * (1.0 - val_fraction))
    shown = f"{tokenizer} tokens" + (f" ({len(vocab)} characters)" if vocab else "")
    log(f"pushing {text_file} to {dest.uri}: {total:,} characters as {shown}")
    encode = encoder(tokenizer, vocab or "")
    shard_tokens = max(1, shard_size // 2)
    shards: list[Future[Shard]] = []

    def one(planned: PlannedShard) -> Shard:
        path = Path(tmp) / planned.name
        try:
            entry = write_shard(planned, path)
            store.upload(path, dest.key(planned.name), entry.sha256)
        finally:
            path.unlink(missing_ok=True)
            for member in planned.members:
                member.path.unlink(missing_ok=True)
        log(f"  {planned.name}: {fmt_bytes(entry.size)}")
        return entry

    with (
        tempfile.TemporaryDirectory(prefix="spotrun-push-", dir=work_dir) as tmp,
        ThreadPoolExecutor(max_workers=max(1, parallel)) as pool,
    ):

        def send(planned: PlannedShard) -> None:
            # At most `parallel` shards on local disk: wait for the oldest beyond that.
            while sum(not f.done() for f in shards) >= max(1, parallel):
                next(f for f in shards if not f.done()).result()
            shards.append(pool.submit(one, planned))

        writers = {s: _SplitWriter(s, shard_tokens, Path(tmp), send) for s in (TRAIN, VAL)}
        for split, piece in text_pieces(text_file, cut):
            writers[split].add(encode(piece), len(piece))
        for writer in writers.values():
            writer.close(tokenizer, vocab)
        entries = [f.result() for f in shards]
    train, val = writers[TRAIN], writers[VAL]
    manifest = Manifest(
        name=text_file.name,
        created_at=time.time(),
        layout="tokens",
        classes=[],
        eval_split=VAL,
        shards=entries,
        tokens=StoredTokens(
            tokenizer=tokenizer,
            vocab_size=_vocab_size(tokenizer, vocab),
            val_fraction=val_fraction,
        ),
    )
    store.put(dest.key(MANIFEST_NAME), manifest.to_json().encode())
    seconds = time.monotonic() - started
    log(
        f"pushed {dest.uri}: {train.tokens:,} training and {val.tokens:,} validation tokens, "
        f"{fmt_bytes(manifest.size)} in {seconds:.1f} s, manifest last"
    )
    return PushResult(manifest, seconds)


def _vocab_size(tokenizer: PushTokenizer, vocab: str | None) -> int:
    if tokenizer == "gpt2":
        return GPT2_VOCAB
    return len(vocab) if vocab is not None else 256
