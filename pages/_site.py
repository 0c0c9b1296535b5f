"""Every page of the app, once: its file, title, icon, section of the sidebar, and the line Home shows for it.

app.py builds the navigation from this list and pages/home.py lists it; a new page is one entry here.
"""

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from attention.classroom.routes import WHOLE_PATH, minutes


@dataclass(frozen=True)
class PageEntry:
    """One page as the navigation, Home and the path show it."""

    path: str  # relative to the repository root, as st.Page and st.page_link take it
    title: str
    icon: str  # a Material icon, ":material/name:"
    line: str  # what Home says about it (markdown): what it teaches

    @property
    def minutes(self) -> int:
        """About how long a learner spends on it, as measured (attention.classroom.routes)."""
        return minutes(Path(self.path).stem)


HOME = PageEntry("pages/home.py", "Home", ":material/home:", "")

SECTIONS: dict[str, tuple[PageEntry, ...]] = {
    "Toy examples": (
        PageEntry("pages/lookup.py", "Lookup: hard vs soft", ":material/search:",
                  "A dictionary answers *apple*; attention also answers *fruit*."),
        PageEntry("pages/self_attention.py", "Step by step: self-attention", ":material/stairs:",
                  "“Thinking Machines”: embeddings → Q, K, V → scores → ÷√d_k → softmax → weighted sum."),
        PageEntry("pages/scaling.py", "Why scale by √d_k", ":material/straighten:",
                  "Score variance grows with d; softmax saturates without scaling."),
        PageEntry("pages/scoring.py", "Scoring functions", ":material/functions:",
                  "Dot, scaled dot, multiplicative, reduced-rank, additive."),
        PageEntry("pages/multihead.py", "Heads, masks, cross-attention", ":material/view_column:",
                  "“Hang them, not let them go”, causal masks and a toy translation."),
        PageEntry("pages/toy_ambiguity.py", "Ambiguity in a toy model", ":material/alt_route:",
                  "Hand-built “bank” and “it” that attention resolves."),
        PageEntry("pages/positions.py", "Word order and positions", ":material/format_list_numbered:",
                  "Shuffle a sentence; sinusoidal positions; rotary positions in 2-D and in SmolLM2."),
        PageEntry("pages/bottleneck.py", "The bottleneck, and attention", ":material/compress:",
                  "Two trained GRUs reverse digits: one context vector fails on long inputs; attention, which "
                  "reads the input again at every step, does not."),
    ),
    "Pretrained models": (
        PageEntry("pages/model_heads.py", "Model heads", ":material/grid_view:",
                  "Every layer × head of MiniLM or SmolLM2 on your sentence, offline."),
        PageEntry("pages/inside_head.py", "Inside one head", ":material/calculate:",
                  "q, each k, q⊙k, scores, softmax, output of a real head."),
        PageEntry("pages/ambiguous_words.py", "Ambiguous words", ":material/compare_arrows:",
                  "“bank”, “it”, “plant” in two sentences, head by head."),
        PageEntry("pages/head_atlas.py", "Head atlas", ":material/map:",
                  "Entropy, [SEP] sinks, previous-token heads (Clark et al. 2019)."),
        PageEntry("pages/head_census.py", "What each head is", ":material/category:",
                  "Every head scored by the papers' own metrics on their probes: induction, previous-token, "
                  "duplicate-token, sink, copying, name-mover, copy-suppression and successor heads."),
        PageEntry("pages/predictions.py", "Predictions and head effects", ":material/target:",
                  "“The capital of France is” → ?: generate step by step, then remove each head to see which "
                  "matter."),
        PageEntry("pages/what_heads_do.py", "What heads do", ":material/hub:",
                  "Which heads write the predicted token directly, the logit lens layer by layer, patching a "
                  "corrupted prompt, and the previous-token head an induction head reads."),
        PageEntry("pages/compare.py", "Compare two models", ":material/difference:",
                  "One text, two models or two precisions: which heads changed, and how, head by head."),
        PageEntry("pages/image_model.py", "Attention in an image model", ":material/image:",
                  "A vision transformer reads a picture as patches: click one to see where it looks, every head at "
                  "once, [CLS], attention rollout, and the high-norm tokens registers replace."),
        PageEntry("pages/corpus.py", "A head across a corpus", ":material/scatter_plot:",
                  "Every head over 278 texts: a map of all heads, each head's top examples anywhere in the corpus, "
                  "its queries and keys in one picture."),
        PageEntry("pages/batch.py", "A batch of prompts", ":material/stacked_bar_chart:",
                  "For researchers: the logit difference, each head's direct share and residual patching over 100 IOI "
                  "prompt pairs or a file of yours, each prompt's own number kept, with the mean and its spread."),
    ),
    "Class": (
        PageEntry("pages/classroom.py", "A class", ":material/groups:",
                  "Join a class with the code on the board; or open one as its teacher, choose a lesson that fits "
                  "the hour, and see the class's answers as they arrive."),
        PageEntry("pages/board.py", "A class's board", ":material/cast:",
                  "What a teacher projects: the class's code and link in large type, then the class's answers to the "
                  "question the teacher chose. No names, no key."),
        PageEntry("pages/handout.py", "A handout", ":material/print:",
                  "A lesson's questions to print; for its teacher, the answer key, with what each wrong choice "
                  "reveals."),
    ),
}


PATH = tuple(f"pages/{name}.py" for name in WHOLE_PATH)  # the order Home proposes (a class may follow another)


MOVED = {"circuits": "pages/what_heads_do.py"}  # an address a page had before (its URL name) -> the page now


def moved_to(path: str) -> None:
    """A page's old address: the page it became, with the link's settings (its query parameters) kept."""
    st.switch_page(path, query_params=dict(st.query_params))


def entry(path: str) -> PageEntry:
    """The entry of a page by its path."""
    return next(e for e in (HOME, *(e for entries in SECTIONS.values() for e in entries)) if e.path == path)


def page_path(url_path: str) -> str | None:
    """The path of a page of the site by its URL name ("lookup" -> "pages/lookup.py"); None for Home and for an
    address that is no page's (an old one, MOVED)."""
    path = f"pages/{url_path}.py"
    return path if url_path and any(e.path == path for entries in SECTIONS.values() for e in entries) else None

