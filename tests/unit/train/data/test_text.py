"""The token pipeline: tokenisers, the contiguous split, windows whose order is a function of
(seed, epoch, batch index), and the fixed validation windows."""

from __future__ import annotations

import torch

from spotrun.train.data.text import EvalWindows, TextWindows, Tokenizer, split_text

TEXT = "To be, or not to be: that is the question.\n" * 40


def test_char_and_byte_tokenisers_round_trip() -> None:
    char = Tokenizer.fit("char", TEXT)
    assert char.vocab_size == len(set(TEXT)) and char.chars == "".join(sorted(set(TEXT)))
    assert char.decode(char.encode(TEXT).tolist()) == TEXT
    byte = Tokenizer.fit("byte", "naïve café")
    ids = byte.encode("naïve café")
    assert byte.vocab_size == 256 and len(ids) == len("naïve café".encode())
    assert byte.decode(ids.tolist()) == "naïve café"


def test_last_tenth_of_characters_is_validation() -> None:
    split = split_text(TEXT, "char", 0.1)
    cut = int(len(TEXT) * 0.9)
    assert len(split.train) == cut and len(split.val) == len(TEXT) - cut == split.val_chars
    assert split.tokenizer.decode(split.val.tolist()) == TEXT[cut:]


def test_windows_are_next_token_pairs_in_a_seeded_order() -> None:
    tokens = split_text(TEXT, "char").train
    source = TextWindows(tokens, block_size=8, batch_size=4, steps=5, seed=3)
    batches = list(source.batches(0))
    assert len(batches) == len(source) == 5
    x, y = batches[0]
    assert x.shape == (4, 8) and y.shape == (32,)
    starts = source.offsets(0)[0]
    for row, start in enumerate(starts.tolist()):
        assert torch.equal(x[row], tokens[start : start + 8])
        assert torch.equal(y.view(4, 8)[row], tokens[start + 1 : start + 9])
    # Resume from batch 3 of epoch 0 gives exactly the batches an unbroken epoch gives.
    for (xa, ya), (xb, yb) in zip(batches[3:], source.batches(0, start=3), strict=True):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    again = TextWindows(tokens, block_size=8, batch_size=4, steps=5, seed=3)
    assert torch.equal(again.offsets(0), source.offsets(0))
    assert not torch.equal(source.offsets(1), source.offsets(0))
    other_rank = TextWindows(tokens, block_size=8, batch_size=4, steps=5, seed=3, rank=1)
    assert not torch.equal(other_rank.offsets(0), source.offsets(0))


def test_validation_windows_are_consecutive_and_shared_between_ranks() -> None:
    split = split_text(TEXT, "byte")
    whole = EvalWindows(split.val, block_size=10, batch_size=3, chars=split.val_chars)
    count = (len(split.val) - 1) // 10
    assert len(whole.inputs) == count and len(whole) == -(-count // 3)
    assert torch.equal(whole.inputs.reshape(-1), split.val[: count * 10])
    assert torch.equal(whole.targets.reshape(-1), split.val[1 : count * 10 + 1])
    halves = [
        EvalWindows(split.val, block_size=10, batch_size=3, chars=1, rank=r, world_size=2)
        for r in (0, 1)
    ]
    assert sum(len(h.inputs) for h in halves) == count
    assert whole.tokens_per_char == 1.0  # ASCII: one byte per character


def test_bytes_per_character_of_non_ascii_text() -> None:
    text = "é" * 200
    split = split_text(text, "byte")
    val = EvalWindows(split.val, block_size=4, batch_size=2, chars=split.val_chars)
    assert val.tokens_per_char == 2.0
