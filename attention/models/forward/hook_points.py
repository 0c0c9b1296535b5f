"""Hook points with TransformerLens's names on every family the anatomy reads: read any step of a forward
pass by name, or replace it. `hooks` puts torch hooks on the network's own modules (found through the anatomy) and
removes them when its block ends; run_with_cache and run_with_hooks (hook_runs) run through it.

    >>> logits, cache = run_with_cache(m, "When Mary and John went", names_filter=lambda n: "pattern" in n)
    >>> cache["blocks.23.attn.hook_pattern"].shape      # also cache["pattern", 23]
    >>> def knock_out(z, hook):                         # head L24H4 (layer 23, head 3, counted from 0)
    ...     z[:, :, 3] = 0
    >>> logits = run_with_hooks(m, "When Mary and John went", fwd_hooks=[("blocks.23.attn.hook_z", knock_out)])

The points (TransformerLens's names and shapes; layers and heads count from 0, HeadName.parse("L24H4") says
(23, 3)). A hook fn(tensor, hook) gets the tensor and the point's name (a str with .name and .layer, as
TransformerLens's HookPoint has) and returns None, having read it or edited it in place, or a replacement of
the same shape. Every point is editable.

    hook_embed                     [batch, pos, d_model]  the token embeddings W_E[tokens] (the input embedding's
                                   output): what block 0 receives in rotary decoders (Gemma's embedding module
                                   scales by √d_model itself, so this is scaled); GPT-2 adds learned positions
                                   after it, BERT-likes positions and token types and a LayerNorm, ModernBERT a
                                   norm (ELECTRA's is its smaller embedding size, projected to d_model after)
    blocks.{l}.hook_resid_pre      [batch, pos, d_model]  the residual stream block l receives
    blocks.{l}.attn.hook_q         [batch, pos, head_index, d_head]  the query projection's output by head:
                                   before rotary positions and any q/k norm, as TransformerLens's hook_q
    blocks.{l}.attn.hook_k, hook_v [batch, pos, kv_head_index, d_head]  (grouped-query models: their KV heads)
    blocks.{l}.attn.hook_attn_scores, hook_pattern  [batch, head_index, query_pos, key_pos]  inside the eager
                                   kernel: softmax's input (after the mask, as TL's, whose masked keys hold -inf
                                   where ours hold the dtype's lowest value) and its output,
                                   editable (a -inf score knocks a key out): attention_edits says how
    blocks.{l}.attn.hook_rot_q, hook_rot_k  [batch, pos, head_index, d_head]  q and k as the eager kernel gets
                                   them, after rotary positions (rotary families), editable (attention_edits)
    blocks.{l}.attn.hook_z         [batch, pos, head_index, d_head]  W_O's input by head (every head's output)
    blocks.{l}.attn.hook_result    [batch, pos, head_index, d_model]  z_h W_O^h, each head's write (head_results)
    blocks.{l}.hook_attn_out       [batch, pos, d_model]  what attention adds to the residual stream: W_O's output;
                                   Gemma 2/3 and OLMo-2 normalise it first, and this is the norm's output
    blocks.{l}.ln1/ln2.hook_scale, hook_normalized, hook_resid_mid, mlp.hook_pre, hook_pre_linear, hook_post:
                                   inside a pre-norm block, as block_points says (the norms' read only)
    blocks.{l}.hook_mlp_out        [batch, pos, d_model]  what the MLP adds (the same norms after it for those three)
    blocks.{l}.hook_resid_post     [batch, pos, d_model]  the residual stream after block l
    ln_final.hook_scale            [batch, pos, 1]  the final norm's scale, read only (block_points)
    ln_final.hook_normalized       [batch, pos, d_model]  the final norm's output, its weight and bias applied
                                   (TransformerLens's is x / scale, before the weight, folded or not: this is
                                   its value times ln_final.w; docs/transformer_lens.md)

Encoders that normalise after each sum (BERT, RoBERTa, ELECTRA, DistilBERT) follow TransformerLens's
HookedEncoder: hook_resid_post is the sum before the block's last LayerNorm, and
`blocks.{l}.hook_normalized_resid_post` is the block's output (what block l + 1 receives); they have no
ln_final. For an encoder without a head the "logits" returned are its last hidden state [batch, pos, d_model].

Not here (a HookPointError names the family and the point): q/k/v of a fused projection whose layout the
family's anatomy entry does not give (`fused_qkv`: Falcon, BLOOM); what attention and the MLP add where it
has no `writes` (OPT, Falcon, BLOOM, DeBERTa-v2); ln_final for a family without a final norm; the norms and
the MLP's inside where the family's entry has no `inner` (encoders among them); any point of a model with
one block shared by every layer (ALBERT), an encoder-decoder, an image model; scores and pattern where a pass
does not reach the eager kernel's softmax (said while it runs). Texts and ids: hook_runs.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import re
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from attention.models.forward.anatomy import Anatomy, model_type, parameter
from attention.models.forward.attention_edits import HookPointError, inside
from attention.models.forward.block_points import Point, inner_points, norm_hook, part_point, qkv_points
from attention.models.forward.capabilities import require
from attention.models.forward.head_results import ResultHook
from attention.models.forward.model import LoadedModel
from attention.models.forward.tl_names import why_not_given

HookFn = Callable[[torch.Tensor, "HookPoint"], "torch.Tensor | None"]


class HookPoint(str):
    """A point's name, handed to every hook fn: a str ("blocks.3.attn.hook_z") with TransformerLens's `.name`,
    `.layer()` (from 0; None for hook_embed and ln_final; also read as `.layer`, an int), and `.ctx`, a dict a fn
    may keep things in for as long as its hook is installed (TL's)."""

    def __new__(cls, name: str):
        point = super().__new__(cls, name)
        point.ctx = {}
        return point

    @property
    def name(self) -> str:
        return str(self)

    @property
    def layer(self) -> _Layer | None:
        match = re.match(r"blocks\.(\d+)\.", self)
        return None if match is None else _Layer(match[1])


class _Layer(int):
    """A layer number that is also TransformerLens's method: hook.layer == 3 and hook.layer() == 3."""

    def __call__(self) -> int:
        return int(self)


BLOCK_ORDER = ("hook_resid_pre", "ln1.hook_scale", "ln1.hook_normalized", "attn.hook_q", "attn.hook_k", "attn.hook_v",
               "attn.hook_rot_q", "attn.hook_rot_k", "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z",
               "attn.hook_result", "hook_attn_out", "hook_resid_mid", "ln2.hook_scale", "ln2.hook_normalized",
               "mlp.hook_pre", "mlp.hook_pre_linear", "mlp.hook_post", "hook_mlp_out", "hook_resid_post",
               "hook_normalized_resid_post")  # a block's points in the order a pass meets them


def points(loaded: LoadedModel, parts: Anatomy | None = None) -> dict[str, Point | str]:
    """Every hook point of this model by name: a Point, or a str saying why the family cannot give it exactly.
    HookPointError when the model has none at all. `parts`: an anatomy to read instead of the model's own (the
    one attention.models.forward.anatomy_inferred is confirming)."""
    parts, kind = (parts, parts.model_type) if parts is not None else _anatomy(loaded)
    config = loaded.network.config
    n_heads = int(config.num_attention_heads)
    writes = parts.family.writes
    found: dict[str, Point | str] = {"hook_embed": Point(loaded.network.get_input_embeddings(), "out")}
    interface = bool(getattr(loaded.network, "_supports_attention_backend", False))  # scores edited inside it
    for layer, block in enumerate(parts.blocks):
        w_o = parts.outputs[layer]
        d = (getattr(w_o, "in_features", None) or parameter(w_o).shape[0]) // n_heads  # Conv1D stores (in, out)
        at, here = f"blocks.{layer}.", {}
        here[at + "hook_resid_pre"] = Point(block, "in")
        here.update(zip((at + "attn.hook_q", at + "attn.hook_k", at + "attn.hook_v"),
                         qkv_points(kind, parts.family, block, config, n_heads, d), strict=True))
        attn = block.get_submodule(parts.family.attention)  # inside its eager kernel (attention_edits)
        here[at + "attn.hook_attn_scores"] = Point(attn, "scores", heads=n_heads) if interface else (
            f"{kind}: its attention is its own code, not transformers' attention function (hook_pattern reads)")
        here[at + "attn.hook_pattern"] = Point(attn, "pattern", heads=n_heads)
        for qk in ("q", "k"):  # the kernel's q and k, after rotary positions
            here[f"{at}attn.hook_rot_{qk}"] = (Point(attn, f"rot_{qk}", heads=n_heads) if interface else
                                               f"{kind}: its attention is its own code (hook_{qk} is before rotary)") \
                if parts.family.rotary else f"{kind} has no rotary positions: hook_{qk} is what its attention reads"
        here[at + "attn.hook_z"] = Point(w_o, "in", d_head=d)
        here[at + "attn.hook_result"] = Point(w_o, "result", heads=n_heads, scale=parts.write_scale)
        if writes is None:
            why = (f"{kind}: what attention and the MLP add to the residual stream is not known here (its anatomy "
                   "entry has no writes)")
            here[at + "hook_attn_out"] = here[at + "hook_mlp_out"] = why
        else:
            here[at + "hook_attn_out"] = Point(w_o, "out", scale=parts.write_scale) if writes.attn_out is None \
                else part_point(block, writes.attn_out, kind, "attention's output norm")
            here[at + "hook_mlp_out"] = part_point(block, writes.mlp_out, kind, "MLP", scale=parts.write_scale)
        here.update(inner_points(block, at, parts.family.inner, kind))
        post_norm = None if writes is None else writes.post_norm
        here[at + "hook_resid_post"] = Point(block, "out") if post_norm is None else part_point(
            block, post_norm, kind, "last LayerNorm", "in")
        here[at + "hook_normalized_resid_post"] = Point(block, "out") if post_norm else (
            f"{kind}: blocks.{{l}}.hook_normalized_resid_post is TransformerLens's name for the output of a BERT-style "
            "block that normalises after its sum; this family's block output is blocks.{l}.hook_resid_post")
        found.update((at + tail, here[at + tail]) for tail in BLOCK_ORDER if at + tail in here)
    why = f"{kind} has no final norm (each block ends with its own: blocks.{{l}}.hook_normalized_resid_post)"
    found["ln_final.hook_scale"] = why if parts.final_norm is None else Point(parts.final_norm, "scale")
    found["ln_final.hook_normalized"] = why if parts.final_norm is None else Point(parts.final_norm, "out")
    return found


def _anatomy(loaded: LoadedModel):
    """(anatomy, family name), or HookPointError for a model whose every point would be missing or ambiguous."""
    require(loaded, "hook points", HookPointError)
    parts = loaded.anatomy
    return parts, parts.model_type


@dataclass
class _Installed:
    """Hooks one `hooks()` block or `add_hook` put on a model: their torch handles, and whether their backward
    hooks still act (a tensor hook stays on its tensor after its handle is removed: it checks this first)."""

    handles: list
    permanent: bool = False
    active: bool = True

    def remove(self) -> None:
        self.active = False
        for handle in self.handles:
            handle.remove()


_LASTING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # network -> [_Installed] left on by a block


@contextlib.contextmanager
def hooks(loaded: LoadedModel, fwd_hooks=(), bwd_hooks=(), *, reset_hooks_end: bool = True, lock: bool = True,
          parts: Anatomy | None = None) -> Iterator[list[str]]:
    """Run every forward pass inside the block through fwd_hooks, [(name, fn)]: a point's full name, or a
    predicate on names (every point it accepts); fn(tensor, hook) as the module docstring says. bwd_hooks, the
    same, see each point's gradient in a backward pass run inside the block (fn(grad, hook): None, or a
    replacement gradient of the same shape); the pass then builds a graph from hook_embed on even when no weight
    asks for gradients. Yields the names hooked (forward, then backward). Every name is checked before anything
    is installed; hooks go in the order given and are removed when the block ends, whatever a fn raised.

    As TransformerLens's `model.hooks(...)`: `reset_hooks_end=False` leaves them on after the block, until
    `reset_hooks(model)`. Blocks nest: run_with_cache, run_with_hooks, generate and attend inside a block run
    through its hooks. `lock`: hold the model's lock for the block, so that no other thread's pass (another
    session of the app) runs through these hooks; it is re-entrant, so the calls inside take it again at once.
    A family whose attention makes weights only when asked (DeBERTa-v2) needs output_attentions=True in the pass
    for hook_pattern (run_with_cache and run_with_hooks pass it). `parts`: as points() takes it."""
    with _installed(loaded, fwd_hooks, bwd_hooks, reset_hooks_end, lock, parts) as names:
        yield names


@contextlib.contextmanager
def _installed(loaded: LoadedModel, fwd_hooks, bwd_hooks, reset_hooks_end: bool, lock: bool,
               parts: Anatomy | None = None, permanent: bool = False,
               leaves: list | None = None) -> Iterator[list[str]]:
    """hooks(), and whether hooks left on are permanent (add_hook's is_permanent); `leaves`: the embedding's
    output is always made a new leaf, and each pass's is appended here (run_with_cache's backward stops there)."""
    found = points(loaded, parts)
    chosen = _chosen(loaded, found, fwd_hooks) + _chosen(loaded, found, bwd_hooks, backward=True)
    with loaded.lock if lock else contextlib.nullcontext():
        installed = _Installed([], permanent)
        try:
            if bwd_hooks:
                installed.handles.append(_graph_from_embed(loaded, leaves))
            for name, point, fn, backward in chosen:
                installed.handles.append(_install(point, HookPoint(name), fn, loaded, installed if backward else None))
            yield [name for name, _, _, _ in chosen]
        except BaseException:
            installed.remove()
            raise
        if reset_hooks_end:
            installed.remove()
        else:
            _LASTING.setdefault(loaded.network, []).append(installed)


def _chosen(loaded: LoadedModel, found: dict, pairs, backward: bool = False) -> list:
    """[(name, Point, fn, backward)] for [(name or predicate, fn)], every name checked."""
    chosen = []
    for name, fn in pairs:
        names = [n for n, p in found.items() if isinstance(p, Point) and name(n)] if callable(name) else [name]
        chosen += [(n, _point(found, n, loaded), fn, backward) for n in names]
    return chosen


def add_hook(loaded: LoadedModel, name, fn: HookFn, dir: str = "fwd", is_permanent: bool = False) -> list[str]:
    """TransformerLens's `model.add_hook`: a hook left on the model until `reset_hooks(model)` (a permanent one
    until `reset_hooks(model, including_permanent=True)`). `dir`: "fwd" or "bwd". Returns the names hooked.
    On a model the app shares, a hook left on runs in every session's pass: use `hooks()` blocks there."""
    if dir not in ("fwd", "bwd"):
        raise ValueError(f"dir is 'fwd' or 'bwd', not {dir!r}")
    with _installed(loaded, [(name, fn)] if dir == "fwd" else (), [(name, fn)] if dir == "bwd" else (),
                    reset_hooks_end=False, lock=True, permanent=is_permanent) as hooked:
        return hooked


def reset_hooks(loaded: LoadedModel, including_permanent: bool = False) -> int:
    """TransformerLens's `model.reset_hooks`: remove the hooks left on by `add_hook` and by blocks with
    `reset_hooks_end=False` (the permanent ones too with `including_permanent`). Returns how many blocks of hooks
    were removed. Hooks of a block still open stay until it ends."""
    kept, removed = [], 0
    for installed in _LASTING.get(loaded.network, []):
        if installed.permanent and not including_permanent:
            kept.append(installed)
        else:
            installed.remove()
            removed += 1
    _LASTING[loaded.network] = kept
    return removed


def _graph_from_embed(loaded: LoadedModel, leaves: list | None = None):
    """A forward hook on the input embedding that makes its output a leaf asking for gradients when it does not
    already (the weights of a loaded model ask for none): every point after it is then in the autograd graph, and
    a backward pass reaches each. The values are not changed. With `leaves`, always a new leaf, kept there."""
    def leaf(module, args, output):
        if not torch.is_grad_enabled() or not isinstance(output, torch.Tensor):
            return None
        if leaves is None and output.requires_grad:
            return None
        new = output.detach().requires_grad_(True)
        if leaves is not None:
            leaves.append(new)
        return new
    return loaded.network.get_input_embeddings().register_forward_hook(leaf)


def _point(found: dict[str, Point | str], name: str, loaded: LoadedModel) -> Point:
    """The Point named, or HookPointError: an unknown name (with the closest ones), or a point not here."""
    point = found.get(name) if isinstance(name, str) else None
    if isinstance(point, Point):
        return point
    if isinstance(point, str):
        raise HookPointError(f"{loaded.spec.name} has no {name}: {point}")
    if why := why_not_given(str(name)):  # TransformerLens has it, this package not yet
        raise HookPointError(f"{name} is TransformerLens's, not a hook point here: {why}")
    close = difflib.get_close_matches(str(name), list(found), n=3)
    n_layers = sum(1 for n in found if n.endswith(".hook_resid_pre"))
    raise HookPointError(f"no hook point is named {name!r}" + (f" (did you mean {', '.join(close)}?)" if close else "")
                         + f"; this model's are hook_embed, blocks.{{l}}.hook_resid_pre, attn.hook_q/k/v/pattern/z, "
                         f"hook_attn_out, hook_mlp_out, hook_resid_post and more for l from 0 to {n_layers - 1}, "
                         "and ln_final.hook_normalized (hook_names(model) lists them)")


def _install(point: Point, hook: HookPoint, fn: HookFn, loaded: LoadedModel, backward: _Installed | None = None):
    """One torch hook on the point's module that shows fn the point's tensor and puts back what fn returns.
    With `backward` (the block it belongs to): a hook on the tensor's gradient instead, fn shown the gradient
    of the point (the tensor's, through the point's view and scale) while the block's hooks are active."""
    if point.side == "result":  # each head's z_h W_O^h: attention.models.forward.head_results
        return ResultHook(point.module, point.heads, point.scale, hook, fn, backward is not None)
    if point.side in ("scale", "normalized"):  # a norm's, read only: attention.models.forward.block_points
        return norm_hook(point, hook, fn, backward is not None)
    if point.side in ("scores", "pattern", "rot_q", "rot_k"):  # inside the eager kernel: attention_edits
        return inside(point.module, point.side, point.heads, hook, fn, loaded.spec.name,
                      None if backward is None else functools.partial(_on_grad, point, hook, fn, backward))
    def run(t: torch.Tensor) -> torch.Tensor | None:
        if backward is not None:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(lambda grad: _on_grad(point, hook, fn, backward, grad))
            return None
        if not isinstance(t, torch.Tensor):
            raise HookPointError(f"{loaded.spec.name} ({model_type(loaded.network)}): {hook} found no tensor there "
                                 f"(the module gave {type(t).__name__}; its attention returns weights only when it "
                                 "runs eager attention: load it with the package's loader or "
                                 "attn_implementation=\"eager\")")
        seen = point.view(t)
        if point.scale != 1.0:  # what the block adds: a copy, put back divided only when fn changed it
            seen = seen * point.scale
            before = seen.clone()
        edited = fn(seen, hook)
        if point.scale != 1.0:
            if edited is None and torch.equal(seen, before):
                return None
            edited = (seen if edited is None else edited) / point.scale
        if edited is None:
            return None
        if tuple(edited.shape) != tuple(seen.shape):
            raise HookPointError(f"the fn on {hook} returned shape {tuple(edited.shape)}, not the point's "
                                 f"{tuple(seen.shape)}")
        return point.back(t, edited.to(seen.dtype))

    if point.side in ("in", "mid"):
        def before(module, args, kwargs):
            t = args[0] if args else kwargs["hidden_states"]
            new = run(t)
            if new is None:
                return None
            if point.side == "mid":  # the stream the block's sum reads too: edited where it is
                t.copy_(new)
                return None
            return ((new, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": new})
        return point.module.register_forward_pre_hook(before, with_kwargs=True)

    def after(module, args, output):
        items = isinstance(output, tuple)
        new = run(output[point.item] if items else output)
        if new is None:
            return None
        return (*output[:point.item], new, *output[point.item + 1:]) if items else new
    return point.module.register_forward_hook(after)


def _on_grad(point: Point, hook: HookPoint, fn: HookFn, block: _Installed, grad: torch.Tensor):
    """A backward hook's fn on the gradient reaching a point's tensor: None keeps it, a tensor replaces it."""
    if not block.active:
        return None
    seen = point.view(grad) / point.scale  # d(loss)/d(point): the point is the tensor times its scale
    edited = fn(seen, hook)
    if edited is None:
        return None
    if tuple(edited.shape) != tuple(seen.shape):
        raise HookPointError(f"the backward fn on {hook} returned shape {tuple(edited.shape)}, not the point's "
                             f"{tuple(seen.shape)}")
    return point.back(grad, (edited * point.scale).to(grad.dtype))


def hook_names(loaded: LoadedModel) -> list[str]:
    """The hook points this model gives, in the order a pass meets them (TransformerLens's hook_dict keys)."""
    return [name for name, point in points(loaded).items() if isinstance(point, Point)]
