"""Train the two digit-reversal models of the bottleneck page and write attention/seq2seq_weights.npz.

    python scripts/train_seq2seq.py                 # the shipped weights: 3,000 steps each, seed 0
    python scripts/train_seq2seq.py --steps 5 --out /tmp/w.npz   # what the test runs
    python scripts/train_seq2seq.py --lengths 1 10  # other training lengths: saved with the weights

Deterministic on CPU (fixed seeds, one torch thread): re-running it writes the same numbers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from attention import seq2seq, seq2seq_training  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000, help="training steps per model (batch of 64)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lengths", type=int, nargs=2, default=seq2seq.TRAIN_LENGTHS, metavar=("SHORTEST", "LONGEST"),
                        help="sequence lengths to train on, inclusive (saved with the weights: the page says them)")
    parser.add_argument("--out", type=Path, default=seq2seq.WEIGHTS)
    args = parser.parse_args(argv)

    def on_step(variant: str, step: int, loss: float) -> None:
        if step % 250 == 0 or step == args.steps - 1:
            print(f"{variant:10s} step {step:5d}  loss {loss:.4f}", flush=True)

    models = seq2seq_training.train_both(steps=args.steps, seed=args.seed, lengths=tuple(args.lengths),
                                         on_step=on_step)
    size = seq2seq_training.save_translators(models, args.out)
    for variant in seq2seq.VARIANTS:
        acc = models.trained_accuracy[variant]
        at = {int(n): f"{a:.0%}" for n, a in zip(acc.lengths, acc.sequences, strict=True) if n % 5 == 0}
        print(f"{variant:10s} trained in {models.train_seconds[variant]:.0f} s; sequences reversed by length: {at}")
    print(f"wrote {args.out} ({size / 1024:.0f} KiB), trained on {models.record.lengths_in_words()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
