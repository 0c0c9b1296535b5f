"""The literature's heads, every head scored as its paper scores it (issue 73): one call, `head_census(model)`,
gives each (layer, head) every metric of CENSUS_METRICS on that metric's own probe, with the threshold above which
the paper (or, where it names none, this package, said so) calls a head that kind.

    >>> c = head_census(load_model("smollm2"))
    >>> c.scores["prefix_matching"].shape        # (L, H), layers and heads from 0
    >>> c.kinds(19, 6)                           # ("induction", ...) the kinds whose threshold the head passes
    >>> c.sink_rate                              # Gu et al.'s: the share of heads with α > 0.3
    >>> c.top("name_copy", 5)                    # [(layer, head, score)] best first

One place for each definition: the CENSUS_METRICS table below (docs/heads.md prints it), the functions in census_scores,
the probes in census_probes. The pages' role words read `kinds`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attention.models.analyses import census_scores as scores
from attention.models.analyses.census_probes import (
    DEPTHS,
    HAYSTACK_TOKENS,
    NAMES,
    ORDINALS,
    needle_prompts,
    single_tokens,
    sink_sequences,
)
from attention.models.analyses.weight_views import weights
from attention.models.forward.capabilities import why_not
from attention.models.forward.head_survey import BROAD_FRACTION
from attention.models.forward.model import LoadedModel, Progress

REPEAT, BATCH, SEED = 50, 10, 0  # the repeated-token probe: R tokens twice, B rows (ARENA's and TL's demos' sizes)
SINK_SEQUENCES, SINK_TOKENS = 20, 64  # Gu et al.'s α: sequences of the bundled corpus, each exactly this long
# detect_head divides by every row of the probe, and only the second repeat's R rows can score on the duplicate and
# induction patterns: ARENA's 0.4 on those rows is 0.4 x R / (2R + 1) of detect_head's ratio (a probe with BOS)
SECOND_HALF = REPEAT / (2 * REPEAT + 1)


@dataclass(frozen=True)
class Metric:
    """One published score: what it is called, where it comes from, how it is computed and on what."""

    key: str  # Census.scores[key]
    kind: str  # the kind of head it finds ("induction", "sink", ...)
    paper: str  # authors, year, title, arXiv id
    definition: str
    probe: str
    threshold: float
    threshold_from: str  # where the threshold comes from (the paper, or our choice and why)
    choices: str = ""  # what the paper left open and which way we took it


CENSUS_METRICS = (
    Metric("previous_token", "previous-token", "TransformerLens 3.9 detect_head (Nanda et al.)",
           "detect_head(model, probe, \"previous_token_head\", error_measure=\"mul\"): the share of each head's "
           "weight on the token before", "the repeated-token probe's first row, the tokenizer's BOS token first "
           "(SmolLM2: <|im_start|>, which its tokenizer does not add to a text)", 0.4,
           "ARENA's exercises (TL gives none)", "exclude_bos and exclude_current_token False (TL's defaults)"),
    Metric("duplicate_token", "duplicate-token", "TransformerLens 3.9 detect_head",
           "detect_head(..., \"duplicate_token_head\"): the share on earlier copies of the same token",
           "as previous_token", round(0.4 * SECOND_HALF, 3), f"ARENA's 0.4 on the second repeat's rows, which are "
           f"{REPEAT} of the probe's {2 * REPEAT + 1}: detect_head's ratio counts every row"),
    Metric("induction", "induction", "TransformerLens 3.9 detect_head",
           "detect_head(..., \"induction_head\"): the share on the token after an earlier copy", "as previous_token",
           round(0.4 * SECOND_HALF, 3), "as duplicate_token: ARENA's 0.4 on the second repeat's rows"),
    Metric("prefix_matching", "induction", "Olsson et al. 2022, In-context learning and induction heads, "
           "arXiv 2209.11895", "mean weight of a second-repeat token i on i − R + 1", f"{BATCH} rows of BOS + "
           f"{REPEAT} random tokens twice (seed {SEED})", 0.4, "our choice: the paper ranks heads, names no cut",
           "random tokens uniform over the vocabulary less special tokens; queries: the second repeat only"),
    Metric("copying", "copying", "Elhage et al. 2021, A Mathematical Framework for Transformer Circuits; Olsson "
           "et al. 2022", "Σ Re λ / Σ |λ| over the eigenvalues of the full OV circuit E W_V W_O U",
           "the weights alone", 0.5, "our choice: most of the circuit's eigenvalue mass positive",
           "layer norms left out, as Elhage et al. do; E as the embedding module makes it (Gemma's scale)"),
    Metric("sink", "sink", "Gu et al. 2024, When Attention Sink Emerges in Language Models, arXiv 2410.10781",
           "α: the mean weight on the first token over every query position and sequence", f"{SINK_SEQUENCES} "
           f"sequences of exactly {SINK_TOKENS} tokens: the bundled corpus joined and cut, each with the tokenizer's "
           "own special tokens", 0.3, "the paper (ε = 0.3)",
           "a model without BOS (SmolLM2) has its first word first; Gu et al. find the sink there too"),
    Metric("name_copy", "name mover", "Wang et al. 2022, Interpretability in the Wild (IOI), arXiv 2211.00593",
           "the share of names whose token is in the top 5 logits of ln_final and W_U on the head's OV output",
           "single-token names, each alone through block 0 without attention (its effective embedding)", 0.5,
           "our choice: the paper reports name movers' scores near 1, names no cut",
           "the effective embedding (Gould, McDougall) stands in for Wang's residual at the name in IOI prompts"),
    Metric("negative_name_copy", "copy suppression", "McDougall et al. 2023, Copy Suppression, arXiv 2310.04625; "
           "Wang et al. 2022's negative copy score", "the same on −OV: the name among its 5 most suppressed",
           "as name_copy", 0.5, "our choice, as name_copy", "negative name movers and copy suppression heads "
           "share this score (McDougall et al. show they are one kind)"),
    Metric("succession", "successor", "Gould et al. 2023, Successor Heads, arXiv 2312.09230",
           "the share of ordinal tokens whose successor has the top logit among its sequence's tokens, through "
           "the head's OV, ln_final and W_U", "numbers, number and ordinal words, days, months, letters: each "
           "token alone through block 0 without attention", 0.5, "our choice: the paper ranks heads",
           "each sequence's last token left out (no successor); only tokens that are one token after a space"),
    Metric("retrieval", "retrieval", "Wu et al. 2024, Retrieval Head Mechanistically Explains Long-Context "
           "Factuality, arXiv 2404.15574", "while the model answers greedily, 1 / (the needle's length in tokens) "
           "for each step whose token "
           "the head's most-attended key holds inside the needle; averaged over the prompts it answered",
           f"their needle and question in {', '.join(map(str, HAYSTACK_TOKENS))} tokens of the bundled corpus at "
           f"depths {', '.join(f'{d:.0%}' for d in DEPTHS)}; the chat template where the tokenizer has one", 0.1,
           "the paper", "an answer counts when its ROUGE-1 recall of the needle is over 0.5 (their code); decoding "
           "stops at a newline or 50 tokens (theirs); the needle's tokens matched exactly where their code takes "
           "the first window with 90 % of them; 9 prompts of up to 1,000 tokens where they go to 50K"),
    Metric("entropy_fraction", "broad", "the Head atlas's own rule for a broad head",
           "each head's mean row entropy over the uniform entropy of the same rows (mean log of the keys each row "
           "sees)", "as sink", BROAD_FRACTION, "ours, the Head atlas's: broad above 90 % of uniform",
           "a fraction of uniform, not nats: a late row of 64 keys can spread far more than an early one"),
)
BY_KEY = {m.key: m for m in CENSUS_METRICS}
GPT2_SMALL = ("gpt2", "openai-community/gpt2")  # hub ids of the model the papers below name heads in
PUBLISHED = (  # (kind, paper, score key, heads (layer, head) from 0, as the papers write them): GPT-2 small
    ("induction", "Olsson et al. 2022; Elhage et al. 2021", "prefix_matching", ((5, 1), (5, 5), (6, 9))),
    ("name mover", "Wang et al. 2022 (IOI)", "name_copy", ((9, 6), (9, 9), (10, 0))),
    ("copy suppression", "McDougall et al. 2023", "negative_name_copy", ((10, 7),)),
)


@dataclass(frozen=True)
class PublishedHead:
    """A head a paper names in the model the census scored, beside this census's score for its kind."""

    kind: str
    paper: str
    layer: int  # from 0, as the papers write them (GPT-2's 5.1)
    head: int
    key: str  # the census score read for it (CENSUS_METRICS key)
    score: float | None  # None where the census could not score `key` (the reason in Census.missing)
    passed: bool  # above the metric's threshold


def published_heads(name: str, model_type: str, scores: dict[str, np.ndarray]) -> tuple[PublishedHead, ...]:
    """The papers' heads of GPT-2 small (hub id `gpt2`, 12 layers x 12 heads), each with this census's score for
    its kind; () for any other model."""
    shape = next(iter(scores.values())).shape if scores else None
    if name not in GPT2_SMALL or model_type != "gpt2" or shape != (12, 12):
        return ()
    return tuple(PublishedHead(kind, paper, layer, head, key, None if key not in scores else
                               float(scores[key][layer, head]),
                               key in scores and bool(scores[key][layer, head] > BY_KEY[key].threshold))
                 for kind, paper, key, heads in PUBLISHED for layer, head in heads)
NOT_SCORED: dict[str, str] = {}  # a metric the table names but head_census does not score yet -> why


@dataclass(frozen=True)
class Census:
    """Every head's scores (CENSUS_METRICS keys -> (L, H)), and which heads pass each metric's threshold. Scores a
    family cannot give (no unembedding: an encoder; a fused q/k/v projection) are absent, the reason in `missing`."""

    model: str
    scores: dict[str, np.ndarray]
    missing: dict[str, str] = field(default_factory=dict)
    probes: dict[str, str] = field(default_factory=dict)  # a probe's name -> its text or ids, to open and read
    counted: dict[str, int] = field(default_factory=dict)  # how many names / ordinal tokens a score averaged
    published: tuple[PublishedHead, ...] = ()  # the heads the papers name in this model (GPT-2 small), scored

    @property
    def sink_rate(self) -> float:
        """Gu et al.'s sink rate: the share of heads whose α exceeds ε = 0.3."""
        return float((self.scores["sink"] > BY_KEY["sink"].threshold).mean())

    def passed(self, key: str) -> np.ndarray:
        """(L, H) bool: the heads above the metric's threshold."""
        return self.scores[key] > BY_KEY[key].threshold

    def passes(self, layer: int, head: int) -> tuple[str, ...]:
        """The metrics (keys) whose threshold this head passes, in CENSUS_METRICS order."""
        return tuple(m.key for m in CENSUS_METRICS if m.key in self.scores and self.passed(m.key)[layer, head])

    def kinds(self, layer: int, head: int) -> tuple[str, ...]:
        """The kinds (Metric.kind) whose threshold this head passes, each once, in CENSUS_METRICS order."""
        found = [m.kind for m in CENSUS_METRICS if m.key in self.scores and self.passed(m.key)[layer, head]]
        return tuple(dict.fromkeys(found))

    def top(self, key: str, count: int = 5) -> list[tuple[int, int, float]]:
        """The `count` highest-scoring heads on `key`: [(layer, head, score)], from 0, best first."""
        return top_heads(self.scores[key], count)

    def counts(self) -> dict[str, int]:
        """How many heads pass each scored metric."""
        return {key: int(self.passed(key).sum()) for key in self.scores}


def top_heads(scores: np.ndarray, count: int = 5) -> list[tuple[int, int, float]]:
    """The `count` highest of an (L, H) score: [(layer, head, score)], from 0, best first (layer order on a tie)."""
    s = np.asarray(scores)
    order = np.argsort(-s, axis=None, kind="stable")[:count]
    return [(int(i) // s.shape[1], int(i) % s.shape[1], float(s.flat[i])) for i in order]


def head_census(loaded: LoadedModel, *, progress: Progress | None = None) -> Census:
    """Every metric of CENSUS_METRICS on every head of `loaded` (module docstring)."""
    say = progress or (lambda fraction, message: None)
    out: dict[str, np.ndarray] = {}
    missing: dict[str, str] = dict(NOT_SCORED)
    say(0.0, "Repeated random tokens (TransformerLens's detect_head, Olsson's prefix matching)…")
    ids, first = scores.repeated_tokens(loaded, REPEAT, BATCH, SEED)
    row = ids[:1]
    seen = scores.patterns_of(loaded, row)[:, 0]  # one pass for the three (TL's cache=)
    for key, name in (("previous_token", "previous_token_head"), ("duplicate_token", "duplicate_token_head"),
                      ("induction", "induction_head")):
        out[key] = scores.detect_head(loaded, row, name, cache=seen)  # the row has its BOS already
    out["prefix_matching"] = scores.prefix_matching(loaded, repeat=REPEAT, batch=BATCH, seed=SEED)
    say(0.3, "The first token's share on the corpus's sequences (Gu et al.)…")
    sinks = sink_sequences(loaded, SINK_SEQUENCES, SINK_TOKENS)
    out["sink"], out["entropy_fraction"] = scores.first_token_share(loaded, sinks)
    counted = {}
    try:
        w = weights(loaded)
        if w.W_U is None:
            raise ValueError(f"{loaded.spec.name} has no unembedding (an encoder): OV circuits read into logits "
                             "need one")
    except ValueError as err:
        for key in ("copying", "name_copy", "negative_name_copy", "succession"):
            missing[key] = str(err)
    else:
        say(0.4, "OV circuits: copying (eigenvalues)…")
        embedding = loaded.network.get_input_embeddings()
        scale = float(getattr(embedding, "embed_scale", 1.0))
        out["copying"] = scores.copying(w, embedding.weight.detach().float().cpu() * scale)
        names = single_tokens(loaded, NAMES)
        say(0.45, f"OV circuits: {len(names)} names (Wang et al.'s copy score)…")
        out["name_copy"], out["negative_name_copy"] = scores.name_copy(
            loaded, w, names, progress=lambda f: say(0.45 + 0.15 * f, "OV circuits: names…"))
        counted["names"] = len(names)
        say(0.6, "OV circuits: ordinal sequences (Gould et al.'s succession score)…")
        out["succession"], counted["ordinal tokens"] = scores.succession(loaded, w)
    needles = needle_prompts(loaded)
    answers = _retrieval(loaded, needles, out, missing, counted, lambda f: say(0.65 + 0.35 * f, "A needle in a "
                         "haystack: the model answers, every head watched (Wu et al.'s retrieval score)…"))
    say(1.0, "Done.")
    tok = loaded.tokenizer
    shown = lambda row: " ".join(repr(tok.decode([i])) for i in row.tolist())  # noqa: E731 - each token alone
    probes = {f"repeated tokens (row 1 of {BATCH}, ids {ids[0, :4].tolist()}…; random from position {first})":
              shown(ids[0]), f"sink sequence 1 of {SINK_SEQUENCES}": shown(sinks[0]), "names": ", ".join(NAMES),
              "ordinal sequences": "; ".join(f"{k}: {' '.join(v)}" for k, v in ORDINALS.items())}
    if needles:
        probes[f"needle in a haystack 1 of {len(needles)} ({needles[0].haystack_tokens} corpus tokens, depth "
               f"{needles[0].depth:.0%})"] = needles[0].prompt
    if answers:
        probes["the model's answers to the needle prompts"] = "\n".join(
            f"{p.haystack_tokens} tokens, depth {p.depth:.0%}: {a!r}" for p, a in zip(needles, answers, strict=True))
    model_type = getattr(loaded.network.config, "model_type", "")
    return Census(loaded.spec.name, out, missing, probes, counted, published_heads(loaded.spec.name, model_type, out))


def _retrieval(loaded, needles, out, missing, counted, progress) -> list[str]:
    """Wu et al.'s retrieval score into `out`, or its reason into `missing`; the model's answers."""
    if why := why_not(loaded, "generation"):  # an encoder cannot answer
        missing["retrieval"] = f"the needle prompts need an answer the model writes: {why}"
        return []
    score, answers = scores.retrieval(loaded, needles, progress)
    from attention.models.analyses.census_probes import NEEDLE, rouge1_recall

    counted["needle prompts answered"] = sum(rouge1_recall(NEEDLE, a) > 0.5 for a in answers)
    if score is None:
        missing["retrieval"] = (f"{loaded.spec.name} answered none of the {len(needles)} needle prompts (ROUGE-1 "
                                "recall of the needle over 0.5), so no step counts (Wu et al. count none either)")
    else:
        out["retrieval"] = score
    return answers


def metrics_table() -> list[str]:
    """CENSUS_METRICS as a markdown table: each metric's paper, definition, probe, threshold and choices."""
    rows = ["| metric | kind | paper | definition | probe | threshold | choices |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    cell = lambda text: str(text).replace("|", "\\|")  # noqa: E731 - a token such as <|im_start|> keeps its pipes
    rows += ["| " + " | ".join(cell(c) for c in (m.key, m.kind, m.paper, m.definition, m.probe,
                                                  f"{m.threshold:g} ({m.threshold_from})", m.choices)) + " |"
             for m in CENSUS_METRICS]
    return rows + [f"| {key} | | | {cell(why)} | | | |" for key, why in NOT_SCORED.items()]


def census_report(census: Census, top: int = 5) -> list[str]:
    """A short markdown report of one model's census (what docs/heads.md and the page's download hold): the sink
    rate, how many heads pass each metric, and its top heads, named from 1 (L19H7)."""
    from attention.naming import head_name

    L, H = next(iter(census.scores.values())).shape
    counts = census.counts()
    lines = [f"### {census.model}: {L} layers × {H} heads", "",
             f"Sink rate (Gu et al. 2024, ε = 0.3): {census.sink_rate:.1%} of {L * H} heads.", "",
             "| metric | kind | heads above the threshold | top heads (score) |", "| --- | --- | --- | --- |"]
    for m in CENSUS_METRICS:
        if m.key in census.scores:
            best = ", ".join(f"{head_name(layer, head)} {score:.3f}" for layer, head, score in census.top(m.key, top)
                             if score > 0) or "none above 0"
            lines.append(f"| {m.key} | {m.kind} | {counts[m.key]} (> {m.threshold:g}) | {best} |")
    if census.published:
        lines += ["", "The heads the papers name in this model (layer.head counted from 0, as they write them), each "
                  "beside this census's score for its kind:", "",
                  "| kind | paper | head | score | above the threshold |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {p.kind} | {p.paper} | {p.layer}.{p.head} ({head_name(p.layer, p.head)}) | "
                  + (f"{p.key} {p.score:.3f}" if p.score is not None else f"{p.key}: not scored")
                  + f" | {'yes' if p.passed else 'no'} |" for p in census.published]
    lines += [""] + [f"- not scored: {key}: {why}" for key, why in census.missing.items()]
    if census.counted:
        lines.append("- averaged over: " + ", ".join(f"{n} {what}" for what, n in census.counted.items()))
    return lines


def census_document(census: Census) -> str:
    """One model's census as a Markdown document a reader can trace to the papers: the report, then every
    metric's paper, definition, probe, threshold and choices (the page's download)."""
    return "\n".join([f"# The head census of {census.model}", "", "Written by attention.models.head_census: every "
                      "head scored by each paper's metric on that paper's probe. Heads are named from 1 (L19H7 is "
                      "layer 19, head 7).", "", *census_report(census), "", "## The metrics", "",
                      *metrics_table(), ""])


def probe_inputs(loaded: LoadedModel) -> list:
    """The token ids head_census runs the model on ([batch, pos] tensors): the repeated-token rows, the first row
    again (detect_head's pass), the sink sequences, the names and ordinal tokens one token each (their
    effective embeddings), and the needle prompts. What make bench times the census against, as plain forward passes."""
    import torch

    ids, _ = scores.repeated_tokens(loaded, REPEAT, BATCH, SEED)
    singles = [*single_tokens(loaded, NAMES).values(),
               *(i for words in ORDINALS.values() for i in single_tokens(loaded, words).values())]
    needles = [] if why_not(loaded, "generation") else [  # one pass over each prompt (the census decodes its answer)
        loaded.tokenizer(p.prompt, return_tensors="pt")["input_ids"].to(loaded.device) for p in needle_prompts(loaded)]
    return [ids, ids[:1], *sink_sequences(loaded, SINK_SEQUENCES, SINK_TOKENS)[:, None],
            torch.tensor(singles, device=loaded.device)[:, None], *needles]


def probe_result(loaded: LoadedModel):
    """attend() on row 1 of the repeated-token probe: the pattern behind a head's detect_head and prefix-matching
    scores, to show (its tokens decoded one by one as labels)."""
    from attention.models.forward.running import attend

    ids, first = scores.repeated_tokens(loaded, REPEAT, BATCH, SEED)
    return attend(loaded, f"{REPEAT} random tokens, twice (row 1 of the census's probe, seed {SEED})",
                  ids=ids[0].cpu().numpy())
