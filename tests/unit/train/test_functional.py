"""The maths of every method's plain function (spotrun.train.functional), one test or more each."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train import functional as sf
from spotrun.train.methods.blurpool import BlurConv2d, BlurMaxPool2d
from spotrun.train.methods.cutmix import cutmix_box
from spotrun.train.methods.layer_freezing import layers
from spotrun.train.methods.patch_whitening import patch_covariance
from spotrun.train.methods.progressive_resizing import bucket_sizes
from spotrun.train.methods.tta import translate
from spotrun.train.models.base import ResidualBlock
from spotrun.train.models.small import SmallResNet, residual_block
from spotrun.train.wrapping import unwrap_model


@pytest.fixture(autouse=True)
def seeded() -> None:
    torch.manual_seed(0)


def images(n: int = 8, c: int = 3, side: int = 8) -> torch.Tensor:
    return torch.randn(n, c, side, side)


# ------------------------------------------------------------ progressive resizing
def test_progressive_size_buckets_and_window() -> None:
    assert bucket_sizes(32, 0.5, 4, 4) == [16, 20, 24, 32]
    kw = {"initial_scale": 0.5, "delay_frac": 0.2, "finish_frac": 0.6, "buckets": 3}
    sizes = [sf.progressive_size(32, p / 100, size_multiple=8, **kw) for p in range(101)]
    assert sizes[0] == sizes[20] == 16  # smallest until the delay ends
    assert set(sizes) == {16, 24, 32}  # only the buckets: few shapes for a compiled model
    assert sizes == sorted(sizes)
    assert sizes[60] == sizes[100] == 32 and sizes[59] == 24


def test_resize_batch() -> None:
    x = images(side=16)
    assert sf.resize_batch(x, (16, 16)) is x
    small = sf.resize_batch(x, (8, 8))
    assert small.shape == (8, 3, 8, 8)
    flat = torch.full((2, 3, 16, 16), 0.7)
    assert torch.allclose(
        sf.resize_batch(flat, (6, 10), "bilinear"), torch.full((2, 3, 6, 10), 0.7)
    )


# ---------------------------------------------------------------- mixed precision
def test_autocast_bf16_on_cpu_and_grad_scaler_arithmetic() -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with sf.autocast_context("cpu", "bf16"):
        assert (a @ b).dtype == torch.bfloat16
    assert (a @ b).dtype == torch.float32
    scaler = sf.make_grad_scaler("cpu", init_scale=8.0)
    w = nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([w], lr=0.1)
    loss = (w * 2).sum()
    scaled = scaler.scale(loss)
    assert float(scaled.detach()) == pytest.approx(8.0 * float(loss.detach()))
    scaled.backward()
    scaler.unscale_(opt)
    assert torch.equal(w.grad, torch.full((3,), 2.0))  # type: ignore[arg-type]


def test_grad_scaler_skips_overflowing_step() -> None:
    scaler = sf.make_grad_scaler("cpu", init_scale=2.0**127)
    w = nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=0.1)
    scaler.scale((w * 1e10).sum()).backward()  # inf after scaling
    scaler.step(opt)
    scaler.update()
    assert torch.equal(w.detach(), torch.ones(2)) and scaler.get_scale() == 2.0**126


# ------------------------------------------------------------------ channels_last
def test_channels_last_keeps_parameter_identity() -> None:
    model = SmallResNet(4, width=8)
    before = [id(p) for p in model.parameters()]
    sf.apply_channels_last(model)
    assert [id(p) for p in model.parameters()] == before  # optimizers stay valid
    conv = model.stem[0]
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert sf.to_channels_last(images()).is_contiguous(memory_format=torch.channels_last)


# ----------------------------------------------------------------------- blurpool
def test_blur_keeps_constants_and_low_pass() -> None:
    flat = torch.full((1, 2, 6, 6), 3.0)
    assert torch.allclose(sf.blur_2d(flat), flat)
    assert sf.blur_2d(flat, stride=2).shape == (1, 2, 3, 3)
    checker = (torch.arange(8).view(1, 8) + torch.arange(8).view(8, 1)) % 2
    x = checker.float().view(1, 1, 8, 8)
    # A checkerboard is the highest frequency there is: blurring flattens it.
    assert float(sf.blur_2d(x).std()) < 0.3 * float(x.std())


@pytest.mark.parametrize(
    "pool", [nn.MaxPool2d(2), nn.MaxPool2d(3, 2, 1), nn.MaxPool2d(2, 2)], ids=str
)
@pytest.mark.parametrize("side", [7, 8])
def test_blur_maxpool_matches_output_size(pool: nn.MaxPool2d, side: int) -> None:
    x = images(side=side)
    assert BlurMaxPool2d(pool)(x).shape == pool(x).shape


def test_apply_blurpool_wraps_strided_layers_keeping_parameters() -> None:
    model = SmallResNet(4, width=16)
    params = {id(p) for p in model.parameters()}
    changed = sf.apply_blurpool(model, min_channels=16)
    # the strided 3x3 and 1x1 convs of the downsampling block, and the max-pool
    assert changed == 3
    assert {id(p) for p in model.parameters()} == params
    assert sum(isinstance(m, BlurConv2d) for m in model.modules()) == 2
    assert model(images(side=12)).shape == (8, 4)
    assert sf.apply_blurpool(model, min_channels=16) == 3  # idempotent: no double wrapping
    assert sum(isinstance(m, BlurConv2d) for m in model.modules()) == 2


# -------------------------------------------------------------------------- EMA
def test_ema_update_is_a_lerp_and_copies_buffers() -> None:
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    ema = sf.ema_copy(model)
    assert not any(p.requires_grad for p in ema.parameters())
    old = [p.detach().clone() for p in ema.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    model.train()(torch.randn(5, 3))  # moves the BN statistics
    sf.ema_update(ema, model, decay=0.75)
    for e, o, p in zip(ema.parameters(), old, model.parameters()):
        assert torch.allclose(e, 0.75 * o + 0.25 * p)
    assert torch.equal(ema[1].running_mean, model[1].running_mean)


# ------------------------------------------------------------------ mixup, cutmix
def test_mixup_blends_inputs_and_targets_alike() -> None:
    x = images()
    mixed, perm, lam = sf.mixup_batch(x, alpha=0.4)
    assert 0.0 <= lam <= 1.0
    assert torch.allclose(mixed, lam * x + (1 - lam) * x[perm])
    y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    soft = sf.mix_targets(y, perm, lam, 4)
    assert torch.allclose(soft.sum(1), torch.ones(8))
    expect = lam * F.one_hot(y, 4).float() + (1 - lam) * F.one_hot(y[perm], 4).float()
    assert torch.allclose(soft, expect)
    lams = [sf.mixup_batch(x, alpha=0.2)[2] for _ in range(200)]
    # Beta(0.2, 0.2) piles up near 0 and 1, with mean 1/2.
    assert abs(sum(lams) / len(lams) - 0.5) < 0.1
    assert sum(1 for v in lams if v < 0.1 or v > 0.9) > 100


def test_cutmix_pastes_a_box_and_weights_labels_by_area() -> None:
    x = images(side=10)
    mixed, perm, lam = sf.cutmix_batch(x, alpha=1.0)
    from_other = (mixed == x[perm]) & (mixed != x)
    changed = from_other.any(1)  # N, H, W
    assert bool((mixed == x)[~changed.unsqueeze(1).expand_as(x)].all())
    assert float(changed[0].float().mean()) == pytest.approx(1 - lam, abs=1e-6) or lam == 1.0
    top, bottom, left, right = cutmix_box(10, 10, 0.75)
    assert 0 <= top <= bottom <= 10 and 0 <= left <= right <= 10
    assert (bottom - top) <= 5 and (right - left) <= 5  # side = 10 * sqrt(1 - 0.75)


# -------------------------------------------------------------------- cutout, colout
def test_cutout_zeroes_squares() -> None:
    x = torch.ones(64, 1, 16, 16)
    out = sf.cutout_batch(x, size_frac=0.25, holes=1)  # 4x4 squares, clipped at borders
    zeros = (out == 0).float().sum((1, 2, 3))
    assert bool((zeros <= 16).all()) and bool((zeros >= 4).all())
    assert float(zeros.max()) == 16  # some squares fall wholly inside
    assert torch.equal(out[out != 0], x[out != 0])


def test_colout_drops_rows_and_columns_keeping_order() -> None:
    x = torch.arange(2 * 10 * 20, dtype=torch.float32).view(2, 1, 10, 20)
    out = sf.colout_batch(x, p_row=0.2, p_col=0.1)
    assert out.shape == (2, 1, 8, 18)
    first_col = out[0, 0, :, 0]
    assert bool((first_col[1:] > first_col[:-1]).all())  # rows kept in their order
    kept_rows = {int(v) // 20 for v in first_col}
    assert len(kept_rows) == 8


# --------------------------------------------------------------- stochastic depth
def test_stochastic_depth_probabilities_and_expectation() -> None:
    model = SmallResNet(4, width=8)
    probs = sf.apply_stochastic_depth(model, 0.3, schedule="linear")
    assert probs == pytest.approx([0.1, 0.2, 0.3])
    assert sf.apply_stochastic_depth(model, 0.3, schedule="uniform") == [0.3] * 3

    branch = nn.Identity()
    x = torch.ones(4000, 1)
    out = sf.stochastic_residual(branch, x, 0.25, "sample")
    assert torch.allclose(out.unique(), torch.tensor([0.0, 1 / 0.75]))
    assert float(out.mean()) == pytest.approx(1.0, abs=0.05)  # unbiased
    kept = [sf.stochastic_residual(branch, x[:1], 0.25, "block") for _ in range(400)]
    dropped = sum(1 for k in kept if k.dim() == 0)
    assert 60 < dropped < 140  # about a quarter of the blocks skipped entirely


def test_residual_block_drops_only_in_training() -> None:
    block = residual_block(4, 4)
    block.drop_prob, block.drop_mode = 0.9, "block"
    x = torch.randn(2, 4, 5, 5)
    block.eval()
    assert torch.equal(block(x), block(x))


# ---------------------------------------------------------------------------- SAM
def test_sam_moves_by_rho_and_restores_exactly() -> None:
    a, b = nn.Parameter(torch.randn(3)), nn.Parameter(torch.randn(2, 2))
    c = nn.Parameter(torch.randn(2))  # no gradient: left alone
    a.grad, b.grad = torch.randn(3), torch.randn(2, 2)
    before = [p.detach().clone() for p in (a, b, c)]
    moved = sf.sam_perturb([a, b, c], rho=0.1)
    step = torch.cat([(a - before[0]).flatten(), (b - before[1]).flatten()]).detach()
    assert float(step.norm()) == pytest.approx(0.1, rel=1e-5)
    grad = torch.cat([a.grad.flatten(), b.grad.flatten()])
    assert torch.allclose(step, 0.1 * grad / grad.norm(), atol=1e-6)  # uphill
    assert torch.equal(c.detach(), before[2])
    sf.sam_restore(moved)
    assert all(torch.equal(p.detach(), q) for p, q in zip((a, b, c), before))


# ------------------------------------------------------------ selective backprop
def test_select_hardest_keeps_top_losses_in_order() -> None:
    x = torch.arange(6).float().view(6, 1)
    y = torch.arange(6)
    losses = torch.tensor([0.1, 5.0, 0.2, 3.0, 4.0, 0.0])
    xs, ys = sf.select_hardest(x, y, losses, keep=0.5)
    assert ys.tolist() == [1, 3, 4] and xs.flatten().tolist() == [1.0, 3.0, 4.0]
    assert len(sf.select_hardest(x, y, losses, keep=0.01)[0]) == 1
    model = nn.Sequential(nn.Flatten(), nn.Linear(1, 6))
    per = sf.per_example_loss(model, x, y)
    assert per.shape == (6,)
    assert torch.allclose(per, F.cross_entropy(model(x), y, reduction="none"))


# ---------------------------------------------------------------- layer freezing
def test_frozen_fraction_and_freeze_layers() -> None:
    assert sf.frozen_fraction(0.5, 0.6, 0.8) == 0.0
    assert sf.frozen_fraction(0.8, 0.6, 0.8) == pytest.approx(0.4)
    assert sf.frozen_fraction(1.0, 0.6, 0.8) == pytest.approx(0.8)
    model = SmallResNet(4, width=8)
    found = layers(model)
    assert found[0] is model.stem[0] and found[-1] is model.head
    count = sf.freeze_layers(model, 0.5)
    assert count == len(found) // 2
    assert all(not p.requires_grad for m in found[:count] for p in m.parameters(recurse=False))
    assert all(p.requires_grad for m in found[count:] for p in m.parameters(recurse=False))
    sf.freeze_layers(model, 0.1)  # never unfreezes
    assert not found[count - 1].weight.requires_grad  # type: ignore[union-attr]


# ------------------------------------------------------------------ grad clipping
def test_clip_gradients() -> None:
    a, b = nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(2))
    a.grad, b.grad = torch.tensor([3.0, 0.0]), torch.tensor([0.0, 4.0])
    norm = sf.clip_gradients([a, b], 1.0)
    assert norm is not None and float(norm) == pytest.approx(5.0)
    assert float(torch.cat([a.grad, b.grad]).norm()) == pytest.approx(1.0, rel=1e-5)
    a.grad = torch.tensor([3.0, -0.5])
    sf.clip_gradients([a], 1.0, "value")
    assert a.grad.tolist() == [1.0, -0.5]


# ---------------------------------------------------------------------------- TTA
def test_tta_views_and_mean_logits() -> None:
    x = torch.arange(16.0).view(1, 1, 4, 4)
    assert translate(x, 1, 0)[0, 0, 1:, :].equal(x[0, 0, :3, :])  # moved down one row
    assert translate(x, 0, -1)[0, 0, :, :3].equal(x[0, 0, :, 1:])  # moved left one column
    assert len(sf.tta_views(x, flips=True, shift=0)) == 2
    assert len(sf.tta_views(x, flips=True, shift=1)) == 6
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
    views = sf.tta_views(x, flips=True, shift=1)
    expect = torch.stack([model(v) for v in views]).mean(0)
    assert torch.allclose(sf.tta_logits(model, x, flips=True, shift=1), expect)
    # A mirror-symmetric model's predictions do not change with flips.
    sym = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1, 3))
    assert torch.allclose(sf.tta_logits(sym, x, flips=True), sym(x))


# ---------------------------------------------------------------------- no decay
def test_no_decay_groups() -> None:
    model = SmallResNet(4, width=8)
    decay, plain = sf.no_decay_param_groups(model, 5e-4)
    assert all(p.ndim > 1 for p in decay["params"]) and decay["weight_decay"] == 5e-4
    assert all(p.ndim == 1 for p in plain["params"]) and plain["weight_decay"] == 0.0
    assert len(decay["params"]) + len(plain["params"]) == len(list(model.parameters()))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=5e-4, momentum=0.9)
    moved = sf.split_no_decay(opt)
    assert moved == len(plain["params"])
    assert [g["weight_decay"] for g in opt.param_groups] == [5e-4, 0.0]
    assert all(g["momentum"] == 0.9 and g["lr"] == 0.1 for g in opt.param_groups)
    model(images(side=8)).sum().backward()
    opt.step()
    with pytest.raises(RuntimeError, match="before the optimizer's first step"):
        sf.split_no_decay(opt)


# ------------------------------------------------------------ zero-init residual
def test_zero_init_residual_makes_blocks_identity_like() -> None:
    block = residual_block(4, 4)
    assert sf.zero_init_residual(block) == 1
    x = torch.randn(2, 4, 5, 5)
    block.train()
    assert torch.allclose(block(x), F.relu(x))  # residual branch outputs exactly 0
    assert sf.zero_init_residual(nn.Sequential(nn.Linear(2, 2))) == 0


# --------------------------------------------------------------- concat pooling
def test_concat_pooling_widens_head_and_moves_optimizer() -> None:
    model = SmallResNet(4, width=8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    old_head = model.head
    sf.apply_concat_pooling(model, opt)
    assert model.head.in_features == 2 * old_head.in_features
    owned = {id(p) for g in opt.param_groups for p in g["params"]}
    assert id(model.head.weight) in owned and id(old_head.weight) not in owned
    x = torch.randn(3, 16, 2, 2)
    pooled = sf.AdaptiveConcatPool2d(1)(x).flatten(1)
    assert torch.equal(pooled, torch.cat([x.mean((2, 3)), x.amax((2, 3))], 1))
    assert model(images(side=8)).shape == (8, 4)


# -------------------------------------------------------------- patch whitening
def test_patch_whitening_decorrelates_patches() -> None:
    # Strongly correlated channels: the whitened patches still come out with unit covariance.
    base = torch.randn(200, 1, 8, 8)
    x = torch.cat(
        [base, 0.8 * base + 0.2 * torch.randn(200, 1, 8, 8), torch.randn(200, 1, 8, 8)], 1
    )
    weight = sf.patch_whitening_weights(x, kernel_size=2, eps=1e-6)
    assert weight.shape == (24, 3, 2, 2)
    assert torch.equal(weight, sf.patch_whitening_weights(x, kernel_size=2, eps=1e-6))
    w = weight[:12].reshape(12, -1).double()
    cov = patch_covariance(x, 2)
    assert torch.allclose(w @ cov @ w.T, torch.eye(12, dtype=torch.float64), atol=1e-3)
    assert torch.equal(weight[12:], -weight[:12])


def test_apply_patch_whitening_builds_a_frozen_stem() -> None:
    model = SmallResNet(4, width=8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    old_conv = model.stem[0]
    x = images(32, side=12)
    sf.apply_patch_whitening(model, x, kernel_size=2, optimizer=opt)
    whiten = model.stem.whiten
    assert not whiten.weight.requires_grad and whiten.out_channels == 24
    new_conv = model.stem.stem[0]
    assert new_conv.in_channels == 24
    owned = {id(p) for g in opt.param_groups for p in g["params"]}
    assert id(new_conv.weight) in owned and id(old_conv.weight) not in owned
    assert id(whiten.weight) not in owned
    assert model(x).shape == (32, 4)


# ------------------------------------------------------------------------ compile
def test_compile_model_wraps_and_unwraps() -> None:
    model = nn.Sequential(nn.Linear(4, 3))
    compiled = sf.compile_model(model, backend="eager")
    assert unwrap_model(compiled) is model
    x = torch.randn(2, 4)
    assert torch.equal(compiled(x), model(x))


def test_every_residual_block_is_found() -> None:
    model = SmallResNet(4, width=8)
    assert sum(isinstance(m, ResidualBlock) for m in model.modules()) == 3
    assert math.isclose(sum(sf.apply_stochastic_depth(model, 0.2)), 0.2 * (1 + 2 + 3) / 3)


def test_patch_whitening_fills_a_models_own_whitening_layer() -> None:
    from spotrun.train.models.fastnet import fast_cifar_net

    model = fast_cifar_net(10, widths=(8, 8, 8))
    own = model.stem.whiten
    layers_before = len(list(model.modules()))
    x = images(16, side=12)
    sf.apply_patch_whitening(model, x, kernel_size=2)
    assert model.stem.whiten is own and len(list(model.modules())) == layers_before
    assert torch.equal(own.weight, sf.patch_whitening_weights(x, 2))
    assert not own.weight.requires_grad and own.bias is not None and own.bias.requires_grad
    with pytest.raises(UsageError, match="kernel_size=2"):
        sf.apply_patch_whitening(fast_cifar_net(10, widths=(8, 8, 8)), x, kernel_size=3)
