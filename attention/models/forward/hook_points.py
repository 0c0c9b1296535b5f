"""Hook points with TransformerLens's names on every family the anatomy reads: read any step of a forward
pass by name, or replace it. One context manager, `hooks`, puts torch hooks on the network's own modules
(found through attention.models.forward.anatomy) and removes them in `finally`.

    >>> logits, cache = run_with_cache(m, "When Mary and John went", names_filter=lambda n: "pattern" in n)
    >>> cache["blocks.23.attn.hook_pattern"].shape      # also cache["pattern", 23]
    >>> def knock_out(z, hook):                         # head L24H4 (layer 23, head 3, counted from 0)
    ...     z[:, :, 3] = 0
    >>> logits = run_with_hooks(m, "When Mary and John went", fwd_hooks=[("blocks.23.attn.hook_z", knock_out)])

The points (TransformerLens's names and shapes; layers and heads count from 0, HeadName.parse("L24H4") says
(23, 3)). A hook fn(tensor, hook) gets the tensor and the point's name (a str with .name and .layer, as
TransformerLens's HookPoint has) and returns None, having read it or edited it in place, or a replacement of
the same shape. Every point is editable except hook_pattern.

    hook_embed                     [batch, pos, d_model]  the token embeddings W_E[tokens] (the input embedding's
                                   output): what block 0 receives in rotary decoders (Gemma's embedding module
                                   scales by √d_model itself, so this is scaled); GPT-2 adds learned positions
                                   after it, BERT-likes positions and token types and a LayerNorm, ModernBERT a
                                   norm (ELECTRA's is its smaller embedding size, projected to d_model after)
    blocks.{l}.hook_resid_pre      [batch, pos, d_model]  the residual stream block l receives
    blocks.{l}.attn.hook_q         [batch, pos, head_index, d_head]  the query projection's output by head:
                                   before rotary positions and any q/k norm, as TransformerLens's hook_q
    blocks.{l}.attn.hook_k, hook_v [batch, pos, kv_head_index, d_head]  (grouped-query models: their KV heads)
    blocks.{l}.attn.hook_pattern   [batch, head_index, query_pos, key_pos]  the model's own eager weights. Read
                                   only: transformers' attention function multiplies them by v inside one call,
                                   so an edit could change nothing; a fn that returns one or edits in place raises
    blocks.{l}.attn.hook_z         [batch, pos, head_index, d_head]  W_O's input by head (every head's output)
    blocks.{l}.hook_attn_out       [batch, pos, d_model]  what attention adds to the residual stream: W_O's output;
                                   Gemma 2/3 and OLMo-2 normalise it first, and this is the norm's output
    blocks.{l}.hook_mlp_out        [batch, pos, d_model]  what the MLP adds (the same norms after it for those three)
    blocks.{l}.hook_resid_post     [batch, pos, d_model]  the residual stream after block l
    ln_final.hook_normalized       [batch, pos, d_model]  the final norm's output, its weight and bias applied
                                   (TransformerLens's is x / scale, before the weight, folded or not: this is
                                   its value times ln_final.w; docs/transformer_lens.md)

Encoders that normalise after each sum (BERT, RoBERTa, ELECTRA, DistilBERT) follow TransformerLens's
HookedEncoder: hook_resid_post is the sum before the block's last LayerNorm, and
`blocks.{l}.hook_normalized_resid_post` is the block's output (what block l + 1 receives); they have no
ln_final. For an encoder without a head the "logits" returned are its last hidden state [batch, pos, d_model].

Not here (a HookPointError names the family and the point): q/k/v of a fused projection whose layout the
family's anatomy entry does not give (`fused_qkv`: Falcon, BLOOM); what attention and the MLP add where it
has no `writes` (OPT, Falcon, BLOOM, DeBERTa-v2); ln_final for a family without a final norm; q and k after
rotary positions (TransformerLens's hook_rot_q/k: attend() records them, read only); any point of a model with
one block shared by every layer (ALBERT), an encoder-decoder, an image model. hook_pattern raises while the
pass runs when the attention returned no weights (a model that runs a fused kernel: load it with the package's
loader or attn_implementation="eager"). A text is a batch of one; a list of texts is padded on the right, as
TransformerLens pads it (positions past a text's end are padding, the attention mask 0 there: each text's own
positions are what it gives alone, to float32 rounding); ids may be a (batch, pos) tensor of one length.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import torch

from attention.models.forward.anatomy import Anatomy, Family, model_type, parameter
from attention.models.forward.capabilities import require
from attention.models.forward.inputs import text_inputs
from attention.models.forward.model import LoadedModel

HookFn = Callable[[torch.Tensor, "HookPoint"], "torch.Tensor | None"]


class HookPointError(ValueError):
    """A name that is no hook point, or a point this family cannot give exactly; the message says which."""


class HookPoint(str):
    """A point's name, handed to every hook fn: a str ("blocks.3.attn.hook_z") with TransformerLens's `.name`,
    and `.layer` (from 0; None for hook_embed and ln_final)."""

    @property
    def name(self) -> str:
        return str(self)

    @property
    def layer(self) -> int | None:
        match = re.match(r"blocks\.(\d+)\.", self)
        return None if match is None else int(match[1])


SHORT = {  # TransformerLens's short names (cache["pattern", 3]) -> full names
    "embed": "hook_embed", "resid_pre": "blocks.{}.hook_resid_pre", "q": "blocks.{}.attn.hook_q",
    "k": "blocks.{}.attn.hook_k", "v": "blocks.{}.attn.hook_v", "pattern": "blocks.{}.attn.hook_pattern",
    "attn": "blocks.{}.attn.hook_pattern", "z": "blocks.{}.attn.hook_z", "attn_out": "blocks.{}.hook_attn_out",
    "mlp_out": "blocks.{}.hook_mlp_out", "resid_post": "blocks.{}.hook_resid_post",
    "normalized_resid_post": "blocks.{}.hook_normalized_resid_post", "normalized": "ln_final.hook_normalized",
}


@dataclass(frozen=True)
class Point:
    """Where one hook point is: a module's first input ("in") or its output ("out", item `item` of a tuple),
    seen through `view` as TransformerLens shapes it (a view: edits in place reach the model)."""

    module: torch.nn.Module
    side: str  # "in" or "out"
    item: int = 0  # which element of a tuple output
    groups: int = 1  # the last axis read as (groups, width) ...
    part: tuple[int, int] | None = None  # ... of which this [start, stop) along width (None: all) ...
    d_head: int | None = None  # ... then split into heads of d_head (None: the tensor as it is)
    editable: bool = True
    heads: int | None = None  # attention weights: the (batch, heads, query_pos, key_pos) a tensor must have
    scale: float = 1.0  # the point is the module's tensor times this (Granite's blocks scale what they add)

    def view(self, t: torch.Tensor) -> torch.Tensor:
        """The module's tensor as the point shows it: (..., groups * width) -> (..., heads, d_head)."""
        if self.d_head is None:
            return t
        seen = t.unflatten(-1, (self.groups, -1))  # (..., groups, width)
        seen = seen if self.part is None else seen[..., self.part[0]:self.part[1]]
        return seen.unflatten(-1, (-1, self.d_head)).flatten(-3, -2)  # (..., heads, d_head)

    def back(self, t: torch.Tensor, edited: torch.Tensor) -> torch.Tensor:
        """The module's tensor with the point's part replaced by `edited`."""
        if self.d_head is None:
            return edited
        out = t.clone()
        self.view(out).copy_(edited)
        return out


def points(loaded: LoadedModel, parts: Anatomy | None = None) -> dict[str, Point | str]:
    """Every hook point of this model by name: a Point, or a str saying why the family cannot give it exactly.
    HookPointError when the model has none at all. `parts`: an anatomy to read instead of the model's own (the
    one attention.models.forward.anatomy_inferred is confirming)."""
    parts, kind = (parts, parts.model_type) if parts is not None else _anatomy(loaded)
    config = loaded.network.config
    n_heads = int(config.num_attention_heads)
    writes = parts.family.writes
    found: dict[str, Point | str] = {"hook_embed": Point(loaded.network.get_input_embeddings(), "out")}
    for layer, block in enumerate(parts.blocks):
        w_o = parts.outputs[layer]
        d = (getattr(w_o, "in_features", None) or parameter(w_o).shape[0]) // n_heads  # Conv1D stores (in, out)
        at = f"blocks.{layer}."
        found[at + "hook_resid_pre"] = Point(block, "in")
        found.update(zip((at + "attn.hook_q", at + "attn.hook_k", at + "attn.hook_v"),
                         _qkv(kind, parts.family, block, config, n_heads, d), strict=True))
        found[at + "attn.hook_pattern"] = Point(block.get_submodule(parts.family.attention), "out", item=1,
                                                editable=False, heads=n_heads)
        found[at + "attn.hook_z"] = Point(w_o, "in", d_head=d)
        if writes is None:
            why = (f"{kind}: what attention and the MLP add to the residual stream is not known here (its anatomy "
                   "entry has no writes)")
            found[at + "hook_attn_out"] = found[at + "hook_mlp_out"] = why
        else:
            found[at + "hook_attn_out"] = Point(w_o, "out", scale=parts.write_scale) if writes.attn_out is None \
                else _part(block, writes.attn_out, kind, "attention's output norm")
            found[at + "hook_mlp_out"] = _part(block, writes.mlp_out, kind, "MLP", scale=parts.write_scale)
        post_norm = None if writes is None else writes.post_norm
        found[at + "hook_resid_post"] = Point(block, "out") if post_norm is None else _part(
            block, post_norm, kind, "last LayerNorm", "in")
        found[at + "hook_normalized_resid_post"] = Point(block, "out") if post_norm else (
            f"{kind}: blocks.{{l}}.hook_normalized_resid_post is TransformerLens's name for the output of a BERT-style "
            "block that normalises after its sum; this family's block output is blocks.{l}.hook_resid_post")
    found["ln_final.hook_normalized"] = Point(parts.final_norm, "out") if parts.final_norm is not None else (
        f"{kind} has no final norm (each block ends with its own: blocks.{{l}}.hook_normalized_resid_post)")
    return found


def _anatomy(loaded: LoadedModel):
    """(anatomy, family name), or HookPointError for a model whose every point would be missing or ambiguous."""
    require(loaded, "hook points", HookPointError)
    parts = loaded.anatomy
    return parts, parts.model_type


def _part(block: torch.nn.Module, path: str, kind: str, what: str, side: str = "out",
          scale: float = 1.0) -> Point | str:
    """A Point on a module of the block, or why not: the module is not where the family's writes say."""
    try:
        return Point(block.get_submodule(path), side, scale=scale)
    except AttributeError:
        return f"{kind}: its block has no {what} at “{path}” as this module's entry for the family says"


def _qkv(kind: str, family: Family, block, config, n_heads: int, d: int) -> list[Point | str]:
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
    close = difflib.get_close_matches(str(name), list(found), n=3)
    n_layers = sum(1 for n in found if n.endswith(".hook_resid_pre"))
    raise HookPointError(f"no hook point is named {name!r}" + (f" (did you mean {', '.join(close)}?)" if close else "")
                         + f"; this model's are hook_embed, blocks.{{l}}.hook_resid_pre, attn.hook_q/k/v/pattern/z, "
                         f"hook_attn_out, hook_mlp_out, hook_resid_post for l from 0 to {n_layers - 1}, and "
                         "ln_final.hook_normalized (hook_names(model) lists them)")


def _install(point: Point, hook: HookPoint, fn: HookFn, loaded: LoadedModel, backward: _Installed | None = None):
    """One torch hook on the point's module that shows fn the point's tensor and puts back what fn returns.
    With `backward` (the block it belongs to): a hook on the tensor's gradient instead, fn shown the gradient
    of the point (the tensor's, through the point's view and scale) while the block's hooks are active."""
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
        if point.heads is not None and (seen.ndim != 4 or seen.shape[1] != point.heads):
            raise HookPointError(f"{loaded.spec.name} ({model_type(loaded.network)}): {hook} found a tensor of shape "
                                 f"{tuple(seen.shape)} where its attention's weights should be: this family's "
                                 "attention does not return them as transformers' attention interface does")
        if not point.editable:
            copy = seen.clone()
            if fn(copy, hook) is not None or not torch.equal(copy, seen):
                raise HookPointError(f"{hook} is read only: the layer's output is already computed from these "
                                     "weights (edit hook_q, hook_k, hook_v or hook_z instead)")
            return None
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

    if point.side == "in":
        def before(module, args, kwargs):
            new = run(args[0] if args else kwargs["hidden_states"])
            if new is None:
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


class HookCache(Mapping):
    """What run_with_cache kept: name -> tensor, detached copies on the model's device, batch first.
    cache["blocks.3.attn.hook_pattern"], or TransformerLens's short form cache["pattern", 3] (a negative layer
    counts from the end)."""

    def __init__(self, tensors: dict[str, torch.Tensor], n_layers: int, points: tuple[str, ...] = ()):
        self._tensors, self.n_layers = tensors, n_layers
        self._points = points  # every point the model gives (hook_names), kept or not

    def __getitem__(self, key) -> torch.Tensor:
        name = self._name(key)
        if name not in self._tensors and self._points and name not in self._points:
            short = isinstance(key, tuple) and key[0] not in SHORT
            close = difflib.get_close_matches(name, [*self._points, *SHORT], n=3)
            raise KeyError(f"{key!r} names no hook point of this model" + (
                f" ({key[0]!r} is not one of the short names {', '.join(SHORT)})" if short else "")
                + (f"; did you mean {', '.join(close)}?" if close else "; hook_names(model) lists them"))
        if name not in self._tensors:
            raise KeyError(f"{name!r} was not kept: run_with_cache kept {len(self)} points"
                           + (f" ({', '.join(list(self)[:4])}, ...)" if self._tensors else "")
                           + "; its names_filter says which")
        return self._tensors[name]

    def _name(self, key) -> str:
        short, layer = (key, None) if isinstance(key, str) else (key[0], key[1])
        if short not in SHORT:
            return short
        if layer is None:
            return SHORT[short] if "{}" not in SHORT[short] else short
        return SHORT[short].format(layer + self.n_layers if layer < 0 else layer)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


def run_with_cache(loaded: LoadedModel, text_or_ids, names_filter=None, *, incl_bwd: bool = False,
                   metric: Callable[[torch.Tensor], torch.Tensor] | None = None) -> tuple[torch.Tensor, HookCache]:
    """(logits [batch, pos, vocab], cache) of one pass: the cache keeps the points `names_filter` names (a
    name, a list of names, or a predicate on names; None: every point the model gives). Names listed must
    exist; a predicate only picks among those that do. Memory: each point kept is one tensor of its shape.
    Shapes: logits [batch, pos, vocab] (an encoder without a head: its last hidden state [batch, pos, d_model]);
    each cached tensor as the module docstring lists it.

    `incl_bwd` (TransformerLens's name): a backward pass too, and the cache also keeps each point's gradient
    as "<name>_grad" (cache["blocks.10.hook_resid_pre_grad"]), of `metric(logits)`, a scalar, or without a
    metric the next-token loss (mean cross-entropy of each position's logits against the next token, pads
    left out: TransformerLens's return_type="loss"). The weights get no gradients; the logits come back detached.
    Without incl_bwd the pass runs without autograd, whatever the caller's grad mode."""
    found = points(loaded)
    if names_filter is None or callable(names_filter):
        keep = [n for n, p in found.items() if isinstance(p, Point) and (names_filter is None or names_filter(n))]
    else:
        keep = [names_filter] if isinstance(names_filter, str) else list(names_filter)
    kept: dict[str, torch.Tensor] = {}

    def save(t: torch.Tensor, hook: HookPoint) -> None:
        kept[hook.name] = t.detach().clone()

    def save_grad(g: torch.Tensor, hook: HookPoint) -> None:
        kept[hook.name + "_grad"] = g.detach().clone()

    ids, mask = _ids(loaded, text_or_ids)
    grads, leaves = ([(name, save_grad) for name in keep], []) if incl_bwd else ([], None)
    with (loaded.lock, torch.enable_grad() if incl_bwd else torch.no_grad(),
          _installed(loaded, [(name, save) for name in keep], grads, True, False, leaves=leaves) as hooked):
        logits = _forward(loaded, ids, hooked, mask)
        if incl_bwd:  # to the embedding's output only: the weights' .grad stay as they were
            torch.autograd.backward(_scalar(loaded, logits, ids, mask, metric), inputs=leaves)
            logits = logits.detach()
    n_layers = sum(1 for n in found if n.endswith(".hook_resid_pre"))
    given = tuple(n for n, p in found.items() if isinstance(p, Point))
    order = [key for n in found for key in (n, n + "_grad") if key in kept]
    return logits, HookCache({key: kept[key] for key in order}, n_layers, given)


def _scalar(loaded: LoadedModel, logits: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor | None,
            metric: Callable[[torch.Tensor], torch.Tensor] | None) -> torch.Tensor:
    """What a backward pass differentiates: metric(logits), or the next-token loss; ValueError where neither is
    a scalar or the model has no logits to take a loss of."""
    if metric is not None:
        value = metric(logits)
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            raise ValueError("metric(logits) must return one number as a tensor (a scalar to differentiate), not "
                             f"{type(value).__name__}{tuple(value.shape) if isinstance(value, torch.Tensor) else ''}")
        return value.reshape(())
    if loaded.spec.architecture != "decoder-only" or logits.shape[-1] != loaded.network.config.vocab_size:
        raise ValueError(f"{loaded.spec.name} predicts no next token here (its output is not a decoder's logits): "
                         "pass metric=fn, fn(logits) -> a scalar tensor")
    if ids.shape[1] < 2:
        raise ValueError("the next-token loss needs at least 2 tokens: pass a longer text, or metric=fn")
    targets = ids[:, 1:].clone()
    if mask is not None:
        targets[mask[:, 1:] == 0] = -100  # pads: no loss
    return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets.flatten(),
                                             ignore_index=-100)


def run_with_hooks(loaded: LoadedModel, text_or_ids, fwd_hooks=(), bwd_hooks=(), *, reset_hooks_end: bool = True,
                   grad: bool | None = None) -> torch.Tensor:
    """The logits of one pass with fwd_hooks, [(name or predicate, fn)], applied (hooks).
    Shapes: [batch, pos, vocab] (an encoder without a head: its last hidden state [batch, pos, d_model]).

    `grad`: whether the pass keeps an autograd graph. None (the default): only with bwd_hooks; a pass that only
    reads or edits keeps none (TransformerLens keeps one whenever torch's grad mode is on, the default: here ask
    with grad=True, e.g. to train a steering vector a fn adds). A fn may return a replacement or None (None keeps
    the tensor, edited in place or not). With bwd_hooks the logits carry a graph from hook_embed on, and as in
    TransformerLens the hooks must outlive the call for a backward pass to reach them: pass
    reset_hooks_end=False, call .backward() on your metric, then reset_hooks(model) (with reset_hooks_end=True
    and bwd_hooks a warning says they were removed before any backward pass). For gradients of every point at
    once, run_with_cache(..., incl_bwd=True)."""
    if bwd_hooks and reset_hooks_end:
        warnings.warn("run_with_hooks removes its hooks when it returns, before any backward pass can reach the "
                      "bwd_hooks: pass reset_hooks_end=False, then reset_hooks(model) after .backward()",
                      stacklevel=2)
    ids, mask = _ids(loaded, text_or_ids)
    grad = bool(bwd_hooks) if grad is None else grad
    with (loaded.lock, torch.enable_grad() if grad else torch.no_grad(),
          hooks(loaded, fwd_hooks, bwd_hooks, reset_hooks_end=reset_hooks_end, lock=False) as hooked):
        return _forward(loaded, ids, hooked, mask)


def _ids(loaded: LoadedModel, text_or_ids) -> tuple[torch.Tensor, torch.Tensor | None]:
    """((batch, pos) token ids on the model's device, the attention mask or None): a text tokenized as attend()
    does it; a list of texts, each so, padded on the right as TransformerLens pads them (the mask 0 at the pads,
    which no real token attends to; in a decoder they come after every real token, so each text's own positions
    are as it alone gives them, to float32 rounding); or ids as given."""
    if isinstance(text_or_ids, str):
        return text_inputs(loaded, text_or_ids, None).ids, None
    if isinstance(text_or_ids, list | tuple) and text_or_ids and isinstance(text_or_ids[0], str):
        rows = [text_inputs(loaded, text, None).ids[0] for text in text_or_ids]
        tok = loaded.tokenizer
        pad = next((i for i in (tok.pad_token_id, tok.eos_token_id) if i is not None), 0)
        ids = torch.full((len(rows), max(len(r) for r in rows)), int(pad), dtype=torch.long, device=rows[0].device)
        mask = torch.zeros_like(ids)
        for b, row in enumerate(rows):
            ids[b, :len(row)], mask[b, :len(row)] = row, 1
        return ids, mask
    ids = torch.as_tensor(text_or_ids, dtype=torch.long)
    ids = ids[None] if ids.ndim == 1 else ids
    limit = loaded.spec.token_limit(loaded.device)
    if ids.ndim != 2 or not 0 < ids.shape[1] <= limit:
        raise ValueError(f"token ids as (pos,) or (batch, pos) with 1 to {limit} positions, not {tuple(ids.shape)}")
    return ids.to(loaded.device), None


def _forward(loaded: LoadedModel, ids: torch.Tensor, hooked: list[str],
             mask: torch.Tensor | None = None) -> torch.Tensor:
    """The network on ids: its logits, or an encoder's last hidden state. Weights are asked for when a pattern
    is hooked: most families return them anyway (eager attention), DeBERTa-v2 only when asked."""
    extra = {"use_cache": False} if loaded.spec.architecture == "decoder-only" else {}
    if any(name.endswith(".hook_pattern") for name in hooked):
        extra["output_attentions"] = True
    if mask is not None:
        extra["attention_mask"] = mask
    out = loaded.network(input_ids=ids, **extra)
    logits = getattr(out, "logits", None)
    return out.last_hidden_state if logits is None else logits
