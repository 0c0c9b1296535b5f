"""Where the corpus page's texts come from: the default corpus, a user's file, or a survey saved earlier.

Files are read once per content (their digest is the cache key); a file that cannot be read gets its
message from attention.models.read_corpus or load_corpus_survey, and the page stops there.
"""

import hashlib

import streamlit as st

from attention.models import (
    CORPUS_FORMATS,
    Corpus,
    CorpusSurvey,
    corpus_limits,
    default_corpus,
    listed_corpora,
    load_corpus_survey,
    open_listed,
    read_corpus,
)
from pages._path import stop_here
from pages._text import md

SURVEY_MAX_MB = 500  # a saved survey larger than this is not taken by the uploader


@st.cache_resource(max_entries=1, show_spinner=False)
def _default() -> Corpus:
    return default_corpus()


@st.cache_resource(max_entries=4, show_spinner=False)
def _read(digest: str, file_name: str, _data: bytes) -> Corpus:
    return read_corpus(file_name, _data)


@st.cache_resource(max_entries=4, show_spinner=False)
def _listed(name: str, changed: int) -> Corpus:
    return open_listed(name)


@st.cache_resource(max_entries=2, show_spinner=False)
def _saved(digest: str, _data: bytes) -> CorpusSurvey:
    return load_corpus_survey(_data)


def corpus_or_stop(source: str, col=st) -> tuple[Corpus, str]:
    """The default corpus ("default"), one the server lists ("listed"), or the one in the file the user uploads
    ("file"; the page stops until there is one, or with the file's message). Returns (the corpus, a key
    naming it for caches)."""
    if source == "listed":
        listed = listed_corpora()
        name = col.selectbox("Corpus", list(listed), key="corpus.listed",
                             help="The files in the folders this server's operator lists.")
        try:
            changed = listed[name].stat().st_mtime_ns  # a file changed since is read again
            return _listed(name, changed), f"listed:{name}:{changed}"
        except (ValueError, OSError, KeyError) as err:
            col.error(f"**{md(name)} cannot be read as a corpus.** {md(err)}")
            stop_here()
    if source == "default":
        corpus = _default()
        col.caption(f"The default corpus: {len(corpus.texts)} short texts written for this app (the seeds' sentences, "
                    "ambiguous words, coreference, names, repeated sequences, lists, numbers, dates, a little code).")
        return corpus, "default"
    file = col.file_uploader("Corpus file", type=[f[1:] for f in CORPUS_FORMATS], key="corpus.file",
                             max_upload_size=30, help=".txt: texts separated by a blank line; .jsonl: a \"text\" "
                                                      "field per line; .csv: a \"text\" column. " + corpus_limits())
    if file is None:
        col.info(f"Upload a corpus. {corpus_limits()}")
        stop_here()
    data = file.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:16]
    try:
        return _read(digest, file.name, data), digest
    except ValueError as err:
        col.error(f"**{md(file.name)} cannot be read as a corpus.** {md(err)}")
        stop_here()


def saved_survey_or_stop() -> CorpusSurvey:
    """A survey the user saved earlier (.safetensors), opened without the model; the page stops until there
    is one, or with the file's message."""
    file = st.file_uploader("Saved survey", type=["safetensors"], key="corpus.saved", max_upload_size=SURVEY_MAX_MB,
                            help="What “Save this survey” downloads, or CorpusSurvey.save writes in Python.")
    if file is None:
        st.info("Upload a survey saved with “Save this survey” (or CorpusSurvey.save in Python).")
        stop_here()
    data = file.getvalue()
    try:
        return _saved(hashlib.sha256(data).hexdigest()[:16], data)
    except ValueError as err:
        st.error(f"**{md(file.name)} cannot be opened.** {md(err)}")
        stop_here()
