"""Training the bottleneck page's two digit-reversal models (attention.seq2seq), and saving their weights.

    models = train_both(steps=3000, seed=0)      # what scripts/train_seq2seq.py runs
    save_translators(models)                     # attention/seq2seq_weights.npz

Deterministic on CPU: fixed seeds, one torch thread (restored afterwards).
"""

from __future__ import annotations

import functools
import io
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

from attention.seq2seq import (
    BOS,
    DIGITS,
    TRAIN_LENGTHS,
    VARIANTS,
    WEIGHTS,
    Sizes,
    Translator,
    Translators,
    accuracy_by_length,
)
from attention.seq2seq_record import TrainingRecord, record_arrays


def train(attentive: bool, *, steps: int = 3000, batch: int = 64, seed: int = 0, learning_rate: float = 3e-3,
          lengths: tuple[int, int] = TRAIN_LENGTHS, on_step: Callable[[int, float], None] | None = None
          ) -> Translator:
    """Train one model on random sequences of `lengths` (shortest, longest: inclusive), one length per batch,
    teacher forcing, Adam with a cosine-decaying learning rate.
    Deterministic: fixed seeds, one torch thread (restored afterwards)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        model = Translator(attentive)
        optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)  # settle at the end
        loss_of = nn.CrossEntropyLoss()
        for step in range(steps):
            n = int(rng.integers(lengths[0], lengths[1] + 1))
            source = torch.from_numpy(rng.integers(0, 10, size=(batch, n)))
            target = source.flip(1)
            previous = torch.cat([torch.full((batch, 1), BOS), target[:, :-1]], dim=1)
            logits, _ = model(source, previous)
            loss = loss_of(logits.reshape(-1, len(DIGITS)), target.reshape(-1))
            optimiser.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            schedule.step()
            if on_step is not None:
                on_step(step, float(loss))
        return model.eval()
    finally:
        torch.set_num_threads(threads)


def train_both(*, steps: int = 3000, seed: int = 0, lengths: tuple[int, int] = TRAIN_LENGTHS,
               on_step=None) -> Translators:
    """Both models, same seed, same data, same steps, on sequences of `lengths` (recorded with them). Weights
    are rounded through float16, as they will be saved, before their accuracy is measured as the page measures
    it."""
    made, accuracy, seconds = {}, {}, {}
    for variant in VARIANTS:
        start = time.perf_counter()
        made[variant] = train(variant == "attentive", steps=steps, seed=seed, lengths=lengths,
                              on_step=None if on_step is None else functools.partial(on_step, variant))
        seconds[variant] = time.perf_counter() - start
        with torch.no_grad():
            for p in made[variant].parameters():
                p.copy_(p.half().float())
        accuracy[variant] = accuracy_by_length(made[variant])
    record = TrainingRecord((int(lengths[0]), int(lengths[1])), accuracy, seconds)
    return Translators(made["bottleneck"], made["attentive"], record)


def save_translators(models: Translators, path: Path = WEIGHTS) -> int:
    """Write both models' weights (float16), their sizes and what training recorded (the lengths trained on,
    measured accuracy, seconds: attention.seq2seq_record) to one .npz; -> bytes."""
    arrays = record_arrays(models.record)
    for variant in VARIANTS:
        model = getattr(models, variant)
        for name, value in model.state_dict().items():
            arrays[f"{variant}/{name}"] = value.numpy().astype(np.float16)
        arrays[f"{variant}/sizes"] = np.array([getattr(model.sizes, f) for f in Sizes.__dataclass_fields__])
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    Path(path).write_bytes(buffer.getvalue())
    return len(buffer.getvalue())
