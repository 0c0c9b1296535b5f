"""Real pretrained models: load one, run it on a text, and read every layer and head (needs torch).

    >>> from attention.models import attend, load_model
    >>> att = attend(load_model("minilm"), "I sat on the river bank.")
    >>> att.weights.shape            # (layers, heads, queries, keys)
    >>> att.head_trace(2, 5)         # one head rebuilt step by step, an attention.AttentionTrace

Three wings, one question each; each wing's `__init__` is its front and says what its modules hold:
    forward     the forward pass and what it records: load_model, attend, ModelAttention, the survey, the guard
    recorded    reads of a recorded result (they work on a saved file too): views, words, aggregations,
                export and import, rotary positions, ambiguous words, two results compared, the model
                pages' questions
    analyses    what heads do, by running the network again (or reading its weights, or a corpus): contrast,
                head effects, direct logit attribution, the logit lens, patching, roles, composition, why this
                key (qk_attribution), the corpus survey, predictions; and over a batch of prompt pairs (IOI):
                ioi_pairs, logit_differences, batch_attribution, batch_patching
`recorded` and `analyses` read what `forward` records and never import each other. This module re-exports
every public name of the three, each listed once in its wing's `__all__`, so `from attention.models import X`
works whatever the inner layout; pages import these fronts, never an inner module (an import-linter contract
in pyproject.toml says so).

Arrays count layers and heads from 0; the pages say "L19H7" counting from 1 (head_name(18, 6)).
The toy side (`import attention`) never imports this package, so toy pages start without torch.
"""

from attention.models.analyses import *  # noqa: F403
from attention.models.analyses import __all__ as _analyses
from attention.models.forward import *  # noqa: F403
from attention.models.forward import __all__ as _forward
from attention.models.recorded import *  # noqa: F403
from attention.models.recorded import __all__ as _recorded

# The wings' fronts are the register: a public name is listed once, in its wing's __all__
# (tests/test_structure.py holds this union equal to the wings' public names).
__all__ = [*_forward, *_recorded, *_analyses]
