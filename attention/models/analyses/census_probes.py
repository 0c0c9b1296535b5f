"""The probes the head census reads (issue 73), each as its paper builds it where the paper says how, and our choice
stated where it does not (attention.models.analyses.census's METRICS table names each probe's choices):

    repeated_tokens    Olsson et al. 2022: BOS (where the tokenizer has one) + R random tokens + the same R again,
                       a batch of B such rows; tokens uniform over the vocabulary less its special tokens, seeded
    detection patterns TransformerLens 3.9's get_previous_token / duplicate_token / induction_head_detection_pattern,
                       re-written here line for line (transformer_lens/head_detector.py)
    sink_sequences     Gu et al. 2024 average over sequences of T tokens of the training data; here consecutive
                       windows of the bundled corpus, each exactly T tokens with the tokenizer's own special tokens
    needle_prompts     Wu et al. 2024's needle in a haystack: their default needle and question (Kamradt's NIAH), the
                       haystack the bundled corpus's sentences cut to a length in tokens, the needle put between two
                       sentences at a depth; the tokenizer's chat template where it has one, as they prompt chat models
    names, ordinals    single-token names (Wang et al. 2022's IOI names and more) and ordinal sequences (Gould et
                       al. 2023: numbers, number words, days, months, letters), kept where the tokenizer has each as
                       one token after a space

Shapes: B rows, R repeated tokens, n positions.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.forward.model import LoadedModel

NAMES = ("Mary", "John", "Tom", "James", "Dan", "Sid", "Martin", "Amy", "Anna", "Jane", "Mark", "Paul", "Kate",
         "Lisa", "Sarah", "David", "Michael", "Robert", "William", "Richard", "Joseph", "Thomas", "Charles",
         "George", "Peter", "Emma", "Alice", "Laura", "Rachel", "Daniel", "Andrew", "Steven", "Brian", "Kevin",
         "Jason", "Ryan", "Jacob", "Adam", "Eric", "Chris", "Sam", "Ben", "Alex", "Max", "Jack", "Henry", "Mike",
         "Lucy", "Grace", "Rose", "Helen", "Susan", "Karen", "Linda", "Nancy", "Betty", "Emily", "Julia", "Claire",
         "Victoria", "Oliver", "Harry", "Edward", "Frank", "Joe", "Bob", "Jim", "Bill", "Fred", "Carl")
ORDINALS = {  # Gould et al. 2023's tasks: each token's successor is the next in its sequence
    "numbers": tuple(str(i) for i in range(1, 21)),
    "number words": ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    "ordinal words": ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"),
    "days": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "months": ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
               "November", "December"),
    "letters": tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
}


def bos_id(loaded: LoadedModel) -> int | None:
    """The beginning-of-text token a probe starts with (BOS, else an encoder's [CLS]), None where there is none."""
    tok = loaded.tokenizer
    return next((int(i) for i in (getattr(tok, "bos_token_id", None), getattr(tok, "cls_token_id", None))
                 if i is not None), None)


def repeated_tokens(loaded: LoadedModel, repeat: int, batch: int, seed: int) -> tuple[torch.Tensor, int]:
    """((B, first + 2R) ids, first): each row BOS (where there is one) then R random tokens twice; `first` is where
    the random tokens start (1 after a BOS, else 0)."""
    tok = loaded.tokenizer
    special = set(getattr(tok, "all_special_ids", []) or [])
    pool = np.array([i for i in range(len(tok)) if i not in special])
    rng = np.random.default_rng(seed)
    rows = np.stack([rng.choice(pool, size=repeat, replace=False) for _ in range(batch)])
    bos = bos_id(loaded)
    head = np.full((batch, 0 if bos is None else 1), bos if bos is not None else 0)
    ids = np.concatenate([head, rows, rows], axis=1)
    return torch.as_tensor(ids, dtype=torch.long, device=loaded.device), head.shape[1]


def previous_token_pattern(tokens: torch.Tensor) -> torch.Tensor:
    """TransformerLens's get_previous_token_head_detection_pattern: ones on the diagonal below the main one."""
    n = tokens.shape[-1]
    pattern = torch.zeros(n, n)
    pattern[1:, :-1] = torch.eye(n - 1)
    return torch.tril(pattern)


def duplicate_token_pattern(tokens: torch.Tensor) -> torch.Tensor:
    """TransformerLens's get_duplicate_token_head_detection_pattern: 1 where key j holds query i's token, j < i."""
    row = tokens.reshape(-1).cpu().numpy()
    same = np.equal.outer(row, row).astype(int)
    np.fill_diagonal(same, 0)
    return torch.tril(torch.as_tensor(same).float())


def induction_pattern(tokens: torch.Tensor) -> torch.Tensor:
    """TransformerLens's get_induction_head_detection_pattern: the duplicate pattern moved one key to the right
    (the token after the earlier occurrence), its first column zero."""
    duplicate = duplicate_token_pattern(tokens)
    shifted = torch.roll(duplicate, shifts=1, dims=1)
    return torch.tril(torch.cat((torch.zeros(duplicate.shape[0], 1), shifted[:, 1:]), dim=1))


DETECTION_PATTERNS = {"previous_token_head": previous_token_pattern, "duplicate_token_head": duplicate_token_pattern,
                      "induction_head": induction_pattern}


def sink_sequences(loaded: LoadedModel, count: int, length: int) -> torch.Tensor:
    """(count, length) ids: Gu et al. 2024 average α over sequences of `length` tokens of the training data; here the
    bundled corpus's texts, joined with spaces and cut into consecutive windows, each given the special tokens the
    tokenizer adds to a text (BOS, or [CLS] ... [SEP]) so that every sequence is exactly `length` long."""
    from attention.models.analyses.corpus import default_corpus

    tok = loaded.tokenizer
    prefix, suffix = special_ends(tok)
    stream = tok(" ".join(default_corpus().texts), add_special_tokens=False)["input_ids"]
    size = length - len(prefix) - len(suffix)
    if len(stream) < count * size:
        raise ValueError(f"the bundled corpus has {len(stream):,} tokens here, fewer than {count} x {size}")
    rows = [prefix + stream[i * size:(i + 1) * size] + suffix for i in range(count)]
    return torch.tensor(rows, dtype=torch.long, device=loaded.device)


def special_ends(tok) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before and after a text's own ([BOS], or [CLS] and [SEP]): read
    from how it tokenizes one word with and without them."""
    with_them = tok("x")["input_ids"]
    own = tok("x", add_special_tokens=False)["input_ids"]
    for k in range(len(with_them) - len(own) + 1):
        if with_them[k:k + len(own)] == own:
            return with_them[:k], with_them[k + len(own):]
    return [], []


def single_tokens(loaded: LoadedModel, words) -> dict[str, int]:
    """{word: its id} for the words the tokenizer has as one token after a space (" Mary")."""
    found = {}
    for word in words:
        ids = loaded.tokenizer(" " + word, add_special_tokens=False)["input_ids"]
        if len(ids) == 1:
            found[word] = int(ids[0])
    return found


NEEDLE = "The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day."
QUESTION = "What is the best thing to do in San Francisco?"  # Wu et al.'s default needle and question (Kamradt's)
HAYSTACK_TOKENS, DEPTHS = (250, 500, 1000), (0.1, 0.5, 0.9)  # theirs: 1K-50K tokens, depths 0-100 %
NEEDLE_ROOM = 200  # tokens a prompt needs beside its haystack: the needle, the question, a chat template, 50 answered


@dataclass(frozen=True)
class NeedleProbe:
    """One needle-in-a-haystack prompt: its text as the model reads it, and where it was cut and put."""

    prompt: str
    haystack_tokens: int  # the corpus's tokens around the needle (at least HAYSTACK_TOKENS' entry)
    depth: float  # where the needle sits in the haystack, 0 to 1


def needle_prompts(loaded: LoadedModel, lengths=HAYSTACK_TOKENS, depths=DEPTHS) -> list[NeedleProbe]:
    """Wu et al.'s prompts: the corpus's sentences until `length` tokens (the lengths the model's context holds with
    NEEDLE_ROOM to spare), NEEDLE between two of them at `depth`,
    then "Based on the content of the book, Question: QUESTION\nAnswer:" (their wording). A tokenizer with a chat
    template gets it as one user turn, the book in <book> tags and the assistant's turn opened (their chat models'
    prompt); else the plain text, the tokenizer's own BOS added as it adds it."""
    from attention.models.analyses.corpus import default_corpus

    tok = loaded.tokenizer
    sentences = [t.strip() for t in default_corpus().texts if t.strip()]
    sizes = np.cumsum([len(tok(" " + t, add_special_tokens=False)["input_ids"]) for t in sentences])
    room = loaded.spec.token_limit(loaded.device) - NEEDLE_ROOM  # the needle, the question, the answer
    probes = []
    for length in (n for n in lengths if n <= room):  # GPT-2's 1,024 tokens hold 250 and 500, not 1,000
        n = int(np.searchsorted(sizes, length)) + 1  # sentences until the haystack has `length` tokens
        for depth in depths:
            at = round(n * depth)
            book = " ".join(sentences[:at] + [NEEDLE] + sentences[at:n])
            ask = f"Based on the content of the book, Question: {QUESTION}\nAnswer:"
            if getattr(tok, "chat_template", None):
                prompt = tok.apply_chat_template([{"role": "user", "content": f"<book>{book}</book>\n{ask}"}],
                                                 tokenize=False, add_generation_prompt=True)
                bos = getattr(tok, "bos_token", None)
                if bos and prompt.startswith(bos) and special_ends(tok)[0]:  # the tokenizer adds it again
                    prompt = prompt[len(bos):]
            else:
                prompt = f"{book}\n{ask}"
            probes.append(NeedleProbe(prompt, int(sizes[n - 1]), depth))
    return probes


def needle_span(ids, tokenizer) -> tuple[int, int]:
    """(start, end) of NEEDLE in `ids`: its tokens found exactly (after a space, or as a text's start), else Wu
    et al.'s find_needle_idx, the first window of its length holding over 90 % of its distinct tokens (a rule that
    can start a token early, hence the exact match first); (-1, -1) where neither finds it."""
    ids = list(ids)
    for spelled in (" " + NEEDLE, NEEDLE):
        want = tokenizer(spelled, add_special_tokens=False)["input_ids"]
        for i in range(len(ids) - len(want) + 1):
            if ids[i:i + len(want)] == want:
                return i, i + len(want)
    want = tokenizer(NEEDLE, add_special_tokens=False)["input_ids"]
    for i in range(len(ids)):
        if len(set(ids[i:i + len(want)]) & set(want)) / len(set(want)) > 0.9:
            return i, i + len(want)
    return -1, -1


def rouge1_recall(reference: str, answer: str) -> float:
    """ROUGE-1 recall (Lin 2004), rouge_score's default tokens (lower case, runs of letters and digits, no
    stemming): the share of the reference's words, counted with repeats, that the answer has."""
    words = lambda text: re.sub(r"[^a-z0-9]+", " ", text.lower()).split()  # noqa: E731
    ref, got = Counter(words(reference)), Counter(words(answer))
    return sum(min(c, got[w]) for w, c in ref.items()) / max(1, sum(ref.values()))
