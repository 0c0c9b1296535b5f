"""A loaded model: the network, its tokenizer, what the guard measured, and the lock that shares it.

`LoadedModel` is what attention.models.forward.loading builds and every analysis takes. Its `lock`
serialises forward passes between the sessions that share one model, short requests first (ModelLock).
The model's constants read here: its anatomy (where the family keeps its parts), its device and the base
of its rotary positions (rotary_base). Running it is attention.models.forward.running's attend(loaded, text):
this record imports nothing that runs it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from attention.models.forward.anatomy import Anatomy, MissingAnatomy, anatomy
from attention.models.forward.check import ModelCheck
from attention.models.forward.registry import ModelSpec

SHORT_GRACE_SECONDS = 1.0  # long work waits this long after another user's short request: its page draws
LONG_WORK_PATIENCE_SECONDS = 2.0  # long work that has waited this long goes next, short requests or not
Progress = Callable[[float, str], None]  # (fraction done, what is happening)
REQUESTER: contextvars.ContextVar = contextvars.ContextVar("attention_explorer_requester", default=None)
"""Who asks for a pass: the app sets its session's id (pages/_jobs.py, and a Job's thread inherits it), so that
long work tells its own user's requests from another user's. Unset (a notebook), each thread is its own."""


def _requester() -> object:
    return REQUESTER.get() or threading.get_ident()


class ModelLock:
    """One forward pass at a time on a shared model, short requests first, long work never starved.

    `with lock:` is a short request (a sentence, a generation step): it waits for the pass in flight, then
    goes ahead of any long work waiting. `with lock.background():` is one batch of long work (a scan): it
    also waits while a short request is waiting, so a sentence typed during a scan waits for one batch
    (about BATCH_SECONDS) at most, instead of racing the scan for the lock after every batch; and until
    `grace` seconds after the last short request of another requester (REQUESTER: another user's session)
    ended, so the page that asked draws its figures without a scan's batches taking the cores (a 16-token grid
    during a scan: 2.2 s with no grace, 1.2 s alone). The long work's own user's short requests (its setup
    pass, its page) give it no grace. But a batch that has waited `patience` seconds goes next, ahead of grace
    and of short requests: under a steady stream of short requests (three busy pages and a corpus survey,
    whose texts are short requests each) a scan otherwise got the model twice in 31 s; now 14 times in 32 s,
    the pages' passes as fast (median 0.46 s; benchmarks/contention.py, benchmarks/NOTES.md). A sentence
    then waits for at most two batches."""

    def __init__(self, grace: float = SHORT_GRACE_SECONDS, patience: float = LONG_WORK_PATIENCE_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self._clock = clock  # seconds, monotonic: tests give a clock they move by hand
        self._turn = threading.Condition()
        self._held = False
        self._short_waiting = 0
        self._grace, self._patience = grace, patience
        self._short_ended: dict = {}  # requester (_requester()) -> time.monotonic() its last short request ended
        self._long_since: dict[object, float] = {}  # a waiting batch of long work -> when it began to wait
        self._holder_short = False
        self._owner: int | None = None  # the thread holding the lock (threading.get_ident()), while it is held
        self._depth = 0  # how many times the holder took it (re-entrant): released when its outermost block ends

    def acquire(self, *, short: bool = True) -> None:
        """Wait for the model: a short request (a page's pass) goes before long work, unless that work has
        waited LONG_WORK_PATIENCE_SECONDS; long work also leaves SHORT_GRACE_SECONDS after another user's short
        request, so that its page draws first. Re-entrant for its holder: a thread that holds the lock (a
        `hooks()` block) takes it again at once (run_with_cache or generate inside the block, as TransformerLens's
        `with model.hooks(...): model.generate(...)`); every other thread still waits."""
        with self._turn:
            if self._held and self._owner == threading.get_ident():
                self._depth += 1
                return
            me, since = object(), self._clock()
            self._short_waiting += short
            if not short:
                self._long_since[me] = since
            try:
                while True:
                    if self._held:
                        self._turn.wait()
                        continue
                    if short:
                        if self._overdue():  # long work waited its patience: it goes first (its wait ends now)
                            self._turn.wait(0.05)
                            continue
                        break
                    waited = self._clock() - since
                    if waited >= self._patience:
                        break
                    rest = self._patience if self._short_waiting else self._grace_left()
                    if rest <= 0:
                        break
                    self._turn.wait(min(rest, self._patience - waited))
                self._held, self._holder_short = True, short
                self._owner, self._depth = threading.get_ident(), 1
            finally:
                self._short_waiting -= short
                self._long_since.pop(me, None)

    def _overdue(self) -> bool:
        """Whether a batch of long work has waited `patience` seconds."""
        now = self._clock()
        return any(now - since >= self._patience for since in self._long_since.values())

    def _grace_left(self) -> float:
        """Seconds until the last short request of another requester is `grace` old (<= 0: none is)."""
        now, me = self._clock(), _requester()
        self._short_ended = {t: end for t, end in self._short_ended.items() if now - end < self._grace}
        return max((end + self._grace - now for t, end in self._short_ended.items() if t != me), default=0.0)

    def release(self) -> None:
        """Give the model to the next in line (and note when a short request ended: the grace period)."""
        with self._turn:
            self._depth -= 1
            if self._depth > 0:  # an inner block of the holder's ended: the outermost one releases
                return
            if self._holder_short:
                self._short_ended[_requester()] = self._clock()
            self._held, self._owner = False, None
            self._turn.notify_all()

    def __enter__(self) -> ModelLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    @contextlib.contextmanager
    def background(self):
        """Hold the lock for one batch of long work, after every short request waiting."""
        self.acquire(short=False)
        try:
            yield self
        finally:
            self.release()


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to attend (attention.models.forward.loading builds it). Shared between sessions: `lock`
    serialises forward passes, short ones first."""

    spec: ModelSpec
    network: torch.nn.Module  # transformers PreTrainedModel in eval mode, attention routed through CAPTURE
    tokenizer: object  # its transformers tokenizer (None for an image model)
    check: ModelCheck | None = None  # what the guard measured when a loader checked it (None: not checked)
    lock: ModelLock = field(default_factory=ModelLock, repr=False, compare=False)
    processor: object = None  # an image model's transformers image processor (spec.inputs == "image"), else None
    read_parts: Anatomy | MissingAnatomy | None = field(default=None, repr=False, compare=False)  # a family
    # without an entry in the anatomy's table: its parts as the guard read them from the module tree and confirmed
    # (attention.models.forward.anatomy_inferred), or why not; None: the table's entry

    def __getattr__(self, name: str):
        """Only for names that are not here: the pass was a method (`loaded.attend(text)`) until 0.3; say where
        it went rather than a bare AttributeError."""
        if name in ("attend", "attend_image"):
            raise AttributeError(f"LoadedModel has no method {name}: call attention.models.{name}(model, ...) "
                                 f"(from attention.models import {name}; {name}(model, ...))")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @cached_property
    def output_weights(self) -> tuple[np.ndarray, ...] | None:
        """Every self-attention layer's W_O, (H * d, D) float32 in x @ W_O form, through the anatomy; None when
        the family has no entry. Read once: on a GPU each read copies them (a 1B model's: 268 MB) and every
        result shares these."""
        try:
            parts = self.anatomy
        except MissingAnatomy:
            return None
        return tuple(parts.output_weight(layer) for layer in range(len(parts.outputs)))

    @property
    def anatomy(self) -> Anatomy:
        """Where the network keeps its parts (attention.models.forward.anatomy), or for a family without an entry
        as the guard read them from its module tree and confirmed them (read_parts); MissingAnatomy, saying why,
        where neither gives them."""
        found = self.found_anatomy
        if isinstance(found, MissingAnatomy):
            raise type(found)(str(found))
        return found

    @cached_property
    def found_anatomy(self) -> Anatomy | MissingAnatomy:
        """The anatomy or why there is none, found once."""
        if self.read_parts is not None:
            return self.read_parts
        try:
            return anatomy(self.network)
        except MissingAnatomy as err:
            return err

    @property
    def logit_scale(self) -> float:
        """What the model multiplies its LM head's output by (Granite: 1 / logits_scaling), as its anatomy found
        and confirmed it; 1 where it has none or no anatomy."""
        found = self.found_anatomy
        return 1.0 if isinstance(found, MissingAnatomy) else found.logit_scale

    @property
    def logit_softcap(self) -> float | None:
        """c when the model caps its final logits as c * tanh(z / c) (Gemma-2), else None: cap_logits."""
        return getattr(self.network.config, "final_logit_softcapping", None) or None

    @property
    def folder(self) -> str | None:
        """The folder or hub id the network was loaded from (transformers' `config._name_or_path`): what a
        reference load of the same weights reads, e.g. `AutoModel.from_pretrained(m.folder,
        attn_implementation="eager")`. None for a network built in Python from a config (from_model)."""
        return str(getattr(self.network.config, "_name_or_path", "") or "") or None

    @property
    def device(self) -> torch.device:
        """Where the network's parameters are (attention.models.forward.device.compute_device put them)."""
        first = next(self.network.parameters(), None)
        return torch.device("cpu") if first is None else first.device



def rotary_base(loaded: LoadedModel) -> float | None:
    """The base of the model's rotary positions (θ_i = base^(-2i/d)), or None when it has none (BERT adds
    learned positions to its embeddings instead) or its family is unknown. Only plain RoPE over the whole
    head counts: scaled variants and partial rotary (a share of each head) return None."""
    config = loaded.network.config
    params = getattr(config, "rope_parameters", None) or {}
    try:
        if loaded.anatomy.rotary is None or not loaded.anatomy.family.rotate_half:
            return None
    except MissingAnatomy:
        return None
    if params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0)) not in (None, 1.0):
        return None
    if params.get("rope_type", "default") != "default":
        return None
    base = params.get("rope_theta", getattr(config, "rope_theta", None))
    return None if base is None else float(base)


def final_logits(loaded: LoadedModel, z):
    """The model's logits from its LM head's output z as the model makes them: times its logit scale (Granite
    divides by logits_scaling: Anatomy.logit_scale), then soft-capped (Gemma-2: cap_logits). Any shape."""
    return cap_logits(z * loaded.logit_scale, loaded.logit_softcap)


def cap_logits(logits, cap: float | None):
    """The final logits as a model with a soft cap makes them, c * tanh(z / c), or unchanged for cap None.
    Takes and returns a torch tensor or a numpy array, any shape."""
    if not cap:
        return logits
    return cap * (logits / cap).tanh() if isinstance(logits, torch.Tensor) else cap * np.tanh(logits / cap)
