"""The residual stream at block `layer`, split into the parts that wrote it, for "why this key".

StreamParts runs the model up to block `layer` once, reading TransformerLens's hook points (or reads the
result itself, for pre-norm families), and gives, at any positions, the residual stream (`resid`) as a sum of
parts: the embeddings, what each earlier head wrote (z_h W_O^h), each earlier attention's output bias, each
earlier MLP, and the norms' biases, with every norm's scale frozen at its value on this text; then those parts
through the head's norm, projection, head norm and rotary embedding (`vectors`), so that a query or key is a
sum over parts plus a constant.

Shapes: P parts, p positions, H heads, H_kv KV heads, d head size, D model size.
"""

from __future__ import annotations

import contextlib
import inspect
import sys

import numpy as np
import torch

from attention.models.analyses.qk_families import QKFamily
from attention.models.analyses.readout import frozen_norm
from attention.models.forward.anatomy import home
from attention.models.forward.check import ROUNDING_UNITS
from attention.models.forward.device_arrays import part
from attention.models.forward.hook_points import HookPoint, hooks
from attention.models.forward.model import LoadedModel
from attention.models.forward.model_attention import ModelAttention
from attention.naming import head_name


class _Stop(Exception):
    """Raised in block `layer`'s pre-hook: nothing after its input is needed."""


class StreamParts:
    """One pass of the model up to block `layer`, and the parts of the stream there at any positions: what
    qk_attribution splits a head's query and key into."""

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
        """The key/value head query head `head` reads."""
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
        """What the parts are made of, at every position: the residual stream entering blocks 0 ... layer
        (hook_resid_pre), W_O's input z (attn.hook_z) and output o, the post norms' inputs. Pre-norm families:
        from the result itself (its hidden states, and z = w v from its q, k, v), no pass; post-norm ones: one
        pass up to block `layer` with hooks (their second norm's input is kept nowhere else)."""
        s = att.self_attn
        if self.qk.residual != "post" and s.v is not None and att.hidden is not None and s.own_weights is None:
            self.att = att
            return
        self.att = None
        resid, z, o, norm_in = {}, {}, {}, {}
        layer = self.layer

        def keep_resid(t: torch.Tensor, hook: HookPoint) -> None:  # [1, pos, d_model]
            resid[hook.layer] = t[0].detach().cpu()
            if hook.layer == layer:
                raise _Stop

        def keep_z(t: torch.Tensor, hook: HookPoint) -> None:  # [1, pos, head_index, d_head]
            z[hook.layer] = t[0].detach().cpu()

        fwd_hooks = ([(f"blocks.{m}.hook_resid_pre", keep_resid) for m in range(layer + 1)]
                     + [(f"blocks.{m}.attn.hook_z", keep_z) for m in range(layer)])
        ids = torch.as_tensor(att.token_ids)[None].to(self.loaded.device)
        # The hooks go on the shared model only while it is ours: put on before the lock, another session's
        # pass ran into _Stop (make soak: "Running MiniLM-L6 failed: the work raised _Stop").
        with (self.loaded.lock, torch.no_grad(), hooks(self.loaded, fwd_hooks, lock=False),
              self._unnamed_points(o, norm_in)):
            try:
                self.loaded.network(input_ids=ids, **({"use_cache": False} if att.architecture ==
                                                      "decoder-only" else {}))
            except _Stop:
                pass
        self._resid, self._z, self._o, self._norm_in = resid, z, o, norm_in

    @contextlib.contextmanager
    def _unnamed_points(self, o: dict, norm_in: dict):
        """Hooks put on by hand, on blocks before `layer`, for what no hook point gives in every family: W_O's
        output o[m] (hook_attn_out is the norm after it in Gemma-2/3 and OLMo-2; OPT has none) and the post
        norms' inputs norm_in[m, i] (BERT's first is TransformerLens's hook_resid_mid, not a point here; its
        second, hook_resid_post, is kept with it). Removed in finally; the caller holds the model's lock."""
        def keep(store, key, side):
            def hook(module, args, out=None):
                store[key] = (args[0] if side == "in" else out)[0].detach().cpu()
            return hook

        handles = []
        try:
            for m, block in enumerate(self.parts.blocks[:self.layer]):
                handles.append(self.parts.outputs[m].register_forward_hook(keep(o, m, "out")))
                for i, path in enumerate(self.qk.post_norms):
                    handles.append(block.get_submodule(path).register_forward_pre_hook(keep(norm_in, (m, i), "in")))
            yield
        finally:
            for handle in handles:
                handle.remove()

    def resid_pre(self, m: int, pos: torch.Tensor) -> torch.Tensor:
        """The residual stream entering block m at `pos`: (p, D) float64."""
        if self.att is None:
            return self._resid[m][pos].double()
        return torch.from_numpy(self.att.hidden[m, pos.numpy()]).double()  # those rows only (on a GPU, a copy)

    def z(self, m: int, pos: torch.Tensor) -> torch.Tensor:
        """W_O's input at `pos`, every head's output: [pos, head_index, d_head] float64."""
        if self.att is None:
            return self._z[m][pos].double()
        s = self.att.self_attn
        lo, hi = int(pos.min()), int(pos.max()) + 1
        w = s.layer_weights(m, rows=slice(lo, hi)).double().cpu()[:, pos - lo]  # (H, p, m)
        if m not in self._values:  # read once per layer (on a GPU each read copies the layer back)
            self._values[m] = torch.from_numpy(s.v[m]).double()
        v = self._values[m].repeat_interleave(self.H // s.v.shape[1], dim=0)  # (H, m, d)
        flat = torch.einsum("hpj,hjd->phd", w, v[:, :w.shape[-1]]).reshape(len(pos), -1)  # (p, H * d)
        return flat.unflatten(-1, (self.H, -1))  # a view of flat

    def o(self, m: int, pos: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """W_O's output at `pos` (its bias included), from its input there `z` (self.z): (p, D) float64."""
        if self.att is None:
            return self._o[m][pos].double()
        linear = self.parts.outputs[m]
        bias = getattr(linear, "bias", None)
        w_o = torch.from_numpy(self.parts.output_weight(m)).double()
        out = z.flatten(-2) @ w_o  # (p, H * d) @ (H * d, D)
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
        names, parts = ["embeddings"], [self.resid_pre(0, pos)[None]]
        post = self.qk.residual == "post"
        if post:
            names.append("norm biases")
            parts.append(torch.zeros_like(parts[0]))
        for m in range(self.layer):
            w_o = torch.from_numpy(self.parts.output_weight(m)).double()  # (H * d, D)
            d = w_o.shape[0] // H
            z = self.z(m, pos)  # once per layer: z, o and the heads' writes all come from it
            o = self.o(m, pos, z)
            heads = torch.einsum("phd,hdD->hpD", z, w_o.view(H, d, -1))
            bias = (o - heads.sum(0))[None]
            new = [head_name(m, h) for h in range(H)] + [f"L{m + 1} attention bias"]
            if self.qk.residual == "pre":
                mlp = self.resid_pre(m + 1, pos) - self.resid_pre(m, pos) - o
                names += [*new, f"L{m + 1} MLP"]
                parts += [heads, bias, mlp[None]]
            elif self.qk.residual == "post_attention_norm":
                norm = self.block_of(m).get_submodule(self.qk.post_norms[0])
                written = torch.cat([heads, bias])  # (H + 1, p, D)
                normed, betas = self._frozen(norm, self.norm_input(m, 0, pos, o), written)
                normed[-1] += betas
                mlp = self.resid_pre(m + 1, pos) - self.resid_pre(m, pos) - normed.sum(0)
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
        want = self.resid_pre(self.layer, pos)
        tol = self.tolerance(1e-5)
        if not torch.allclose(stacked.sum(0), want, rtol=tol, atol=tol * float(want.abs().max())):
            raise ValueError(f"{self.loaded.spec.name}: the parts of the residual stream do not add up to what the "
                             "model computed there, so its scores are not split here.")
        return tuple(names), stacked

    def block_of(self, m: int) -> torch.nn.Module:
        """Block `m` of the network."""
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
        resid = self.resid_pre(self.layer, pos)  # (p, D)
        if self.qk.norm is None:
            normed, constant = parts, torch.zeros_like(resid)
        else:
            normed, constant = self._frozen(self.block.get_submodule(self.qk.norm), resid, parts)
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
