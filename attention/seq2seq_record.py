"""What training recorded about the bottleneck page's two models, read without torch.

attention.seq2seq_training writes it into seq2seq_weights.npz beside the weights: the sequence lengths the models
were trained on, their accuracy by length (measured once, after the weights were rounded as they are saved) and
how long training took. A sentence about the models (the page's captions, its question's answer) reads these
numbers rather than repeating them by hand, so retraining on other lengths changes every sentence with it.

    >>> record = read_record()
    >>> record.train_lengths, record.trained_on(20), record.share_reversed("bottleneck", 20)

numpy only: the toy side's questions (attention.toy.questions) read it without loading torch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

WEIGHTS = Path(__file__).with_name("seq2seq_weights.npz")
VARIANTS = ("bottleneck", "attentive")  # the two models: one context vector, additive attention


@dataclass(frozen=True)
class LengthAccuracy:
    """Accuracy against sequence length, on fresh random sequences (none chosen by hand)."""

    lengths: np.ndarray  # (L,)
    sequences: np.ndarray  # (L,) fraction of sequences reversed exactly
    digits: np.ndarray  # (L,) fraction of output digits in the right place
    samples: int  # random sequences per length


@dataclass(frozen=True)
class TrainingRecord:
    """What training recorded, per variant (VARIANTS)."""

    train_lengths: tuple[int, int]  # the shortest and longest sequences seen in training, inclusive
    accuracy: dict  # variant -> LengthAccuracy
    train_seconds: dict  # variant -> seconds the training took

    def trained_on(self, n: int) -> bool:
        """Whether sequences of n digits were among those seen in training."""
        return self.train_lengths[0] <= n <= self.train_lengths[1]

    def lengths_in_words(self) -> str:
        """"1 to 20 digits": the training lengths as a sentence says them."""
        return f"{self.train_lengths[0]} to {self.train_lengths[1]} digits"

    def share_reversed(self, variant: str, n: int) -> float:
        """The share of n-digit sequences `variant` reversed exactly when it was saved (KeyError: n not measured)."""
        acc = self.accuracy[variant]
        at = dict(zip((int(x) for x in acc.lengths), acc.sequences, strict=True))
        return float(at[n])


def record_arrays(record: TrainingRecord) -> dict[str, np.ndarray]:
    """The record as the .npz's arrays (seq2seq_training.save_translators writes them beside the weights)."""
    arrays = {"train_lengths": np.array(record.train_lengths)}
    for variant in VARIANTS:
        acc = record.accuracy[variant]
        arrays[f"{variant}/accuracy"] = np.stack([acc.lengths, acc.sequences, acc.digits])
        arrays[f"{variant}/samples"] = np.array(acc.samples)
        arrays[f"{variant}/train_seconds"] = np.array(record.train_seconds[variant])
    return arrays


@functools.cache
def read_record(path: Path = WEIGHTS) -> TrainingRecord:
    """The record saved with the weights at `path` (cached per path); FileNotFoundError saying how to make it,
    KeyError naming what a file written before the record held its training lengths lacks."""
    if not Path(path).exists():
        raise FileNotFoundError(f"{path} is missing: run `python scripts/train_seq2seq.py` to train the models")
    with np.load(path) as data:
        if "train_lengths" not in data.files:
            raise KeyError(f"{path} does not say which lengths the models were trained on: run "
                           "`python scripts/train_seq2seq.py` to train and save them again")
        lo, hi = (int(x) for x in data["train_lengths"])
        accuracy, seconds = {}, {}
        for variant in VARIANTS:
            lengths, sequences, digits = data[f"{variant}/accuracy"]
            accuracy[variant] = LengthAccuracy(lengths.astype(int), sequences, digits, int(data[f"{variant}/samples"]))
            seconds[variant] = float(data[f"{variant}/train_seconds"])
    return TrainingRecord((lo, hi), accuracy, seconds)
