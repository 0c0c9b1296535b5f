"""What a model's layer 0 holds: a token's embedding alone, or its embedding plus its position.

The vector each token enters the first layer with (hidden state 0) is its embedding, and in some models its
position too: BERT and GPT-2 add a learned position vector, the original Transformer a sinusoid. Models with
rotary positions (RoPE: SmolLM2, Llama, Gemma) add none there: they turn each query and key by its position
inside attention. Which one a model is, is measured here from the model itself, not from its family's name:

    same token, two positions  ->  the same layer-0 vector?   yes: no position added;  no: a position added

Shapes: n tokens, D model size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.models.forward.model import LoadedModel
from attention.models.forward.registry import model_label
from attention.models.forward.running import attend

PROBE_TEXT = "the the the the"  # one word repeated: the same token at several positions


@dataclass(frozen=True)
class EmbeddingPositions:
    """Whether a model's layer-0 vectors carry each token's position, measured on one token at two positions."""

    model_name: str
    added: bool  # the same token's layer-0 vector differs from one position to another: a position is added
    rotary: bool  # the model turns queries and keys by their positions inside attention (RoPE)
    gap: float  # max |layer-0 vector at one position - at the other|: 0 when no position is added

    def layer_zero(self) -> str:
        """What layer 0 is, in a sentence (Ambiguous words' cosine chart starts there)."""
        if self.added:
            return ("Layer 0 is the word's embedding plus its position (identical only when the word sits at the "
                    "same position in both sentences)")
        inside = ("its rotary positions turn the queries and keys inside attention" if self.rotary else
                  "its positions enter inside attention")
        return (f"Layer 0 is the word's embedding alone, the same in both sentences: {model_label(self.model_name)} "
                f"adds no position to it ({inside})")


def embedding_positions(loaded: LoadedModel) -> EmbeddingPositions:
    """Measure whether `loaded` adds positions to its embeddings: the same token at two positions of
    PROBE_TEXT, through the model's own pass (attend); their layer-0 vectors are equal when it adds none.
    ValueError when the text gives no token twice."""
    att = attend(loaded, PROBE_TEXT)
    ids = np.asarray(att.token_ids)  # (n,)
    plain = [i for i in range(len(ids)) if not att.special[i]]
    pair = next(((i, j) for k, i in enumerate(plain) for j in plain[k + 1:] if ids[i] == ids[j]), None)
    if pair is None:
        raise ValueError(f"{model_label(loaded.spec.name)} gives no token twice in “{PROBE_TEXT}”: whether it adds "
                         "positions to its embeddings is not measured.")
    first, second = (np.asarray(att.hidden[0, i], dtype=np.float64) for i in pair)  # (D,) each
    gap = float(np.max(np.abs(first - second)))
    scale = float(np.max(np.abs(first))) or 1.0
    return EmbeddingPositions(model_name=loaded.spec.name, added=gap > 1e-4 * scale,
                              rotary=loaded.anatomy.rotary is not None, gap=gap)
