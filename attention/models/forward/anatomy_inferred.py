"""The anatomy of a decoder whose family has no entry in attention.models.forward.anatomy's table, read from its
module tree and kept only where a pass of the model confirms it.

Granite, GPT-BigCode and many more are built as LLaMA or GPT-2 are (blocks in a ModuleList; in each an attention
module with q, k, v projections and an output projection, and an MLP; a final norm), under names transformers'
families share (NAMES). `inferred_anatomy` finds those parts, reads the scales a config declares (Granite's
residual_multiplier and logits_scaling: SCALES), and builds a Family for each reading the tree allows (a fused
q, k, v projection may lay them out side by side or head by head: both are tried). A reading is kept only when
one pass over a probe confirms, at every layer, within the rounding of the model's dtype:

    z        each head's output (W_O's input, split into heads) is its attention pattern times its v: the
             attention module, the output projection and the layout of v are the ones the model runs
    writes   hook_resid_pre + hook_attn_out + hook_mlp_out = hook_resid_post: what attention and the MLP
             return (times the scale) is all a block adds, nothing normalised after it, so heads write linearly
    logits   the LM head of the final norm's output, times the logit scale, gives the model's own logits

Together: every head's direct attribution, the MLPs', the embeddings' and the biases' sum to the model's own logit
difference, as for a family of the table (tests/test_inferred.py holds that to the model). A reading that fails is
not used: whatever needs the anatomy says why, with the gap measured; the attention itself is still shown exactly
(the guard checks it apart). Only causal language models are read this way (not encoders, whose blocks normalise
after the sum, nor encoder-decoders).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from attention.models.forward.anatomy import (
    Anatomy,
    Family,
    FusedQKV,
    MissingAnatomy,
    Writes,
    has_lm_head,
    model_type,
    parts_of,
)
from attention.models.forward.hook_points import hooks
from attention.models.forward.model import LoadedModel

NAMES = {  # where transformers' families keep each part, most common first
    "attention": ("self_attn", "attn", "attention", "self_attention"),  # in a block
    "output": ("o_proj", "out_proj", "c_proj", "dense", "Wo", "o"),  # in the attention module
    "separate": (("q_proj", "k_proj", "v_proj"), ("query", "key", "value"), ("q", "k", "v")),  # in the attention
    "fused": ("qkv_proj", "c_attn", "query_key_value", "Wqkv", "qkv"),  # in the attention
    "mlp": ("mlp", "feed_forward", "ffn", "block_sparse_moe"),  # in a block
    "final_norm": ("norm", "ln_f", "final_layernorm", "final_layer_norm", "norm_f", "ln_final"),  # in the base
    "rotary": ("rotary_emb",),  # in the base
}
SCALES = {"write_scale": "residual_multiplier", "logit_divisor": "logits_scaling"}  # Family field -> config field
PROBE = "When Mary and John went to the store, John gave a drink to Mary. The river bank was quiet."
ROUNDING = 8  # gaps allowed: this many of the dtype's epsilon times the size of the terms compared (each check
# recomputes one rounded step of the model from its own rounded inputs: half an epsilon of the result apart)


def inferred_anatomy(loaded: LoadedModel) -> Anatomy:
    """The model's parts as its module tree shows them, confirmed by a pass (module docstring); MissingAnatomy
    saying why not (no such parts, or the pass disagreeing, with the gap)."""
    said = (f"the model family “{model_type(loaded.network)}” has no entry in this app's map of model parts, and "
            "its module tree ")
    why = "so its output projections, layers and norms are not known here (its attention weights are still shown " \
          "exactly)"
    try:
        readings = _readings(loaded.network)
    except MissingAnatomy as err:
        raise MissingAnatomy(f"{said}does not show them as a decoder's ({err}), {why}") from None
    failures = []
    for family in readings:
        try:
            parts = parts_of(loaded.network, family)
        except MissingAnatomy as err:
            failures.append(str(err))
            continue
        gaps = confirm(loaded, parts)
        if not gaps:
            return replace(parts, inferred=_said(family, parts))
        failures.append("; ".join(gaps))
    raise MissingAnatomy(f"{said}shows parts that a pass of the model does not confirm ({' / '.join(failures)}), "
                         f"{why}")


def _said(family: Family, parts: Anatomy) -> str:
    """How the parts were found, for a page or a notebook."""
    scales = [f"{name} {getattr(parts, field):g}" for field, name in
              (("write_scale", "writes scaled by"), ("logit_scale", "logits scaled by")) if getattr(parts, field) != 1]
    qkv = ", ".join(family.qkv) if family.qkv else (
        f"{family.fused_qkv.path} ({family.fused_qkv.layout})" if family.fused_qkv else "none")
    return (f"read from its module tree (blocks {family.layers}, attention {family.attention}, W_O {family.output}, "
            f"q/k/v {qkv}, MLP {family.writes.mlp_out}, final norm {family.final_norm}"
            + (f"; {', '.join(scales)}" if scales else "") + ") and confirmed by a pass: each head's output is its "
            "pattern times its v, the blocks add exactly what attention and the MLP return, and the LM head of the "
            "final norm gives the model's logits")


def _child(module: torch.nn.Module, names) -> str | None:
    """The first of `names` that is a submodule of `module`."""
    for name in names:
        try:
            module.get_submodule(name)
            return name
        except AttributeError:
            continue
    return None


def _width(linear: torch.nn.Module, side: str) -> int | None:
    """A projection's input or output width (Linear, or GPT-2's Conv1D, which stores (in, out))."""
    weight = getattr(linear, "weight", None)
    if weight is None or weight.ndim != 2:
        return None
    rows, columns = weight.shape
    out, into = (columns, rows) if type(linear).__name__ == "Conv1D" else (rows, columns)
    return into if side == "in" else out


def _readings(network) -> list[Family]:
    """Each Family the module tree allows (more than one where a fused projection's layout is open)."""
    config = network.config
    if getattr(config, "is_encoder_decoder", False) or not has_lm_head(network):
        raise MissingAnatomy("only causal language models' parts are read from the tree")
    base = getattr(network, "base_model", network)
    n_layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    lists = [name for name, m in base.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m) == n_layers]
    if not lists:
        raise MissingAnatomy(f"no list of {n_layers} blocks")
    layers = min(lists, key=lambda name: (name.count("."), len(name)))
    block = base.get_submodule(layers)[0]
    attention = _child(block, NAMES["attention"])
    if attention is None:
        raise MissingAnatomy(f"no attention module in a block (looked for {', '.join(NAMES['attention'])})")
    attn = block.get_submodule(attention)
    n_heads, width = int(config.num_attention_heads), int(config.hidden_size)
    d = int(getattr(config, "head_dim", None) or width // n_heads)
    kv = int(getattr(config, "num_key_value_heads", None) or n_heads)
    output = next((name for name in NAMES["output"] if _child(attn, [name]) and _width(attn.get_submodule(name), "in")
                   == n_heads * d and _width(attn.get_submodule(name), "out") == width), None)
    if output is None:
        raise MissingAnatomy(f"no output projection from {n_heads} heads of {d} to {width} in {attention}")
    mlp = _child(block, NAMES["mlp"])
    final_norm = _child(base, NAMES["final_norm"])
    if mlp is None or final_norm is None:
        raise MissingAnatomy("no MLP in a block" if mlp is None else "no final norm")
    found = Family(layers, attention, f"{attention}.{output}", final_norm, _child(base, NAMES["rotary"]),
                   linear_heads=True, writes=Writes(None, mlp),
                   **{field: name for field, name in SCALES.items() if getattr(config, name, None) not in (None, 1)})
    separate = next((names for names in NAMES["separate"] if all(_child(attn, [n]) for n in names)), None)
    if separate is not None:
        return [replace(found, qkv=tuple(f"{attention}.{n}" for n in separate))]
    fused = _child(attn, NAMES["fused"])
    out = None if fused is None else _width(attn.get_submodule(fused), "out")
    layouts = [layout for layout, fits in (("side by side", out == (n_heads + 2 * kv) * d),
                                           ("by head", kv == n_heads and out == 3 * n_heads * d)) if fits]
    if not layouts:  # no q, k, v points: confirm() says so
        return [found]
    return [replace(found, fused_qkv=FusedQKV(f"{attention}.{fused}", layout)) for layout in layouts]


def confirm(loaded: LoadedModel, parts: Anatomy) -> list[str]:
    """What two passes over PROBE find wrong with `parts` (module docstring), each with its gap; [] when nothing.
    The writes are confirmed on a second pass that adds a vector as large as the residual stream to every
    hook_attn_out and hook_mlp_out (+Δ and -Δ/2, the signs turning layer by layer, so the stream stays bounded):
    in 16 bits what attention writes can be smaller than the stream's rounding, and a scale that is off would go
    unseen on the plain pass; on this one it moves each block's output by Δ times the error."""
    tokenizer = loaded.tokenizer
    ids = torch.tensor(tokenizer(PROBE)["input_ids"] if tokenizer is not None else list(range(1, 21)))[None]
    ids = ids.to(loaded.device)
    kept: dict[str, torch.Tensor] = {}

    def keep(t: torch.Tensor, hook) -> None:
        kept[str(hook)] = t.detach().double().cpu()

    wanted = ("hook_resid_pre", "attn.hook_v", "attn.hook_pattern", "attn.hook_z", "ln_final.hook_normalized")
    with torch.inference_mode(), hooks(loaded, [(lambda n: n.endswith(wanted), keep)], lock=False, parts=parts):
        logits = loaded.network(input_ids=ids, output_attentions=True).logits[0].double().cpu()
    eps = torch.finfo(next(loaded.network.parameters()).dtype).eps
    gaps = []

    def check(what: str, a: torch.Tensor, b: torch.Tensor, size: float) -> None:
        gap = float((a - b).abs().max())
        if not gap <= ROUNDING * eps * max(size, 1e-30):
            gaps.append(f"{what} off by {gap:.2g} (allowed {ROUNDING * eps * size:.2g})")

    n_heads = int(loaded.network.config.num_attention_heads)
    L = len(parts.blocks)
    for layer in range(L):
        at = f"blocks.{layer}."
        if at + "attn.hook_pattern" not in kept:
            return [f"layer {layer + 1}'s attention gave no weights to confirm with"]
        v = kept.get(at + "attn.hook_v")  # [1, pos, kv_head, d_head]
        if v is None:  # no q, k, v under the usual names: W_O's input cannot be confirmed head by head
            return ["its q, k and v projections are not under the names transformers' families use, so each head's "
                    "output (W_O's input, head by head) cannot be confirmed"]
        v = v.repeat_interleave(n_heads // v.shape[2], dim=2)
        z = torch.einsum("bhqk,bkhd->bqhd", kept[at + "attn.hook_pattern"], v)
        check(f"layer {layer + 1}: W_O's input against each head's pattern times v", kept[at + "attn.hook_z"], z,
              float(v.abs().max()))
    if gaps:
        return gaps
    size = max(float(kept[f"blocks.{layer}.hook_resid_pre"].abs().max()) for layer in range(L))
    width = kept["blocks.0.hook_resid_pre"].shape[-1]
    delta = torch.cos(torch.arange(width, dtype=torch.float64)) * size  # (D,) as large as the stream

    def add(t: torch.Tensor, hook) -> None:
        sign = 1.0 if hook.layer % 2 == 0 else -1.0
        t += (delta * (sign if hook.endswith("hook_attn_out") else -sign / 2)).to(t.device, t.dtype)
        keep(t, hook)

    edited = (lambda n: n.endswith(("hook_attn_out", "hook_mlp_out")), add)
    streams = (lambda n: n.endswith(("hook_resid_pre", "hook_resid_post")), keep)
    with torch.inference_mode(), hooks(loaded, [edited, streams], lock=False, parts=parts):
        loaded.network(input_ids=ids)
    for layer in range(L):
        terms = [kept[f"blocks.{layer}.{n}"] for n in ("hook_resid_pre", "hook_attn_out", "hook_mlp_out")]
        check(f"layer {layer + 1}: the block's output against its input plus what attention and the MLP add",
              sum(terms), kept[f"blocks.{layer}.hook_resid_post"], sum(float(t.abs().max()) for t in terms))
        if gaps:
            return gaps
    with torch.inference_mode():
        final = kept["ln_final.hook_normalized"].to(loaded.device, next(parts.unembed.parameters()).dtype)
        own = parts.unembed(final)[0].double().cpu() * parts.logit_scale
    check("the LM head of the final norm's output against the model's logits", own, logits,
          float(logits.abs().max()))
    return gaps

