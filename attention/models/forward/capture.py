"""Capture Q, K, V inside a Hugging Face model while it runs, after rotary embeddings, for every layer.

transformers 5 routes every attention layer through one function chosen by `attn_implementation`, and
calls it with the tensors the kernel sees: query (B, H, n, d) and key/value (B, H_kv, m, d) after
rotary position embeddings (llama) and before KV heads are repeated (grouped-query attention), plus
the additive mask and the scaling. Models load with `attn_implementation=CAPTURE`: our function
records those inputs when a `recording()` block is open on this thread, then runs the architecture's
own eager kernel (outputs and `output_attentions` exactly the eager ones), the fused SDPA kernel, which
never materialises the (heads, n, m) weights, or a kernel of ours (`OwnKernel`): the head survey's, which
makes the layer's output from the same weights it sums (attention.models.forward.kernel.SurveyKernel).
A check of our numbers against the model's (the guard, own_attention) also runs the model's eager kernel
*beside* the pass, on the very q, k, v and mask of each call, and carries the pass's own output forward:
so the layers after a checked one read the same inputs as in the pass the pages show (in 16 bits an eager
layer's rounded output would make every later layer differ), and a gap measures our rebuilding alone.

This does what forward hooks on q_proj/k_proj/v_proj would, without re-implementing each model's
rotary embedding: the captured q, k are the ones the model multiplies.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import eager_mask

from attention.models.forward.attention_edits import AttentionEditError, edited_call, edits_of
from attention.models.forward.device_arrays import DeviceArray, kept, resident_device

CAPTURE = "explorer_capture"
# What a call may carry for our own kernel to stand in for the model's: settings the captured mask already
# holds (a sliding window), the soft cap it applies, and flags that do not touch attention's math. Anything
# else (T5's position_bias, gpt-oss's sinks, a head mask) leaves the call to the model's kernels.
PLAIN_KWARGS = frozenset({"sliding_window", "softcap", "position_ids", "cache_position", "use_cache", "is_causal",
                          "output_attentions", "output_hidden_states", "output_router_logits", "deterministic",
                          "encoder_hidden_states", "past_key_values"})


@dataclass(frozen=True)
class CapturedCall:
    """One attention call. Shapes: q (H, n, d), k and v (H_kv, m, d), mask (n, m) bool or None,
    weights (H, n, m) or None. On a GPU q, k, v and the mask are DeviceArrays (attention.models.forward.
    device_arrays): they stay there, in the model's dtype."""

    module: str  # the attention module's qualified name, e.g. "encoder.layer.3.attention.self"
    q: np.ndarray | DeviceArray
    k: np.ndarray | DeviceArray
    v: np.ndarray | DeviceArray
    mask: np.ndarray | DeviceArray | None  # True = may attend (from the additive mask: 0 kept, very negative
    # masked); calls given the same mask tensor share one array (a sliding-window layer gets its own)
    bias: bool  # the additive mask held finite non-zero values (a position bias, as in T5)
    scale: float
    causal: bool = False  # the mask is exactly causal (query i sees keys 0..i)
    softcap: float | None = None  # scores went through cap * tanh(scores / cap) before the mask (Gemma-2)
    weights: np.ndarray | None = None  # the eager kernel's own weights, for the modules asked for


OwnKernel = Callable[[CapturedCall], "torch.Tensor | None"]
"""Our own attention for one captured call: its output (n, H, d), or None to leave the call to the fused kernel."""


@dataclass(frozen=True)
class EagerBeside:
    """The model's own eager attention of one call, computed beside the pass from that call's q, k, v and mask,
    and the output the pass carried forward instead (recording's `beside`).
    Shapes: weights (H, n, m) and outputs (n, H, d), torch, in the model's dtype, where the model runs."""

    weights: torch.Tensor  # the eager kernel's weights
    output: torch.Tensor  # the eager kernel's output
    carried: torch.Tensor  # the output the pass went on with: ours, the fused kernel's, or the eager one
    ours: bool  # our kernel (the recording's OwnKernel) made `carried`
    exact: torch.Tensor | None = None  # (H, n, m) float32: the same eager kernel on the same q, k, v and mask
    # taken to float32, for a model in 16 bits (None in float32): its own arithmetic without its rounding


Beside = Callable[[CapturedCall, EagerBeside], None]
"""Told, for every call of a recording, its eager weights and output beside the pass's (the guard's check)."""


@dataclass
class _Recording:
    names: dict[int, str]  # id(attention module) -> qualified name
    kernel: str | OwnKernel  # "eager", "sdpa", or a kernel of ours
    eager_for: frozenset[str]  # modules whose eager weights are computed beside the pass and kept
    on_call: Callable[[int], None] | None  # told how many calls were recorded so far
    beside: Beside | None = None  # told every call's eager attention beside the pass's
    calls: list[CapturedCall] = field(default_factory=list)
    masks: dict = field(default_factory=dict)  # one bool mask per mask tensor: every layer shares it


_local = threading.local()


@contextlib.contextmanager
def recording(names: dict[int, str], *, kernel: str | OwnKernel = "eager", eager_for=frozenset(),
              on_call: Callable[[int], None] | None = None, beside: Beside | None = None):
    """Collect the CapturedCalls of the forward passes run inside the block, on this thread.

    kernel "eager" runs transformers' eager attention (it returns weights: output_attentions works);
    "sdpa" runs the fused kernel, which never builds the (H, n, m) weights, so long inputs fit in memory:
    weights are recomputed later from the captured q and k. An OwnKernel makes each plain call's output
    itself from the captured q, k, v and mask (one text, no dropout, nothing on the scores that q and k
    do not hold, see PLAIN_KWARGS); other calls run the fused kernel. Modules named in `eager_for` also run
    the eager kernel beside the pass, on the same inputs, and keep its weights (`CapturedCall.weights`: a
    check of one layer against the model itself) while the pass goes on with the kernel's output, as it
    would without the check. `beside(call, eager)` is told every call's eager attention beside the pass's.
    Yields the list being filled.
    """
    if kernel not in ("eager", "sdpa") and not callable(kernel):
        raise ValueError(f"kernel must be 'eager', 'sdpa' or a kernel of ours, got {kernel!r}")
    active = _Recording(names, kernel, frozenset(eager_for), on_call, beside)
    _local.active = active
    try:
        yield active.calls
    finally:
        _local.active = None


def _capture_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    active: _Recording | None = getattr(_local, "active", None)
    if edits := edits_of(module):  # a hook inside this layer's eager kernel (scores, pattern, rotated q or k)
        out = edited_call(_eager(module), edits, module, query, key, value, attention_mask, scaling=scaling,
                          dropout=dropout, **kwargs)
        if active is None:
            return out
        if any(edit.changed for edit in edits):  # a hook that only reads lets the recording go on
            raise AttentionEditError("a pass that recomputes attention from the captured q and k (attend(), generate "
                                     "and the analyses) would show weights this layer did not use: a hook changed "
                                     "its scores, pattern or rotated q/k (run_with_cache and run_with_hooks run "
                                     "through such edits and give the edited pattern)")
    if active is None:  # outside a recording (e.g. generate()): the model's own eager attention
        return _eager(module)(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    name = active.names.get(id(module), type(module).__name__)
    mask, bias, causal = _bool_mask(active.masks, attention_mask, query.shape[-2], key.shape[-2])
    extra = kwargs.get("position_bias")  # T5 passes its learned relative bias separately
    bias = bias or (isinstance(extra, torch.Tensor) and bool(torch.any(extra != 0)))
    scale = float(scaling) if scaling is not None else float(query.shape[-1]) ** -0.5
    softcap = kwargs.get("softcap")
    call = CapturedCall(module=name, q=kept(query[0]), k=kept(key[0]), v=kept(value[0]), mask=mask, bias=bias,
                        scale=scale, causal=causal, softcap=None if softcap is None else float(softcap))
    eager = _eager(module)
    side = None  # the eager kernel's (output, weights) beside the pass, on this call's own inputs
    if name in active.eager_for or active.beside is not None:
        side = eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    own = None
    if callable(active.kernel) and _plain(query, bias, dropout, kwargs):
        own = active.kernel(call)  # (n, H, d), or None when the kernel leaves this call to the model's
    if own is not None:
        out, weights = own[None].to(query.dtype), None
    # The fused kernel cannot soft-cap scores: those layers run the model's own eager kernel (one layer's
    # (H, n, m) weights at a time), and the cap is recorded so recomputed weights apply it too.
    elif active.kernel == "eager" or softcap is not None:
        out, weights = side if side is not None else eager(module, query, key, value, attention_mask,
                                                            scaling=scaling, dropout=dropout, **kwargs)
    else:
        # A plain causal mask goes as is_causal (the fused kernel's fast path); any other mask as given.
        given = kwargs.pop("is_causal", None)  # SigLIP says is_causal=False itself
        out, weights = sdpa_attention_forward(module, query, key, value, None if causal else attention_mask,
                                              dropout=dropout, scaling=scaling, is_causal=True if causal else given,
                                              **kwargs)
    if side is not None and name in active.eager_for:
        call = replace(call, weights=_np(side[1][0]))
    if side is not None and active.beside is not None:
        exact = None
        if query.dtype in (torch.float16, torch.bfloat16):  # its own kernel, without its 16-bit rounding
            exact = eager(module, query.float(), key.float(), value.float(),
                          None if attention_mask is None else attention_mask.float(), scaling=scaling,
                          dropout=dropout, **kwargs)[1][0]
        active.beside(call, EagerBeside(weights=side[1][0], output=side[0][0], carried=out[0], ours=own is not None,
                                        exact=exact))
    active.calls.append(call)
    if active.on_call is not None:
        active.on_call(len(active.calls))
    return out, weights


def _plain(query: torch.Tensor, bias: bool, dropout: float, kwargs: dict) -> bool:
    """Our kernel can stand in for the model's on this call: one text in float32 (a half-precision model
    keeps its own arithmetic), no dropout, no bias on the scores, and nothing else passed that could change
    the math (PLAIN_KWARGS, or an unset value)."""
    return (query.shape[0] == 1 and query.dtype == torch.float32 and not bias and not dropout
            and all(k in PLAIN_KWARGS or v is None or v is False for k, v in kwargs.items()))


def _eager(module):
    return importlib.import_module(type(module).__module__).eager_attention_forward


def _np(t: torch.Tensor) -> np.ndarray:
    """A float32 numpy array in row-major order (the model's own weights, kept for a check)."""
    return t.detach().to(torch.float32).cpu().contiguous().numpy()


def _bool_mask(seen: dict, mask, n: int, m: int) -> tuple[np.ndarray | None, bool, bool]:
    """(B, 1, n, m) additive float mask -> ((n, m) bool with True = may attend, it holds a finite bias,
    it is exactly causal: query i sees keys 0..i).

    Every layer gets the same mask tensor: it is converted once per forward pass (`seen`).
    """
    if mask is None:
        return None, False, False
    key = (mask.data_ptr(), tuple(mask.shape), n, m)
    if key not in seen:
        a = mask[0, 0, -n:, -m:].detach()
        if a.dtype == torch.bool:
            visible, bias = a, False
        else:  # a masked key holds its dtype's most negative value (float16: -65504), or -inf
            blocked = a <= torch.finfo(a.dtype).min / 2
            visible, bias = ~blocked, bool(torch.any((a != 0) & ~blocked))
        # compared where the mask is (on a GPU, n x n there), then copied once, or kept there (a GPU's pass)
        causal = n == m and torch.equal(visible, torch.ones(n, n, dtype=torch.bool, device=a.device).tril())
        resident = resident_device()
        seen[key] = (visible.cpu().numpy() if resident is None else DeviceArray(visible.to(resident).contiguous()),
                     bias, causal)
    return seen[key]


AttentionInterface.register(CAPTURE, _capture_attention)
AttentionMaskInterface.register(CAPTURE, eager_mask)  # the same explicit masks eager attention gets
