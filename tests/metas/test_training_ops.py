"""Training steps eager runs and thunder failed on or got wrong (issue 51): the losses
(metatrace/metas/torch_ops/losses.py, torch_executor_fixes.py), instance norm's running statistics
(instance_norm.py) and multi-head attention (multi_head_attention.py). Each compares the output and
the gradient of every input and parameter with eager's, over sizes that change between calls, in one
compile (two where thunder's grad transform tells a batch of 1 apart)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

import thunder

SYMBOLIC = "symbolic values"


def _fresh(args):
    return [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]


def _cotangent(t: torch.Tensor) -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, t.numel(), dtype=t.dtype).reshape(t.shape)


def _step(fn, args):
    """``fn``'s output and the gradient of each input requiring grad, for a fixed cotangent."""
    args = _fresh(args)
    out = fn(*args)
    out.backward(_cotangent(out))
    return out.detach(), [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad]


def _assert_step_equals_eager(jf, fn, args):
    got, got_grads = _step(jf, args)
    want, want_grads = _step(fn, args)
    assert_close(got, want)
    assert len(got_grads) == len(want_grads)
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        assert_close(g, w, msg=f"gradient of input {i}")


# --- cross_entropy and nll_loss --------------------------------------------------------------

# name -> (loss, the ignore_index its targets hold)
LOSSES = {
    "cross_entropy": (lambda x, t, w, r: F.cross_entropy(x, t, weight=w, reduction=r), -100),
    "smoothed": (lambda x, t, w, r: F.cross_entropy(x, t, weight=w, reduction=r, label_smoothing=0.1), -100),
    # (an ignore_index inside the class range: thunder masks the gathered values, not the targets)
    "smoothed_ignore_1": (lambda x, t, w, r: F.cross_entropy(x, t, weight=w, reduction=r, ignore_index=1,
                                                             label_smoothing=0.2), 1),
    # (no ignore_index given: eager's default is -100)
    "nll_loss": (lambda x, t, w, r: F.nll_loss(F.log_softmax(x, 1), t, weight=w, reduction=r), -100),
}


def _loss_inputs(n: int, c: int, dtype, weighted: bool, *extra: int, ignore_index: int = -100):
    g = torch.Generator().manual_seed(n * 31 + c)
    x = torch.randn(n, c, *extra, generator=g, dtype=dtype, requires_grad=True)
    t = torch.randint(0, c, (n, *extra), generator=g)
    t = torch.where(t == ignore_index, (t + 1) % c, t)
    t.view(-1)[1::3] = ignore_index  # ignored targets present, never all of them
    w = torch.rand(c, generator=g, dtype=dtype) + 0.5 if weighted else None
    return x, t, w


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("loss", LOSSES)
def test_class_index_loss_output_and_gradients_equal_eager(enabled, loss, reduction, weighted):
    """float32 with ``reduction="sum"``/``"none"``: the backward raised "expected scalar type Float
    but found Double" (the torch executor's nll_loss_backward). Label smoothing's mean summed the
    ignored targets' smoothing term. ``F.nll_loss`` without ``ignore_index`` failed in the grad
    rule. All wrong in stock thunder too, constant values included."""
    loss_fn, ignore_index = LOSSES[loss]
    fn = lambda x, t, w: loss_fn(x, t, w, reduction)  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for dtype in (torch.float32, torch.float64):
        for n, c in ((6, 4), (9, 5)):
            _assert_step_equals_eager(jf, fn, _loss_inputs(n, c, dtype, weighted, ignore_index=ignore_index))
    assert thunder.cache_misses(jf) == 2  # (a dtype each)


@pytest.mark.parametrize("smoothing", [0.0, 0.3])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_a_loss_over_a_sequence_dimension_equals_eager(enabled, reduction, smoothing):
    """Logits ``(N, C, T)`` (and ``(N, C, T, U, V)``): the torch executor's nll_loss_backward
    returned the gradient reshaped to ``(N, C, 1, T)`` and took the cotangent of ``"none"`` in the
    wrong shape; label smoothing's weighted mean squeezed the gathered weights, so ``T = 1``
    broadcast them against the targets. Stock thunder too, constant values included."""
    fn = lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction=reduction,  # noqa: E731
                                         label_smoothing=smoothing, ignore_index=1)
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for n, c, *extra in ((2, 4, 3), (3, 5, 6), (4, 5, 1), (2, 3, 2, 2, 3)):
        _assert_step_equals_eager(jf, fn, _loss_inputs(n, c, torch.float32, True, *extra, ignore_index=1))
    assert thunder.cache_misses(jf) <= 3  # (a rank each; T = 1 may take its own)


@pytest.mark.parametrize("loss", ["cross_entropy", "smoothed", "nll_loss"])
def test_a_weight_requiring_grad_raises_eagers_error(enabled, loss):
    """Eager has no derivative for a class-index loss's weight and refuses it on the forward;
    thunder (stock too, constant values included) returned no gradient for it, silently."""
    fn = lambda x, t, w: LOSSES[loss][0](x, t, w, "sum")  # noqa: E731
    x, t, w = _loss_inputs(6, 4, torch.float32, True)
    w.requires_grad_()
    with pytest.raises(RuntimeError, match="nll_loss_forward' is not differentiable with respect to argument 'weight'"):
        fn(x, t, w)
    with pytest.raises(RuntimeError, match="nll_loss_forward' is not differentiable with respect to argument 'weight'"):
        thunder.jit(fn, cache=SYMBOLIC)(x, t, w)


def test_a_weight_requiring_grad_under_no_grad_gives_eagers_loss(enabled):
    fn = lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1)  # noqa: E731
    x, t, w = _loss_inputs(6, 4, torch.float32, True)
    w.requires_grad_()
    with torch.no_grad():
        assert_close(thunder.jit(fn, cache=SYMBOLIC)(x, t, w), fn(x, t, w))


def test_probability_targets_differentiate_the_weight_as_eager(enabled):
    """Probability targets do not reach nll_loss: eager differentiates the weight there."""
    fn = lambda x, p, w: F.cross_entropy(x, p, weight=w, reduction="sum", label_smoothing=0.1)  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for n, c in ((6, 4), (9, 5)):
        x = torch.randn(n, c, requires_grad=True)
        p = torch.softmax(torch.randn(n, c), 1)
        w = torch.rand(c, requires_grad=True)
        _assert_step_equals_eager(jf, fn, (x, p, w))
    assert thunder.cache_misses(jf) == 1


# --- instance norm's running statistics ---------------------------------------------------------

def _norm_step(module, x):
    x = x.detach().clone().requires_grad_()
    out = module(x)
    out.backward(_cotangent(out))
    return out.detach(), x.grad


@pytest.mark.parametrize("cls, spatial", [(nn.InstanceNorm1d, ((5,), (8,), (3,))),
                                          (nn.InstanceNorm2d, ((4, 5), (6, 3), (2, 7)))], ids=["1d", "2d"])
def test_instance_norm_updates_running_statistics_as_eager(enabled, cls, spatial):
    """thunder's instance_norm wrote the new statistics into per-sample copies nothing read: in
    training under grad they stayed at their initial values (stock thunder too, constant values
    included; without grad the torch executor ran F.instance_norm whole and updated them)."""
    torch.manual_seed(0)
    model = cls(3, affine=True, track_running_stats=True, momentum=0.3)
    eager = copy.deepcopy(model)
    jm = thunder.jit(model, cache=SYMBOLIC)
    for i, size in enumerate(spatial):
        x = torch.randn(2 + i, 3, *size) * 2 + 1
        (got, got_grad), (want, want_grad) = _norm_step(jm, x), _norm_step(eager, x)
        assert_close(got, want)
        assert_close(got_grad, want_grad)
        assert_close(model.running_mean, eager.running_mean)
        assert_close(model.running_var, eager.running_var)
        for name, p in eager.named_parameters():
            assert_close(dict(model.named_parameters())[name].grad, p.grad, msg=name)
    assert thunder.cache_misses(jm) == 1
    model.eval(), eager.eval()
    x = torch.randn(2, 3, *spatial[0])
    assert_close(jm(x), eager(x))  # (the statistics read back)


def test_instance_norm_without_grad_updates_its_statistics_once(enabled):
    model = nn.InstanceNorm1d(3, track_running_stats=True)
    eager = copy.deepcopy(model)
    jm = thunder.jit(model, cache=SYMBOLIC)
    with torch.no_grad():
        for length in (5, 8):
            x = torch.randn(2, 3, length) + 2
            assert_close(jm(x), eager(x))
            assert_close(model.running_mean, eager.running_mean)
            assert_close(model.running_var, eager.running_var)


# --- multi-head attention -----------------------------------------------------------------------

E, HEADS, BATCH = 8, 2, 3


def _masks(kind: str, length: int) -> dict:
    causal = nn.Transformer.generate_square_subsequent_mask(length)
    padding = torch.arange(length)[None, :] >= torch.tensor([[length], [length - 1], [2]])  # no row all masked
    return {
        "none": {},
        "causal": dict(attn_mask=causal),
        "is_causal": dict(attn_mask=causal, is_causal=True),
        "bool_and_padding": dict(attn_mask=torch.ones(length, length, dtype=torch.bool).triu(1),
                                 key_padding_mask=padding),
        "padding": dict(key_padding_mask=padding),
    }[kind]


def _attention_step(module, inputs, kwargs):
    inputs = _fresh(inputs)
    outs = module(*inputs, **kwargs)
    outs = [o for o in (outs if isinstance(outs, tuple) else (outs,)) if o is not None]
    sum((o * _cotangent(o)).sum() for o in outs).backward()
    params = {name: p.grad for name, p in module.named_parameters()}
    for p in module.parameters():
        p.grad = None
    return outs, [a.grad for a in inputs if a.requires_grad], params


def _assert_attention_equals_eager(model, make_call, lengths=(5, 7, 4)):
    eager = copy.deepcopy(model)
    jm = thunder.jit(model, cache=SYMBOLIC)
    for length in lengths:
        inputs, kwargs = make_call(length)
        got, got_grads, got_params = _attention_step(jm, inputs, kwargs)
        want, want_grads, want_params = _attention_step(eager, inputs, kwargs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w)
        for i, (g, w) in enumerate(zip(got_grads, want_grads)):
            assert_close(g, w, msg=f"gradient of input {i}")
        for name, w in want_params.items():
            assert_close(got_params[name], w, msg=f"gradient of {name}")
    assert thunder.cache_misses(jm) == 1


def _sequence(length, batch_first, width=E, requires_grad=True):
    shape = (BATCH, length, width) if batch_first else (length, BATCH, width)
    return torch.randn(shape, requires_grad=requires_grad)


@pytest.mark.parametrize("batch_first, need_weights, masks", [
    (True, True, "none"), (False, False, "none"), (True, False, "is_causal"), (False, True, "bool_and_padding"),
    (True, False, "padding"), (False, True, "causal"),
])
def test_multihead_self_attention_trains_as_eager(enabled, batch_first, need_weights, masks):
    """thunder registered multi_head_attention_forward automatically: its backward failed with
    ``need_weights=False`` (a vjp output is None) and with any mask (a keyword argument requires
    grad), and the fake run pinned the length. Stock thunder too, constant values included."""
    torch.manual_seed(0)
    model = nn.MultiheadAttention(E, HEADS, batch_first=batch_first)

    def call(length):
        x = _sequence(length, batch_first)
        return (x, x, x), dict(need_weights=need_weights, **_masks(masks, length))

    _assert_attention_equals_eager(model, call)


def test_cross_attention_with_its_own_key_and_value_sizes_trains_as_eager(enabled):
    torch.manual_seed(0)
    model = nn.MultiheadAttention(E, HEADS, kdim=6, vdim=4, add_bias_kv=True, add_zero_attn=True)

    def call(length):
        return (_sequence(length, False), _sequence(length + 2, False, 6), _sequence(length + 2, False, 4)), \
            dict(average_attn_weights=False)

    _assert_attention_equals_eager(model, call)


def test_unbatched_attention_trains_as_eager(enabled):
    torch.manual_seed(0)
    model = nn.MultiheadAttention(E, HEADS, bias=False)

    def call(length):
        x = torch.randn(length, E, requires_grad=True)
        return (x, x, x), dict(attn_mask=torch.randn(HEADS, length, length))

    _assert_attention_equals_eager(model, call)


@pytest.mark.parametrize("batch_first, norm_first, masks", [
    (True, False, "none"), (False, False, "bool_and_padding"), (True, True, "is_causal"),
])
def test_transformer_encoder_layer_trains_as_eager(enabled, batch_first, norm_first, masks):
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(E, HEADS, dim_feedforward=16, dropout=0.0, batch_first=batch_first,
                                       norm_first=norm_first, activation="gelu" if norm_first else "relu")

    def call(length):
        m = _masks(masks, length)
        kwargs = {"src_mask": m.get("attn_mask"), "src_key_padding_mask": m.get("key_padding_mask"),
                  "is_causal": m.get("is_causal", False)}
        return (_sequence(length, batch_first),), kwargs

    _assert_attention_equals_eager(model, call)


def test_transformer_decoder_layer_trains_as_eager(enabled):
    torch.manual_seed(0)
    model = nn.TransformerDecoderLayer(E, HEADS, dim_feedforward=16, dropout=0.0)

    def call(length):
        return (_sequence(length, False), _sequence(length + 3, False)), \
            dict(tgt_mask=nn.Transformer.generate_square_subsequent_mask(length))

    _assert_attention_equals_eager(model, call)
