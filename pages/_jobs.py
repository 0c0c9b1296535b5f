"""Loading models and running them for the model pages: cached, shared between sessions, with progress.

Models are cached once per process with st.cache_resource (LoadedModel serialises its forward passes
with a lock, so sessions can share it). Slow work (a forward pass over thousands of tokens, a survey of
every head, a scan) is cached as a Job: st.cache_resource hands every session asking for the same work
the same Job, which computes in its own thread and reports progress that each page draws as a bar. A Job
that failed is not kept (`validate`), so the next rerun tries again. A page asks for any analysis of
attention.models the same way, naming the function it calls:

    effects = result_of(head_ablation, "Ablating every head…", loaded, att, contrast, ablation="zero")

and the work is known by its arguments themselves (cache_key): a model by its name and precision, a result
by its serial, so results of two precisions are never mixed. The models and results are cached by their
ModelChoice (its name and precision, attention.focus); a result opened from a file by a SavedResult.

Results are read-only numpy arrays shared by every session. Memory: a result stores q, k, v and the
hidden states (they grow as n, not n²); long texts get a cache of their own with room for one entry,
so a 4,096-token SmolLM2 result (~0.8 GB) never sits beside three others.
"""

import contextvars
import dataclasses
import gc
import hashlib
import inspect
import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

import serving
from attention.models import (
    BUNDLED,
    REQUESTER,
    Corpus,
    LoadedModel,
    ModelAttention,
    ModelChoice,
    ModelRefused,
    ModelUnavailable,
    Progress,
    attend,
    cached_survey,
    load_model,
    load_npz,
    model_label,
    own_attention,
    why_not,
)
from pages._path import stop_here
from pages._text import md

LOG = logging.getLogger("attention_explorer")  # a failed job's traceback, for the operator
LONG_TEXT_CHARS = 2_000  # above this a text counts as long (~500 tokens): its results share one cache slot
HUGE_TEXT_CHARS = 8_000  # above this (~2,000 tokens, a SmolLM2 result of ~0.4 GB) collect garbage first


class Job:
    """A computation shared by every session that asks for it: it runs in its own thread and reports
    how far it got, so each page can draw a progress bar while it waits."""

    def __init__(self, work: Callable[[Callable[[float, str], None]], object], message: str):
        self.fraction, self.message = 0.0, message
        self.result, self.error = None, None
        self._done = threading.Event()
        asking = contextvars.copy_context()  # the session that asked (REQUESTER) goes with the work
        threading.Thread(target=asking.run, args=(self._run, work), daemon=True, name="attention-explorer-job").start()

    def _run(self, work) -> None:
        serving.short_work_threads()  # not the count a scan running elsewhere in the process set
        try:
            self.result = work(self._progress)
        except Exception as err:  # handed to the page that waits for it
            self.error = err
        finally:
            self._done.set()

    def _progress(self, fraction: float, message: str) -> None:
        self.fraction, self.message = fraction, message

    def wait(self, seconds: float) -> bool:
        return self._done.wait(seconds)

    def usable(self) -> bool:
        """False once it has failed: st.cache_resource then drops it and the next call starts again."""
        return not (self._done.is_set() and self.error is not None)


# The progress bar, redrawn only when it moved, at most twice a second, and without Streamlit's sliding
# transition: on 2 cores the browser re-rendering the page five times a second and animating the bar all the
# while took ~1 s of CPU from a 9-s SmolLM2 pass at 2,048 tokens (benchmarks/NOTES.md).
PROGRESS_EVERY_S = 0.5
NO_SLIDE = "<style>[data-testid='stProgress'] * { transition: none !important; }</style>"


def follow(job: Job):
    """Wait for a job, drawing a progress bar if it takes more than a moment; its error is raised here."""
    if not job.wait(0.3):
        st.html(NO_SLIDE)  # style only: Streamlit puts it in the page without a visible element
        shown = (0.0, job.message)
        bar = st.progress(0.0, text=job.message)
        while not job.wait(PROGRESS_EVERY_S):
            now = (min(1.0, round(job.fraction, 2)), job.message)
            if now != shown:
                bar.progress(now[0], text=now[1])
                shown = now
        bar.empty()
    if job.error is not None:
        raise job.error
    return job.result


def follow_or_stop(job: Job):
    """A job's result. A ValueError (the user's input cannot be read) becomes a warning that ends the page;
    any other failure of the work (a model that raises inside its forward pass, memory running out) an error
    box that says so, its traceback going to the server's log: the page ends, the server goes on serving,
    and the failed job is not kept, so the next run tries again."""
    try:
        return follow(job)
    except ValueError as err:
        st.warning(md(err))
        stop_here()
    except Exception as err:
        LOG.error("%s failed", job.message, exc_info=err)
        out_of_memory = type(err).__name__ in ("MemoryError", "OutOfMemoryError")
        st.error(f"**{md(job.message.rstrip('…'))} failed: {'memory ran out' if out_of_memory else 'the work raised'} "
                 f"{type(err).__name__}.** {md(str(err)[:300])}\n\n"
                 + ("Try a shorter text or a smaller precision. " if out_of_memory else "")
                 + "Nothing else is affected: other texts, models and pages still work (the server's log has the "
                 "details).")
        stop_here()


@dataclass(frozen=True)
class SavedResult:
    """A result opened from a .npz file (what the pages show instead of running a model)."""

    digest: str  # the first 16 hex digits of the file's sha256


Source = ModelChoice | SavedResult  # what a model page reads: a model it runs, or a result opened from a file


@st.cache_resource(max_entries=4, show_spinner=False)
def cached_model(choice: ModelChoice) -> LoadedModel:
    """The model chosen, in the precision chosen, loaded once per process."""
    return load_model(choice.name, dtype=choice.dtype, paths=False)  # a name typed in the app is never a path


def _attention_job(text: str, decoder_text: str | None, loaded: LoadedModel) -> Job:
    def work(progress):
        # The result this one replaces in the cache may still be held by the page run that showed it: a
        # run's namespace is a reference cycle (its functions point back at it), freed only by the cyclic
        # collector, whose oldest generation runs rarely. For huge texts collect now, not after 0.8 GB
        # more is allocated (a full collection costs ~0.3 s with both models loaded: not worth it below).
        if len(text) > HUGE_TEXT_CHARS:
            gc.collect()
        return attend(loaded, text, decoder_text=decoder_text, progress=progress)
    return Job(work, f"Running {model_label(loaded.spec.name)}…")


@st.cache_resource(max_entries=4, show_spinner=False, validate=Job.usable)
def _short_attention(choice: ModelChoice, text: str, decoder_text: str | None, _loaded: LoadedModel) -> Job:
    return _attention_job(text, decoder_text, _loaded)


@st.cache_resource(max_entries=1, show_spinner=False, validate=Job.usable)
def _long_attention(choice: ModelChoice, text: str, decoder_text: str | None, _loaded: LoadedModel) -> Job:
    return _attention_job(text, decoder_text, _loaded)


@st.cache_resource(max_entries=16, show_spinner=False, validate=Job.usable)
def _analysis(analysis: str, key: tuple, message: str, _work: Callable[[Progress], object]) -> Job:
    return Job(_work, message)


def cache_key(value) -> Hashable:
    """How the shared caches know one argument of an analysis, made from the argument itself (a hand-copied
    tuple could disagree with the call): a model by its name and precision, a result by its serial (each result
    is numbered when made: one text read in two precisions gives two), any other record (a contrast, a token
    choice) by its fields, an array, an image or bytes by a digest of their contents, plain values as they are.
    TypeError for anything else: say here how to know it."""
    if isinstance(value, LoadedModel):
        return "model", value.spec.name, value.check.dtype if value.check is not None else str(value.device)
    if isinstance(value, ModelAttention):
        return "result", value.serial
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a contrast, a token choice: by fields
        return type(value).__name__, *(cache_key(getattr(value, f.name)) for f in dataclasses.fields(value))
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, tuple | list):
        return tuple(cache_key(v) for v in value)
    if isinstance(value, bytes | bytearray):
        return "bytes", hashlib.sha256(value).hexdigest()
    if hasattr(value, "tobytes"):  # a numpy array or scalar, a PIL image
        shape = getattr(value, "shape", None) or getattr(value, "size", None)
        return type(value).__name__, str(shape), hashlib.sha256(value.tobytes()).hexdigest()
    raise TypeError(f"no cache key for a {type(value).__name__}: say in pages/_jobs.cache_key how to know one")


def shared(analysis: Callable, message: str, *args, **kwargs) -> Job:
    """`analysis(*args, **kwargs)` as a Job that every session asking with the same arguments shares (each
    known by cache_key). `progress` is passed when `analysis` takes it."""
    reports = "progress" in inspect.signature(analysis).parameters
    key = (tuple(cache_key(a) for a in args), tuple(sorted((k, cache_key(v)) for k, v in kwargs.items())))

    def work(progress: Progress):
        return analysis(*args, **kwargs, **({"progress": progress} if reports else {}))
    return _analysis(f"{analysis.__module__}.{analysis.__qualname__}", key, message, work)


def result_of(analysis: Callable, message: str, *args, **kwargs):
    """What `analysis(*args, **kwargs)` returns, computed once for every session asking with the same
    arguments (shared()), with a progress bar while it runs; a ValueError (the input cannot be read) ends the
    page with its message."""
    return follow_or_stop(shared(analysis, message, *args, **kwargs))


def result_or_none(analysis: Callable, message: str, loaded: LoadedModel, *args, needs: tuple[str, ...] = (),
                   **kwargs):
    """As result_of, but where the analysis is not defined for this model or input, a warning saying why and None,
    and the page goes on: beside a second model's result, or the rest of the page. What the model lacks is read
    from its capabilities first (`needs`: the features the analysis asks for, attention.models.FEATURES), so no
    job starts to find it out; what depends on the input still comes as the analysis's ValueError. Any other
    failure ends the page as follow_or_stop says."""
    for feature in needs:
        reason = why_not(loaded, feature)
        if reason is not None:
            st.warning(md(reason))
            return None
    return result_or_said(analysis, message, loaded, *args, **kwargs)


def result_or_said(analysis: Callable, message: str, *args, **kwargs):
    """As result_of, but a ValueError (the analysis is not defined for this input or model) is said in a warning
    and None returned, and the page goes on; any other failure ends the page as follow_or_stop says."""
    job = shared(analysis, message, *args, **kwargs)
    try:
        return follow(job)
    except ValueError as err:
        st.warning(md(err))
        return None
    except Exception:
        return follow_or_stop(job)  # the job is done: its error is said and the page ends


@st.cache_resource(max_entries=2, show_spinner=False, validate=Job.usable)
def corpus_survey_job(choice: ModelChoice, corpus_key: str, include_sinks: bool, _loaded: LoadedModel,
                      _corpus: Corpus) -> Job:
    """A corpus survey, one per (model, corpus, setting), shared by the sessions asking for it; read from the disk
    where this machine made it before (attention.models.cached_survey). Two are kept: each holds a sample of
    queries and keys (about 15 MB for MiniLM, 70 MB for SmolLM2)."""
    return Job(lambda progress: cached_survey(_loaded, _corpus, include_sinks=include_sinks, progress=progress),
               f"Surveying {len(_corpus.texts):,} texts…")


@st.cache_resource(max_entries=8, show_spinner=False)
def cached_own_attention(choice: ModelChoice, text: str, layer: int, _loaded: LoadedModel, _att: ModelAttention):
    """The model's own attention weights of one layer on the result's inputs (own_attention), kept for the
    pages that check a head against them. Shapes: -> (H, n, m)."""
    return own_attention(_loaded, _att, layer)


@st.cache_resource(max_entries=4, show_spinner=False)
def _saved(digest: str, file_name: str, _data: bytes) -> ModelAttention:
    return load_npz(_data)


def ask_as_this_session() -> None:
    """Mark the model work this script run starts (and the Jobs it creates) as this session's
    (attention.models.forward.model.REQUESTER): a scan then tells its own user's requests from another's."""
    ctx = get_script_run_ctx()
    REQUESTER.set(None if ctx is None else ctx.session_id)


def open_saved(file_name: str, data: bytes) -> SavedResult | None:
    """Read an uploaded .npz once (shared by the pages while cached); what names it, or None after a message."""
    digest = hashlib.sha256(data).hexdigest()[:16]
    try:
        _saved(digest, file_name, data)
    except ValueError as err:
        st.error(f"**{md(file_name)} cannot be opened.** {md(err)}")
        return None
    _NAMES[digest] = file_name
    return SavedResult(digest)


_NAMES: dict[str, str] = {}  # digest -> the file's name, for captions


def is_saved(source: Source) -> bool:
    """`source` is a result opened from a file, not a model."""
    return isinstance(source, SavedResult)


def model_or_stop(source: Source) -> LoadedModel:
    """The loaded model, with a spinner that says what is happening; an unavailable model ends the page."""
    ask_as_this_session()
    if isinstance(source, SavedResult):
        st.info("This result was opened from a file: this part needs the model itself. Close the file (above) to "
                "run a model.")
        stop_here()
    first = BUNDLED[source.name].first_load if source.name in BUNDLED else None
    refused = _refusals()  # the guard's verdicts, the same at every load: a model is not loaded again to hear one
    try:
        if source not in refused:
            with st.spinner(f"Loading {model_label(source)}" + (f" ({first})" if first else "") + "…"):
                return cached_model(source)
    except ModelRefused as err:
        refused[source] = str(err)
    except ModelUnavailable as err:
        st.error(f"**Model unavailable.** {md(err)}")
        stop_here()
    st.error(f"**Model unavailable.** {md(refused[source])}")
    stop_here()


@st.cache_resource(show_spinner=False)
def _long_slot() -> dict:
    """{"key": the (source, text, decoder text) whose result holds the long texts' one cache slot}, per process."""
    return {}


@st.cache_resource(show_spinner=False)
def _refusals() -> dict[ModelChoice, str]:
    """The guard's refusals so far in this process, by model and precision (ModelRefused's messages)."""
    return {}


def attention_or_stop(source: Source, text: str, decoder_text: str | None = None, *,
                      say_check: bool = True) -> ModelAttention:
    """Load the model and run it (a progress bar per layer on long texts); errors end the page cleanly.
    The guard's measure of the model is stated under it (once a page: say_check=False for a second text)."""
    if isinstance(source, SavedResult):
        return _saved_or_stop(source)
    loaded = model_or_stop(source)  # also marks this session as the requester
    cache = _long_attention if len(text) > LONG_TEXT_CHARS else _short_attention
    if cache is _long_attention and _long_slot().get("key") != (source, text, decoder_text):
        # the slot's one result is let go before the next is made, not after it: at 4,096 tokens of SmolLM2 each
        # holds ~1.3 GB, and both together made the server's peak (3.5 GB against 2.3 with one; benchmarks/NOTES.md)
        _long_attention.clear()
        _long_slot()["key"] = (source, text, decoder_text)
    att = follow_or_stop(cache(source, text, decoder_text, loaded))
    if loaded.check is not None and say_check:
        auto = f" (precision auto: {loaded.check.dtype})" if source.dtype == "auto" else ""
        st.caption(f"{md(model_label(source))}{auto} · {loaded.check.short}",
                   help=f"The {md(loaded.check.summary)}. It reads up to {loaded.spec.token_limit(loaded.device):,} "
                        "tokens here: the limit its memory check sets. Every number "
                        "shown for it is computed from what it computes.")
        if loaded.check.note:
            st.info(md(loaded.check.note))
    if att.truncated:
        st.warning(f"The text has {att.n_input_tokens:,} tokens; {md(model_label(source))} reads at most "
                   f"{len(att.tokens):,} here, so only the beginning is shown.")
    return att


def attention_again(source: Source, text: str) -> ModelAttention:
    """The result a run above this part of the page made and spoke about (attention_or_stop): found again in the
    shared cache, with nothing said twice. A part of a page takes the text, not the result, as its argument (a
    fragment keeps its arguments until the next whole run: a kept 4,096-token result stayed alive beside the
    next one); made again, with its progress, if another session's text took its cache slot meanwhile."""
    if isinstance(source, SavedResult):
        return _saved_or_stop(source)
    ask_as_this_session()
    cache = _long_attention if len(text) > LONG_TEXT_CHARS else _short_attention
    return follow_or_stop(cache(source, text, None, cached_model(source)))


def _saved_or_stop(saved: SavedResult) -> ModelAttention:
    digest = saved.digest
    try:
        att = _saved(digest, _NAMES[digest], b"")  # cached when it was opened: the bytes are not read again
    except (KeyError, ValueError):
        st.warning("The file opened earlier is no longer held here: open it again (above).")
        stop_here()
    st.caption(f"Opened from {md(_NAMES[digest])}: {md(att.model_name)}, {len(att.tokens):,} tokens, the weights as "
               "they were saved.")
    return att


