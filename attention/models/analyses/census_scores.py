"""Each head scored as one paper scores it (issue 73): the functions the census (attention.models.analyses.census)
runs, each usable alone. Every score is an (L, H) float array, layers and heads from 0. The METRICS table in
census.py gives each one's paper, probe, threshold and the choices its paper left open.

    detect_head          TransformerLens 3.9's detect_head, its arguments and its arithmetic
    prefix_matching      Olsson et al. 2022's induction (prefix-matching) score on repeated random tokens
    copying              Elhage et al. 2021 / Olsson et al. 2022: Σ Re λ / Σ |λ| of the full OV circuit W_E W_OV W_U
    first_token_share    Gu et al. 2024's α: the mean weight each head puts on the first token
    name_copy            Wang et al. 2022's copy score (and its negative, McDougall et al. 2023's copy suppression)
    succession           Gould et al. 2023's succession score on ordinal sequences
    retrieval            Wu et al. 2024's retrieval score on needle-in-a-haystack prompts, while the model decodes
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attention.models.analyses.census_probes import (
    DETECTION_PATTERNS,
    NEEDLE,
    ORDINALS,
    NeedleProbe,
    needle_span,
    repeated_tokens,
    rouge1_recall,
    single_tokens,
)
from attention.models.analyses.weight_views import Weights
from attention.models.forward.hook_points import hooks
from attention.models.forward.hook_runs import run_with_cache
from attention.models.forward.model import LoadedModel
from attention.models.forward.token_ids import to_tokens

PATTERNS = "blocks.{}.attn.hook_pattern"


def patterns_of(loaded: LoadedModel, ids: torch.Tensor) -> torch.Tensor:
    """(L, batch, H, n, n) float32: every layer's pattern on `ids` (run_with_cache's default arithmetic)."""
    _, cache = run_with_cache(loaded, ids, lambda name: name.endswith(".attn.hook_pattern"))
    return torch.stack([cache[PATTERNS.format(layer)] for layer in range(len(cache))]).float()  # only patterns kept


def detect_head(loaded: LoadedModel, seq, detection_pattern, heads=None, cache: torch.Tensor | None = None, *,
                exclude_bos: bool = False, exclude_current_token: bool = False, error_measure: str = "mul",
                prepend_bos: bool = True) -> np.ndarray:
    """TransformerLens 3.9's detect_head (transformer_lens/head_detector.py) on this model: (L, H), -1 for heads
    not in `heads` ([(layer, head)] or {layer: [heads]}; None: all). `detection_pattern`: "previous_token_head",
    "duplicate_token_head", "induction_head" or an (n, n) lower-triangular tensor. "mul": the share of the head's
    weight on the pattern's ones; "abs": 1 − mean |weight − pattern| × n, rounded to 3 decimals, as TL rounds it.
    `prepend_bos`: TL's default, True (to_tokens); ids (a tensor) are read as they are. A list of texts: the
    mean of each text's scores; TL 3.9 drops exclude_bos, exclude_current_token and error_measure for a list (it
    calls itself without them): here they apply to every text. `cache`: the patterns of `seq` already made,
    (L, H, n, n) (TL's cache= saves the pass)."""
    if error_measure not in ("mul", "abs"):
        raise ValueError(f"error_measure is 'mul' or 'abs', not {error_measure!r}")
    if isinstance(seq, list | tuple):
        return np.mean([detect_head(loaded, s, detection_pattern, heads, None, exclude_bos=exclude_bos,
                                    exclude_current_token=exclude_current_token, error_measure=error_measure,
                                    prepend_bos=prepend_bos) for s in seq], axis=0)
    tokens = seq.reshape(1, -1) if isinstance(seq, torch.Tensor) else to_tokens(loaded, seq, prepend_bos=prepend_bos)
    n = tokens.shape[-1]
    if isinstance(detection_pattern, str):
        if detection_pattern not in DETECTION_PATTERNS:
            raise ValueError(f"detection_pattern must be a tensor or one of {list(DETECTION_PATTERNS)}; got "
                             f"{detection_pattern!r}")
        detection_pattern = DETECTION_PATTERNS[detection_pattern](tokens.cpu())
    detection = torch.as_tensor(detection_pattern, dtype=torch.float32)
    if not 1 < n < loaded.spec.token_limit(loaded.device):
        raise ValueError("the sequence must have at least 2 tokens and fit within the model's context window")
    if detection.shape != (n, n) or not torch.equal(detection, torch.tril(detection)):
        raise ValueError(f"the detection pattern must be lower triangular, ({n}, {n}) for this text's {n} tokens; "
                         f"got {tuple(detection.shape)}")
    patterns = patterns_of(loaded, tokens)[:, 0] if cache is None else cache  # (L, H, n, n)
    L, H = patterns.shape[:2]
    chosen = {(layer, head) for layer in range(L) for head in range(H)} if heads is None else (
        {(layer, head) for layer, head in heads} if isinstance(heads, list) else
        {(layer, head) for layer, hs in heads.items() for head in hs})
    matches = -np.ones((L, H), dtype=np.float32)
    for layer, head in sorted(chosen):
        matches[layer, head] = _similarity(patterns[layer, head].clone(), detection, exclude_bos,
                                           exclude_current_token, error_measure)
    return matches


def _similarity(pattern: torch.Tensor, detection: torch.Tensor, exclude_bos: bool, exclude_current_token: bool,
                error_measure: str) -> float:
    """TransformerLens's compute_head_attention_similarity_score, line for line."""
    if error_measure == "mul":
        if exclude_bos:
            pattern[:, 0] = 0
        if exclude_current_token:
            pattern.fill_diagonal_(0)
        return float(((pattern * detection).sum() / pattern.sum()).item())
    diff = (pattern - detection).abs()
    if exclude_bos:
        diff[:, 0] = 0
    if exclude_current_token:
        diff.fill_diagonal_(0)
    return 1 - round(float((diff.mean() * len(diff)).item()), 3)


def prefix_matching(loaded: LoadedModel, *, repeat: int = 50, batch: int = 10, seed: int = 0) -> np.ndarray:
    """Olsson et al. 2022's prefix-matching (induction) score: on rows of R random tokens seen twice, the mean
    weight a second-repeat token i puts on i − R + 1, the token after its earlier occurrence. (L, H)."""
    ids, first = repeated_tokens(loaded, repeat, batch, seed)
    patterns = patterns_of(loaded, ids)  # (L, B, H, n, n)
    queries = torch.arange(first + repeat, first + 2 * repeat)
    return patterns[..., queries, queries - repeat + 1].mean((1, 3)).numpy()


def copying(w: Weights, embedding: torch.Tensor) -> np.ndarray:
    """Elhage et al. 2021's copying measure of each head's full OV circuit E W_V W_O U (V × V, layer norms left
    out): Σ Re λ / Σ |λ| over its eigenvalues, those of the d × d W_O U E W_V (the same non-zero ones), in
    [−1, 1]; near 1 a head raises the logit of the token it attends to. `embedding`: (V, D) as the model's
    embedding module makes it (Gemma's scale included). (L, H)."""
    ue = (w.W_U.double() @ embedding.double())  # (D, D): U E, made once
    small = w.W_O.double() @ ue @ w.W_V.double()  # (L, H, d, d)
    eig = torch.linalg.eigvals(small)
    return (eig.real.sum(-1) / eig.abs().sum(-1)).numpy()


def first_token_share(loaded: LoadedModel, ids: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(α, entropy fraction): Gu et al. 2024's α, each head's weight on the first token averaged over every query
    position and sequence (the first query, which sees only itself, included, as their mean over t = 1..T), and
    each head's mean row entropy as a fraction of the uniform entropy of the same rows (mean log of the keys each
    row sees: i + 1 in a causal model, every key in an encoder), the Head atlas's rule for a broad head
    (head_survey.BROAD_FRACTION), on `ids` (batch, T), one sequence at a time. (L, H) each."""
    alpha, entropy, uniform = 0.0, 0.0, 0.0
    for row in ids:
        p = patterns_of(loaded, row[None])[:, 0]  # (L, H, n, n)
        n = p.shape[-1]
        causal = not torch.triu(p, 1).any()  # no weight on a later key in any head: a causal model
        seen = torch.arange(1.0, n + 1, dtype=torch.float64) if causal else torch.full((n,), n, dtype=torch.float64)
        alpha = alpha + p[..., 0].mean(-1)
        entropy = entropy - torch.where(p > 0, p * p.clamp_min(1e-30).log(), 0.0).sum(-1).mean(-1)
        uniform = uniform + float(seen.log().mean())
    return (alpha / len(ids)).numpy(), (entropy / uniform).numpy()


def effective_embedding(loaded: LoadedModel, ids: list[int]) -> torch.Tensor:
    """(N, D): each token alone through block 0 with its attention left out (hook_attn_out zeroed): the embedding
    plus the first MLP's output on it, the "effective embedding" Gould et al. and McDougall et al. read OV
    circuits from."""
    def no_attention(t, hook):
        return torch.zeros_like(t)
    batch = torch.as_tensor(ids, dtype=torch.long, device=loaded.device)[:, None]  # (N, 1): each token alone
    with hooks(loaded, [("blocks.0.hook_attn_out", no_attention)]):
        _, cache = run_with_cache(loaded, batch, "blocks.0.hook_resid_post")
    return cache["blocks.0.hook_resid_post"][:, 0].float()


def _head_logits(loaded: LoadedModel, w: Weights, x: torch.Tensor, layer: int, head: int,
                 columns: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(positive, negative) logits, (N, V or len(columns)): the final norm, then W_U, on x W_OV and on −x W_OV."""
    norm = loaded.anatomy.final_norm
    out = x @ w.W_V[layer, head] @ w.W_O[layer, head]  # (N, D)
    u = w.W_U if columns is None else w.W_U[:, columns]
    with torch.no_grad():
        both = norm(torch.stack([out, -out]).to(next(norm.parameters()).dtype)).float() if norm is not None \
            else torch.stack([out, -out])
    positive = both[0] @ u
    if torch.equal(both[1], -both[0]):  # a norm without bias (RMSNorm): the negative's logits are these negated
        return positive, -positive
    return positive, both[1] @ u


def name_copy(loaded: LoadedModel, w: Weights, names: dict[str, int], top: int = 5,
              progress: Callable[[float], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(copy, negative copy): Wang et al. 2022's copy score, the share of names whose own token is among the `top`
    logits of the final norm and W_U on the head's OV output for the name (here its effective embedding; Wang
    read the residual stream at the name in IOI prompts), and the same on −OV (their negative copy score,
    McDougall et al. 2023's measure of copy suppression). (L, H) each."""
    ids = torch.tensor(list(names.values()))
    x = effective_embedding(loaded, ids.tolist())
    L, H = w.W_V.shape[:2]
    copy, negative = np.zeros((L, H)), np.zeros((L, H))
    for layer in range(L):
        for head in range(H):
            pos, neg = _head_logits(loaded, w, x, layer, head)
            copy[layer, head] = (pos.topk(top, dim=-1).indices == ids[:, None]).any(-1).float().mean()
            negative[layer, head] = (neg.topk(top, dim=-1).indices == ids[:, None]).any(-1).float().mean()
        if progress:
            progress((layer + 1) / L)
    return copy, negative


def succession(loaded: LoadedModel, w: Weights) -> tuple[np.ndarray, int]:
    """Gould et al. 2023's succession score: over every token of the ordinal sequences (but each sequence's last)
    that is one token after a space, the share whose successor has the top logit among its sequence's tokens,
    reading the head's OV output for its effective embedding through the final norm and W_U. ((L, H), how many
    tokens it was averaged over)."""
    tasks = [list(single_tokens(loaded, words).values()) for words in ORDINALS.values()]
    tasks = [ids for ids in tasks if len(ids) >= 3]
    if not tasks:
        raise ValueError(f"{loaded.spec.name}'s tokenizer has none of the ordinal sequences as single tokens")
    every = [i for ids in tasks for i in ids]
    x = effective_embedding(loaded, every)
    L, H = w.W_V.shape[:2]
    hits, count = np.zeros((L, H)), sum(len(ids) - 1 for ids in tasks)
    for layer in range(L):
        for head in range(H):
            at = 0
            for ids in tasks:
                logits, _ = _head_logits(loaded, w, x[at:at + len(ids) - 1], layer, head, torch.tensor(ids))
                hits[layer, head] += (logits.argmax(-1) == torch.arange(1, len(ids))).sum().item()
                at += len(ids)
    return hits / count, count


def retrieval_probe(loaded: LoadedModel, probe: NeedleProbe, max_new_tokens: int = 50) -> tuple[np.ndarray, str]:
    """(L, H) Wu et al. 2024's retrieval score of every head on one prompt, and the model's answer. The model decodes
    greedily with its KV cache (generate, each step's query rows kept, as their decode reads output_attentions)
    until a newline, its end of text or `max_new_tokens` (theirs: 50); at each step a head copies and pastes when
    its most-attended key (top 1) lies in the needle and holds the token just generated, and scores 1 / |needle|
    for it (their retrieval_calculate)."""
    from attention.models.analyses.predictions import generate

    tok = loaded.tokenizer
    gen = generate(loaded, probe.prompt, max_new_tokens=max_new_tokens,
                   stop=tok("\n", add_special_tokens=False)["input_ids"])
    ids = gen.prompt_ids
    start, end = needle_span(ids, tok)
    if start < 0:
        raise ValueError("the needle is not in the prompt's tokens (over 90 % of its tokens in one window)")
    score = 0.0
    for step in gen.steps:
        top = step.rows.argmax(-1)  # (L, H) each head's most-attended key
        inside = (top >= start) & (top < end)
        score = score + (inside & (ids[np.where(inside, top, 0)] == step.token_id)) / (end - start)
    answer = tok.decode([s.token_id for s in gen.steps], skip_special_tokens=True).strip()
    return np.asarray(score, dtype=np.float64), answer


def retrieval(loaded: LoadedModel, probes: list[NeedleProbe],
              progress: Callable[[float], None] | None = None) -> tuple[np.ndarray | None, list[str]]:
    """(L, H) the retrieval score averaged over the probes the model answered (ROUGE-1 recall of the needle over
    0.5, Wu et al.'s `score > 50`), None where it answered none; and every probe's answer."""
    kept, answers = [], []
    for i, probe in enumerate(probes):
        score, answer = retrieval_probe(loaded, probe)
        answers.append(answer)
        if rouge1_recall(NEEDLE, answer) > 0.5:
            kept.append(score)
        if progress:
            progress((i + 1) / len(probes))
    return (np.mean(kept, axis=0) if kept else None), answers
