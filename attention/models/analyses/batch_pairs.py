"""A data set of prompt pairs for analyses over a batch: each row a clean prompt, its corrupted twin, and the
target and foil next tokens whose logit difference m = logit(target) − logit(foil) the analyses read.

    >>> pairs = ioi_pairs(model.tokenizer, 100, seed=0)          # indirect-object identification, generated
    >>> pairs[0]
    PromptPair(clean='When Mary and John went to the store, John gave a drink to',
               corrupted='When Mary and John went to the store, Lisa gave a drink to', target=' Mary', foil=' John')
    >>> pairs = read_prompt_pairs("ioi.jsonl")                     # or .csv: columns clean, corrupted, target, foil

The IOI generator (Wang et al. 2022, "Interpretability in the wild") fills a template with an indirect object IO,
a subject S named twice (S1, S2), a place and an object; the answer is IO (the target) and the foil is S:

    ABBA  "When {IO} and {S} went to the {place}, {S} gave a {object} to"  -> " IO", not " S"
    BABA  "When {S} and {IO} went to the {place}, {S} gave a {object} to"  -> " IO", not " S"

Corruptions (`corruption=`):
    "abc"   ABB -> ABC, the default: S2 replaced by a third name C. A and B stay, so the target and the foil
            keep their meaning, and the prompts differ at one position only (S2): the model has no repeated name
            to rule out, and m falls to about 0. This is the corruption most activation-patching work on IOI
            calls "ABC".
    "xyz"   all three names replaced by three fresh ones, the ABC distribution of Wang et al.'s own code
            ("ABB->XYZ"): the prompts differ from S1 on
    "swap"  IO and S exchanged everywhere: the model now prefers the foil, m_corrupt ≈ −m_clean

Every name, place and object is one token of the model's tokenizer after a space (" Mary"), checked here;
words that are not are skipped (`skipped` lists them). So every prompt of one template has the same number of
tokens, and positions align across the batch: what patching by position needs. The generator is seeded
(random.Random(seed)): the same seed and tokenizer give the same rows.
"""

from __future__ import annotations

import csv
import io
import json
import random
from dataclasses import dataclass
from pathlib import Path

PAIR_COLUMNS = ("clean", "corrupted", "target", "foil")
PAIR_FORMATS = (".jsonl", ".csv")
CORRUPTIONS = {
    "abc": "S2 replaced by a third name C (ABB -> ABC): the prompts differ at S2 only",
    "xyz": "all three names replaced by fresh ones (Wang et al.'s ABC distribution, ABB -> XYZ)",
    "swap": "IO and S exchanged everywhere (ABB -> BAA): the model prefers the foil",
}
IOI_TEMPLATES = (  # {first} and {second} are IO and S (ABBA) or S and IO (BABA); {S} is S2
    "When {first} and {second} went to the {place}, {S} gave a {object} to",
    "After {first} and {second} went to the {place}, {S} gave a {object} to",
    "While {first} and {second} were working at the {place}, {S} gave a {object} to",
    "Then, {first} and {second} went to the {place}. {S} gave a {object} to",
)
ORDERS = ("ABBA", "BABA")  # ABBA: IO named first; BABA: S named first
NAMES = ("Mary", "John", "Alice", "Bob", "James", "Michael", "Robert", "David", "William", "Richard", "Thomas",
         "Charles", "Daniel", "Matthew", "Anthony", "Mark", "Paul", "Steven", "Andrew", "Kevin", "Brian", "George",
         "Edward", "Ryan", "Jacob", "Eric", "Peter", "Jack", "Sarah", "Karen", "Nancy", "Lisa", "Betty", "Emily",
         "Anna", "Laura", "Kate", "Rachel", "Emma", "Jane", "Amy", "Helen", "Susan", "Linda", "Maria", "Jessica")
PLACES = ("store", "park", "school", "garden", "hospital", "station", "office", "restaurant", "market", "beach",
          "house", "library", "church", "kitchen")
OBJECTS = ("drink", "ring", "book", "bone", "kiss", "bag", "ball", "snack", "computer", "gift", "letter",
           "necklace")  # none starts with a vowel: the templates say "a {object}"


@dataclass(frozen=True)
class PromptPair:
    """One row: the clean prompt, its corrupted twin, and the two next tokens m compares (with their space)."""

    clean: str
    corrupted: str
    target: str  # the next token the clean prompt should get (" Mary")
    foil: str  # the one it should not (" John")


@dataclass(frozen=True)
class PromptPairs:
    """The rows of a data set and where they came from. A sequence: len(pairs), pairs[i], iteration."""

    rows: tuple[PromptPair, ...]
    source: str  # "ioi (seed 0, abc)", or the file's name
    corruption: str = ""  # what the corrupted prompts change, in words ("" for a file: its own)
    skipped: tuple[str, ...] = ()  # generator words skipped: not one token of the tokenizer

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        return PromptPairs(self.rows[i], self.source, self.corruption, self.skipped) if isinstance(i, slice) \
            else self.rows[i]

    def __iter__(self):
        return iter(self.rows)


def single_tokens(tokenizer, words) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(kept, skipped): the words that are one token after a space (" Mary"), and the others."""
    kept, skipped = [], []
    for word in words:
        one = len(tokenizer(" " + word, add_special_tokens=False)["input_ids"]) == 1
        (kept if one else skipped).append(word)
    return tuple(kept), tuple(skipped)


def ioi_pairs(tokenizer, n: int = 100, *, seed: int = 0, corruption: str = "abc", templates=IOI_TEMPLATES[:1],
              orders=ORDERS, names=NAMES, places=PLACES, objects=OBJECTS) -> PromptPairs:
    """n IOI rows from `templates` (by default the first: one template, so positions align across rows), each
    with a random order from `orders`, names, place and object (module docstring); corrupted as `corruption`
    says (a key of CORRUPTIONS). One seed gives the same clean rows whatever the corruption: the corrupted
    rows' other names are drawn apart. ValueError when fewer than five names (three for "abc" and "swap") are single
    tokens of this tokenizer."""
    if corruption not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {corruption!r}; choose one of {', '.join(CORRUPTIONS)}")
    if unknown := [o for o in orders if o not in ORDERS]:
        raise ValueError(f"unknown order {unknown[0]!r}; choose among {', '.join(ORDERS)}")
    names, bad_names = single_tokens(tokenizer, names)
    places, bad_places = single_tokens(tokenizer, places)
    objects, bad_objects = single_tokens(tokenizer, objects)
    need = 5 if corruption == "xyz" else 3
    if len(names) < need or not places or not objects:
        raise ValueError(f"this tokenizer makes single tokens of {len(names)} names, {len(places)} places and "
                         f"{len(objects)} objects: the generator needs {need}, 1 and 1 (pass names=, places=, "
                         "objects= it reads as one token each after a space)")
    rng = random.Random(seed)  # the clean rows: the same for every corruption of one seed
    others = random.Random(f"{seed} corrupted")  # the corruption's own names, drawn apart
    rows = []
    for _ in range(n):
        template, order = rng.choice(tuple(templates)), rng.choice(tuple(orders))
        io_, s = rng.sample(names, 2)
        slots = dict(place=rng.choice(places), object=rng.choice(objects))
        drawn = [io_, s, *others.sample([x for x in names if x not in (io_, s)], need - 2)]  # then C, or X, Y, Z
        clean = _fill(template, order, io_, s, s, slots)
        if corruption == "abc":
            corrupted = _fill(template, order, io_, s, drawn[2], slots)
        elif corruption == "xyz":
            corrupted = _fill(template, order, *drawn[2:5], slots)
        else:
            corrupted = _fill(template, order, s, io_, io_, slots)
        rows.append(PromptPair(clean, corrupted, " " + io_, " " + s))
    return PromptPairs(tuple(rows), f"ioi (seed {seed}, {corruption})", CORRUPTIONS[corruption],
                       bad_names + bad_places + bad_objects)


def _fill(template: str, order: str, io_: str, s1: str, s2: str, slots: dict) -> str:
    """The template with IO and S1 in `order`'s places and S2 as given."""
    first, second = (io_, s1) if order == "ABBA" else (s1, io_)
    return template.format(first=first, second=second, S=s2, **slots)


SHOWN_PROBLEMS = 5  # lines named in the error of a file that cannot be read


def read_prompt_pairs(name: str | Path, data: bytes | None = None) -> PromptPairs:
    """The rows of a .jsonl file (one object per line with clean, corrupted, target, foil) or a .csv file (those
    four columns; others are ignored): read from `name`, or from `data` (an upload's bytes) named `name`.
    ValueError, saying every line that cannot be read (a missing column or an empty field, a line that is not
    JSON; the first SHOWN_PROBLEMS of them named), or text that is not UTF-8."""
    suffix = Path(name).suffix.lower()
    if suffix not in PAIR_FORMATS:
        raise ValueError(f"{Path(name).name}: prompt pairs are read from {' or '.join(PAIR_FORMATS)} files")
    try:
        text = (Path(name).read_bytes() if data is None else data).decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{Path(name).name} is not UTF-8 text (byte {err.start} cannot be read)") from err
    file, problems = Path(name).name, []
    if suffix == ".jsonl":
        records = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append((i, json.loads(line)))
                except json.JSONDecodeError as err:
                    problems.append((i, f"line {i} is not JSON ({err.msg}, column {err.colno})"))
    else:
        try:
            records = list(enumerate(csv.DictReader(io.StringIO(text)), 2))  # line 1 is the header
        except csv.Error as err:  # a field over csv's size limit
            raise ValueError(f"{file}: {err}") from err
    rows = []
    for line, record in records:
        missing = PAIR_COLUMNS if not isinstance(record, dict) else [
            c for c in PAIR_COLUMNS if not isinstance(record.get(c), str) or not record[c].strip()]
        if missing:
            problems.append((line, f"line {line}: " + (
                f"no {', '.join(missing)} (each row needs {', '.join(PAIR_COLUMNS)})" if isinstance(record, dict)
                else f"not an object with {', '.join(PAIR_COLUMNS)}")))
        else:
            rows.append(PromptPair(*(record[c] for c in PAIR_COLUMNS)))
    problems = [said for _, said in sorted(problems)]  # in the file's order
    if len(problems) == 1:
        raise ValueError(f"{file}, {problems[0]}")
    if problems:  # every line that cannot be read, not only the first (the first few named)
        raise ValueError(f"{file}: {len(problems)} lines cannot be read: {'; '.join(problems[:SHOWN_PROBLEMS])}"
                         + (f"; and {len(problems) - SHOWN_PROBLEMS} more" if len(problems) > SHOWN_PROBLEMS else ""))
    if not rows:
        raise ValueError(f"{Path(name).name} holds no prompt pairs")
    return PromptPairs(tuple(rows), Path(name).name)


def write_prompt_pairs(pairs: PromptPairs) -> str:
    """The rows as .jsonl text (what read_prompt_pairs reads back)."""
    return "".join(json.dumps(dict(zip(PAIR_COLUMNS, (r.clean, r.corrupted, r.target, r.foil), strict=True)),
                              ensure_ascii=False) + "\n" for r in pairs)
