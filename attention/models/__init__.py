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
every public name of the three, so `from attention.models import X` works whatever the inner layout; pages
import these fronts, never an inner module (an import-linter contract in pyproject.toml says so).

Arrays count layers and heads from 0; the pages say "L19H7" counting from 1 (head_name(18, 6)).
The toy side (`import attention`) never imports this package, so toy pages start without torch.
"""

from attention.models.analyses import *  # noqa: F403
from attention.models.analyses import __all__ as _analyses
from attention.models.analyses.batch import (
    BatchAttribution,
    LogitDifferences,
    Spread,
    batch_attribution,
    logit_differences,
)
from attention.models.analyses.batch_inputs import PaddedBatch, last_logits, pad_batch
from attention.models.analyses.batch_job import (
    BatchJob,
    batch_file,
    batch_job_bytes,
    batch_job_of,
    load_batch_job,
    merge_batch_jobs,
)
from attention.models.analyses.batch_pairs import (
    CORRUPTIONS,
    IOI_TEMPLATES,
    PromptPair,
    PromptPairs,
    ioi_pairs,
    read_prompt_pairs,
    write_prompt_pairs,
)
from attention.models.analyses.batch_patching import BatchPatching, batch_patching
from attention.models.analyses.batch_ray import batch_file_on_ray
from attention.models.forward import *  # noqa: F403
from attention.models.forward import __all__ as _forward
from attention.models.forward.anatomy import Anatomy, MissingAnatomy
from attention.models.forward.hook_points import (
    HookCache,
    HookPoint,
    HookPointError,
    hook_names,
    hooks,
    run_with_cache,
    run_with_hooks,
)
from attention.models.recorded import *  # noqa: F403
from attention.models.recorded import __all__ as _recorded
from attention.naming import HeadName

__all__ = [*_forward, *_recorded, *_analyses,
           # TransformerLens's hook points (forward.hook_points) and one name for a head, both ways
           "HeadName", "HookCache", "HookPoint", "HookPointError", "hook_names", "hooks", "run_with_cache",
           "run_with_hooks",
           # where a family keeps its parts, from the table or read from its module tree (forward.anatomy_inferred)
           "Anatomy", "MissingAnatomy",
           # analyses over a batch of prompt pairs (analyses.batch_pairs, batch_inputs, batch, batch_patching)
           "BatchAttribution", "BatchPatching", "CORRUPTIONS", "IOI_TEMPLATES", "LogitDifferences", "PaddedBatch",
           "PromptPair", "PromptPairs", "Spread", "batch_attribution", "batch_patching", "ioi_pairs", "last_logits",
           "logit_differences", "pad_batch", "read_prompt_pairs", "write_prompt_pairs",
           # the same as a job over a pairs file, saved as it goes, resumed, or on Ray (batch_job, batch_ray)
           "BatchJob", "batch_file", "batch_file_on_ray", "batch_job_bytes", "batch_job_of", "load_batch_job",
           "merge_batch_jobs"]
