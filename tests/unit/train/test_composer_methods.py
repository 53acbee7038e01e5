"""The maths of the Composer methods added for issue 35 (AGC, SWA, ghost BatchNorm, weight
standardisation), each checked against its definition computed by hand."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train import functional as sf
from spotrun.train.methods import validate_methods
from spotrun.train.methods.ghost_batchnorm import GhostBatchNorm
from spotrun.train.methods.squeeze_excite import ConvSqueezeExcite
from spotrun.train.models.small import SmallResNet


@pytest.fixture(autouse=True)
def seeded() -> None:
    torch.manual_seed(0)


# ------------------------------------------------------------------------------ AGC
def test_agc_clips_each_unit_to_its_weight_norm() -> None:
    w = nn.Parameter(torch.tensor([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]]))  # row norms 5, 0, 1
    w.grad = torch.tensor([[0.6, 0.8], [0.3, 0.4], [0.001, 0.0]])  # grad norms 1, 0.5, 0.001
    b = nn.Parameter(torch.tensor([0.0, 2.0]))  # one unit: norm 2
    b.grad = torch.tensor([1.0, 0.0])
    sf.adaptive_clip_gradients([w, b], clipping=0.1, eps=1e-3)
    # Row 0: limit 0.1 * 5 = 0.5 < 1, so scaled by 0.5 / 1.
    assert torch.allclose(w.grad[0], torch.tensor([0.3, 0.4]))
    # Row 1: zero weight, so the limit is 0.1 * eps = 1e-4; scaled by 1e-4 / 0.5.
    assert torch.allclose(w.grad[1], torch.tensor([0.3, 0.4]) * (1e-4 / 0.5))
    # Row 2: 0.001 is within 0.1 * 1: untouched, bit for bit.
    assert torch.equal(w.grad[2], torch.tensor([0.001, 0.0]))
    # The bias is one unit: limit 0.2 < 1.
    assert torch.allclose(b.grad, torch.tensor([0.2, 0.0]))


def test_agc_unitwise_over_conv_filters() -> None:
    conv = nn.Conv2d(2, 3, 3)
    conv.weight.grad = torch.randn_like(conv.weight) * 10
    before = conv.weight.grad.clone()
    sf.adaptive_clip_gradients([conv.weight], clipping=0.05)
    for unit in range(3):
        limit = 0.05 * max(float(conv.weight[unit].detach().norm()), 1e-3)
        assert float(conv.weight.grad[unit].norm()) == pytest.approx(limit, rel=1e-5)
        # Direction kept.
        assert torch.allclose(
            conv.weight.grad[unit] / conv.weight.grad[unit].norm(),
            before[unit] / before[unit].norm(),
            atol=1e-6,
        )


# ------------------------------------------------------------------------------ SWA
def test_swa_average_is_the_mean_of_the_snapshots() -> None:
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    average = sf.ema_copy(model)
    snapshots = []
    count = 0
    for _ in range(4):
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn_like(p))
        model(torch.randn(5, 3))  # moves the BatchNorm statistics
        snapshots.append([p.detach().clone() for p in model.parameters()])
        count = sf.swa_update(average, model, count)
    assert count == 4
    for i, p in enumerate(average.parameters()):
        mean = torch.stack([s[i] for s in snapshots]).mean(dim=0)
        assert torch.allclose(p, mean, atol=1e-6)
    # Statistics are the model's latest, not averaged.
    for a, b in zip(average.buffers(), model.buffers(), strict=True):
        assert torch.equal(a, b)


def test_swa_and_ema_refused_together() -> None:
    with pytest.raises(UsageError, match="swa and ema"):
        validate_methods({"swa": {}, "ema": {}})


# ------------------------------------------------------------------ ghost BatchNorm
def test_ghost_batch_norm_is_batch_norm_on_each_ghost_batch() -> None:
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        bn.bias.copy_(torch.tensor([0.0, -1.0, 3.0]))
    x = torch.randn(12, 3, 4, 4) * 3 + 1
    out = sf.ghost_batch_norm(x, bn, ghost_batch_size=4)
    for part_in, part_out in zip(torch.split(x, 4), torch.split(out, 4), strict=True):
        mean = part_in.mean(dim=(0, 2, 3), keepdim=True)
        var = part_in.var(dim=(0, 2, 3), unbiased=False, keepdim=True)
        by_hand = (part_in - mean) / torch.sqrt(var + bn.eps)
        by_hand = by_hand * bn.weight.view(1, 3, 1, 1) + bn.bias.view(1, 3, 1, 1)
        assert torch.allclose(part_out, by_hand, atol=1e-5)
    # Not what whole-batch BatchNorm gives, and the running statistics saw three updates.
    assert not torch.allclose(out, F.batch_norm(x, None, None, bn.weight, bn.bias, True))
    assert bn.num_batches_tracked is not None and int(bn.num_batches_tracked) == 3
    bn.eval()
    assert torch.equal(sf.ghost_batch_norm(x, bn, 4), bn(x))


def test_apply_ghost_batchnorm_wraps_each_batchnorm_once() -> None:
    model = SmallResNet(num_classes=4, width=8)
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    params = list(model.parameters())
    assert sf.apply_ghost_batchnorm(model, 4) == len(norms)
    wrapped = {id(m.bn) for m in model.modules() if isinstance(m, GhostBatchNorm)}
    assert wrapped == {id(m) for m in norms}
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]
    assert sf.apply_ghost_batchnorm(model, 4) == 0  # no wrapper wrapped twice
    assert sf.apply_ghost_batchnorm(nn.Sequential(nn.Linear(2, 2)), 4) == 0


# ---------------------------------------------------------- weight standardisation
def test_standardize_weight_by_hand() -> None:
    w = torch.tensor([[1.0, 2.0, 3.0, 6.0], [5.0, 5.0, 5.0, 5.0]])
    # Row 0: mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5.
    expected = (torch.tensor([1.0, 2.0, 3.0, 6.0]) - 3.0) / (3.5 + 1e-5) ** 0.5
    out = sf.standardize_weight(w, eps=1e-5)
    assert torch.allclose(out[0], expected, atol=1e-6)
    assert torch.equal(out[1], torch.zeros(4))  # a constant filter has nothing left


def test_weight_standardization_convolves_with_standardized_filters() -> None:
    first, frozen = nn.Conv2d(3, 4, 3), nn.Conv2d(2, 2, 1)
    model = nn.Sequential(first, nn.ReLU(), nn.Conv2d(4, 2, 1), frozen)
    frozen.weight.requires_grad_(False)  # frozen (a whitening stem): left alone
    params = list(model.parameters())
    raw = first.weight.detach().clone()
    assert sf.apply_weight_standardization(model, n_last_layers_ignore=1) == 1
    x = torch.randn(2, 3, 6, 6)
    expected = F.conv2d(x, sf.standardize_weight(raw), first.bias)
    assert torch.allclose(first(x), expected, atol=1e-5)
    # The same Parameter objects: an optimizer built before stays valid.
    assert {id(p) for p in model.parameters()} == {id(p) for p in params}
    per_filter = first.weight.flatten(1)
    assert torch.allclose(per_filter.mean(1), torch.zeros(4), atol=1e-6)


# ------------------------------------------------------------------- squeeze-excite
def test_squeeze_excite_gates_each_channel_by_hand() -> None:
    reduce, expand = nn.Conv2d(2, 1, 1), nn.Conv2d(1, 2, 1)
    assert reduce.bias is not None and expand.bias is not None
    with torch.no_grad():
        reduce.weight.copy_(torch.tensor([1.0, -1.0]).view(1, 2, 1, 1))
        reduce.bias.zero_()
        expand.weight.copy_(torch.tensor([2.0, -3.0]).view(2, 1, 1, 1))
        expand.bias.copy_(torch.tensor([0.0, 1.0]))
    x = torch.stack([torch.full((3, 3), 4.0), torch.full((3, 3), 1.0)]).unsqueeze(0)
    x[0, 0, 0, 0] = 13.0  # channel means: 5 and 1
    # Squeeze: (5, 1); reduce: relu(5 - 1) = 4; expand: (8, -11); gates sigmoid of those.
    gates = torch.sigmoid(torch.tensor([8.0, -11.0])).view(1, 2, 1, 1)
    assert torch.allclose(sf.squeeze_excite(x, reduce, expand), x * gates)


def test_apply_squeeze_excite_gates_wide_convs_and_trains_the_gates() -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 32, 3), nn.Conv2d(32, 2, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = sum(len(g["params"]) for g in optimizer.param_groups)
    assert sf.apply_squeeze_excite(model, optimizer, min_channels=8, latent_channels=0.5) == 2
    gates = [m for m in model.modules() if isinstance(m, ConvSqueezeExcite)]
    assert [g.reduce.out_channels for g in gates] == [4, 16]
    after = sum(len(g["params"]) for g in optimizer.param_groups)
    assert after == before + 2 * 4  # each gate: two 1x1 convs with weight and bias
    optimized = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert optimized == {id(p) for p in model.parameters()}


# --------------------------------------------------------------- low-precision norms
def test_low_precision_norms_compute_in_the_autocast_dtype() -> None:
    x = torch.randn(4, 6, 5)
    ln, gn = nn.LayerNorm(5), nn.GroupNorm(3, 6)
    with torch.no_grad():
        for norm in (ln, gn):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    plain_ln, plain_gn = ln(x), gn(x)
    assert sf.apply_low_precision_norm(nn.Sequential(ln, gn)) == 2
    assert torch.equal(ln(x), plain_ln) and torch.equal(gn(x), plain_gn)  # no autocast: same
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low_ln, low_gn = ln(x), gn(x)
        promoted = F.layer_norm(x, [5], ln.weight, ln.bias)  # what autocast does by itself
    assert promoted.dtype == torch.float32 and low_ln.dtype == low_gn.dtype == torch.bfloat16
    # By definition: the same normalisation with every input first rounded to bf16.
    bf = torch.bfloat16
    by_hand_ln = F.layer_norm(x.to(bf), [5], ln.weight.to(bf), ln.bias.to(bf), ln.eps)
    by_hand_gn = F.group_norm(x.to(bf), 3, gn.weight.to(bf), gn.bias.to(bf), gn.eps)
    assert torch.equal(low_ln, by_hand_ln) and torch.equal(low_gn, by_hand_gn)
    assert torch.allclose(low_ln.float(), plain_ln, atol=0.05)


# ---------------------------------------------------------------------- RandAugment
def test_randaugment_translate_shifts_by_whole_pixels() -> None:
    x = torch.randn(6, 3, 10, 10)
    # Magnitude 1/3 of a 0.3-side maximum is 0.1 of 10 pixels: exactly one pixel, either way.
    out = sf.randaugment_batch(x, depth=1, magnitude=1 / 3, operations=("translate_x",))
    right = torch.zeros_like(x)
    right[..., 1:] = x[..., :-1]
    left = torch.zeros_like(x)
    left[..., :-1] = x[..., 1:]
    for i in range(6):
        assert torch.allclose(out[i], right[i], atol=1e-5) or torch.allclose(
            out[i], left[i], atol=1e-5
        ), i


def test_randaugment_contrast_and_identity_by_hand() -> None:
    x = torch.randn(4, 3, 6, 6)
    same = sf.randaugment_batch(x, depth=3, magnitude=1.0, operations=("identity",))
    assert torch.allclose(same, x, atol=1e-5)
    out = sf.randaugment_batch(x, depth=1, magnitude=0.5, operations=("contrast",))
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    for i in range(4):  # factor 1 +- 0.5 * 0.9 about the image's own mean
        options = [mean[i] + f * (x[i] - mean[i]) for f in (1.45, 0.55)]
        assert any(torch.allclose(out[i], o, atol=1e-5) for o in options), i
    mixed = sf.randaugment_batch(x, depth=2, magnitude=0.5)
    assert mixed.shape == x.shape and torch.isfinite(mixed).all()


# --------------------------------------------------------------------------- AugMix
def test_augmix_is_the_weighted_blend_of_its_chains() -> None:
    x = torch.randn(5, 3, 6, 6)
    chains = [torch.randn_like(x), torch.randn_like(x)]
    weights = torch.tensor([[0.25, 0.75]] * 5, dtype=torch.float64)
    keep = torch.tensor([0.0, 0.5, 1.0, 0.2, 0.9], dtype=torch.float64)
    out = sf.augmix_mix(x, chains, weights, keep)
    for i, k in enumerate(keep.tolist()):
        by_hand = k * x[i] + (1 - k) * (0.25 * chains[0][i] + 0.75 * chains[1][i])
        assert torch.allclose(out[i], by_hand, atol=1e-6)
    drawn, share = sf.augmix_weights(1000, 3, alpha=1.0)
    assert torch.allclose(drawn.sum(1), torch.ones(1000, dtype=torch.float64))
    assert ((share >= 0) & (share <= 1)).all() and abs(float(share.mean()) - 0.5) < 0.05
    # With identity chains the blend is the image itself, whatever the weights.
    same = sf.augmix_batch(x, width=3, max_depth=2, operations=("identity",))
    assert torch.allclose(same, x, atol=1e-5)


# ------------------------------------------------------------------------ Factorize
def test_factorize_matrix_is_the_truncated_svd() -> None:
    w = torch.randn(6, 4)
    a, b = sf.factorize_matrix(w, 4)
    assert a.shape == (6, 4) and b.shape == (4, 4)
    assert torch.allclose(a @ b, w, atol=1e-5)  # full rank: exact
    a, b = sf.factorize_matrix(w, 2)
    s = torch.linalg.svdvals(w)
    # Eckart-Young: the error of the best rank-2 approximation is the dropped singular values.
    assert float((w - a @ b).norm()) == pytest.approx(float(s[2:].norm()), rel=1e-4)


def test_apply_factorize_computes_with_the_low_rank_weights_and_trains_them() -> None:
    conv, linear = nn.Conv2d(8, 8, 3, padding=1), nn.Linear(8 * 5 * 5, 8)
    model = nn.Sequential(conv, nn.Flatten(), linear)
    x = torch.randn(2, 8, 5, 5)
    a, b = sf.factorize_matrix(conv.weight.detach().reshape(8, -1), 6)
    low_rank = F.conv2d(x, (a @ b).reshape(8, 8, 3, 3), conv.bias, padding=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # Rank 6 of 8 saves multiplies on the 3x3 conv (6 * (72 + 8) < 576) and on the linear.
    assert sf.apply_factorize(model, optimizer, min_channels=8, latent=6) == 2
    assert torch.allclose(model[0](x), low_rank, atol=1e-5)
    optimized = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert optimized == {id(p) for p in model.parameters()}  # the old weights left it
    one_by_one = nn.Sequential(nn.Conv2d(8, 8, 1))
    assert sf.apply_factorize(one_by_one, None, min_channels=8, latent=6) == 0  # no saving
