"""GPT-2's tokenizer from the installed files (no download), token files read as one stream,
and a text tokenised in pieces at push time giving the ids of tokenising it whole."""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest
import torch

from spotrun.datasets.token_push import encoder, text_pieces
from spotrun.train.data import gpt2_bpe
from spotrun.train.data.text import TextWindows, Tokenizer, split_text
from spotrun.train.data.token_files import TokenSequence


def test_gpt2_gives_gpt2s_ids_without_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object) -> None:
        raise AssertionError("the tokenizer tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    gpt2_bpe.gpt2_encoding.cache_clear()  # built afresh here, with no network
    tokenizer = Tokenizer("gpt2")
    # GPT-2's published ids: "Hello"=15496, " world"=995, " the"=262, "\n\n"=628.
    assert tokenizer.encode("Hello world").tolist() == [15496, 995]
    assert tokenizer.encode(" the\n\n").tolist() == [262, 628]
    assert tokenizer.vocab_size == 50_257 == gpt2_bpe.gpt2_encoding().n_vocab
    text = "naïve café — Ünïcödé, 数字 and <|endoftext|> as plain text"
    ids = tokenizer.encode(text).tolist()
    assert gpt2_bpe.END_OF_TEXT not in ids  # special tokens are never made from text
    assert tokenizer.decode(ids) == text


def test_token_files_read_as_one_stream_across_file_ends(tmp_path: Path) -> None:
    whole = np.arange(1000, 1100, dtype="<u2")
    parts = []
    for i, (a, b) in enumerate([(0, 30), (30, 31), (31, 77), (77, 100)]):
        path = tmp_path / f"{i}.bin"
        whole[a:b].tofile(path)
        parts.append(np.memmap(path, dtype="<u2", mode="r"))
    sequence = TokenSequence(parts)
    assert len(sequence) == 100
    starts = torch.tensor([0, 25, 29, 30, 76, 88])
    got = sequence.rows(starts, 12)
    assert got.dtype == torch.long
    assert got.tolist() == [whole[s : s + 12].tolist() for s in starts.tolist()]
    assert sequence.head(40).tolist() == whole[:40].tolist()
    # Training windows drawn from the files are those drawn from the same tokens in memory.
    in_memory = torch.from_numpy(whole.astype(np.int64))
    a = TextWindows(sequence, block_size=8, batch_size=3, steps=4, seed=5)
    b = TextWindows(in_memory, block_size=8, batch_size=3, steps=4, seed=5)
    for (xa, ya), (xb, yb) in zip(a.batches(2, start=1), b.batches(2, start=1), strict=True):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


@pytest.mark.parametrize("tokenizer", ["gpt2", "byte"])
def test_push_time_pieces_tokenise_as_the_whole_text(tmp_path: Path, tokenizer: str) -> None:
    # Spaces before newlines, blank lines, a long line and non-ASCII: the cases where cutting
    # a text in the wrong place changes GPT-2's ids.
    lines = ["First Citizen:  \n", "Before we proceed any further, hear me speak.\n\n", "  x\n"]
    lines += ["café " * 400 + "\n", "\tTabbed\n", "end"]
    text = "".join(lines * 20)
    path = tmp_path / "text.txt"
    path.write_text(text)
    cut = int(len(text) * 0.9)
    encode = encoder("gpt2" if tokenizer == "gpt2" else "byte")
    got: dict[str, list[int]] = {"train": [], "val": []}
    pieces = 0
    for split, piece in text_pieces(path, cut, chunk=300):
        got[split] += encode(piece).tolist()
        pieces += 1
    assert pieces > 10
    whole = split_text(text, "gpt2" if tokenizer == "gpt2" else "byte", 0.1)
    assert isinstance(whole.train, torch.Tensor) and isinstance(whole.val, torch.Tensor)
    assert got["train"] == whole.train.tolist()
    assert got["val"] == whole.val.tolist()
