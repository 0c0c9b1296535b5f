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
         "hook_tokens": "token ids are the call's input: to_tokens(model, text)",
         "unembed.hook_in": "the unembedding's input is ln_final.hook_normalized here (the final norm's output, "
                            "its weight applied)",
         "unembed.hook_out": "the unembedding's output is the logits run_with_cache and run_with_hooks return"}


def why_not_given(name: str) -> str | None:
    """Why TransformerLens's `name` is not a hook point here (and what to read instead), or None for a name
    TransformerLens does not have either."""
    if name in FINAL:
        return FINAL[name]
    tail = re.sub(r"^blocks\.\d+\.", "", name)
    return NOT_GIVEN.get(tail) or None


_LAYER_TYPES = {"a": "attn", "m": "mlp", "b": "", "block": "", "blocks": "", "attention": "attn"}
_ALIASES = {"attn": "pattern", "attn_logits": "attn_scores", "key": "k", "query": "q", "value": "v",
            "mlp_pre": "pre", "mlp_mid": "mid", "mlp_post": "post"}
_IN_ATTN = ("k", "v", "q", "z", "rot_k", "rot_q", "result", "pattern", "attn_scores")
_IN_MLP = ("pre", "post", "mid", "pre_linear")


def get_act_name(name: str, layer: int | str | None = None, layer_type: str | None = None) -> str:
    """A hook point's full name from TransformerLens's short form, by TransformerLens 3.9's rules (its
    utils.get_act_name): get_act_name("pattern", 3) is "blocks.3.attn.hook_pattern", ("scale", 4, "ln1")
    "blocks.4.ln1.hook_scale", "pre5" "blocks.5.mlp.hook_pre", ("normalized") "ln_final.hook_normalized"; a full
    name is returned as it is. What the cache's cache["pattern", 3] reads."""
    if ("." in name or name.startswith("hook_")) and layer is None and layer_type is None:
        return name
    match = re.match(r"([a-z]+)(\d+)([a-z]?.*)", name)
    if match is not None:
        name, layer, layer_type = match[1], match[2], match[3]
    name = _ALIASES.get(name, name)
    full = "" if layer is None else f"blocks.{layer}."
    if name in _IN_ATTN:
        layer_type = "attn"
    elif name in _IN_MLP:
        layer_type = "mlp"
    elif layer_type in _LAYER_TYPES:
        layer_type = _LAYER_TYPES[layer_type]
    full += (f"{layer_type}." if layer_type else "") + f"hook_{name}"
    return f"ln_final.{full}" if name in ("scale", "normalized") and layer is None else full
