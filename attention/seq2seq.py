"""The bottleneck problem, measured: two tiny GRU encoder-decoders that reverse digit sequences (needs torch).

Seeds 003 and 004: Sutskever et al. (2014) squeeze the whole input into one context vector, the encoder's
last state; on long inputs that vector is a bottleneck. Bahdanau et al. (2015) let the decoder look back at
every encoder state h_j at every step t, with the additive score of `attention/toy/scoring.py`:

    e_tj = v_a^T tanh(W_1 s_{t-1} + W_2 h_j)      α_t = softmax(e_t)      c_t = Σ_j α_tj h_j

Both models share everything else: a bidirectional GRU encoder (h_j = [→h_j; ←h_j]), a GRU decoder whose
first state comes from the encoder's two final states, and an output layer reading [s_t; c_t]. The
bottleneck model's c_t is the same summary vector at every step; the attentive model's c_t is the blend
above. The task is to reverse a sequence of digits ("1234" -> "4321"); the output is as long as the input,
so decoding runs len(source) greedy steps and no end token is needed.

    >>> models = load_translators()
    >>> t = translate(models.attentive, "0123456789")
    >>> t.output, t.alignment.shape         # '9876543210', (10 target steps, 10 source positions)

Weights: `seq2seq_weights.npz` beside this file, trained by `scripts/train_seq2seq.py` with
attention.seq2seq_training (fixed seed, one thread, deterministic on CPU), with what training recorded (the
lengths trained on, accuracy by length: attention.seq2seq_record, readable without torch). This module never
imports transformers: the page starts without it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from attention.seq2seq_record import VARIANTS, WEIGHTS, LengthAccuracy, TrainingRecord, read_record

DIGITS = "0123456789"
BOS = 10  # the decoder's first input: "start", not a digit
TRAIN_LENGTHS = (1, 20)  # the lengths training draws from by default; the shipped models' own: Translators.record
MAX_LENGTH = 30  # longest sequence the page accepts: a third beyond training, to show what happens there


@dataclass(frozen=True)
class Sizes:
    embed: int = 32  # digit embedding width
    encoder: int = 64  # per direction; encoder states h_j have 2 x this
    decoder: int = 128  # decoder state s_t
    attention: int = 64  # d_a: width of W_1 s + W_2 h inside the additive score


class Translator(nn.Module):
    """A GRU encoder-decoder; `attentive` decides where the context c_t comes from (module docstring)."""

    def __init__(self, attentive: bool, sizes: Sizes = Sizes()):
        super().__init__()
        self.attentive, self.sizes = attentive, sizes
        e, h, d, a = sizes.embed, sizes.encoder, sizes.decoder, sizes.attention
        self.source_embedding = nn.Embedding(len(DIGITS), e)
        self.encoder = nn.GRU(e, h, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * h, d)  # s_0 = tanh(bridge([→h_S; ←h_1]))
        self.target_embedding = nn.Embedding(len(DIGITS) + 1, e)  # + BOS
        self.decoder = nn.GRUCell(e + 2 * h, d)  # input: [embedding of y_{t-1}; c_t]
        self.w1 = nn.Linear(d, a, bias=False)  # W_1, applied to the decoder state s_{t-1}
        self.w2 = nn.Linear(2 * h, a, bias=False)  # W_2, applied to each encoder state h_j
        self.v_a = nn.Linear(a, 1, bias=False)
        self.out = nn.Linear(d + 2 * h, len(DIGITS))

    def encode(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """source (B, S) digit ids -> encoder states (B, S, 2h), summary (B, 2h) = [→h_S; ←h_1]."""
        states, last = self.encoder(self.source_embedding(source))  # last: (2, B, h)
        return states, torch.cat([last[0], last[1]], dim=-1)

    def forward(self, source: torch.Tensor, previous: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """source (B, S); previous (B, T) the decoder inputs: BOS, then the target shifted by one (teacher
        forcing) -> logits (B, T, 10) and `seen` (see step)."""
        states, summary = self.encode(source)
        s = torch.tanh(self.bridge(summary))
        keys = self.w2(states) if self.attentive else None  # (B, S, a): W_2 h_j, once per sequence
        logits, seen = [], []
        for t in range(previous.shape[1]):
            out, s, alpha, query = self.step(previous[:, t], s, states, keys, summary)
            logits.append(out)
            seen.append((alpha, query))
        return torch.stack(logits, 1), _seen(seen, states)

    def step(self, previous, s, states, keys, summary):
        """One decoder step. previous (B,) the last output digit (or BOS), s (B, d) the state s_{t-1}
        -> logits (B, 10), s_t, α_t (B, S) or None, and s_{t-1} (the query that was scored)."""
        alpha = None
        if self.attentive:
            energy = torch.tanh(self.w1(s)[:, None, :] + keys)  # (B, S, a): tanh(W_1 s_{t-1} + W_2 h_j)
            alpha = torch.softmax(self.v_a(energy)[..., 0], dim=-1)  # (B, S)
            context = torch.einsum("bs,bsh->bh", alpha, states)  # c_t = Σ_j α_tj h_j
        else:
            context = summary  # the bottleneck: the same vector at every step
        s_next = self.decoder(torch.cat([self.target_embedding(previous), context], dim=-1), s)
        return self.out(torch.cat([s_next, context], dim=-1)), s_next, alpha, s

    @torch.no_grad()
    def greedy(self, source: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """source (B, S) -> output ids (B, S), each step fed the previous step's argmax; and `seen`:
        `alignment` (B, T, S) or None, `decoder_states` s_{t-1} (B, T, d), `encoder_states` (B, S, 2h)."""
        states, summary = self.encode(source)
        s = torch.tanh(self.bridge(summary))
        keys = self.w2(states) if self.attentive else None
        previous = torch.full((source.shape[0],), BOS, dtype=torch.long)
        outputs, seen = [], []
        for _ in range(source.shape[1]):
            logits, s, alpha, query = self.step(previous, s, states, keys, summary)
            previous = logits.argmax(-1)
            outputs.append(previous)
            seen.append((alpha, query))
        return torch.stack(outputs, 1), _seen(seen, states)


def _seen(steps: list, states: torch.Tensor) -> dict:
    alphas, queries = zip(*steps, strict=True)
    return {
        "alignment": None if alphas[0] is None else torch.stack(alphas, 1),
        "decoder_states": torch.stack(queries, 1),
        "encoder_states": states,
    }


@dataclass(frozen=True)
class Translators:
    bottleneck: Translator  # one context vector for the whole sequence (Sutskever et al. 2014)
    attentive: Translator  # additive attention over every encoder state (Bahdanau et al. 2015)
    record: TrainingRecord  # what training recorded: the lengths trained on, accuracy by length, seconds

    @property
    def trained_accuracy(self) -> dict:
        """variant -> LengthAccuracy measured by the training script when it saved them."""
        return self.record.accuracy

    @property
    def train_seconds(self) -> dict:
        """variant -> seconds the training took."""
        return self.record.train_seconds

    @property
    def train_lengths(self) -> tuple[int, int]:
        """The shortest and longest sequences the models were trained on, inclusive."""
        return self.record.train_lengths


@dataclass(frozen=True)
class Translation:
    """One sequence through one model. Shapes: T target steps = S source positions."""

    source: str
    output: str  # greedy decoding
    expected: str  # the source reversed
    alignment: np.ndarray | None  # (T, S) α_tj, rows sum to 1; None for the bottleneck model
    decoder_states: np.ndarray  # (T, d) s_{t-1}: the query of step t's additive score
    encoder_states: np.ndarray  # (S, 2h) h_j: the keys (and values)

    @property
    def correct(self) -> bool:
        """Every digit reversed right."""
        return self.output == self.expected

    @property
    def digits_correct(self) -> int:
        """How many digits are in their right place."""
        return sum(a == b for a, b in zip(self.output, self.expected, strict=True))

    @property
    def ideal_alignment(self) -> np.ndarray:
        """(T, S): for reversal, step t should read source position S - 1 - t (the anti-diagonal)."""
        return np.fliplr(np.eye(len(self.source)))

    @property
    def antidiagonal_mass(self) -> float | None:
        """Mean over steps of the weight on the ideal source position (1.0 = a perfect alignment)."""
        if self.alignment is None:
            return None
        return float((self.alignment * self.ideal_alignment).sum(1).mean())

    @property
    def offsets_from_ideal(self) -> np.ndarray | None:
        """(T,) for each step, the position of its strongest weight minus the ideal position S - 1 - t."""
        if self.alignment is None:
            return None
        return self.alignment.argmax(1) - np.arange(len(self.source))[::-1]

    @property
    def typical_offset(self) -> int | None:
        """The most common of offsets_from_ideal: 0 when the model reads the digit it writes."""
        if self.alignment is None:
            return None
        values, counts = np.unique(self.offsets_from_ideal, return_counts=True)
        return int(values[np.argmax(counts)])

    @property
    def near_antidiagonal_mass(self) -> float | None:
        """Mean over steps of the weight within one position of the ideal one."""
        if self.alignment is None:
            return None
        s = len(self.source)
        near = np.abs(np.arange(s)[None, :] - np.arange(s)[::-1][:, None]) <= 1  # (T, S)
        return float((self.alignment * near).sum(1).mean())

    @property
    def argmax_on_antidiagonal(self) -> float | None:
        """Fraction of steps whose largest weight sits on the ideal source position."""
        if self.alignment is None:
            return None
        s = len(self.source)
        return float(np.mean(self.alignment.argmax(1) == np.arange(s)[::-1]))


def parse_digits(text: str) -> str:
    """The digits of a user's text, spaces and commas ignored; ValueError with a message a page shows."""
    cleaned = "".join(c for c in str(text) if c not in " ,\t\n")
    if not cleaned:
        raise ValueError("Type at least one digit, e.g. 3 1 4 1 5.")
    bad = sorted({c for c in cleaned if c not in DIGITS})
    if bad:
        raise ValueError(f"Only the digits 0-9 can be reversed; {', '.join(repr(c) for c in bad[:5])} "
                         f"{'is' if len(bad) == 1 else 'are'} not.")
    if len(cleaned) > MAX_LENGTH:
        raise ValueError(f"At most {MAX_LENGTH} digits; this has {len(cleaned)}.")
    return cleaned


def translate(model: Translator, digits: str) -> Translation:
    """Reverse one digit string with `model`; digits is checked by parse_digits."""
    source = parse_digits(digits)
    ids = torch.tensor([[int(c) for c in source]])
    model.eval()
    output, seen = model.greedy(ids)
    alignment = seen["alignment"]
    return Translation(
        source=source,
        output="".join(str(int(i)) for i in output[0]),
        expected=source[::-1],
        alignment=None if alignment is None else alignment[0].numpy().astype(np.float64),
        decoder_states=seen["decoder_states"][0].numpy().astype(np.float64),
        encoder_states=seen["encoder_states"][0].numpy().astype(np.float64),
    )


def additive_parameters(model: Translator) -> dict[str, np.ndarray]:
    """W_1 (d_a, d), W_2 (d_a, 2h), v_a (d_a,) as numpy: the arguments of
    `attention.scored_attention(method="additive")`."""
    return {
        "w1": model.w1.weight.detach().numpy().astype(np.float64),
        "w2": model.w2.weight.detach().numpy().astype(np.float64),
        "v_a": model.v_a.weight.detach().numpy()[0].astype(np.float64),
    }


def accuracy_by_length(model: Translator, lengths=range(1, MAX_LENGTH + 1), *, samples: int = 200,
                       seed: int = 1) -> LengthAccuracy:
    """Greedy-decode `samples` random sequences of each length and count exact reversals."""
    rng = np.random.default_rng(seed)
    model.eval()
    lengths = np.asarray(list(lengths))
    seq, dig = np.zeros(len(lengths)), np.zeros(len(lengths))
    for i, n in enumerate(lengths):
        source = torch.from_numpy(rng.integers(0, 10, size=(samples, int(n))))
        output, _ = model.greedy(source)
        right = output == source.flip(1)
        seq[i] = right.all(1).float().mean().item()
        dig[i] = right.float().mean().item()
    return LengthAccuracy(lengths=lengths, sequences=seq, digits=dig, samples=samples)


@functools.cache
def load_translators(path: Path = WEIGHTS) -> Translators:
    """The shipped models (cached per path), with what training recorded (read_record). Weights are stored as
    float16 and run as float32; the accuracy they were saved with was measured after that rounding (train_both)."""
    record = read_record(Path(path))  # FileNotFoundError first, saying how to train them
    with np.load(path) as data:
        made = {}
        for variant in VARIANTS:
            model = Translator(variant == "attentive", Sizes(*(int(x) for x in data[f"{variant}/sizes"])))
            state = {name: torch.from_numpy(data[f"{variant}/{name}"].astype(np.float32))
                     for name in model.state_dict()}
            model.load_state_dict(state)
            made[variant] = model.eval()
    return Translators(made["bottleneck"], made["attentive"], record)

