"""What heads do: analyses that run the network again (edited, on a probe, step by step), read its weights, or
survey a corpus.

    >>> from attention.models.analyses import contrast, direct_logit_attribution
    >>> pair = contrast(att, m.tokenizer, " Mary", " John")        # m = logit(target) - logit(foil)
    >>> direct_logit_attribution(m, att, pair).heads               # (L, H) each head's direct share of m

Modules:
    target_foil     a target and a foil token, tokenized once, and the metric m = logit(target) - logit(foil);
                    which two (and the corrupted prompt) a text gets: picked, an example's, or derived from it
    edits           runs with heads' outputs or the residual stream edited, batched (ablation, patching)
    head_effects    each head removed, exactly or by attribution patching, and how well the two agree
    readout         the residual stream through the unembedding: direct logit attribution, the logit lens
    patching        activation patching of a clean run into a corrupted one
    roles           previous-token, induction, duplicate-token and first-token scores on a probe
    composition_scores Q-, K- and V-composition of heads, from their weights
    weight_views    TransformerLens's W_Q, W_K, W_V, W_O, W_U and the factored W_QK, W_OV (SVD, eigenvalues)
    census          every head scored by the papers' metrics (detect_head, prefix matching, sinks, name movers...)
    cache_tools     TransformerLens's cache tools: accumulated_resid, decompose_resid, stack_head_results, logit_attrs
    corpus          a corpus of texts: the default one shipped with the package, or a user's .txt/.jsonl/.csv
    corpus_survey   every head over a corpus: top examples, per-text statistics, a sample of q and k; saved
                    to one .safetensors file
    corpus_pass     what the survey keeps between texts: running top-k, statistics, the lowest-priority sample
    survey_cache    a survey kept on disk, made once per machine for a model, corpus, code and settings
    corpus_job      the survey as a batch job over a file: parts merged and saved as it goes, resumable
    corpus_ray      the same job on Ray (an extra): one model replica per worker
    saved_file      a job's .safetensors file read back (the corpus survey's, the batch job's): bounded, never unpickled
    corpus_projection  one head's sampled queries and keys over a corpus in one 2-D projection (qk_projection)
    qk_attribution  why this key: one head's score split into (query part, key part) pairs
    qk_families     which families' scores are split, and where each block keeps what q and k read
    qk_stream       the residual stream at a layer as a sum of the parts that wrote it (StreamParts)
    predictions     the next token and step-by-step generation (the Predictions page)
    embedding_positions  whether a model's layer-0 vectors carry each token's position (measured)
    batch_pairs     prompt pairs (IOI templates, corruptions), read and written as a file
    batch_inputs    a batch of prompts padded for one pass, and each prompt's last logits
    batch           logit differences and attribution over a batch of prompt pairs, with their spread
    batch_patching  activation patching over the same batch
    batch_job       the batch as a job over a pairs file: parts saved as it goes, resumed, merged
    batch_ray       the same job on Ray (an extra)
    job_parts       the one runner both jobs share: parts, resume, merge in input order, save, Ray placement

Each takes a LoadedModel (attention.models.forward) and, where it reads a text, its ModelAttention.
"""

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
from attention.models.analyses.cache_tools import (
    accumulated_resid,
    apply_ln_to_stack,
    decompose_resid,
    logit_attrs,
    logit_constant,
    stack_head_results,
)
from attention.models.analyses.census import (
    CENSUS_METRICS,
    PUBLISHED,
    Census,
    Metric,
    PublishedHead,
    census_document,
    census_report,
    head_census,
    metrics_table,
    probe_inputs,
    probe_result,
    published_heads,
    top_heads,
)
from attention.models.analyses.census_probes import NeedleProbe, needle_prompts
from attention.models.analyses.census_scores import (
    copying,
    detect_head,
    first_token_share,
    name_copy,
    prefix_matching,
    retrieval,
    retrieval_probe,
    succession,
)
from attention.models.analyses.composition_scores import KINDS, Composition, composition
from attention.models.analyses.corpus import (
    CORPUS_FORMATS,
    Corpus,
    corpus_limits,
    default_corpus,
    listed_corpora,
    open_listed,
    read_corpus,
)
from attention.models.analyses.corpus_job import merge_surveys, survey_file
from attention.models.analyses.corpus_projection import QKProjection, qk_projection
from attention.models.analyses.corpus_ray import survey_file_on_ray
from attention.models.analyses.corpus_survey import (
    CorpusSurvey,
    TopExample,
    corpus_survey,
    load_corpus_survey,
    survey_bytes,
)
from attention.models.analyses.embedding_positions import EmbeddingPositions, embedding_positions
from attention.models.analyses.head_effects import (
    ABLATIONS,
    HeadEffects,
    ScanAgreement,
    agreement,
    attribution_patching,
    drop_in_words,
    head_ablation,
    head_ablation_cosine,
    said,
)
from attention.models.analyses.patching import SITES, Patching, activation_patching
from attention.models.analyses.predictions import MAX_NEW_TOKENS, Generation, NextTokens, generate, next_tokens
from attention.models.analyses.qk_attribution import (
    QKAttribution,
    key_choices,
    part_in_words,
    qk_attribution,
)
from attention.models.analyses.qk_families import QK_FAMILIES
from attention.models.analyses.readout import (
    LENS_MAX_POSITIONS,
    LogitAttribution,
    LogitLens,
    direct_logit_attribution,
    logit_lens,
)
from attention.models.analyses.roles import (
    PROBE_REPEAT,
    ROLE_THRESHOLD,
    ROLES,
    HeadRoles,
    head_roles,
    probe_attention,
    probe_ids,
    roles_of,
)
from attention.models.analyses.survey_cache import cached_survey
from attention.models.analyses.target_foil import (
    Contrast,
    ContrastWords,
    DerivedWords,
    TokenChoice,
    choose_token,
    contrast,
    contrast_words,
    derived_words,
    prompt_names,
    spaced_alternative,
    swap_words,
    swapped_prompt,
)
from attention.models.analyses.weight_views import FactoredMatrix, Weights, weights

__all__ = [
    "ABLATIONS", "CORPUS_FORMATS", "LENS_MAX_POSITIONS", "KINDS", "MAX_NEW_TOKENS", "PROBE_REPEAT", "QK_FAMILIES",
    "ROLES", "ROLE_THRESHOLD", "SITES", "Composition", "Contrast", "Corpus", "CorpusSurvey", "Generation",
    "HeadEffects", "HeadRoles", "LogitAttribution", "LogitLens", "NextTokens", "Patching", "QKAttribution",
    "QKProjection", "ContrastWords", "DerivedWords", "EmbeddingPositions", "ScanAgreement", "TokenChoice",
    "TopExample", "activation_patching", "agreement", "attribution_patching", "composition", "contrast",
    "cached_survey", "choose_token",
    "contrast_words", "corpus_limits", "corpus_survey", "default_corpus", "direct_logit_attribution", "derived_words",
    "drop_in_words",
    "embedding_positions", "generate", "head_ablation", "head_ablation_cosine", "head_roles", "key_choices",
    "listed_corpora", "load_corpus_survey", "logit_lens", "merge_surveys", "next_tokens", "open_listed",
    "part_in_words", "probe_attention", "probe_ids", "prompt_names", "qk_attribution", "qk_projection", "read_corpus",
    "roles_of", "said", "spaced_alternative", "survey_bytes", "survey_file", "survey_file_on_ray", "swap_words",
    "swapped_prompt",
    # over a batch of prompt pairs (batch_pairs, batch_inputs, batch, batch_patching)
    "BatchAttribution", "BatchPatching", "CORRUPTIONS", "IOI_TEMPLATES", "LogitDifferences", "PaddedBatch",
    "PromptPair", "PromptPairs", "Spread", "batch_attribution", "batch_patching", "ioi_pairs", "last_logits",
    "logit_differences", "pad_batch", "read_prompt_pairs", "write_prompt_pairs",
    # the same as a job over a pairs file, saved as it goes, resumed, or on Ray (batch_job, batch_ray)
    "BatchJob", "batch_file", "batch_file_on_ray", "batch_job_bytes", "batch_job_of", "load_batch_job",
    "merge_batch_jobs",
    # TransformerLens's weight views (weight_views)
    "FactoredMatrix", "Weights", "weights",
    # the literature's heads, each scored as its paper scores it (census, census_scores, census_probes)
    "CENSUS_METRICS", "PUBLISHED", "PublishedHead", "published_heads", "Census", "Metric", "census_document",
    "census_report", "head_census", "metrics_table",
    "probe_inputs", "probe_result", "top_heads", "copying", "detect_head", "first_token_share", "name_copy",
    "prefix_matching", "succession", "retrieval", "retrieval_probe", "NeedleProbe", "needle_prompts",
    # TransformerLens's cache tools on a run_with_cache cache (cache_tools)
    "accumulated_resid", "apply_ln_to_stack", "decompose_resid", "logit_attrs", "logit_constant", "stack_head_results",
]
