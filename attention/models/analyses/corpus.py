"""A corpus: many short texts a head is surveyed over (attention.models.analyses.corpus_survey).

The default corpus ships in the package (`default_corpus.txt` beside this file, written by
scripts/write_corpus.py): the app's examples, ambiguous words, coreference, names, repeated sequences, lists,
numbers, dates, a little code and prose, so the survey works offline on first start. A user brings one:

    .txt    one text per paragraph (texts are separated by a blank line)
    .jsonl  one JSON object per line with a "text" field
    .csv    a "text" column (other columns are ignored)

`read_corpus(name, data)` reads any of them from bytes and says, in a ValueError a page can show, what is
wrong with a file that cannot be read. An operator lists folders whose corpus files the server may open
(ATTENTION_EXPLORER_CORPUS_DIRS, as ATTENTION_EXPLORER_MODEL_DIRS lists model folders): `listed_corpora()`;
a visitor picks one by name, never types a path. Limits (stated on the page): at most MAX_TEXTS texts and MAX_BYTES
bytes; a text longer than MAX_TEXT_CHARS characters is cut there (the survey cuts again at MAX_TOKENS
tokens and says how many texts were cut).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

DEFAULT_CORPUS = Path(__file__).with_name("default_corpus.txt")
MAX_TEXTS = 5_000  # texts read from one file; more are refused with a message
MAX_BYTES = 20_000_000  # a larger file is refused before it is read
MAX_TEXT_CHARS = 2_000  # a longer text is cut here
MAX_TOKENS = 128  # tokens of each text the survey reads (a longer text is cut, and the survey counts it)
CORPUS_FORMATS = (".txt", ".jsonl", ".csv")


@dataclass(frozen=True)
class Corpus:
    """Texts to survey, and where they came from."""

    name: str  # the file's name, or "default corpus"
    texts: tuple[str, ...]
    cut: int  # texts cut at MAX_TEXT_CHARS when read


def listed_corpora() -> dict[str, Path]:
    """"<folder>/<file>" -> path, for every .txt, .jsonl and .csv file in the folders an operator lists in
    ATTENTION_EXPLORER_CORPUS_DIRS (os.pathsep between them; subfolders included). A file whose real path lies
    outside its folder (a symbolic link out of it) is left out."""
    found = {}
    for entry in os.environ.get("ATTENTION_EXPLORER_CORPUS_DIRS", "").split(os.pathsep):
        root = Path(entry).expanduser()
        if not entry.strip() or not root.is_dir():
            continue
        real = root.resolve()
        for path in sorted(root.rglob("*")):
            if path.suffix.lower() in CORPUS_FORMATS and path.is_file() and path.resolve().is_relative_to(real):
                found[f"{root.name}/{path.relative_to(root).as_posix()}"] = path
    return found


def open_listed(name: str) -> Corpus:
    """A corpus listed by listed_corpora(), by its name; ValueError when it is not (or no longer) listed."""
    path = listed_corpora().get(name)
    if path is None:
        raise ValueError(f"“{name}” is not a corpus this server lists")
    if path.stat().st_size > MAX_BYTES:
        raise ValueError(f"{name} has {path.stat().st_size:,} bytes; a corpus may have at most {MAX_BYTES:,}")
    return read_corpus(path.name, path.read_bytes())


def corpus_limits() -> str:
    """The limits on a corpus, in a sentence for the page that takes one."""
    return (f"A file of at most {MAX_BYTES // 1_000_000} MB and {MAX_TEXTS:,} texts; a text is read up to "
            f"{MAX_TEXT_CHARS:,} characters and {MAX_TOKENS} tokens.")


def default_corpus() -> Corpus:
    """The corpus shipped with the package (278 texts)."""
    return replace(read_corpus(DEFAULT_CORPUS.name, DEFAULT_CORPUS.read_bytes()), name="the default corpus")


def read_corpus(name: str, data: bytes) -> Corpus:
    """The texts of a .txt, .jsonl or .csv file's bytes (module docstring); ValueError, in words for the user,
    when the file cannot be read: wrong type, too large, not UTF-8, no texts, a malformed line."""
    suffix = Path(name).suffix.lower()
    if suffix not in CORPUS_FORMATS:
        raise ValueError(f"a corpus is a {', '.join(CORPUS_FORMATS)} file, not “{suffix or name}”")
    if len(data) > MAX_BYTES:
        raise ValueError(f"the file has {len(data):,} bytes; a corpus may have at most {MAX_BYTES:,}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"the file is not UTF-8 text (byte {err.start:,} cannot be read)") from None
    if suffix == ".txt":
        texts = [t.strip() for t in text.replace("\r\n", "\n").split("\n\n")]
    elif suffix == ".jsonl":
        texts = _jsonl_texts(text)
    else:
        texts = _csv_texts(text)
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError("the file holds no text")
    if len(texts) > MAX_TEXTS:
        raise ValueError(f"the file holds {len(texts):,} texts; a corpus may have at most {MAX_TEXTS:,}")
    cut = sum(len(t) > MAX_TEXT_CHARS for t in texts)
    return Corpus(name=name, texts=tuple(t[:MAX_TEXT_CHARS] for t in texts), cut=cut)


def _jsonl_texts(text: str) -> list[str]:
    texts = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"line {number} is not JSON ({err.msg})") from None
        except RecursionError:  # nested deeper than Python's recursion limit
            raise ValueError(f"line {number} is JSON nested too deeply to read") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise ValueError(f"line {number} has no \"text\" field holding a string")
        texts.append(record["text"])
    return texts


def _csv_texts(text: str) -> list[str]:
    try:
        rows = csv.DictReader(io.StringIO(text))
        if not rows.fieldnames or "text" not in rows.fieldnames:
            raise ValueError(f"the CSV file has no \"text\" column (its columns: {', '.join(rows.fieldnames or [])})")
        return [row["text"] or "" for row in rows]
    except csv.Error as err:
        raise ValueError(f"the CSV file cannot be read: {err}") from None
