"""Runs through the hook points (attention.models.forward.hook_points), under TransformerLens's names:
run_with_cache (a cache of every point kept, and with incl_bwd each point's gradient) and run_with_hooks (one pass
with hooks on). A text is a batch of one; a list of texts is padded on the right, as TransformerLens pads it; ids
may be a (batch, pos) tensor of one length."""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Iterator, Mapping

import torch

from attention.models.forward.attention_edits import float32_twins
from attention.models.forward.hook_points import HookPoint, Point, _installed, hooks, points
from attention.models.forward.inputs import text_inputs
from attention.models.forward.model import LoadedModel
from attention.models.forward.tl_names import get_act_name

NO_GRAD = (".attn.hook_result", "ln1.hook_scale", "ln1.hook_normalized", "ln2.hook_scale", "ln2.hook_normalized",
           "ln_final.hook_scale")  # points made beside the pass: their gradients are not in its graph


class HookCache(Mapping):
    """What run_with_cache kept: name -> tensor, detached copies on the model's device, batch first.
    cache["blocks.3.attn.hook_pattern"], or TransformerLens's short form cache["pattern", 3] (a negative layer
    counts from the end)."""

    def __init__(self, tensors: dict[str, torch.Tensor], n_layers: int, points: tuple[str, ...] = ()):
        self._tensors, self.n_layers = tensors, n_layers
        self._points = points  # every point the model gives (hook_names), kept or not

    def __getitem__(self, key) -> torch.Tensor:
        name = self._name(key)
        if name not in self._tensors and name.endswith("_grad") and name[:-5].endswith(NO_GRAD):
            raise KeyError(f"{name!r}: {name[:-5]} keeps no gradient (it is made beside the pass, not in it): "
                           "hook_z's gradient gives hook_result's, hook_resid_pre's or hook_resid_mid's a norm's")
        if name not in self._tensors and self._points and name.removesuffix("_grad") not in self._points:
            close = difflib.get_close_matches(name, list(self._points), n=3)
            raise KeyError(f"{key!r} names no hook point of this model (read as {name!r}, TransformerLens's "
                           "get_act_name rules)" + (f"; did you mean {', '.join(close)}?" if close else
                                                    "; hook_names(model) lists them"))
        if name not in self._tensors:
            raise KeyError(f"{name!r} was not kept: run_with_cache kept {len(self)} points"
                           + (f" ({', '.join(list(self)[:4])}, ...)" if self._tensors else "")
                           + "; its names_filter says which")
        return self._tensors[name]

    def _name(self, key) -> str:
        """TransformerLens's short forms: cache["pattern", 3], cache["scale", 4, "ln1"], cache["k6"]; a negative
        layer counts from the end."""
        if isinstance(key, str):
            return get_act_name(key)
        name, layer, *rest = key
        layer = layer + self.n_layers if isinstance(layer, int) and layer < 0 else layer
        return get_act_name(name, layer, *rest)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


def run_with_cache(loaded: LoadedModel, text_or_ids, names_filter=None, *, incl_bwd: bool = False,
                   metric: Callable[[torch.Tensor], torch.Tensor] | None = None,
                   pattern: str = "float32") -> tuple[torch.Tensor, HookCache]:
    """(logits [batch, pos, vocab], cache) of one pass: the cache keeps the points `names_filter` names (a
    name, a list of names, or a predicate on names; None: every point the model gives). Names listed must
    exist; a predicate only picks among those that do. Memory: each point kept is one tensor of its shape.
    Shapes: logits [batch, pos, vocab] (an encoder without a head: its last hidden state [batch, pos, d_model]);
    each cached tensor as the module docstring lists it.

    `incl_bwd` (TransformerLens's name): a backward pass too, and the cache also keeps each point's gradient
    as "<name>_grad" (cache["blocks.10.hook_resid_pre_grad"]), of `metric(logits)`, a scalar, or without a
    metric the next-token loss (mean cross-entropy of each position's logits against the next token, pads
    left out: TransformerLens's return_type="loss"). The weights get no gradients; the logits come back detached.
    hook_result has no gradient kept (it is made beside the pass, not in it: hook_z's gradient times W_O^h^T is it).
    Without incl_bwd the pass runs without autograd, whatever the caller's grad mode.

    `pattern`: which arithmetic hook_pattern is kept in, as attend() says of its weights. "float32" (the default,
    as attend()'s): transformers' eager attention on the q, k and mask the layer's kernel got, cast to float32,
    beside the pass: what attend().weights recompute and every page shows. "model": the pattern the model itself
    multiplied v by, in its dtype (TransformerLens's hook_pattern). For a float32 model the two are one tensor;
    a 16-bit model's differ by its rounding of the scores (up to 0.07 on SmolLM2 in bfloat16). A hook that edits a
    layer's scores or pattern needs "model" (the float32 weights would not be the ones the model used)."""
    if pattern not in ("float32", "model"):
        raise ValueError(f'pattern is "float32" (attend()\'s arithmetic) or "model" (the model\'s dtype), '
                         f"not {pattern!r}")
    found = points(loaded)
    if names_filter is None or callable(names_filter):
        keep = [n for n, p in found.items() if isinstance(p, Point) and (names_filter is None or names_filter(n))]
    else:
        keep = [names_filter] if isinstance(names_filter, str) else list(names_filter)
    kept: dict[str, torch.Tensor] = {}

    def save(t: torch.Tensor, hook: HookPoint) -> None:
        kept[hook.name] = t.detach().clone()
    save.reads_only = True  # the layer's weights stay the model's (a float32 twin may be made beside them)

    def save_grad(g: torch.Tensor, hook: HookPoint) -> None:
        kept[hook.name + "_grad"] = g.detach().clone()

    ids, mask = _ids(loaded, text_or_ids)
    grads, leaves = ([(name, save_grad) for name in keep if not name.endswith(NO_GRAD)], []) if incl_bwd \
        else ([], None)
    if incl_bwd and not grads:
        raise ValueError(f"incl_bwd=True keeps gradients, and none of the points kept ({', '.join(keep[:3])}"
                         f"{', ...' if len(keep) > 3 else ''}) has one: hook_result and the norms' hook_scale and "
                         "hook_normalized are made beside the pass (keep hook_z, hook_resid_pre or hook_resid_mid)")
    with (loaded.lock, torch.enable_grad() if incl_bwd else torch.no_grad(),
          _installed(loaded, [(name, save) for name in keep], grads, True, False, leaves=leaves) as hooked,
          float32_twins(loaded, found, keep if pattern == "float32" else []) as twins):
        logits = _forward(loaded, ids, hooked, mask)
        kept.update(twins)
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
