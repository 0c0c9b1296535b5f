"""Why this key: one head's score split into where its query and its key come from.

The residual stream at a position is a sum of parts: the embeddings, what each earlier head wrote (z_h W_O^h),
each earlier attention's output bias, each earlier MLP (everything else a block adds), and, in post-norm
models, the norms' biases. With every norm's scale frozen at its value on this text (the convention of direct
logit attribution, attention.models.analyses.readout), each norm is linear, and so are the projections and
the rotary embedding at a fixed position. So head (l, h)'s query at position i and its key at position j are
each a sum over parts plus a constant (the norms' and projections' biases), and its scaled score is exactly

    s_ij = scale * q_i . k_j = Σ_(query part a, key part b) scale * q_i^a . k_j^b   +   bias terms

`qk_attribution` builds that matrix (rows: query parts, columns: key parts) from one pass of the model up to
layer l with hooks on the blocks and W_O. `against` asks why this key and not the others: the same matrix
for key j minus the one for a second key, or minus the mean over the keys the query can see. A soft cap
(Gemma-2) applies after the sum: softmax reads c * tanh(s / c) of the total. The sum is held to the
model's own score (its q and k as its attention kernel received them); where the parts do not add up to
what the model computed, the family is refused instead of shown.

How each family's block writes to the stream (QK_FAMILIES):
    "pre"                   x' = x + W_O(z) + mlp                      (Llama, GPT-2, OPT, Phi, Gemma)
    "post_attention_norm"   x' = x + N(W_O(z)) + mlp, N frozen         (Gemma-2, Gemma-3, OLMo-2)
    "post"                  y = N1(x + W_O(z)); x' = N2(y + mlp(y))     (BERT, RoBERTa, ELECTRA, DistilBERT)
Position biases (T5, ALiBi), disentangled attention (DeBERTa), shared blocks (ALBERT), interleaved or fused
per-head projections (GPT-J, GPT-NeoX, ModernBERT) and encoder-decoders are refused with the reason.

Shapes: P parts, p positions, H heads, H_kv KV heads, d head size, D model size.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass, replace

import numpy as np
import torch

from attention.models.analyses.readout import frozen_norm
from attention.models.forward.anatomy import MissingAnatomy, home
from attention.models.forward.device_arrays import part
from attention.models.forward.guard import ROUNDING_UNITS
from attention.models.forward.model import LoadedModel
from attention.models.forward.model_attention import ModelAttention

MEAN_CHUNK = 256  # key positions whose parts are built at once for against="mean"


@dataclass(frozen=True)
class QKFamily:
    """Where one family's block keeps what its query and key read (paths from a block)."""

    norm: str | None  # the norm attention reads the stream through (None: it reads the stream itself)
    query: str  # the query projection, or the fused q, k, v projection (key None): q, then k, then v
    key: str | None
    residual: str = "pre"  # how the block writes to the stream (module docstring)
    post_norms: tuple[str, ...] = ()  # "post_attention_norm": the norm of W_O's output; "post": N1, N2
    query_scaling: bool = False  # the module multiplies q by its `scaling` before the kernel (OPT)


_LLAMA = QKFamily("input_layernorm", "self_attn.q_proj", "self_attn.k_proj")
_GEMMA2 = replace(_LLAMA, residual="post_attention_norm", post_norms=("post_attention_layernorm",))
_BERT = QKFamily(None, "attention.self.query", "attention.self.key", residual="post",
                 post_norms=("attention.output.LayerNorm", "output.LayerNorm"))
QK_FAMILIES = {  # config.model_type -> QKFamily
    "llama": _LLAMA, "mistral": _LLAMA, "mixtral": _LLAMA, "qwen2": _LLAMA, "qwen3": _LLAMA, "stablelm": _LLAMA,
    "gemma": _LLAMA, "phi": _LLAMA, "phi3": QKFamily("input_layernorm", "self_attn.qkv_proj", None),
    "gemma2": _GEMMA2, "gemma3_text": _GEMMA2, "olmo2": replace(_GEMMA2, norm=None),
    "gpt2": QKFamily("ln_1", "attn.c_attn", None),
    "opt": QKFamily("self_attn_layer_norm", "self_attn.q_proj", "self_attn.k_proj", query_scaling=True),
    "bert": _BERT, "roberta": _BERT, "electra": _BERT,
    "distilbert": QKFamily(None, "attention.q_lin", "attention.k_lin", residual="post",
                           post_norms=("sa_layer_norm", "output_layer_norm")),
}
REFUSED = {  # config.model_type -> why its scores are not split here (docs/models.md lists them)
    "t5": "adds a learned position bias to every score", "bloom": "adds ALiBi position biases to every score",
    "falcon": "adds ALiBi position biases to its scores (in some checkpoints) and writes attention and MLP "
              "from one norm", "deberta-v2": "adds disentangled position-to-content scores to every score",
    "albert": "runs one shared block for every layer", "gptj": "rotates queries and keys inside its attention "
              "with interleaved pairs", "gpt_neox": "fuses q, k and v per head in one projection",
    "modernbert": "fuses q, k and v in one projection read per head", "bart": "is an encoder-decoder model",
    "marian": "is an encoder-decoder model",
}


@dataclass(frozen=True)
class QKAttribution:
    """Head (layer, head)'s score of query position `query` on key position `key` (from 0), split into
    (query part, key part) pairs. total = matrix.sum() + sum(rest.values()) equals score."""

    layer: int
    head: int
    query: int
    key: int
    against: int | str | None  # None; a second key position; or "mean" (over the keys the query sees)
    query_parts: tuple[str, ...]  # (Pq,) "embeddings", "L1H3" (layer and head from 1), "L2 MLP", ...
    key_parts: tuple[str, ...]  # (Pk,)
    matrix: np.ndarray  # (Pq, Pk) scale * q^a . k^b (minus the same for `against`)
    rest: dict[str, float]  # the bias terms: the query's constant against every key part, and so on
    total: float  # the sum of everything
    score: float  # the model's own scaled score before softmax (minus the same for `against`)
    softcap: float | None  # softmax reads softcap * tanh(score / softcap) (for against=None)
    rounding: float = 0.0  # in half precision: how far (relative) total may be from score, the model's own
    # q and k being rounded to its dtype (_Run.tolerance); 0 in float32, where the two agree to 1e-3

    @property
    def apart(self) -> float:
        """How far apart total and score are, relative to the score (what `rounding` bounds in half precision)."""
        return abs(self.total - self.score) / max(abs(self.score), 1e-12)

    @property
    def biases(self) -> float:
        """The bias terms together (the sum of `rest`)."""
        return float(sum(self.rest.values()))

    def largest(self, k: int = 5) -> list[tuple[str, str, float]]:
        """The k pairs (query part, key part, value) of largest magnitude."""
        order = np.argsort(-np.abs(self.matrix), axis=None, kind="stable")[:k]
        columns = self.matrix.shape[1]
        return [(self.query_parts[i // columns], self.key_parts[i % columns], float(self.matrix.flat[i]))
                for i in order]

    def top_parts(self, n: int = 12) -> QKAttribution:
        """The same with only the n query parts and n key parts of largest total magnitude, the others summed
        into "other parts" (a last row and column), parts that add exactly 0 left out; sums unchanged. What a
        readable heatmap shows."""
        def keep(names: tuple[str, ...], weight: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
            nonzero = np.flatnonzero(weight > 0)
            if len(nonzero) <= n + 1:
                into = np.zeros((len(nonzero), len(names)))
                into[np.arange(len(nonzero)), nonzero] = 1
                return tuple(names[i] for i in nonzero), into
            chosen = np.sort(np.argsort(-weight, kind="stable")[:n])
            into = np.zeros((n + 1, len(names)))
            into[n] = 1
            into[:, chosen] = 0
            into[np.arange(n), chosen] = 1
            return (*(names[i] for i in chosen), "other parts"), into

        rows, r = keep(self.query_parts, np.abs(self.matrix).sum(1))
        columns, c = keep(self.key_parts, np.abs(self.matrix).sum(0))
        return replace(self, query_parts=rows, key_parts=columns, matrix=r @ self.matrix @ c.T)

    def by_layer(self) -> QKAttribution:
        """The same with each layer's heads summed into one part ("L3 heads"); sums unchanged."""
        def groups(names: tuple[str, ...]) -> tuple[tuple[str, ...], np.ndarray]:
            merged = tuple(dict.fromkeys(_layer_group(n) for n in names))
            into = np.zeros((len(merged), len(names)))
            into[[merged.index(_layer_group(n)) for n in names], np.arange(len(names))] = 1
            return merged, into

        rows, r = groups(self.query_parts)
        columns, c = groups(self.key_parts)
        return replace(self, query_parts=rows, key_parts=columns, matrix=r @ self.matrix @ c.T)


def _layer_group(name: str) -> str:
    if name.startswith("L") and "H" in name and " " not in name:
        return name[:name.index("H")] + " heads"
    return name


def part_in_words(name: str) -> str:
    """'L17H1' -> "layer 17's head 1"; 'L3 MLP' -> "layer 3's MLP"; other names as they are."""
    if name.startswith("L") and " " not in name and "H" in name:
        layer, head = name[1:].split("H")
        return f"layer {layer}'s head {head}"
    if name.startswith("L") and name[1:].split(" ")[0].isdigit():
        layer, what = name[1:].split(" ", 1)
        return f"layer {layer}'s {what}"
    return name


def key_choices(weights: np.ndarray) -> tuple[list[int], int]:
    """The keys a query row can ask about (those with a weight: the mask hides the others) and the one to
    start with: the strongest, the first token (where attention sinks) only when nothing else has weight.
    Shapes: weights (m,)."""
    visible = [int(j) for j in np.flatnonzero(np.asarray(weights) > 0)] or list(range(len(weights)))
    return visible, max(visible, key=lambda j: (j != 0, float(weights[j])))


def qk_attribution(loaded: LoadedModel, att: ModelAttention, layer: int, head: int, query: int, key: int, *,
                   against: int | str | None = None) -> QKAttribution:
    """Split head (layer, head)'s score of `query` on `key` (0-based) into (query part, key part) pairs
    (module docstring). ValueError, in words for the user, for a family or a choice that cannot be split
    exactly (and for a key the query cannot see)."""
    qk = _family(loaded, att)
    s = att.self_attn
    L, H, n = s.n_layers, s.n_heads, s.n_queries
    if not (0 <= layer < L and 0 <= head < H):
        raise ValueError(f"layer {layer + 1}, head {head + 1} is outside {L} x {H}")
    if not 0 <= query < n:
        raise ValueError(f"the text has {n} tokens: there is no token {query}")
    query, key = int(query), int(key)
    if isinstance(against, (int, np.integer)):
        against = int(against)
    visible = _visible(s, layer, query, n)
    for j in (key, against):
        if isinstance(j, int) and (not 0 <= j < n or not visible[j]):
            raise ValueError(f"token {query} (“{att.tokens[query]}”) cannot see token {j} in layer {layer + 1} (the "
                             "mask hides it), so it has no score there")
    if against is not None and not isinstance(against, int) and against != "mean":
        raise ValueError("against is a key position or \"mean\"")
    run = _Run(loaded, att, qk, layer)
    names, q_vectors = run.vectors([query], "query", head)  # (P + 1, 1, d), the constant last
    _, k_vectors = run.vectors([key], "key", head)
    scale = float(s.scale_of(layer))
    own = scale * float(np.dot(s.q[layer, head, query].astype(np.float64), s.k[layer, s.kv_head(head), key]))
    matrix = scale * q_vectors[:, 0] @ k_vectors[:, 0].T  # (P + 1, P + 1)
    if against is not None:
        others = [against] if isinstance(against, int) else np.flatnonzero(visible).tolist()
        mean_k = torch.zeros_like(k_vectors[:, 0])
        for chunk in range(0, len(others), MEAN_CHUNK):
            _, k_other = run.vectors(others[chunk:chunk + MEAN_CHUNK], "key", head)
            mean_k += k_other.sum(1)
        mean_k /= len(others)
        matrix = matrix - scale * q_vectors[:, 0] @ mean_k.T
        keys = s.k[layer, s.kv_head(head), np.asarray(others)].astype(np.float64)  # (keys, d): one read
        own -= float(np.mean(scale * (keys @ s.q[layer, head, query].astype(np.float64))))
    matrix = matrix.cpu().numpy()
    rest = {"query's biases × key parts": float(matrix[-1, :-1].sum()),
            "query parts × key's biases": float(matrix[:-1, -1].sum()),
            "query's biases × key's biases": float(matrix[-1, -1])}
    total = float(matrix.sum())
    tol = run.tolerance(1e-3)
    if not np.isclose(total, own, rtol=tol, atol=tol * max(1.0, abs(own))):
        raise ValueError(f"{loaded.spec.name}: the parts add up to {total:.5g}, the model's own score is {own:.5g}: "
                         "its query or key is not rebuilt exactly here, so the split is not shown")
    return QKAttribution(layer=layer, head=head, query=query, key=key, against=against, query_parts=names,
                         key_parts=names, matrix=matrix[:-1, :-1], rest=rest, total=total, score=own,
                         softcap=s.softcap_of(layer) if against is None else None, rounding=tol if tol > 1e-3 else 0.0)


def _family(loaded: LoadedModel, att: ModelAttention) -> QKFamily:
    name = loaded.spec.name
    if att.architecture == "encoder-decoder":
        raise ValueError(f"{name} is an encoder-decoder model: its scores are not split here.")
    try:
        kind = loaded.anatomy.model_type
    except MissingAnatomy as err:
        raise ValueError(f"{name}: {err}.") from None
    if kind in REFUSED:
        raise ValueError(f"{name} ({kind}) {REFUSED[kind]}: its scores are not split into parts here.")
    if kind not in QK_FAMILIES:
        raise ValueError(f"{name} ({kind}): its family has no entry in this app's list of the families whose scores "
                         "it splits, so its scores are not split into parts here.")
    if att.self_attn.q is None or att.self_attn.k is None or att.self_attn.bias:
        raise ValueError(f"{name}: its queries and keys were not captured (or it adds a position bias), so its "
                         "scores cannot be split here.")
    if kind == "opt" and not getattr(loaded.network.config, "do_layer_norm_before", True):
        raise ValueError(f"{name} normalises after each block (OPT-350m's layout): its scores are not split here.")
    return QK_FAMILIES[kind]


def _visible(s, layer: int, query: int, n: int) -> np.ndarray:
    mask = s.mask_of(layer)
    return np.ones(n, bool) if mask is None else np.asarray(mask[query], bool)


class _Stop(Exception):
    """Raised in block `layer`'s pre-hook: nothing after its input is needed."""


class _Run:
    """One pass of the model up to block `layer`, and the parts of the stream there at any positions."""

    def __init__(self, loaded: LoadedModel, att: ModelAttention, qk: QKFamily, layer: int):
        self.loaded, self.qk, self.layer = loaded, qk, layer
        self.parts = loaded.anatomy
        self.block = self.parts.blocks[layer]
        self.attention = self.block.get_submodule(self.parts.family.attention)
        self.H, self.n = att.self_attn.n_heads, len(att.token_ids)
        self.H_kv = att.self_attn.k.shape[1]
        self.d = att.self_attn.q.shape[-1]
        # one layer's q and k, left where they are (on a GPU each read copies only the rows it asks for)
        self.captured_q, self.captured_k = part(att.self_attn.q, layer), part(att.self_attn.k, layer)
        self._values: dict[int, torch.Tensor] = {}  # layer -> its v, (H_kv, m, d) float64, read once
        self._capture(att)

    def kv_head(self, head: int) -> int:
        return head // (self.H // self.H_kv)

    def tolerance(self, rtol: float) -> float:
        """`rtol` for a model in float32. A model in half precision rounds its own q, k and residual stream to
        its dtype, and the float64 parts can only equal them to that rounding: the guard's allowance then
        (ROUNDING_UNITS unit roundoffs; bfloat16 ~6e-2, float16 ~8e-3), as for its attention weights."""
        dtype = home(self.attention)[1]
        if dtype in (torch.float32, torch.float64):
            return rtol
        return max(rtol, ROUNDING_UNITS * float(torch.finfo(dtype).eps) / 2)

    def _capture(self, att: ModelAttention) -> None:
        """What the parts are made of, at every position: block inputs x (layer + 1), W_O's input z and output o,
        the post norms' inputs. Pre-norm families: from the result itself (its hidden states, and z = w v from
        its q, k, v), no pass; post-norm ones: one pass up to block `layer` with hooks (their second norm's
        input is kept nowhere else)."""
        s = att.self_attn
        if self.qk.residual != "post" and s.v is not None and att.hidden is not None and s.own_weights is None:
            self.att = att
            return
        self.att = None
        x, z, o, norm_in = {}, {}, {}, {}
        layer = self.layer

        def block_input(m):
            def hook(module, args, kwargs):
                x[m] = (args[0] if args else kwargs["hidden_states"])[0].detach().cpu()
                if m == layer:
                    raise _Stop
            return hook

        def keep(store, m, key=None):
            def hook(module, args, out=None):
                store[(m, key) if key is not None else m] = (args[0] if out is None else out)[0].detach().cpu()
            return hook

        handles = []
        ids = torch.as_tensor(att.token_ids)[None].to(self.loaded.device)
        # The hooks go on the shared model only while it is ours: put on before the lock, another session's
        # pass ran into _Stop (make soak: "Running MiniLM-L6 failed: the work raised _Stop").
        with self.loaded.lock, torch.no_grad():
            try:
                for m, block in enumerate(self.parts.blocks[:layer + 1]):
                    handles.append(block.register_forward_pre_hook(block_input(m), with_kwargs=True))
                    if m == layer:
                        break
                    handles += [self.parts.outputs[m].register_forward_pre_hook(keep(z, m)),
                                self.parts.outputs[m].register_forward_hook(keep(o, m))]
                    for i, path in enumerate(self.qk.post_norms):
                        handles.append(block.get_submodule(path).register_forward_pre_hook(keep(norm_in, m, i)))
                try:
                    self.loaded.network(input_ids=ids, **({"use_cache": False} if att.architecture ==
                                                          "decoder-only" else {}))
                except _Stop:
                    pass
            finally:
                for h in handles:
                    h.remove()
        self._x, self._z, self._o, self._norm_in = x, z, o, norm_in

    def x(self, m: int, pos: torch.Tensor) -> torch.Tensor:
        """Block m's input at `pos`: (p, D) float64."""
        if self.att is None:
            return self._x[m][pos].double()
        return torch.from_numpy(self.att.hidden[m, pos.numpy()]).double()  # those rows only (on a GPU, a copy)

    def z(self, m: int, pos: torch.Tensor) -> torch.Tensor:
        """W_O's input at `pos`, every head's output side by side: (p, H * d) float64."""
        if self.att is None:
            return self._z[m][pos].double()
        s = self.att.self_attn
        lo, hi = int(pos.min()), int(pos.max()) + 1
        w = s.layer_weights(m, rows=slice(lo, hi)).double().cpu()[:, pos - lo]  # (H, p, m)
        if m not in self._values:  # read once per layer (on a GPU each read copies the layer back)
            self._values[m] = torch.from_numpy(s.v[m]).double()
        v = self._values[m].repeat_interleave(self.H // s.v.shape[1], dim=0)  # (H, m, d)
        return torch.einsum("hpj,hjd->phd", w, v[:, :w.shape[-1]]).reshape(len(pos), -1)

    def o(self, m: int, pos: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """W_O's output at `pos` (its bias included), from its input there `z` (self.z): (p, D) float64."""
        if self.att is None:
            return self._o[m][pos].double()
        linear = self.parts.outputs[m]
        bias = getattr(linear, "bias", None)
        w_o = torch.from_numpy(self.parts.output_weight(m)).double()
        out = z @ w_o
        return out if bias is None else out + bias.detach().double().cpu()

    def norm_input(self, m: int, which: int, pos: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        """The input of the block's `which` post norm at `pos`: (p, D) float64 (W_O's output `o` for the norm
        of what attention writes)."""
        if self.att is None:
            return self._norm_in[m, which][pos].double()
        return o

    def stream_parts(self, positions: list[int]) -> tuple[tuple[str, ...], torch.Tensor]:
        """The parts of block `layer`'s input at `positions`: names (P,) and (P, p, D), float64; their sum is
        the stream the model computed there (checked)."""
        pos = torch.as_tensor(positions)
        H = self.H
        names, parts = ["embeddings"], [self.x(0, pos)[None]]
        post = self.qk.residual == "post"
        if post:
            names.append("norm biases")
            parts.append(torch.zeros_like(parts[0]))
        for m in range(self.layer):
            w_o = torch.from_numpy(self.parts.output_weight(m)).double()  # (H * d, D)
            d = w_o.shape[0] // H
            z = self.z(m, pos)  # once per layer: z, o and the heads' writes all come from it
            o = self.o(m, pos, z)
            heads = torch.einsum("phd,hdD->hpD", z.view(len(positions), H, d), w_o.view(H, d, -1))
            bias = (o - heads.sum(0))[None]
            new = [f"L{m + 1}H{h + 1}" for h in range(H)] + [f"L{m + 1} attention bias"]
            if self.qk.residual == "pre":
                mlp = self.x(m + 1, pos) - self.x(m, pos) - o
                names += [*new, f"L{m + 1} MLP"]
                parts += [heads, bias, mlp[None]]
            elif self.qk.residual == "post_attention_norm":
                norm = self.block_of(m).get_submodule(self.qk.post_norms[0])
                written = torch.cat([heads, bias])  # (H + 1, p, D)
                normed, betas = self._frozen(norm, self.norm_input(m, 0, pos, o), written)
                normed[-1] += betas
                mlp = self.x(m + 1, pos) - self.x(m, pos) - normed.sum(0)
                names += [*new, f"L{m + 1} MLP"]
                parts += [normed, mlp[None]]
            else:  # post-norm: y = N1(x + o), x' = N2(y + mlp)
                n1, n2 = (self.block_of(m).get_submodule(p) for p in self.qk.post_norms)
                u1, u2 = self.norm_input(m, 0, pos, o), self.norm_input(m, 1, pos, o)
                everything = torch.cat([*parts, heads, bias])
                y_parts, beta1 = self._frozen(n1, u1, everything)
                y_parts[1] += beta1  # the norm biases' part
                with torch.no_grad():
                    y = n1(u1.to(*home(n1))).double().cpu()
                mlp = (u2 - y)[None]
                x_parts, beta2 = self._frozen(n2, u2, torch.cat([y_parts, mlp]))
                x_parts[1] += beta2
                names += [*new, f"L{m + 1} MLP"]
                parts = [x_parts]
        stacked = torch.cat(parts)
        want = self.x(self.layer, pos)
        tol = self.tolerance(1e-5)
        if not torch.allclose(stacked.sum(0), want, rtol=tol, atol=tol * float(want.abs().max())):
            raise ValueError(f"{self.loaded.spec.name}: the parts of the residual stream do not add up to what the "
                             "model computed there, so its scores are not split here.")
        return tuple(names), stacked

    def block_of(self, m: int) -> torch.nn.Module:
        return self.parts.blocks[m]

    @staticmethod
    def _frozen(norm: torch.nn.Module, at: torch.Tensor, parts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each position's norm frozen at `at` (p, D) applied to parts (P, p, D): the images and the betas (p, D)."""
        images, betas = torch.empty_like(parts), torch.empty_like(at)
        for p in range(at.shape[0]):
            apply, beta = frozen_norm(norm, at[p])
            images[:, p], betas[p] = apply(parts[:, p]), beta
        return images, betas

    def vectors(self, positions: list[int], side: str, head: int) -> tuple[tuple[str, ...], torch.Tensor]:
        """Each part's contribution to head `head`'s query (side "query") or its KV head's key at `positions`,
        the constant last: names (P,) and (P + 1, p, d), float64, after rotary; checked against the model's own."""
        names, parts = self.stream_parts(positions)
        pos = torch.as_tensor(positions)
        x = self.x(self.layer, pos)  # (p, D)
        if self.qk.norm is None:
            normed, constant = parts, torch.zeros_like(x)
        else:
            normed, constant = self._frozen(self.block.get_submodule(self.qk.norm), x, parts)
        rows = torch.cat([normed, constant[None]])  # (P + 1, p, D)
        projected = self._project(rows, side)  # (P + 1, p, heads, d), the bias in the last row
        group = self.H if side == "query" else self.H_kv
        projected = self._head_norm(projected, side, group)
        which = head if side == "query" else self.kv_head(head)
        one = projected[:, :, which]  # (P + 1, p, d)
        if self.qk.query_scaling and side == "query":
            one = one * float(self.attention.scaling)
        one = self._rotate(one, pos)
        own = torch.from_numpy(np.asarray((self.captured_q if side == "query" else self.captured_k)[which]))
        want = own[pos].double()
        tol = self.tolerance(1e-4)
        if not torch.allclose(one.sum(0), want, rtol=tol, atol=tol * max(1.0, float(want.abs().max()))):
            raise ValueError(f"{self.loaded.spec.name}: its {side} is not rebuilt exactly from the parts of the "
                             "residual stream here, so its scores are not split.")
        return names, one

    def _project(self, rows: torch.Tensor, side: str) -> torch.Tensor:
        """rows (P + 1, p, D) through the model's own projection: its linear part for every row, its bias added
        to the last (the constant). -> (P + 1, p, heads, d)"""
        fused = self.qk.key is None
        module = self.block.get_submodule(self.qk.query if side == "query" or fused else self.qk.key)
        device, dtype = home(module)
        with torch.no_grad():  # on the model's device; the parts stay float64 on the CPU
            zero = module(torch.zeros(1, rows.shape[-1], dtype=dtype, device=device)).double().cpu()[0]
            out = module(rows.to(device, dtype)).double().cpu() - zero
        out[-1] += zero
        if fused:
            q_width, k_width = self.H * self.d, self.H_kv * self.d
            out = out[..., :q_width] if side == "query" else out[..., q_width:q_width + k_width]
        heads = self.H if side == "query" else self.H_kv
        return out.reshape(*out.shape[:2], heads, self.d)

    def _head_norm(self, projected: torch.Tensor, side: str, heads: int) -> torch.Tensor:
        """A norm on the projected query or key (Qwen3, Gemma-3: per head; OLMo-2: over all heads), frozen at
        the model's own pre-norm value."""
        norm = getattr(self.attention, "q_norm" if side == "query" else "k_norm", None)
        if norm is None:
            return projected
        raw = projected.sum(0)  # (p, heads, d): what the projection gave the model
        per_head = norm.weight.shape[-1] == self.d
        rows = projected if per_head else projected.reshape(*projected.shape[:2], -1)
        at = raw if per_head else raw.reshape(raw.shape[0], -1)
        out = torch.empty_like(rows)
        for p in range(at.shape[0]):
            for g in range(heads if per_head else 1):
                point = at[p, g] if per_head else at[p]
                apply, beta = frozen_norm(norm, point)
                image = apply(rows[:, p, g] if per_head else rows[:, p])
                image[-1] += beta
                if per_head:
                    out[:, p, g] = image
                else:
                    out[:, p] = image
        return out.reshape(projected.shape)

    def _rotate(self, vectors: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """The model's own rotary embedding at `pos` on (P + 1, p, d) (its first r dimensions, r = cos's width)."""
        rotary = self.parts.rotary
        if rotary is None:
            return vectors
        apply = getattr(sys.modules[type(self.attention).__module__], "apply_rotary_pos_emb", None)
        if apply is None:
            raise ValueError(f"{self.loaded.spec.name}: its rotary embedding is not applied here as its own code "
                             "applies it, so its scores are not split.")
        kinds = getattr(self.loaded.network.config, "layer_types", None)  # Gemma-3: a rotary per kind of layer
        extra = {"layer_type": kinds[self.layer]} if kinds and "layer_type" in inspect.signature(
            rotary.forward).parameters else {}
        device = next(rotary.buffers(), vectors).device
        try:
            with torch.no_grad():
                cos, sin = rotary(vectors.float().to(device), pos[None].to(device), **extra)  # (1, p, r)
        except TypeError as err:
            raise ValueError(f"{self.loaded.spec.name}: its rotary embedding is not called here as its own code "
                             f"calls it ({err}), so its scores are not split.") from None
        cos, sin = cos[0].double().cpu(), sin[0].double().cpu()
        r = cos.shape[-1]
        turned, _ = apply(vectors[..., :r], vectors[..., :r], cos, sin, unsqueeze_dim=0)  # cos (p, r) -> (1, p, r)
        return torch.cat([turned, vectors[..., r:]], -1)


