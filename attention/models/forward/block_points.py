"""Where each hook point of a block is (hook_points names them): the Point record, the q/k/v points of separate or
fused projections, and the points inside a pre-norm block that TransformerLens also names (issue 72):

    blocks.{l}.ln1.hook_scale, ln2.hook_scale        [batch, pos, 1]  √(mean(x²) + eps) of the norm's input x
                                                     (x centred first where the norm is a LayerNorm)
    blocks.{l}.ln1.hook_normalized, ln2.hook_normalized  [batch, pos, d_model]  x / scale, before the norm's
                                                     weight (TransformerLens's convention), float32 as the model's
                                                     RMSNorm computes it (x · rsqrt(mean(x²) + eps)): the norm's
                                                     output is its weight times this. Read only: a fn that
                                                     returns or edits a value raises (the model's norm would not
                                                     use it); so is ln_final.hook_scale
    blocks.{l}.hook_resid_mid                        [batch, pos, d_model]  the stream after attention's write,
                                                     before the MLP's: editable (the edit is made in place, so the
                                                     MLP's norm and the residual sum both see it)
    blocks.{l}.mlp.hook_pre, hook_pre_linear         [batch, pos, d_mlp]  the gate's output, before the
                                                     activation, and a gated MLP's up projection (an MLP without
                                                     a gate has hook_pre only: its up projection's output)
    blocks.{l}.mlp.hook_post                         [batch, pos, d_mlp]  the down projection's input: act(pre),
                                                     times pre_linear where gated
A family whose block runs attention and the MLP side by side (Phi-1/2) has no hook_resid_mid nor ln2; one without
an `inner` entry in the anatomy gives none of these (the error says so).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attention.models.forward.anatomy import Family, Inner
from attention.models.forward.attention_edits import HookPointError


@dataclass(frozen=True)
class Point:
    """Where one hook point is: a module's first input ("in"; "mid": edited in place) or its output ("out", item
    `item` of a tuple), seen through `view` as TransformerLens shapes it (a view: edits in place reach the model);
    "scale"/"normalized": a norm's, read only; the other sides are hooks inside attention or W_O (hook_points)."""

    module: torch.nn.Module
    side: str
    item: int = 0  # which element of a tuple output
    groups: int = 1  # the last axis read as (groups, width) ...
    part: tuple[int, int] | None = None  # ... of which this [start, stop) along width (None: all) ...
    d_head: int | None = None  # ... then split into heads of d_head (None: the tensor as it is)
    heads: int | None = None  # attention weights: the (batch, heads, query_pos, key_pos) a tensor must have
    scale: float = 1.0  # the point is the module's tensor times this (Granite's blocks scale what they add)

    def view(self, t: torch.Tensor) -> torch.Tensor:
        """The module's tensor as the point shows it: (..., groups * width) -> (..., heads, d_head)."""
        if self.d_head is None:
            return t if self.part is None else t[..., self.part[0]:self.part[1]]
        seen = t.unflatten(-1, (self.groups, -1))  # (..., groups, width)
        seen = seen if self.part is None else seen[..., self.part[0]:self.part[1]]
        return seen.unflatten(-1, (-1, self.d_head)).flatten(-3, -2)  # (..., heads, d_head)

    def back(self, t: torch.Tensor, edited: torch.Tensor) -> torch.Tensor:
        """The module's tensor with the point's part replaced by `edited`."""
        if self.d_head is None and self.part is None:
            return edited
        out = t.clone()
        self.view(out).copy_(edited)
        return out


def part_point(block: torch.nn.Module, path: str, kind: str, what: str, side: str = "out",
               scale: float = 1.0, part: tuple[int, int] | None = None) -> Point | str:
    """A Point on a module of the block, or why not: the module is not where the family's entry says."""
    try:
        return Point(block.get_submodule(path), side, scale=scale, part=part)
    except AttributeError:
        return f"{kind}: its block has no {what} at “{path}” as this module's entry for the family says"


def qkv_points(kind: str, family: Family, block, config, n_heads: int, d: int) -> list[Point | str]:
    """hook_q, hook_k, hook_v of one block: the outputs of separate projections, or parts of a fused one."""
    if family.qkv is not None:
        return [Point(block.get_submodule(path), "out", d_head=d) for path in family.qkv]
    if family.fused_qkv is None:
        why = f"{kind}: its q, k and v come from one fused projection whose layout is not known here"
        return [why, why, why]
    module = block.get_submodule(family.fused_qkv.path)
    if family.fused_qkv.layout == "by head":  # (..., H, 3 * d): each head's q, k, v side by side
        return [Point(module, "out", groups=n_heads, part=(i * d, (i + 1) * d), d_head=d) for i in range(3)]
    q, kv = n_heads * d, int(getattr(config, "num_key_value_heads", None) or n_heads) * d  # [q | k | v]
    return [Point(module, "out", part=(a, b), d_head=d) for a, b in ((0, q), (q, q + kv), (q + kv, q + 2 * kv))]


def inner_points(block: torch.nn.Module, at: str, inner: Inner | None, kind: str) -> dict[str, Point | str]:
    """The points inside one block (the module docstring's list), each a Point or why not."""
    names = ("ln1.hook_scale", "ln1.hook_normalized", "ln2.hook_scale", "ln2.hook_normalized", "hook_resid_mid",
             "mlp.hook_pre", "mlp.hook_pre_linear", "mlp.hook_post")
    if inner is None:
        why = f"{kind}: where its block keeps its norms and its MLP's inside is not in this module's entry for it"
        return {at + name: why for name in names}
    found: dict[str, Point | str] = {}
    for ln, path in (("ln1", inner.ln1), ("ln2", inner.ln2)):
        for side in ("scale", "normalized"):
            found[f"{at}{ln}.hook_{side}"] = part_point(block, path, kind, f"norm {ln}", side) if path else (
                f"{kind}: its block has no {ln} (attention and the MLP read the stream side by side, or unnormed)")
    found[at + "hook_resid_mid"] = part_point(block, inner.resid_mid, kind, "MLP norm", "mid") if inner.resid_mid \
        else f"{kind}: attention and the MLP read the same stream side by side: there is none between them"
    half = None
    if inner.fused_gate_up:  # [gate | up] side by side in one projection's output
        module = block.get_submodule(inner.mlp_in)
        half = (getattr(module, "out_features", None) or module.weight.shape[0]) // 2
    found[at + "mlp.hook_pre"] = part_point(block, inner.mlp_in, kind, "MLP gate", part=half and (0, half))
    found[at + "mlp.hook_pre_linear"] = part_point(block, inner.mlp_linear, kind, "MLP up projection",
                                                   part=half and (half, 2 * half)) if inner.mlp_linear else (
        f"{kind}: its MLP has no gate: mlp.hook_pre is its one up projection's output")
    found[at + "mlp.hook_post"] = part_point(block, inner.mlp_out, kind, "MLP down projection", "in")
    return found


def norm_parts(module: torch.nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """{"scale", "normalized"} of a norm's input x, TransformerLens's definitions, float32: a LayerNorm centres
    x first; normalized = x · rsqrt(mean(x²) + eps), as transformers' RMSNorms compute it."""
    eps = next(getattr(module, n) for n in ("eps", "variance_epsilon", "variance_eps", "epsilon") if hasattr(module, n))
    x = x.to(torch.float32)
    if isinstance(module, torch.nn.LayerNorm) or "RMS" not in type(module).__name__.upper():
        x = x - x.mean(-1, keepdim=True)
    variance = x.pow(2).mean(-1, keepdim=True) + eps
    return {"scale": variance.sqrt(), "normalized": x * torch.rsqrt(variance)}


def norm_hook(point: Point, hook: str, fn, backward: bool):
    """A read-only fn on a norm's scale or normalized input (a forward pre-hook on the norm)."""
    if backward:
        raise HookPointError(f"{hook} is computed beside the model's norm, not by it: it has no gradient of its "
                             "own (put the backward hook on the norm's input, hook_resid_pre or hook_resid_mid)")

    def before(module, args, kwargs):
        seen = norm_parts(module, args[0] if args else kwargs["hidden_states"])[point.side]
        kept = seen.clone()
        out = fn(seen, hook)
        if (out is not None and not torch.equal(out, kept)) or not torch.equal(seen, kept):
            raise HookPointError(f"{hook} is read only here: the model's norm computes its own scale (edit its "
                                 "input, hook_resid_pre or hook_resid_mid, or the next point after it)")
        return None
    return point.module.register_forward_pre_hook(before, with_kwargs=True)
