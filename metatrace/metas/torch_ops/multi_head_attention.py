"""``F.multi_head_attention_forward`` (``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` and
``DecoderLayer``) traced as thunder ops.

thunder has no definition of it: it registers it automatically (``default_torch_ops.py``), so its
forward runs torch on fake tensors and its backward runs torch's autograd on them. That backward
fails on every training step but the simplest: with ``need_weights=False`` (what
``TransformerEncoderLayer`` passes) the second output is ``None`` and the vjp raises "The outputs
of the user-provided function given to vjp must be either a Tensor or a tuple of Tensors"; with a
mask, ``is_causal`` or separate key/value sizes a keyword argument requires grad and the
registration raises ``NotImplementedError``. The fake run also pinned the sequence length (torch's
``baddbmm`` meta refuses symbolic sizes: a compile per length). Stock thunder too.

While metatrace is enabled the function is torch's own code (``torch/nn/functional.py``, torch
2.9) written in thunder ops, line for line: the same projections (one packed ``linear`` when
query, key and value are one tensor), masks, ``baddbmm``/``softmax``/``bmm`` for the weights
(``need_weights``), ``scaled_dot_product_attention`` otherwise. Its gradient is those ops' rules
and its sizes stay symbolic. torch's pure-Python shape check (``_mha_shape_check``) runs as is.
"""

from __future__ import annotations

import math
import warnings

import thunder.core.dtypes as dtypes
import thunder.torch as ltorch
import torch.nn.functional as F

from metatrace.metas.torch_ops import torch_lookasides
from metatrace.patching import Patch


def _canonical_mask(mask, name, other_type, other_name, target_type, check_other=True):
    """torch's ``_canonical_mask``: a bool mask becomes an additive float mask (``-inf`` where True)."""
    if mask is None:
        return None
    is_float = dtypes.is_float_dtype(mask.dtype)
    if mask.dtype is not dtypes.bool8 and not is_float:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both instead.")
    if not is_float:
        mask = ltorch.masked_fill(ltorch.zeros_like(mask, dtype=target_type), mask, float("-inf"))
    return mask


def _split_heads(proj, parts: int, E):
    """``proj.unflatten(-1, (parts, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()``."""
    x = ltorch.unsqueeze(ltorch.unflatten(proj, -1, (parts, E)), 0)
    return ltorch.contiguous(ltorch.squeeze(ltorch.transpose(x, 0, -2), -2))


def _in_projection_packed(q, k, v, w, b):
    E = q.shape[-1]
    if k is v:
        if q is k:  # self-attention
            proj = _split_heads(ltorch.linear(q, w, b), 3, E)
            return ltorch.getitem(proj, 0), ltorch.getitem(proj, 1), ltorch.getitem(proj, 2)
        w_q, w_kv = ltorch.split(w, [E, E * 2])
        b_q, b_kv = (None, None) if b is None else ltorch.split(b, [E, E * 2])
        kv = _split_heads(ltorch.linear(k, w_kv, b_kv), 2, E)
        return ltorch.linear(q, w_q, b_q), ltorch.getitem(kv, 0), ltorch.getitem(kv, 1)
    w_q, w_k, w_v = ltorch.chunk(w, 3)
    b_q, b_k, b_v = (None, None, None) if b is None else ltorch.chunk(b, 3)
    return ltorch.linear(q, w_q, b_q), ltorch.linear(k, w_k, b_k), ltorch.linear(v, w_v, b_v)


def _in_projection(q, k, v, w_q, w_k, w_v, b_q, b_k, b_v):
    Eq, Ek, Ev = q.shape[-1], k.shape[-1], v.shape[-1]
    assert w_q.shape == (Eq, Eq), f"expecting query weights shape of {(Eq, Eq)}, but got {w_q.shape}"
    assert w_k.shape == (Eq, Ek), f"expecting key weights shape of {(Eq, Ek)}, but got {w_k.shape}"
    assert w_v.shape == (Eq, Ev), f"expecting value weights shape of {(Eq, Ev)}, but got {w_v.shape}"
    assert b_q is None or b_q.shape == (Eq,), f"expecting query bias shape of {(Eq,)}, but got {b_q.shape}"
    assert b_k is None or b_k.shape == (Eq,), f"expecting key bias shape of {(Eq,)}, but got {b_k.shape}"
    assert b_v is None or b_v.shape == (Eq,), f"expecting value bias shape of {(Eq,)}, but got {b_v.shape}"
    return ltorch.linear(q, w_q, b_q), ltorch.linear(k, w_k, b_k), ltorch.linear(v, w_v, b_v)


def _projections(query, key, value, a):
    """q, k, v projected: packed weights, or separate ones (``use_separate_proj_weight``)."""
    if not a["use_separate_proj_weight"]:
        assert a["in_proj_weight"] is not None, "use_separate_proj_weight is False but in_proj_weight is None"
        return _in_projection_packed(query, key, value, a["in_proj_weight"], a["in_proj_bias"])
    for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
        assert a[name] is not None, f"use_separate_proj_weight is True but {name} is None"
    bias = a["in_proj_bias"]
    b_q, b_k, b_v = (None, None, None) if bias is None else ltorch.chunk(bias, 3)
    return _in_projection(query, key, value, a["q_proj_weight"], a["k_proj_weight"], a["v_proj_weight"], b_q, b_k, b_v)


def _checked_attn_mask(attn_mask, tgt_len, src_len, bsz, num_heads):
    if attn_mask is None:
        return None
    if attn_mask.ndim == 2:
        correct_2d_size = (tgt_len, src_len)
        if attn_mask.shape != correct_2d_size:
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be {correct_2d_size}.")
        return ltorch.unsqueeze(attn_mask, 0)
    if attn_mask.ndim == 3:
        correct_3d_size = (bsz * num_heads, tgt_len, src_len)
        if attn_mask.shape != correct_3d_size:
            raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be {correct_3d_size}.")
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")


def _heads(t, static, bsz, num_heads, head_dim, name):
    """``(len, bsz, E)`` to ``(bsz * num_heads, len, head_dim)``, or the static key/value given."""
    if static is None:
        return ltorch.transpose(ltorch.view(t, t.shape[0], bsz * num_heads, head_dim), 0, 1)
    assert static.shape[0] == bsz * num_heads, \
        f"expecting static_{name}.size(0) of {bsz * num_heads}, but got {static.shape[0]}"
    assert static.shape[2] == head_dim, f"expecting static_{name}.size(2) of {head_dim}, but got {static.shape[2]}"
    return static


def _extended_keys(k, v, attn_mask, key_padding_mask, a, bsz, num_heads, head_dim):
    """The bias key/value appended (``add_bias_kv``), the heads split, a zero key/value appended
    (``add_zero_attn``); the masks padded to match."""
    bias_k, bias_v = a["bias_k"], a["bias_v"]
    if bias_k is not None and bias_v is not None:
        assert a["static_k"] is None, "bias cannot be added to static key."
        assert a["static_v"] is None, "bias cannot be added to static value."
        k = ltorch.cat([k, ltorch.repeat(bias_k, 1, bsz, 1)])
        v = ltorch.cat([v, ltorch.repeat(bias_v, 1, bsz, 1)])
        attn_mask = None if attn_mask is None else ltorch.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else ltorch.pad(key_padding_mask, (0, 1))
    else:
        assert bias_k is None
        assert bias_v is None
    k = _heads(k, a["static_k"], bsz, num_heads, head_dim, "k")
    v = _heads(v, a["static_v"], bsz, num_heads, head_dim, "v")
    if a["add_zero_attn"]:
        zero_attn_shape = (bsz * num_heads, 1, head_dim)
        k = ltorch.cat([k, ltorch.zeros(zero_attn_shape, dtype=k.dtype, device=k.device)], dim=1)
        v = ltorch.cat([v, ltorch.zeros(zero_attn_shape, dtype=v.dtype, device=v.device)], dim=1)
        attn_mask = None if attn_mask is None else ltorch.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else ltorch.pad(key_padding_mask, (0, 1))
    return k, v, attn_mask, key_padding_mask


def _merged_masks(attn_mask, key_padding_mask, bsz, num_heads, src_len):
    if key_padding_mask is None:
        return attn_mask
    if key_padding_mask.shape[0] != bsz:
        raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got {key_padding_mask.shape[0]}")
    if key_padding_mask.shape[1] != src_len:
        raise AssertionError(f"Expected key_padded_mask.shape[1] to be {src_len}, but got {key_padding_mask.shape[1]}")
    key_padding_mask = ltorch.reshape(
        ltorch.expand(ltorch.view(key_padding_mask, bsz, 1, 1, src_len), -1, num_heads, -1, -1),
        (bsz * num_heads, 1, src_len))
    return key_padding_mask if attn_mask is None else ltorch.add(attn_mask, key_padding_mask)


def _with_weights(q, k, v, attn_mask, dropout_p, is_causal, a, shape):
    """The ``need_weights`` path: the weights computed explicitly and returned."""
    tgt_len, bsz, embed_dim, num_heads, src_len = shape
    E = q.shape[-1]
    q_scaled = ltorch.mul(q, math.sqrt(1.0 / float(E)))
    assert not (is_causal and attn_mask is None), "FIXME: is_causal not implemented for need_weights"
    k_t = ltorch.transpose(k, -2, -1)
    weights = ltorch.bmm(q_scaled, k_t) if attn_mask is None else ltorch.baddbmm(attn_mask, q_scaled, k_t)
    weights = ltorch.softmax(weights, dim=-1)
    if dropout_p > 0.0:
        weights = ltorch.dropout(weights, p=dropout_p)
    out = ltorch.bmm(weights, v)
    out = ltorch.view(ltorch.contiguous(ltorch.transpose(out, 0, 1)), tgt_len * bsz, embed_dim)
    out = ltorch.linear(out, a["out_proj_weight"], a["out_proj_bias"])
    out = ltorch.view(out, tgt_len, bsz, out.shape[1])
    weights = ltorch.view(weights, bsz, num_heads, tgt_len, src_len)
    if a["average_attn_weights"]:
        weights = ltorch.mean(weights, dim=1)
    return out, weights


def _without_weights(q, k, v, attn_mask, dropout_p, is_causal, a, shape):
    """``need_weights=False``: ``scaled_dot_product_attention``; no weights returned."""
    tgt_len, bsz, embed_dim, num_heads, src_len = shape
    head_dim = q.shape[-1]
    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.ndim == 3:
            attn_mask = ltorch.unsqueeze(attn_mask, 0)
        else:
            attn_mask = ltorch.view(attn_mask, bsz, num_heads, -1, src_len)
    q = ltorch.view(q, bsz, num_heads, tgt_len, head_dim)
    k = ltorch.view(k, bsz, num_heads, src_len, head_dim)
    v = ltorch.view(v, bsz, num_heads, src_len, head_dim)
    out = ltorch.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = ltorch.view(ltorch.contiguous(ltorch.permute(out, 2, 0, 1, 3)), bsz * tgt_len, embed_dim)
    out = ltorch.linear(out, a["out_proj_weight"], a["out_proj_bias"])
    return ltorch.view(out, tgt_len, bsz, out.shape[1]), None


def _masks(attn_mask, key_padding_mask, is_causal, need_weights, dtype):
    """The masks made additive floats, and whether ``is_causal`` stays (torch's rules)."""
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       None if attn_mask is None else attn_mask.dtype, "attn_mask", dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        return None, key_padding_mask, is_causal  # (sdpa's own causal mask)
    attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", dtype, check_other=False)
    return attn_mask, key_padding_mask, is_causal and key_padding_mask is None


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """torch's ``F.multi_head_attention_forward`` in thunder ops (same arguments, same results)."""
    a = dict(in_proj_weight=in_proj_weight, in_proj_bias=in_proj_bias, bias_k=bias_k, bias_v=bias_v,
             add_zero_attn=add_zero_attn, out_proj_weight=out_proj_weight, out_proj_bias=out_proj_bias,
             use_separate_proj_weight=use_separate_proj_weight, q_proj_weight=q_proj_weight,
             k_proj_weight=k_proj_weight, v_proj_weight=v_proj_weight, static_k=static_k, static_v=static_v,
             average_attn_weights=average_attn_weights)
    is_batched = F._mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:  # (new tensors, as in eager: the packed projection's identity tests then fail)
        query, key, value = ltorch.unsqueeze(query, 1), ltorch.unsqueeze(key, 1), ltorch.unsqueeze(value, 1)
        key_padding_mask = None if key_padding_mask is None else ltorch.unsqueeze(key_padding_mask, 0)
    tgt_len, bsz, embed_dim = query.shape
    attn_mask, key_padding_mask, is_causal = _masks(attn_mask, key_padding_mask, is_causal, need_weights, query.dtype)
    assert embed_dim == embed_dim_to_check, \
        f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}"
    head_dim = embed_dim // num_heads
    assert head_dim * num_heads == embed_dim, f"embed_dim {embed_dim} not divisible by num_heads {num_heads}"
    if use_separate_proj_weight:
        assert key.shape[:2] == value.shape[:2], \
            f"key's sequence and batch dims {key.shape[:2]} do not match value's {value.shape[:2]}"
    else:
        assert key.shape == value.shape, f"key shape {key.shape} does not match value shape {value.shape}"
    q, k, v = _projections(query, key, value, a)
    attn_mask = _checked_attn_mask(attn_mask, tgt_len, key.shape[0], bsz, num_heads)
    q = ltorch.transpose(ltorch.view(q, tgt_len, bsz * num_heads, head_dim), 0, 1)
    k, v, attn_mask, key_padding_mask = _extended_keys(k, v, attn_mask, key_padding_mask, a, bsz, num_heads, head_dim)
    src_len = k.shape[1]
    attn_mask = _merged_masks(attn_mask, key_padding_mask, bsz, num_heads, src_len)
    attend = _with_weights if need_weights else _without_weights
    out, weights = attend(q, k, v, attn_mask, dropout_p if training else 0.0, is_causal, a,
                          (tgt_len, bsz, embed_dim, num_heads, src_len))
    if not is_batched:
        out = ltorch.squeeze(out, 1)
        weights = None if weights is None else ltorch.squeeze(weights, 0)
    return out, weights


def patches() -> list[Patch]:
    return torch_lookasides.rows(
        ((F.multi_head_attention_forward, None, None, multi_head_attention_forward),),
        "multi_head_attention_forward in thunder ops (thunder's automatic registration has no backward)")
