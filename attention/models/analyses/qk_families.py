"""Which families' scores "why this key" splits, and where each family's block keeps what its q and k read.

Each family's entry in the anatomy (attention.models.forward.anatomy.FAMILIES) says it once, in `Family.qk`:
a QKFamily (where q and k read the stream, and how the block writes to it), or the reason its scores are not
split; attention.models.forward.capabilities turns that into the sentence a page shows. QK_FAMILIES and REFUSED
are the two halves of that column, read from the anatomy (docs/models.md lists them).
"""

from __future__ import annotations

from attention.models.forward.anatomy import FAMILIES, QKFamily
from attention.models.forward.capabilities import require
from attention.models.forward.model import LoadedModel
from attention.models.forward.model_attention import ModelAttention

QK_FAMILIES = {kind: f.qk for kind, f in FAMILIES.items() if isinstance(f.qk, QKFamily)}  # model_type -> QKFamily
REFUSED = {kind: f.qk for kind, f in FAMILIES.items() if isinstance(f.qk, str)}  # model_type -> why not split


def qk_family(loaded: LoadedModel, att: ModelAttention) -> QKFamily:
    """The family's QKFamily; ValueError, in words for the user, for a model whose scores are not split here
    (capabilities' "why this key"), or whose pass did not capture its queries and keys."""
    require(loaded, "why this key")
    if att.self_attn.q is None or att.self_attn.k is None or att.self_attn.bias:
        raise ValueError(f"{loaded.spec.name}: its queries and keys were not captured (or it adds a position bias), "
                         "so its scores cannot be split here.")
    return loaded.anatomy.family.qk
