"""Hard lookup vs soft lookup (seed 002): a dictionary answers only the keys it holds; attention
answers any query with a blend of all values, weighted by how well each key matches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.toy.core import scaled_dot_product_attention
from attention.toy.rounding import DECIMALS
from attention.toy.scoring import scored_attention
from attention.toy.trace import AttentionTrace


@dataclass(frozen=True)
class HardLookup:
    query: str
    found: bool
    value: float | None  # the stored value, None when the key is absent
    probabilities: dict  # key -> 1.0 for the exact match, 0.0 otherwise (all 0 when nothing matched)
    near: str | None = None  # a key that differs only in capitals ("Apple" -> "apple"): not a match, said so


def hard_lookup(table: dict, query: str) -> HardLookup:
    """Exact-match lookup, as a dictionary does it: 'apple' -> 9 with probability 1; 'fruit' -> nothing, and
    'Apple' -> nothing either (its key, 'apple', is in `near`: "exact keys only" means exactly). Spaces around the
    query are not part of it."""
    key = query.strip()
    found = key in table
    probs = {k: 1.0 if k == key else 0.0 for k in table}
    near = None if found else next((k for k in table if k.lower() == key.lower()), None)
    return HardLookup(query=query, found=found, value=table.get(key), probabilities=probs, near=near)


@dataclass(frozen=True)
class SoftLookup:
    labels: tuple[str, ...]  # one per key
    trace: AttentionTrace  # q (1, d_k), k (m, d_k), v (m, d_v), weights (1, m), output (1, d_v)
    winner: str  # the label with the largest weight
    winner_index: int  # its position in labels

    @property
    def tie(self) -> bool:
        """Whether no item wins: the two largest weights are equal as the page writes them (3 decimals). All
        three query sliders at 0 give every item 0.333, and "apple wins with 33.3%" named a winner of a tie."""
        top = np.sort(self.weights)[::-1]
        return len(top) > 1 and round(float(top[0]), DECIMALS) == round(float(top[1]), DECIMALS)

    @property
    def weights(self) -> np.ndarray:
        """(m,) the softmax weight of each key for the single query."""
        return self.trace.weights[0]

    @property
    def winner_weight(self) -> float:
        """The largest weight: the winner's share of the attention."""
        return float(self.weights[self.winner_index])

    @property
    def output(self) -> np.ndarray:
        """(d_v,) the blend of the values, sum_j alpha_j v_j."""
        return self.trace.output[0]


def soft_lookup(query, keys, values, labels, *, scaled: bool = True) -> SoftLookup:
    """Attention with one query over labelled key/value rows.

    Shapes: query (d_k,), keys (m, d_k), values (m, d_v), labels m strings -> SoftLookup.
    """
    labels = tuple(str(x) for x in labels)
    keys = np.asarray(keys, dtype=np.float64)
    if len(labels) != len(keys):
        raise ValueError(f"{len(labels)} labels for keys of shape {keys.shape}: need one label per key")
    q = np.atleast_2d(np.asarray(query, dtype=np.float64))  # (1, d_k)
    if scaled:
        trace = scaled_dot_product_attention(q, keys, values)
    else:
        trace = scored_attention(q, keys, values, "dot")
    best = int(np.argmax(trace.weights[0]))
    return SoftLookup(labels=labels, trace=trace, winner=labels[best], winner_index=best)


MAX_TABLE_ROWS = 200


@dataclass(frozen=True)
class LookupTable:
    labels: tuple[str, ...]  # m item names
    keys: np.ndarray  # (m, d_k)
    values: np.ndarray  # (m, d_v)


def parse_table(rows, key_columns, value_columns, *, label_column: str = "item",
                max_rows: int = MAX_TABLE_ROWS) -> LookupTable:
    """Turn edited table rows (dicts) into keys and values, or raise ValueError saying what is wrong.

    Empty rows (no name and no numbers) are dropped; a row with some cells missing, text where a
    number belongs, NaN or infinity is refused with its row number and column.
    """
    labels, keys, values = [], [], []
    columns = list(key_columns) + list(value_columns)
    for i, row in enumerate(rows, start=1):
        cells = [row.get(c) for c in columns]
        name = row.get(label_column)
        name = "" if name is None or (isinstance(name, float) and np.isnan(name)) else str(name).strip()
        if not name and all(_blank(c) for c in cells):
            continue
        if not name:
            raise ValueError(f"row {i} has no {label_column} name")
        numbers = []
        for col, cell in zip(columns, cells, strict=True):
            if _blank(cell):
                raise ValueError(f"row {i} ({name}): {col} is empty")
            try:
                x = float(cell)
            except (TypeError, ValueError):
                raise ValueError(f"row {i} ({name}): {col} must be a number, got {str(cell)[:40]!r}") from None
            if not np.isfinite(x):
                raise ValueError(f"row {i} ({name}): {col} must be finite, got {x}")
            numbers.append(x)
        labels.append(name)
        keys.append(numbers[: len(key_columns)])
        values.append(numbers[len(key_columns):])
    if not labels:
        raise ValueError("the table has no complete rows; add at least one item")
    if len(labels) > max_rows:
        raise ValueError(f"the table has {len(labels)} rows; at most {max_rows} are shown")
    return LookupTable(labels=tuple(labels), keys=np.array(keys), values=np.array(values))


def _blank(cell) -> bool:
    return cell is None or (isinstance(cell, str) and not cell.strip()) or (
        isinstance(cell, float) and np.isnan(cell))
