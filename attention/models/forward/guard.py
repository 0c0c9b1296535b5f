"""The guard: before a model reads anyone's text, the weights we rebuild are held to the model's own.

`check_model(loaded)` runs the model on a probe text longer than every attention window its
configuration declares (a sliding window only shows on texts longer than it; capped at the token limit),
with transformers' eager kernel computed *beside* every layer of that pass, from the very q, k, v and mask
the layer had (attention.models.forward.capture): the pass carries its own outputs forward, so what is
measured is our rebuilding alone, not the drift between two passes. (The guard used to run a second pass
with three layers on the eager kernel, and in 16 bits their rounded outputs changed every later layer's
input: SmolLM2 in float16 read 8.5e-3 at layer 30 that way on an Intel Xeon, 1.2e-3 alone.)
At every layer of every stack:
- the weights rebuilt from the captured q and k (AttentionStack.layer_weights, what every view shows) are
  held to the eager kernel's, within GUARD_GAP: above it the family computes its scores in a way we do not
  rebuild, and it is refused, naming the first layer off. In 16 bits the reference is the same eager kernel
  run on the same q, k, v and mask taken to float32: the model's own arithmetic, its rounding taken out, so
  our error is held to GUARD_GAP in every dtype (a scale off by 0.1 % is caught in bfloat16 too);
- where our SurveyKernel made the layer's output (float32 on the CPU), that output is held to the eager
  kernel's, relative to its largest value;
- the model's own numbers must be finite: a dtype too narrow for its activations (Gemma 3 in float16)
  gives inf or NaN, and the refusal says by which layer and which precision to choose instead (the pass
  stops there).
What the model's own 16-bit kernel adds by rounding its scores and weights is stated beside (`gap`, against
its eager weights in its dtype): usually within `allowed_gap` (GUARD_GAP + ROUNDING_UNITS unit roundoffs of
the dtype: bfloat16 6.3e-2, float16 7.9e-3: SmolLM2's scores reach 54 on the probe, and its bfloat16
weights move by 1.6e-2); where a model's sharpest heads are rounded further (a random model with queries
sharpened until its scores reach 157: 0.15 in bfloat16), the pages say so beside the model
(ModelCheck.note): the weights shown are exact for its q and k, and its own are that far from them.
docs/models.md writes the rule down with the gaps measured. Our kernel stands in for the model's only in
float32; in half precision each layer's output is the model's own.
Families whose weights are the model's own output_attentions (T5's position bias, the families that do
not use transformers' attention interface) have nothing rebuilt: their gap is 0, and their texts are
kept to OWN_WEIGHTS_MAX_TOKENS, since they hold L x H x n² weights.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from attention.models.forward.anatomy import MissingAnatomy, NoEntry, attention_window, model_type
from attention.models.forward.anatomy_inferred import inferred_anatomy
from attention.models.forward.capture import CapturedCall, EagerBeside
from attention.models.forward.check import GUARD_GAP, OWN_WEIGHTS_MAX_TOKENS, ModelCheck, ModelRefused, allowed_gap
from attention.models.forward.device_arrays import DeviceArray, part
from attention.models.forward.memory import NotEnoughMemory
from attention.models.forward.model import LoadedModel
from attention.models.forward.recompute import chunk_rows, row_chunks
from attention.models.forward.registry import ModelUnavailable
from attention.models.forward.running import attend, attend_image
from attention.models.forward.stacks import attention_stack, stack_of

PROBE_MIN_TOKENS = 32
PROBE_SENTENCE = "The otter dove into the cold river and came back up with a silver fish. "
def probe_text(loaded: LoadedModel) -> str:
    """A text of at least PROBE_MIN_TOKENS tokens, and longer than the model's attention window when its
    token limit allows."""
    window = attention_window(loaded.network.config) or 0
    want = max(PROBE_MIN_TOKENS, window + 16)
    per_sentence = max(1, len(loaded.tokenizer(PROBE_SENTENCE, add_special_tokens=False)["input_ids"]))
    return PROBE_SENTENCE * (want // per_sentence + 1)


def probe_image() -> np.ndarray:
    """An image model's probe: a fixed 64 x 64 RGB pattern (smooth gradients and seeded noise), which every
    processor resizes to its own size."""
    y, x = np.mgrid[0:64, 0:64] / 63.0
    noise = np.random.default_rng(0).random((64, 64))
    rgb = np.stack([x, y, 0.5 * (x + y) * 0.5 + 0.5 * noise], axis=2)
    return np.rint(rgb * 255).astype(np.uint8)


@dataclass(frozen=True)
class LayerGap:
    """One layer of one stack, measured beside the probe's pass on that layer's own inputs."""

    stack: str  # "self", "decoder" or "cross"
    layer: int  # 0-based, within its stack
    weights: float  # max |weights the views show - eager weights|
    output: float | None  # max |our output - eager output| / max |eager output|, where our kernel made it
    exact: float  # max |weights the views show - the eager kernel in float32 on the same inputs| (16 bits;
    # in float32, `weights`): our error alone
    top_score: float = 0.0  # max |score| over the keys each query sees (16 bits; 0 in float32)


class Overflow(Exception):
    """The model's own numbers hold inf or NaN from this layer on: the pass is stopped there."""

    def __init__(self, stack: str, layer: int):
        super().__init__(f"{stack} layer {layer}")
        self.stack, self.layer = stack, layer  # layer 1-based


def measure_layer(call: CapturedCall, eager: EagerBeside, stack: str, layer: int) -> LayerGap:
    """How far the weights the views show for one layer (AttentionStack.layer_weights, rebuilt from the call's
    q and k with its scale, soft cap and mask), and our kernel's output where it made one, are from the model's
    eager kernel on that layer's own inputs (`eager`, computed beside the pass), a chunk of query rows at a
    time (a 4,096-token probe of 32 heads is 2 GB a layer in float32). Overflow where the model's own q, k,
    v, eager weights or output are not finite (a float16 model past 65,504)."""
    own = eager.weights  # (H, n, m) in the model's dtype, where it runs
    if not (all(_finite(a) for a in (call.q, call.k, call.v)) and bool(torch.isfinite(own).all())
            and bool(torch.isfinite(eager.output).all())):
        raise Overflow(stack, layer + 1)
    one = attention_stack([call], None, causal=False)  # this layer alone, as the result's stack holds it
    gap = exact = top = 0.0
    for rows in row_chunks(one.n_queries, chunk_rows(one.n_heads, one.n_keys)):
        rebuilt = one.layer_weights(0, rows=rows)  # (H, r, m) float32 on the compute device
        if eager.exact is not None:
            exact = max(exact, float((rebuilt - eager.exact[:, rows].to(rebuilt.device)).abs().max()))
            seen = one.layer_scores(0, rows=rows)
            seen = seen[seen > torch.finfo(torch.float32).min / 2]  # the keys each query sees
            top = max(top, float(seen.abs().max())) if seen.numel() else top
        gap = max(gap, float(rebuilt.sub_(own[:, rows].to(rebuilt.device, torch.float32)).abs_().max()))
    output = None
    if eager.ours:
        reference = eager.output.float()
        scale = max(float(reference.abs().max()), 1e-12)
        output = float((eager.carried.float() - reference).abs().max()) / scale
    return LayerGap(stack=stack, layer=layer, weights=gap, output=output,
                    exact=gap if eager.exact is None else exact, top_score=top)


def _finite(a) -> bool:
    return bool(torch.isfinite(a.tensor).all()) if isinstance(a, DeviceArray) else bool(np.isfinite(a).all())


def check_model(loaded: LoadedModel) -> LoadedModel:
    """`loaded` with its ModelCheck (and, for a model whose own weights are kept, its token limit lowered);
    ModelUnavailable, saying why in the user's words, when its numbers overflow its dtype, when rebuilt
    weights differ from the model's own, or when our kernel's output does."""
    dtype = next(loaded.network.parameters()).dtype
    dtype_name = str(dtype).removeprefix("torch.")
    allowed = allowed_gap(dtype)
    att, measured = _probe_pass(loaded, dtype_name)
    s = att.self_attn
    if not s.captured or s.bias:
        check = ModelCheck(captured=s.captured, gap=0.0, output_gap=0.0, layers=(), probe_tokens=len(att.tokens),
                           own_weights=True, dtype=dtype_name, allowed=allowed)
        spec = replace(loaded.spec, max_tokens=min(loaded.spec.max_tokens, OWN_WEIGHTS_MAX_TOKENS),
                       max_tokens_gpu=None)
        return _with_parts(replace(loaded, spec=spec, check=check))
    _refuse_scores_not_rebuilt(loaded, measured, dtype_name)
    made = [g for g in measured if g.output is not None]
    _refuse_kernel_output(loaded, made, allowed)
    worst = max(measured, key=lambda g: g.weights)
    output = max(made, key=lambda g: g.output, default=None)
    self_gaps = tuple(g.weights for g in measured if g.stack == "self")
    check = ModelCheck(captured=True, gap=worst.weights, output_gap=0.0 if output is None else output.output,
                       layers=tuple(range(len(self_gaps))), probe_tokens=len(att.tokens), own_weights=False,
                       dtype=dtype_name, allowed=allowed, layer_gaps=self_gaps, worst=_where(worst),
                       checked=len(measured), kernel_layers=len(made),
                       exact_gap=max(g.exact for g in measured), top_score=max(g.top_score for g in measured))
    return _with_parts(replace(loaded, check=check))


def _with_parts(checked: LoadedModel) -> LoadedModel:
    """`checked` with its parts read from its module tree and confirmed by a pass, for a text model whose family
    has no entry in the anatomy's table (attention.models.forward.anatomy_inferred), or with why they are not:
    found once, now, so that no request pays for it or runs it under the model's lock."""
    if checked.spec.inputs != "text" or checked.spec.architecture == "encoder-decoder" or \
            not isinstance(checked.found_anatomy, NoEntry):  # the table's entry, or a part not where it says
        return checked
    try:
        parts = inferred_anatomy(checked)
    except MissingAnatomy as err:
        parts = err
    return replace(checked, read_parts=parts)


def _probe_pass(loaded: LoadedModel, dtype_name: str):
    """(the probe's result, a LayerGap for every attention layer of every stack): one pass over the probe with
    the model's own eager kernel beside each layer; refused (ModelUnavailable) where its numbers overflow its
    dtype or the check runs out of memory."""
    encoder_decoder = loaded.spec.architecture == "encoder-decoder"
    measured: list[LayerGap] = []
    seen: dict[str, int] = {}  # calls seen per stack: the layer a call is (ALBERT calls one module every layer)

    def beside(call: CapturedCall, eager: EagerBeside) -> None:
        stack = stack_of(call.module, encoder_decoder)
        seen[stack] = layer = seen.get(stack, -1) + 1
        if not call.bias:  # (a position bias: the model's own weights are kept, nothing is rebuilt)
            measured.append(measure_layer(call, eager, stack, layer))

    overflow = None
    try:
        att = attend_image(loaded, probe_image(), beside=beside) if loaded.spec.inputs == "image" else \
            attend(loaded, probe_text(loaded), beside=beside)
    except Overflow as stopped:  # (refused below, outside this block: the pass's frames are not kept with it)
        overflow = stopped.stack, stopped.layer
    except NotEnoughMemory as err:
        raise ModelUnavailable(f"{loaded.spec.label} loaded, but checking it against its own attention on its "
                               f"probe text ran out of memory, so it is not shown. {err}") from None
    if overflow is not None:
        stack, layer = overflow
        _refuse_overflow(loaded, dtype_name, layer, "" if stack == "self" else f"{stack} ")
    _refuse_overflow(loaded, dtype_name, _first_overflow(att), "")  # the last layer's output, or an unseen model
    return att, measured


def _refuse_scores_not_rebuilt(loaded: LoadedModel, measured: list[LayerGap], dtype_name: str) -> None:
    """ModelRefused where our weights differ from the model's own kernel's on the same inputs by more than
    GUARD_GAP, in any dtype (in 16 bits its kernel run in float32: its rounding taken out). What its own
    16-bit rounding adds is stated (ModelCheck.gap), not refused."""
    over = [g for g in measured if not g.exact <= GUARD_GAP]  # NaN is over too
    if not over:
        return
    largest = max(g.exact for g in over)
    more = f"; {len(over)} of its {len(measured)} attention layers are off, by up to {largest:.1e}" \
        if len(over) > 1 else ""
    own = "from its own" if dtype_name in ("float32", "float64") else \
        f"from its own kernel's, run on the same q, k and mask in float32 (its {dtype_name} rounding taken out),"
    raise ModelRefused(
        f"{loaded.spec.label} is refused rather than shown wrong: at {_where(over[0])} the attention weights "
        f"rebuilt from its q and k differ {own} by {over[0].exact:.1e}, fed the same inputs, above the "
        f"{GUARD_GAP:.1e} this app allows{more}. Its family ({model_type(loaded.network)}) computes its attention "
        "scores in a way this app does not rebuild.")


def _refuse_kernel_output(loaded: LoadedModel, made: list[LayerGap], allowed: float) -> None:
    """ModelRefused where the output our kernel made for a layer differs from the model's own by more than
    `allowed` of its largest value."""
    off = [g for g in made if not g.output <= allowed]
    if off:
        raise ModelRefused(
            f"{loaded.spec.label} is refused rather than shown wrong: at {_where(off[0])} the output this app's "
            f"attention kernel makes differs from the model's own by {off[0].output:.1e} of its largest value, fed "
            f"the same q, k and v, above the {allowed:.1e} this app allows. Its family ({model_type(loaded.network)}) "
            "makes attention's output in a way this app's kernel does not.")


def _where(g: LayerGap) -> str:
    """"layer 3", "decoder layer 2", "cross layer 1": a layer as the pages say it (1-based)."""
    return f"{'' if g.stack == 'self' else g.stack + ' '}layer {g.layer + 1}"


def _first_overflow(att) -> int | None:
    """The first layer (1-based; 0: the embeddings) where the shown pass's numbers hold inf or NaN: the
    (encoder's) self-attention's q, k or v, or the layer's output (hidden state); None when all are finite."""
    s = att.self_attn
    layers = [layer + 1 for layer in range(s.n_layers) if s.captured
              and not all(_finite(part(a, layer)) for a in (s.q, s.k, s.v))]
    layers.append(next((i for i in range(len(att.hidden)) if not _finite(att.hidden[i])), None))
    return min((layer for layer in layers if layer is not None), default=None)


NARROWER = {"float16": "bfloat16 or float32", "bfloat16": "float32"}  # what to pick when a dtype overflows


def _refuse_overflow(loaded: LoadedModel, dtype: str, layer: int | None, stack: str) -> None:
    """ModelUnavailable when the model's own numbers are not finite by `layer` (1-based, 0: its embeddings)."""
    if layer is None:
        return
    where = "in its embeddings" if layer == 0 else f"by {stack}layer {layer}"
    if dtype in NARROWER:
        raise ModelRefused(
            f"{loaded.spec.label}: its activations exceed {dtype}'s range {where} (its own forward pass holds "
            f"inf or NaN there), so its numbers cannot be shown in {dtype}. Choose {NARROWER[dtype]} instead.")
    raise ModelRefused(
        f"{loaded.spec.label}: its own forward pass holds inf or NaN {where} even in {dtype}, so its weights may "
        "be damaged and it cannot be shown.")
