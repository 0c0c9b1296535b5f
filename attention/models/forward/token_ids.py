"""TransformerLens's token helpers on a loaded model: to_tokens, to_str_tokens, to_single_token (issue 72).

    >>> to_tokens(m, "When Mary and John")              # [batch, pos] ids, as attend() reads the text
    >>> to_tokens(m, "When Mary", prepend_bos=True)     # BOS first, whatever the tokenizer does
    >>> to_str_tokens(m, "When Mary")                   # ['When', ' Mary']
    >>> to_single_token(m, " Mary")                     # one id, or ValueError when it is several tokens

`prepend_bos`: None (the default) keeps what the model's own tokenizer does, which is what every page and
attend() read: BERT-likes add [CLS] ... [SEP], Llama-style tokenizers add <s>, SmolLM2's and GPT-2's add
nothing. TransformerLens's default is True for most models (HookedTransformerConfig.default_prepend_bos): pass
prepend_bos=True to read a model as a TransformerLens notebook does, or False to drop a BOS the tokenizer
added. Either way the ids are plain token ids: run_with_cache, run_with_hooks and hooks() take them as they are.
"""

from __future__ import annotations

import torch

from attention.models.forward.model import LoadedModel


def to_tokens(loaded: LoadedModel, text, prepend_bos: bool | None = None) -> torch.Tensor:
    """[batch, pos] token ids of a text (batch 1) or a list of texts (padded on the right with the pad token, or
    EOS), on the model's device. `prepend_bos` as the module docstring says."""
    texts = [text] if isinstance(text, str) else list(text)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("to_tokens takes a text or a list of texts")
    rows = [_with_bos(loaded, loaded.tokenizer(t)["input_ids"], prepend_bos) for t in texts]
    tok = loaded.tokenizer
    pad = next((i for i in (tok.pad_token_id, tok.eos_token_id) if i is not None), 0)
    ids = torch.full((len(rows), max(len(r) for r in rows)), int(pad), dtype=torch.long)
    for b, row in enumerate(rows):
        ids[b, :len(row)] = torch.tensor(row, dtype=torch.long)
    return ids.to(loaded.device)


def to_str_tokens(loaded: LoadedModel, text_or_ids, prepend_bos: bool | None = None) -> list[str]:
    """Each token of a text (or of one row of ids) as the tokenizer decodes it alone: " Mary", not "ĠMary"."""
    if isinstance(text_or_ids, str):
        ids = to_tokens(loaded, text_or_ids, prepend_bos)[0]
    else:
        ids = torch.as_tensor(text_or_ids)
        if ids.ndim == 2 and ids.shape[0] == 1:
            ids = ids[0]
        if ids.ndim != 1:
            raise ValueError(f"to_str_tokens takes a text or one row of ids, not ids of shape {tuple(ids.shape)}")
    return [loaded.tokenizer.decode([int(i)]) for i in ids.tolist()]


def to_single_token(loaded: LoadedModel, string: str) -> int:
    """The id of `string` when the tokenizer makes it exactly one token (no special tokens added), else
    ValueError naming the tokens it makes (" Mary" with its space is often one token, "Mary" another)."""
    ids = loaded.tokenizer(string, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        pieces = [loaded.tokenizer.decode([i]) for i in ids]
        raise ValueError(f"{string!r} is {len(ids)} tokens for {loaded.spec.name}, not one: {pieces}")
    return int(ids[0])


def _with_bos(loaded: LoadedModel, ids: list[int], prepend_bos: bool | None) -> list[int]:
    if prepend_bos is None:
        return list(ids)
    bos = loaded.tokenizer.bos_token_id
    if bos is None:
        if prepend_bos:
            raise ValueError(f"{loaded.spec.name}'s tokenizer has no BOS token to prepend (its own special tokens "
                             "are what prepend_bos=None keeps)")
        return list(ids)
    starts = bool(ids) and ids[0] == bos
    if prepend_bos:
        return list(ids) if starts else [bos, *ids]
    return list(ids[1:]) if starts else list(ids)
