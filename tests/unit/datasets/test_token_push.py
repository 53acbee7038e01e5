"""`data push TEXT --tokenizer gpt2|byte|char`: a text tokenised at push time into token-file
shards on moto's S3, staged back, and read by the language-model loader as the ids of the text
itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spotrun.cloud.aws.datasets import S3Store
from spotrun.core.errors import UsageError
from spotrun.datasets.manifest import StoredTokens, read_manifest
from spotrun.datasets.spec import parse_s3
from spotrun.datasets.stager import StageOptions, stage
from spotrun.datasets.token_push import push_text
from spotrun.train.data.text import TextWindows, load_split, split_text

Bucket = tuple[str, Any]
OPTIONS = StageOptions(streams=4, reserve_bytes=0, min_part_bytes=4096, log_every_s=0.0)
VERSE = (
    "Shall I compare thee to a summer's day?  \nThou art more lovely and more temperate:\n\n"
    "Rough winds do shake the darling buds of May, — café\n"
)


def _text(tmp_path: Path, repeat: int = 200) -> tuple[Path, str]:
    path = tmp_path / "sonnet.txt"
    path.write_text(VERSE * repeat)
    return path, path.read_text()


def test_pushed_tokens_stage_back_as_the_ids_of_the_text(
    tmp_path: Path, s3_bucket: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket, _ = s3_bucket
    path, text = _text(tmp_path)
    dest = parse_s3(f"s3://{bucket}/text/sonnet")
    lines: list[str] = []
    # 1,000 tokens a shard: the training split spans several, the stream crosses file ends.
    result = push_text(S3Store(bucket), path, dest, shard_size=2000, parallel=2, log=lines.append)
    manifest = result.manifest
    assert manifest.layout == "tokens" and manifest.eval_split == "val"
    assert manifest.tokens == StoredTokens(tokenizer="gpt2", vocab_size=50_257, val_fraction=0.1)
    assert sum(s.split == "train" for s in manifest.shards) > 3
    assert any(line.startswith(f"pushed {dest.uri}: ") for line in lines), lines

    staged = stage(S3Store(bucket), dest, tmp_path / "nvme", OPTIONS, print).dest
    split = load_split(str(staged), "gpt2", 0.1)
    whole = split_text(text, "gpt2", 0.1)
    assert split.train.head().tolist() == whole.train.tolist()  # type: ignore[union-attr]
    assert split.val.head().tolist() == whole.val.tolist()  # type: ignore[union-attr]
    assert split.val_chars == whole.val_chars
    windows = TextWindows(split.train, block_size=64, batch_size=8, steps=3, seed=1)
    in_memory = TextWindows(whole.train, block_size=64, batch_size=8, steps=3, seed=1)
    for (x, y), (x2, y2) in zip(windows.batches(0), in_memory.batches(0), strict=True):
        assert x.tolist() == x2.tolist() and y.tolist() == y2.tolist()

    # The loader reads the same set by its s3:// address, staging it under SPOTRUN_HOME.
    monkeypatch.setenv("SPOTRUN_HOME", str(tmp_path / "home"))
    again = load_split(dest.uri, "gpt2", 0.1)
    assert again.val.head().tolist() == whole.val.tolist()  # type: ignore[union-attr]

    with pytest.raises(UsageError, match="holds gpt2 tokens; the recipe's tokenizer is byte"):
        load_split(str(staged), "byte", 0.1)


def test_char_tokens_are_the_ids_of_the_whole_texts_vocabulary_and_decode_back(
    tmp_path: Path, s3_bucket: Bucket
) -> None:
    bucket, _ = s3_bucket
    # The validation tail holds a character the training part lacks: the vocabulary is the
    # whole text's, as a run tokenising the file itself fits it (Tokenizer.fit).
    path = tmp_path / "sonnet.txt"
    path.write_text(VERSE * 30 + "Zéphyr ☃\n")
    text = path.read_text()
    dest = parse_s3(f"s3://{bucket}/text/chars")
    result = push_text(S3Store(bucket), path, dest, tokenizer="char", shard_size=600, log=print)
    whole = split_text(text, "char", 0.1)
    assert result.manifest.tokens is not None
    assert result.manifest.tokens.tokenizer == "char"
    assert result.manifest.tokens.vocab_size == len(set(text)) == whole.tokenizer.vocab_size
    staged = stage(S3Store(bucket), dest, tmp_path / "nvme", OPTIONS, print).dest
    split = load_split(str(staged), "char", 0.1)
    assert split.tokenizer == whole.tokenizer  # the same characters in the same order
    assert split.train.head().tolist() == whole.train.tolist()  # type: ignore[union-attr]
    assert split.val.head().tolist() == whole.val.tolist()  # type: ignore[union-attr]
    val_ids = split.val.head().tolist()  # type: ignore[union-attr]
    assert split.tokenizer.decode(val_ids) == text[int(len(text) * 0.9) :]
    with pytest.raises(UsageError, match="holds char tokens; the recipe's tokenizer is gpt2"):
        load_split(str(staged), "gpt2", 0.1)


def test_cli_pushes_a_text_as_byte_or_char_tokens_and_refuses_an_unknown_tokenizer(
    tmp_path: Path, s3_bucket: Bucket
) -> None:
    bucket, s3 = s3_bucket
    path, text = _text(tmp_path, repeat=20)
    uri = f"s3://{bucket}/text/bytes"
    env = {**os.environ, "SPOTRUN_HOME": str(tmp_path / "home")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "spotrun", "data", "push", str(path), *args]
        return subprocess.run(command, env=env, capture_output=True, text=True)

    pushed = cli(uri, "--tokenizer", "byte", "--val-fraction", "0.25")
    assert pushed.returncode == 0, pushed.stderr
    assert f"--set data={uri}" in pushed.stdout
    raw = s3.get_object(Bucket=bucket, Key="text/bytes/manifest.json")["Body"].read()
    manifest = read_manifest(raw, "m")
    assert manifest.tokens is not None and manifest.tokens.tokenizer == "byte"
    staged = stage(S3Store(bucket), parse_s3(uri), tmp_path / "nvme", OPTIONS, print).dest
    split = load_split(str(staged), "byte", 0.25)
    assert split.val.head().tolist() == list(text[int(len(text) * 0.75) :].encode())  # type: ignore[union-attr]

    chars = cli(f"s3://{bucket}/text/chars", "--tokenizer", "char")
    assert chars.returncode == 0, chars.stderr
    assert f"as char tokens ({len(set(text))} characters)" in chars.stdout
    refused = cli(f"s3://{bucket}/text/words", "--tokenizer", "words")
    # the command line names the choices (--tokenizer <gpt2|char|byte> in its help too)
    assert refused.returncode == 2, refused.stderr
    assert "'words' is not one of 'gpt2', 'char', 'byte'" in refused.stderr
    resized = cli(f"s3://{bucket}/text/x", "--max-side", "64")
    assert resized.returncode != 0 and "are for images" in resized.stderr


def test_a_tokens_manifest_says_how_its_tokens_are_stored() -> None:
    import json

    from spotrun.datasets.manifest import Manifest

    base = {"name": "t", "created_at": 0.0, "classes": [], "eval_split": "val", "shards": []}
    with pytest.raises(ValueError, match="says how its tokens are stored"):
        Manifest.model_validate({**base, "layout": "tokens"})
    tokens = {"tokenizer": "gpt2", "vocab_size": 50_257, "val_fraction": 0.1}
    with pytest.raises(ValueError, match="says how its tokens are stored"):
        Manifest.model_validate({**base, "tokens": tokens})
    manifest = Manifest.model_validate({**base, "layout": "tokens", "tokens": tokens})
    assert read_manifest(manifest.to_json(), "m") == manifest
    assert "tokens" not in json.loads(Manifest.model_validate(base).to_json())  # images' digests
