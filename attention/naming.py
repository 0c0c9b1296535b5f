"""How a head is named to people: layer and head counted from 1, as every page says them.

Arrays count layers and heads from 0 (`att.weights[18, 6]`, `effects.ranked()` -> (18, 6)); the pages, the
figures' titles and the messages say "L19H7" or "layer 19, head 7". Plain Python: the toy side may use it.

    >>> head_name(18, 6), head_words(18, 6), head_name(18, 6, spaced=True)
    ('L19H7', 'layer 19, head 7', 'L19 H7')
"""

from __future__ import annotations


def head_name(layer: int, head: int, *, spaced: bool = False) -> str:
    """"L19H7" for layer 18, head 6 (from 0): how pages, tables and titles name a head. `spaced`: "L19 H7", a
    row of a layer · head axis, which labels only some rows, each by its first word ("L19")."""
    return f"L{int(layer) + 1}{' ' if spaced else ''}H{int(head) + 1}"


def head_words(layer: int, head: int) -> str:
    """"layer 19, head 7" for layer 18, head 6 (from 0): the same head in a sentence."""
    return f"layer {int(layer) + 1}, head {int(head) + 1}"
