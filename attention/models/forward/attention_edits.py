"""Editable attention scores and patterns: TransformerLens's hook_attn_scores and hook_pattern, inside the model's own
eager attention (issue 72: attention knockout and pattern patching).

transformers' eager attention makes the scores (q k^T times the scaling, plus the additive mask, after a soft cap
where the family has one), takes one softmax of them and multiplies the result by v, all inside one function
(each family's `eager_attention_forward`). A fn on these points runs *inside* that function: while a module with
edits runs its attention (attention.models.forward.capture sends every call here first), a TorchFunctionMode
catches its one softmax, gives the scores fn the softmax's input and the pattern fn its output, and the function
goes on with what they return. So an edit is the one a reader would make by hand in eager_attention_forward: a
knockout that sets a score to -inf changes the logits exactly as that does (tests/test_hook_loop.py).

Conventions (TransformerLens's beside ours, also in hook_points' docstring):
    hook_attn_scores  [batch, head_index, query_pos, key_pos]: softmax's input, after the mask, as TL 3.9's (after
                      its apply_causal_mask); TL's masked keys hold -inf, ours the mask's value (the dtype's lowest
                      number, -3.4e38 in float32): find them with `< -1e30`, not isinf()
    hook_pattern      [batch, head_index, query_pos, key_pos]: the softmax's output in the model's dtype, as
                      the family casts it next (a 16-bit model's softmax runs in float32): its own weights
    hook_rot_q, hook_rot_k  [batch, pos, head_index, d_head] (k: its KV heads): the q and k the kernel gets, after
                      rotary positions (and a q/k norm where the family has one), as TransformerLens's
A pass with an edit runs the eager kernel for that layer whatever kernel was asked for. attend() and the other
analyses that recompute weights from the captured q and k refuse to run through such an edit (the weights they
would show are not the ones the model used); run_with_cache's hook_pattern is the edited pattern.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

_LOCK = threading.Lock()
_EDITS: dict[int, list[Edit]] = {}  # id(attention module) -> its edits, in the order installed


class HookPointError(ValueError):
    """A name that is no hook point, or a point this family cannot give exactly; the message says which.
    (Defined here, the lowest module that raises it; attention.models.forward.hook_points gives it its name.)"""


class AttentionEditError(HookPointError):
    """An edit of scores or pattern that cannot be made exactly here; the message says why."""


@dataclass(eq=False)
class Edit:
    """One fn on one attention module's scores or pattern. `applied`: how many calls it ran in (a pass that did
    not reach it is an error, not a silent no-op)."""

    module: torch.nn.Module
    where: str  # "scores" or "pattern"; "rot_q" or "rot_k": the kernel's q or k (after rotary positions);
    # "float32": the layer's weights recomputed in float32 beside the pass (read only)
    run: Callable[[torch.Tensor], torch.Tensor | None]  # the tensor -> a replacement, or None (kept, maybe edited)
    applied: int = 0
    reads: bool = False  # it only reads (run_with_cache's own fns): the layer's weights are still the model's
    changed: bool = False  # its fn has changed the tensor it was given (returned another, or edited it in place)

    def remove(self) -> None:
        with _LOCK:
            edits = _EDITS.get(id(self.module), [])
            if self in edits:
                edits.remove(self)
            if not edits:
                _EDITS.pop(id(self.module), None)


def add_edit(module: torch.nn.Module, where: str, run: Callable, reads: bool = False) -> Edit:
    """Put `run` on the module's scores or pattern until the returned Edit's remove()."""
    edit = Edit(module, where, run, reads=reads)
    with _LOCK:
        _EDITS.setdefault(id(module), []).append(edit)
    return edit


def edits_of(module) -> list[Edit]:
    """The edits on this attention module now ([] for none)."""
    return list(_EDITS.get(id(module), ()))


def edited_call(eager: Callable, edits: list[Edit], module, *args, **kwargs):
    """eager(module, *args, **kwargs) with the edits applied at its one softmax; AttentionEditError where the
    kernel takes no softmax or more than one of a 4-D tensor (a family whose attention is not plain softmax)."""
    twins, args = [edit for edit in edits if edit.where == "float32"], list(args)
    edits = [edit for edit in edits if edit.where != "float32"]
    for i, where in ((0, "rot_q"), (1, "rot_k")):  # q and k as the kernel gets them: after rotary (and any q/k norm)
        for edit in edits:
            if edit.where == where:  # the fn sees [batch, pos, head_index, d_head], TransformerLens's shape
                args[i] = _applied(edit, args[i].transpose(1, 2)).transpose(1, 2)
    if twins:  # run_with_cache(pattern="float32")
        _float32_twin(eager, edits, twins, module, *args, **kwargs)
    mode = _AtSoftmax(edits)
    with mode:
        out = eager(module, *args, **kwargs)
    if mode.seen != 1:
        raise AttentionEditError(f"{type(module).__name__}'s eager attention took {mode.seen} softmaxes of scores, "
                                 "not one: its scores and pattern cannot be edited exactly here")
    for edit in edits:
        edit.applied += 1
    return out


def _float32_twin(eager: Callable, edits: list[Edit], twins: list[Edit], module, query, key, value, mask,
                  **kwargs) -> None:
    """The layer's weights in float32: transformers' eager function on the q, k, v and mask the kernel got, each
    cast to float32 (what attend() recomputes), handed to each twin's run. Refused where the layer's scores or
    pattern are edited: those weights would not be the ones the model used."""
    if any(edit.where in ("scores", "pattern") and not edit.reads for edit in edits):
        raise AttentionEditError("this layer's scores or pattern are edited by a hook, so its float32 weights would "
                                 "not be the ones the model used: run_with_cache(..., pattern=\"model\") keeps "
                                 "the edited pattern itself")
    f32 = [t.float() if isinstance(t, torch.Tensor) else t for t in (query, key, value, mask)]
    weights = eager(module, *f32, **{**kwargs, "dropout": 0.0})[1]
    for edit in twins:
        edit.run(weights)
        edit.applied += 1


class _AtSoftmax(TorchFunctionMode):
    """Inside one eager attention call: the scores fns on softmax's input, the pattern fns on its output."""

    def __init__(self, edits: list[Edit]):
        super().__init__()
        self.edits, self.seen = edits, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in (torch.nn.functional.softmax, torch.softmax, torch.Tensor.softmax):
            return func(*args, **kwargs)
        scores = args[0]
        if not isinstance(scores, torch.Tensor) or scores.ndim != 4:
            return func(*args, **kwargs)
        self.seen += 1
        for edit in self.edits:
            if edit.where == "scores":
                scores = _applied(edit, scores)
        pattern = func(scores, *args[1:], **kwargs)
        if any(edit.where == "pattern" for edit in self.edits):
            pattern = pattern.to(scores.dtype)  # as the family casts it next: the model's own weights, exactly
        for edit in self.edits:
            if edit.where == "pattern":
                pattern = _applied(edit, pattern)
        return pattern


def _applied(edit: Edit, t: torch.Tensor) -> torch.Tensor:
    before = None if edit.reads else t.clone()
    new = edit.run(t)
    edit.changed = edit.changed or (before is not None and (new is not None or not torch.equal(t, before)))
    if new is None:
        return t
    if tuple(new.shape) != tuple(t.shape):
        raise AttentionEditError(f"the fn on the attention's {edit.where} returned shape {tuple(new.shape)}, not "
                                 f"{tuple(t.shape)}")
    return new.to(t.dtype)


@dataclass
class Inside:
    """The handle of one fn on a point inside the kernel: its Edit, and the module hooks that check it ran."""

    edit: Edit
    handles: list

    def remove(self) -> None:
        self.edit.remove()
        for handle in self.handles:
            handle.remove()


def inside(module: torch.nn.Module, where: str, heads: int, hook: str, fn, model: str, on_grad=None) -> Inside:
    """fn(tensor, hook) on the module's scores or pattern (`where`); with `on_grad`, a hook on their gradient
    instead. A forward pass of the module that did not reach the fn raises (its family's attention does not run
    through transformers' attention function here), as does a tensor without the model's `heads`."""
    def run(t: torch.Tensor):
        if where in ("scores", "pattern") and t.shape[1] != heads:
            raise AttentionEditError(f"{model}: {hook} found a tensor of shape {tuple(t.shape)}, not [batch, {heads} "
                                     "heads, query_pos, key_pos]: this family's attention is not the plain kind")
        if on_grad is not None:
            if t.requires_grad:
                t.register_hook(on_grad)
            return None
        return fn(t, hook)
    edit, before = add_edit(module, where, run, reads=getattr(fn, "reads_only", False)), {}

    def pre(mod, args):
        before["applied"] = edit.applied

    def post(mod, args, output):
        if edit.applied != before.get("applied"):
            return None
        why = (f"{model}: {hook} was not reached in this pass: the family's attention does not run transformers' "
               "eager attention function here (hook_q, hook_k, hook_v and hook_z are editable on every family)")
        weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if where != "pattern" or on_grad is not None or not isinstance(weights, torch.Tensor) or weights.ndim != 4:
            raise AttentionEditError(why if weights is not None or where != "pattern" else
                                     f"{model}: {hook} found no weights: its attention returned none (a fused "
                                     "kernel: load it with the package's loader or attn_implementation='eager')")
        seen = weights.clone()  # the weights the module returned: read only here
        if fn(seen, hook) is not None or not torch.equal(seen, weights):
            raise AttentionEditError(why.replace("was not reached in this pass", "is read only on this family"))
        return None
    return Inside(edit, [module.register_forward_pre_hook(pre), module.register_forward_hook(post)])


@contextlib.contextmanager
def float32_twins(loaded, found: dict, keep: list[str]) -> Iterator[dict[str, torch.Tensor]]:
    """For run_with_cache(pattern="float32"): {name: the layer's weights in float32} for each hook_pattern kept,
    filled as the pass runs (an empty dict for a float32 model, whose own weights are these). A layer whose pass
    did not reach transformers' eager function says so when the block ends."""
    names = [n for n in keep if n.endswith(".attn.hook_pattern")]
    dtype = next(loaded.network.parameters()).dtype
    made: dict[str, torch.Tensor] = {}
    if dtype == torch.float32 or not names:
        yield made
        return
    edits = [add_edit(found[name].module, "float32", lambda w, name=name: made.__setitem__(name, w.detach().clone()),
                      reads=True) for name in names]
    try:
        yield made
    finally:
        for edit in edits:
            edit.remove()
    if missing := [name for name in names if name not in made]:
        raise AttentionEditError(f"{', '.join(missing)}: the pass did not reach transformers' eager attention there, "
                                 "so no float32 weights were made: run_with_cache(..., pattern=\"model\") keeps the "
                                 "model's own")
