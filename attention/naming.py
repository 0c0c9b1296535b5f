"""How a head is named to people: layer and head counted from 1, as every page says them.

Arrays count layers and heads from 0 (`att.weights[18, 6]`, `effects.ranked()` -> (18, 6)); the pages, the
figures' titles and the messages say "L19H7" or "layer 19, head 7". Plain Python: the toy side may use it.

    >>> head_name(18, 6), head_words(18, 6), head_name(18, 6, spaced=True)
    ('L19H7', 'layer 19, head 7', 'L19 H7')
    >>> HeadName.parse("L19H7"), str(HeadName(18, 6))     # both ways, as one value
    (HeadName(layer=18, head=6), 'L19H7')
"""

from __future__ import annotations

import re
from typing import NamedTuple


def head_name(layer: int, head: int, *, spaced: bool = False) -> str:
    """"L19H7" for layer 18, head 6 (from 0): how pages, tables and titles name a head. `spaced`: "L19 H7", a
    row of a layer · head axis, which labels only some rows, each by its first word ("L19")."""
    return f"L{int(layer) + 1}{' ' if spaced else ''}H{int(head) + 1}"


def head_words(layer: int, head: int) -> str:
    """"layer 19, head 7" for layer 18, head 6 (from 0): the same head in a sentence."""
    return f"layer {int(layer) + 1}, head {int(head) + 1}"


class HeadName(NamedTuple):
    """One head as arrays hold it, (layer, head) counted from 0, that prints and parses as pages say it,
    counted from 1: L24H4 is (23, 3).

        >>> HeadName.parse("L24H4"), str(HeadName(23, 3)), HeadName(23, 3) == (23, 3)
        (HeadName(layer=23, head=3), 'L24H4', True)

    A tuple: it unpacks (`layer, head = HeadName.parse("L24H4")`), indexes a (layers, heads, ...) array
    (`att.weights[HeadName.parse("L24H4")]`) and equals the (layer, head) pairs analyses return."""

    layer: int  # from 0
    head: int  # from 0

    def __str__(self) -> str:
        return head_name(self.layer, self.head)

    @property
    def words(self) -> str:
        """"layer 24, head 4": the head in a sentence."""
        return head_words(self.layer, self.head)

    @classmethod
    def parse(cls, name: str) -> HeadName:
        """"L24H4" (also "l24h4", "L24 H4") -> HeadName(23, 3); ValueError for anything else, and for a layer
        or head 0 (pages count from 1)."""
        match = _PAGE_NAME.fullmatch(str(name).strip())
        if match is None:
            raise ValueError(f"{name!r} is not a head's name: write it as pages do, L<layer>H<head> counted from "
                             "1 (L24H4 is layer 23, head 3 in arrays)")
        layer, head = int(match[1]), int(match[2])
        if layer < 1 or head < 1:
            raise ValueError(f"{name!r}: pages count layers and heads from 1, so the first head is L1H1 "
                             "(HeadName(0, 0))")
        return cls(layer - 1, head - 1)


_PAGE_NAME = re.compile(r"L(\d+)\s*H(\d+)", re.IGNORECASE)
