"""TransformerLens's attn.hook_result: what each head writes before the heads are summed, z_h W_O^h, as a hook point
(issue 72). [batch, pos, head_index, d_model], times the family's write scale (Granite's), as hook_attn_out is.

A fn on it sees each head's product, made from W_O's input (hook_z) and W_O's rows of that head by a pre-hook on W_O;
where the fn changes it (a replacement, or an edit in place), W_O's output becomes the sum of the edited products
plus W_O's bias: the same sum to float32 rounding (one matmul adds the heads' products in another order), exactly
what zeroing a head's slice of z does when a head's result is zeroed. Where the fn changes nothing, W_O runs as it
is. Gradients of a head's result are hook_z's times W_O: a backward hook on hook_result is refused."""

from __future__ import annotations

import torch

from attention.models.forward.anatomy import parameter
from attention.models.forward.attention_edits import HookPointError


def per_head(w_o: torch.nn.Module, heads: int) -> torch.Tensor:
    """W_O of one layer by head, x @ W form: (H, d, D) (Conv1D, GPT-2's, stores (in, out) already)."""
    weight = parameter(w_o)
    w = weight if type(w_o).__name__ == "Conv1D" else weight.T  # (H * d, D)
    return w.reshape(heads, -1, w.shape[-1])


class ResultHook:
    """The handles of one fn on hook_result: a pre-hook that makes the products and a hook that sums them back."""

    def __init__(self, w_o: torch.nn.Module, heads: int, scale: float, hook: str, fn, backward: bool):
        if backward:
            raise HookPointError(f"{hook}: a head's result is hook_z times W_O; put the backward hook on "
                                 f"{hook.replace('hook_result', 'hook_z')}")
        self.w_o, self.heads, self.scale, self.hook, self.fn = w_o, heads, scale, hook, fn
        self.edited: torch.Tensor | None = None
        self.handles = [w_o.register_forward_pre_hook(self._before, with_kwargs=True),
                        w_o.register_forward_hook(self._after)]

    def _before(self, module, args, kwargs):
        z = args[0] if args else kwargs["hidden_states"]  # [batch, pos, H * d]
        w = per_head(module, self.heads).to(z.dtype)
        result = torch.einsum("bphd,hdD->bphD", z.unflatten(-1, (self.heads, -1)), w) * self.scale
        seen = result.clone()
        new = self.fn(result, self.hook)
        if new is not None and tuple(new.shape) != tuple(seen.shape):
            raise HookPointError(f"the fn on {self.hook} returned shape {tuple(new.shape)}, not the point's "
                                 f"{tuple(seen.shape)}")
        changed = new if new is not None else (None if torch.equal(result, seen) else result)
        self.edited = changed
        return None

    def _after(self, module, args, output):
        edited, self.edited = self.edited, None
        if edited is None:
            return None
        bias = parameter(module, "bias")
        out = edited.sum(2) / self.scale + (0 if bias is None else bias)
        return out.to(output.dtype)

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
