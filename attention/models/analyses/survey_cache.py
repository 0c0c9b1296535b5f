"""Corpus surveys kept on disk: each model surveys a corpus once per machine, not once per server process.

The corpus page's first open ran MiniLM over the default corpus's 278 texts in every new server process (and in
each process of `make class`). `cached_survey(loaded, texts)` saves the survey it computes (CorpusSurvey.save,
safetensors, no pickle) under the cache folder (attention.models.forward.registry.cache_dir, `surveys/`) and
reads it back the next time, in a fraction of a second. A saved survey is used only for exactly what made it:

    the model     its name, precision and device, and its files (names, sizes, modification times)
    the corpus    every text
    the settings  k, the sample, the seed, the token limit, sinks included or not
    the code      every module of attention.models (a change to how a survey is made makes a new one), and the
                  versions of torch and transformers

so a cached survey is the survey this code would compute now. A file that cannot be read is computed again; a
cache folder that cannot be written leaves the survey computed (and said nowhere: the page has its result).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
import transformers

from attention.models.analyses.corpus import MAX_TOKENS
from attention.models.analyses.corpus_survey import (
    FORMAT,
    SAMPLE_POINTS,
    TOP_K,
    CorpusSurvey,
    corpus_survey,
    load_corpus_survey,
)
from attention.models.forward.model import LoadedModel
from attention.models.forward.registry import cache_dir

CODE = Path(__file__).resolve().parent.parent  # attention/models: the code a survey is made by


@functools.cache
def code_digest() -> str:
    """sha256 of every module of attention.models (their paths and bytes), once per process."""
    digest = hashlib.sha256()
    for path in sorted(CODE.rglob("*.py")):
        digest.update(str(path.relative_to(CODE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _files(loaded: LoadedModel) -> list:
    """The model's folder's files as (name, size, modification time), or its name where it has no folder."""
    source = str(getattr(loaded.network.config, "_name_or_path", "") or loaded.spec.name)
    folder = Path(source)
    if not folder.is_dir():
        return [source]
    return [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file()]


def survey_key(loaded: LoadedModel, texts, **settings) -> str:
    """The name a survey is saved under: a digest of everything that makes it (module docstring)."""
    weight = next(loaded.network.parameters())
    made_of = {"format": FORMAT, "model": loaded.spec.name, "dtype": str(weight.dtype), "device": str(weight.device),
               "files": _files(loaded), "texts": hashlib.sha256("\0".join(texts).encode()).hexdigest(),
               "settings": settings, "code": code_digest(), "torch": torch.__version__,
               "transformers": transformers.__version__}
    return hashlib.sha256(json.dumps(made_of, sort_keys=True, default=str).encode()).hexdigest()[:32]


def cached_survey(loaded: LoadedModel, texts, *, include_sinks: bool = False,
                  progress: Callable[[float, str], None] | None = None, folder: Path | None = None) -> CorpusSurvey:
    """corpus_survey(loaded, texts, include_sinks=...) with its default settings, read from `folder` (default:
    the cache folder's surveys/) when this model, corpus, code and settings made one there before; else computed
    and saved there."""
    texts = tuple(getattr(texts, "texts", texts))
    settings = {"k": TOP_K, "sample": SAMPLE_POINTS, "seed": 0, "max_tokens": MAX_TOKENS,
                "include_sinks": include_sinks}
    path = (folder or cache_dir() / "surveys") / f"{survey_key(loaded, texts, **settings)}.safetensors"
    if path.is_file():
        try:
            found = load_corpus_survey(path)
            if found.texts == texts:
                return found
        except (ValueError, OSError):
            pass  # not a survey this code can read: made again below
    found = corpus_survey(loaded, texts, progress=progress, **settings)
    _save(found, path)
    return found


def _save(found: CorpusSurvey, path: Path) -> None:
    """Write the survey to `path` whole or not at all (a temporary file renamed: a process reading it meanwhile
    never sees half a file); a folder that cannot be written is left as it is."""
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=path.parent, suffix=".part")
        os.close(handle)
        temporary = Path(name)
        found.save(temporary)
        os.replace(temporary, path)
    except OSError:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
