"""GPT-2 small (124M parameters) on GPT-2's own tokens: a plain baseline and the fast recipe.

Data: a large English text (OpenWebText, FineWeb, ...) tokenised once with GPT-2's BPE and
pushed as token files:

    spotrun data push corpus.txt s3://BUCKET/corpus --tokenizer gpt2 --val-fraction 0.005
    spotrun launch gpt2-small-fast --set data=s3://BUCKET/corpus

(spotrun.datasets.token_push says why tokens are made at push time.) A folder of token files
(`data=NAME` in the data folder, or a path) or a plain text file (`data=file.txt`, tokenised
when the run starts: small texts only) also work. Tiny runs for tests shrink the model with
`--set model_options.n_layer=1` and friends.

Neither recipe has been measured: spotrun's developers have no GPU and no web-scale corpus.
Their stated results say what each is modelled on; bench/gpu_benchmark.py measures tokens per
second, peak memory and the time to a fixed training loss of both when a GPU is lent.
"""

from __future__ import annotations

from spotrun.core.config import Resources
from spotrun.recipes.base import Recipe, Target, Text

GPUS = 8
GLOBAL_BATCH = 96  # windows of 1,024 tokens per step (98,304 tokens), on any number of GPUs
DEVICE_BATCH = 12  # windows one GPU computes at once: 8 GPUs x 12, or 4 x 12 x 2 accumulated
GPT2_VOCAB = 50_257
# GPT-2 small (Radford et al., 2019): 12 layers, 12 heads, 768 wide, 1,024 tokens of context,
# output layer tied to the token embedding. 124,439,808 parameters with GPT-2's vocabulary.
GPT2_SMALL = {"block_size": 1024, "n_layer": 12, "n_head": 12, "n_embd": 768, "tie_weights": True}
# 1,000 steps an epoch; evaluation on the first 1,048,576 validation tokens (1,024 windows).
GPT2_TEXT = Text(tokenizer="gpt2", block_size=1024, steps_per_epoch=1000, eval_tokens=1 << 20)
# Validation loss in nats per token: what GPT-2 124M reaches on web text, and the target of the
# modded-nanoGPT speedruns (FineWeb validation); untested on spotrun.
GPT2_TARGET = Target(metric="test_loss", value=3.28, mode="min")
DATA = "openwebtext"  # token files in the data folder; --set data=s3://... for a pushed set
UNMEASURED = "not yet measured (no GPU lent so far): python bench/gpu_benchmark.py measures "


def gpt2_small_baseline() -> Recipe:
    return Recipe(
        name="gpt2-small-baseline",
        description="GPT-2 small (124M) on GPT-2 BPE tokens, as GPT-2 was built: learned "
        "positions, LayerNorm, GELU MLP, explicit attention, tied embeddings, fp32; AdamW "
        "6e-4 with warmup and cosine decay, gradient clipping at 1",
        result="unmeasured: spotrun's developers have no GPU. The model is GPT-2 small "
        "(124,439,808 parameters); the schedule is nanoGPT's GPT-2 124M one (peak 6e-4, "
        "decayed to a tenth, weight decay 0.1, clip 1.0) over 50,000 steps of 98,304 tokens "
        "(4.9B tokens); the 3.28 nats/token target is the speedruns' validation loss",
        measured_with=UNMEASURED + "its tokens/s, memory and time to a training loss on "
        "synthetic tokens; validation loss needs a corpus: spotrun launch gpt2-small-baseline",
        target=GPT2_TARGET,
        resources=Resources(gpus=GPUS, gpu_memory_gb=40),
        data=DATA,
        text=GPT2_TEXT,
        model="gpt",
        model_options=dict(GPT2_SMALL),
        num_classes=GPT2_VOCAB,
        epochs=50,  # of 1,000 steps
        batch_size=GLOBAL_BATCH,
        device_batch=DEVICE_BATCH,
        eval_batch_size=16,
        optimizer="adamw",
        lr=6e-4,
        weight_decay=0.1,
        methods={
            "warmup_decay": {"warmup_frac": 0.04, "decay": "cosine", "final_frac": 0.1},
            "grad_clipping": {"mode": "norm", "threshold": 1.0},
        },
    )


def gpt2_small_fast() -> Recipe:
    return Recipe(
        name="gpt2-small-fast",
        description="GPT-2 small (124M) with the speedrun changes: rotary positions, RMSNorm, "
        "QK norm, ReLU-squared MLP, tied embeddings, fused attention, sequence-length warmup, "
        "the vocabulary "
        "padded to 50,304 ids, bf16/fp16 by the device, torch.compile, a 3x learning rate; "
        "fsdp=auto: FSDP only where weights, gradients and AdamW state would fill half a GPU "
        "(off at 124M: 2 GiB; on from about 1.25B parameters on 40 GB)",
        result="unmeasured: spotrun's developers have no GPU. Modelled on the modded-nanoGPT "
        "speedruns (rotary, QK norm, RMSNorm, ReLU-squared MLP, padded vocabulary, bf16, "
        "compile) and on MosaicML's GPT-2 125M recipe (sequence-length warmup, reported 1.7x "
        "faster with its methods); shakespeare-fast measured 5.0-7.0x sooner than nanoGPT's "
        "shakespeare_char configuration on CPU (spotrun/recipes/README.md), which says "
        "nothing yet of a GPU at this size",
        measured_with=UNMEASURED + "its tokens/s, memory and time to a training loss beside "
        "gpt2-small-baseline's; validation loss needs a corpus: spotrun launch gpt2-small-fast",
        target=GPT2_TARGET,
        resources=Resources(gpus=GPUS, gpu_memory_gb=40),
        data=DATA,
        text=GPT2_TEXT,
        model="gpt",
        # ReLU-squared: as many parameters as GELU's MLP; it paid on the tiny Shakespeare ladder.
        # The untied head that also paid there is left tied here: it would add 38.6M parameters.
        model_options={**GPT2_SMALL, "mlp": "relu2"},
        # 50,304 = 786 x 64: matrix shapes the tensor cores like (nanoGPT: ~25% faster); the
        # 47 ids past GPT-2's never occur, so they learn to be unlikely at once.
        num_classes=50_304,
        epochs=25,  # of 1,000 steps: half the baseline's tokens
        batch_size=GLOBAL_BATCH,
        device_batch=DEVICE_BATCH,
        eval_batch_size=16,
        fsdp="auto",  # DDP at this size; FSDP where a larger model_options would not fit
        optimizer="adamw",
        lr=1.8e-3,  # QK norm bounds the attention logits, so a 3x higher peak stays stable
        weight_decay=0.1,
        methods={
            "warmup_decay": {"warmup_frac": 0.04, "decay": "cosine", "final_frac": 0.1},
            "grad_clipping": {"mode": "norm", "threshold": 1.0},
            "rotary": {},
            "rms_norm": {},
            "qk_norm": {},
            "weight_tying": {},
            "fused_attention": {},
            "seq_len_warmup": {"min_len": 64, "duration_frac": 0.2, "multiple": 64},
            "mixed_precision": {"precision": "auto"},
            "compile": {"when": "auto"},
        },
    )
