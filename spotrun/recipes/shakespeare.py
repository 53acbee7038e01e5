"""Tiny Shakespeare, character level: a plain GPT baseline and the fastest our methods make.

Both read the 1.1 MB tinyshakespeare.txt (`data=tinyshakespeare.txt` in the data folder, or a
path) with nanoGPT shakespeare_char's split: the last 10% of characters is the validation
text. Sized to train on one CPU thread in minutes; their stated results come from
bench/shakespeare_time_to_loss.py, which runs both side by side on the same machine.
"""

from __future__ import annotations

from spotrun.core.config import Resources
from spotrun.recipes.base import Recipe, Target, Text

MEASURED_WITH = "python bench/shakespeare_time_to_loss.py --data ../shared/data/tinyshakespeare.txt"
SHAKESPEARE_VOCAB = 65  # distinct characters in tinyshakespeare.txt
# The small GPT both recipes train: 4 layers of 128 wide, 4 heads, 64 characters of context.
SMALL_GPT = {"block_size": 64, "n_layer": 4, "n_head": 4, "n_embd": 128}
# 50 steps of 32 windows an epoch; evaluation on the first 16,384 validation characters.
TEXT = Text(tokenizer="char", block_size=64, steps_per_epoch=50, eval_tokens=16_384)


def shakespeare_baseline() -> Recipe:
    return Recipe(
        name="shakespeare-baseline",
        description="tiny Shakespeare, character-level GPT-2-style model (learned positions, "
        "LayerNorm, GELU MLP, explicit attention), AdamW with warmup and cosine decay",
        # bench run of 2026-12-04, 3 seeds, 1 thread per run, 2 side by side, on a 2-core
        # AMD EPYC (AVX2, no AVX-512), load average 1.5-3.
        result="on a 2-core AVX2 AMD EPYC, 400 steps: final validation loss 2.194 nats per "
        "char (median of 3 seeds, 2.191-2.226) in 226-266 s of elapsed_s",
        measured_with=MEASURED_WITH,
        target=Target(metric="test_loss", value=2.2, mode="min"),
        resources=Resources(gpus=0),
        multi_node=False,
        data="tinyshakespeare.txt",
        text=TEXT,
        model="gpt",
        model_options=dict(SMALL_GPT),  # 0.8M parameters
        num_classes=SHAKESPEARE_VOCAB,
        epochs=8,  # of 50 steps
        batch_size=32,  # windows of 64 characters per step: 2,048 tokens
        eval_batch_size=64,
        optimizer="adamw",
        lr=1e-3,  # peak, per AdamW step (nanoGPT shakespeare_char's)
        weight_decay=0.1,
        threads=1,
        methods={"warmup_decay": {"warmup_frac": 0.05, "decay": "cosine", "final_frac": 0.1}},
    )


def shakespeare_fast() -> Recipe:
    return Recipe(
        name="shakespeare-fast",
        description="tiny Shakespeare, character-level GPT with the speedrun changes: rotary "
        "positions, RMSNorm, QK norm, tied embeddings, fused attention, sequence-length "
        "warmup, a higher learning rate",
        # Same bench run: each seed's baseline final loss, reached at epoch 3 of 6.
        result="on a 2-core AVX2 AMD EPYC: the baseline's final validation loss reached "
        "3.19-3.33x sooner (median 3.23x over 3 seeds, 68-82 s of elapsed_s); final 2.015 "
        "nats per char (2.007-2.019) after 300 steps",
        measured_with=MEASURED_WITH,
        target=Target(metric="test_loss", value=2.2, mode="min"),
        resources=Resources(gpus=0),
        multi_node=False,
        data="tinyshakespeare.txt",
        text=TEXT,
        model="gpt",
        model_options=dict(SMALL_GPT),
        num_classes=SHAKESPEARE_VOCAB,
        epochs=6,  # of 50 steps: a shorter schedule, it gets there sooner
        batch_size=32,
        eval_batch_size=64,
        optimizer="adamw",
        lr=3e-3,  # QK norm bounds the attention logits, so a 3x higher peak stays stable
        weight_decay=0.1,
        threads=1,
        methods={
            "warmup_decay": {"warmup_frac": 0.05, "decay": "cosine", "final_frac": 0.1},
            "rotary": {},
            "rms_norm": {},
            "qk_norm": {},
            "weight_tying": {},
            "fused_attention": {},
            "seq_len_warmup": {"min_len": 16, "duration_frac": 0.3, "multiple": 8},
        },
    )
