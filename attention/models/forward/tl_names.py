"""TransformerLens 3.9's hook names that attention.models does not give, each with why and what to use instead, so
that a TransformerLens notebook's every name either works here or says why not (issue 72). The names it does give
are hook_points' (hook_names(model) lists a model's); run_with_cache's gradients are "<name>_grad" (hook_runs)."""

from __future__ import annotations

import re

# a name's tail (after "blocks.{l}.") -> why it is not here, and what to read instead
_SPLIT = ("TransformerLens makes it only with use_split_qkv_input or use_attn_in: the stream attention reads is "
          "hook_resid_pre here (ln1.hook_normalized its normalised form)")
NOT_GIVEN = {"hook_attn_in": _SPLIT, "hook_q_input": _SPLIT, "hook_k_input": _SPLIT, "hook_v_input": _SPLIT,
             "hook_mlp_in": "TransformerLens makes it only with use_hook_mlp_in: the stream the MLP reads is "
                            "hook_resid_mid here (ln2.hook_normalized its normalised form)"}
FINAL = {"hook_pos_embed": "learned position embeddings are added inside the model's embedding module here "
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
