"""TransformerLens 3.9's hook names that attention.models does not give, each with why and what to use instead, so
that a TransformerLens notebook's every name either works here or says why not (issue 72). The names it does give
are hook_points' (hook_names(model) lists a model's); run_with_cache's gradients are "<name>_grad" (hook_runs)."""

from __future__ import annotations

import re

# a name's tail (after "blocks.{l}.") -> why it is not here, and what to read instead
NOT_GIVEN = {
    "attn.hook_rot_q": "q after rotary positions: attend(model, text) records it (ModelAttention's q per layer, "
                       "read only); hook_q is before rotary, as TransformerLens's",
    "attn.hook_rot_k": "k after rotary positions: attend(model, text) records it, read only; hook_k is before rotary",
    "hook_resid_mid": "the stream between attention and the MLP: hook_resid_pre + hook_attn_out gives it in a "
                      "pre-norm block; not a point here yet",
    "ln1.hook_scale": "the block norms' scale and normalized input are not points here yet",
    "ln1.hook_normalized": "the block norms' scale and normalized input are not points here yet",
    "ln2.hook_scale": "the block norms' scale and normalized input are not points here yet",
    "ln2.hook_normalized": "the block norms' scale and normalized input are not points here yet",
    "mlp.hook_pre": "the MLP's inside (pre- and post-activation) is not a point here yet: hook_mlp_out is its output",
    "mlp.hook_pre_linear": "the MLP's inside is not a point here yet: hook_mlp_out is its output",
    "mlp.hook_post": "the MLP's inside is not a point here yet: hook_mlp_out is its output",
}
FINAL = {"ln_final.hook_scale": "the final norm's scale is not a point here; ln_final.hook_normalized is its output "
                                "with the weight applied (TransformerLens's divided by ln_final.w)",
         "hook_pos_embed": "learned position embeddings are added inside the model's embedding module here "
                           "(GPT-2: its wpe; rotary families have none): hook_embed and blocks.0.hook_resid_pre "
                           "are what there is",
         "hook_tokens": "token ids are the call's input: to_tokens(model, text)"}


def why_not_given(name: str) -> str | None:
    """Why TransformerLens's `name` is not a hook point here (and what to read instead), or None for a name
    TransformerLens does not have either."""
    if name in FINAL:
        return FINAL[name]
    tail = re.sub(r"^blocks\.\d+\.", "", name)
    return NOT_GIVEN.get(tail) or None
