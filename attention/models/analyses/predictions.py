"""What a causal language model does with its attention: the next token, and text generated token by token.

    next_tokens(logits, tokenizer)   the most likely next tokens, at a temperature: softmax(logits / T)
    generate(loaded, prompt)         greedy or sampled (seeded) continuation with the KV cache; at each
                                     step, the query that chose the token: its attention row in every
                                     layer x head over every key so far, and the distribution it chose from

Generation feeds one token per step and keeps the keys and values of earlier tokens (the KV cache): each
step's attention row therefore grows by one key, and equals the row of one full forward pass over the
final text (tests check it against the model loaded again with plain eager attention).

Shapes: V vocabulary size, k tokens listed, L layers, H query heads, n prompt tokens, t steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.forward.capabilities import require
from attention.models.forward.capture import recording
from attention.models.forward.device import work_threads
from attention.models.forward.memory import NotEnoughMemory, available_bytes
from attention.models.forward.model import LoadedModel
from attention.models.forward.recompute import layer_weights
from attention.models.forward.token_ids import to_single_token
from attention.models.forward.tokens import display_tokens
from attention.toy.core import entropy, softmax

MAX_NEW_TOKENS = 64


def token_text(tokenizer, token_id: int) -> str:
    """A token as text, its leading space kept (" Paris" and "Paris" are different tokens)."""
    return tokenizer.decode([int(token_id)])


@dataclass(frozen=True)
class NextTokens:
    """The k most likely next tokens at one temperature. Shapes: (k,) arrays, most likely first."""

    token_ids: np.ndarray  # (k,)
    tokens: tuple[str, ...]  # as text, leading spaces kept
    logits: np.ndarray  # (k,)
    probabilities: np.ndarray  # (k,) softmax(logits / temperature) over the whole vocabulary
    temperature: float
    entropy: float  # of the whole distribution, nats
    rest: float  # the probability left for the tokens outside these k


def next_tokens(logits, tokenizer, *, k: int = 10, temperature: float = 1.0) -> NextTokens:
    """The k most likely next tokens from a causal LM's last-position logits. Shapes: logits (V,)."""
    logits = np.asarray(logits, dtype=np.float64)
    p = softmax(logits, temperature=temperature)  # (V,)
    top = np.argsort(-logits, kind="stable")[:k]  # the order does not depend on the temperature
    return NextTokens(token_ids=top, tokens=tuple(token_text(tokenizer, i) for i in top), logits=logits[top],
                      probabilities=p[top], temperature=float(temperature), entropy=float(entropy(p)),
                      rest=float(max(0.0, 1.0 - p[top].sum())))


@dataclass(frozen=True)
class GenerationStep:
    """One generated token and where the query that chose it looked."""

    position: int  # the query's position: the last token fed (it sees keys 0..position)
    choices: NextTokens  # the distribution the token was chosen from (top k, at the temperature used)
    token_id: int
    token: str  # as text
    probability: float  # the chosen token's probability
    rows: np.ndarray  # (L, H, position + 1) the query's attention weights over every key so far


@dataclass(frozen=True)
class Generation:
    prompt_ids: np.ndarray  # (n,)
    prompt_tokens: tuple[str, ...]  # display strings
    steps: tuple[GenerationStep, ...]
    greedy: bool  # argmax at every step; else sampled at `temperature` with `seed`
    temperature: float
    seed: int
    stopped: str  # "length" (max_new_tokens reached), "end of text" (the model chose its EOS token), "stop token"
    truncated: bool  # the prompt was cut to leave room for the new tokens

    @property
    def ids(self) -> np.ndarray:
        """(n + t,) the prompt and the generated tokens."""
        return np.concatenate([self.prompt_ids, [s.token_id for s in self.steps]]).astype(np.int64)

    @property
    def text(self) -> str:
        """The generated continuation."""
        return "".join(s.token for s in self.steps)


def generate(loaded: LoadedModel, prompt: str, *, max_new_tokens: int = 32, greedy: bool = True,
             temperature: float = 1.0, seed: int = 0, k: int = 10, top_k: int | None = None,
             top_p: float | None = None, stop: str | int | list[int] | None = None,
             progress: Callable[[float, str], None] | None = None) -> Generation:
    """Continue `prompt` one token at a time with the KV cache, recording each step's query rows.

    greedy, or sampled at `temperature` from the `top_k` most likely tokens and the smallest set whose probability
    reaches `top_p` (both optional, as transformers' generate reads them; `seed` makes a sample repeatable). Stops
    at the model's end-of-text token, or at `stop` (a token id, ids, or a string of one token). `max_new_tokens`:
    the page offers up to MAX_NEW_TOKENS; here up to what the model reads after the prompt, and what the recorded
    rows (L x H x keys per step) fit in this machine's memory (NotEnoughMemory says so before it starts).
    Inside a hooks() block every step runs through its hooks (steering): the first step sees the prompt's
    positions, each later one only its new position (the KV cache holds the rest, as in TransformerLens), so a fn
    that indexes a position (resid[:, 5]) must check the tensor's length. A hook that changes a layer's scores or
    pattern is refused here (the recorded rows would not be the weights used); one that only reads them runs. The
    model's lock is taken for one step at a time, so other sessions' forward passes interleave."""
    network, tok = loaded.network, loaded.tokenizer
    require(loaded, "generation")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("Type a prompt first: the text is empty.")
    limit = loaded.spec.token_limit(loaded.device)
    if not 1 <= max_new_tokens < limit:
        raise ValueError(f"Generate between 1 and {limit - 1:,} tokens with {loaded.spec.name}, not {max_new_tokens}.")
    if top_k is not None and top_k < 1 or top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_k is a whole number from 1 and top_p a share in (0, 1], not {top_k} and {top_p}")
    room = limit - max_new_tokens
    ids = tok(prompt, return_tensors="pt", truncation=True, max_length=room)["input_ids"].to(loaded.device)
    truncated = len(tok(prompt, truncation=False)["input_ids"]) > ids.shape[1]
    _rows_fit(loaded, ids.shape[1], max_new_tokens)
    rng = np.random.default_rng(seed)
    names = {id(m): name for name, m in network.named_modules()}
    eos = getattr(network.config, "eos_token_id", None)
    eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos]) | _stop_ids(loaded, stop)
    steps, cache, feed, stopped = [], None, ids, "length"
    captured = loaded.check is None or loaded.check.captured  # else its own output_attentions, every step
    with torch.inference_mode(), work_threads(ids.shape[1]):
        for t in range(max_new_tokens):
            with loaded.lock, recording(names, kernel="sdpa") as calls:
                out = network(input_ids=feed, past_key_values=cache, use_cache=True, logits_to_keep=1,
                              output_attentions=not captured)
            cache = out.past_key_values
            keys = ids.shape[1] + t  # keys so far, the new query's own included
            if calls:
                rows = [layer_weights(c.q, c.k, scale=c.scale, mask=c.mask, softcap=c.softcap,
                                      rows=slice(c.q.shape[1] - 1, c.q.shape[1]))[:, 0].cpu().numpy() for c in calls]
            elif out.attentions:  # a family capture cannot see: the model's own weights of the last query
                rows = [a[0, :, -1].to(torch.float32).cpu().numpy() for a in out.attentions]
            else:
                raise ValueError(f"{loaded.spec.name} returned no attention weights while generating.")
            rows = np.stack([_right_aligned(r, keys) for r in rows])  # (L, H, keys so far)
            logits = out.logits[0, -1].to(torch.float64).cpu().numpy()
            used_t = 1.0 if greedy else temperature
            p = softmax(logits, temperature=used_t)
            chosen = int(np.argmax(logits)) if greedy else _sample(p, top_k, top_p, rng)
            steps.append(GenerationStep(position=ids.shape[1] + t - 1, choices=next_tokens(logits, tok, k=k,
                                        temperature=used_t), token_id=chosen, token=token_text(tok, chosen),
                                        probability=float(p[chosen]), rows=rows))
            if progress:
                progress((t + 1) / max_new_tokens, f"Generated {t + 1} of {max_new_tokens} tokens")
            if chosen in eos:
                stopped = "end of text" if chosen not in _stop_ids(loaded, stop) else "stop token"
                break
            feed = torch.tensor([[chosen]], device=loaded.device)
    return Generation(prompt_ids=ids[0].cpu().numpy(), prompt_tokens=display_tokens(tok, ids[0])[0],
                      steps=tuple(steps), greedy=greedy, temperature=float(temperature), seed=int(seed),
                      stopped=stopped, truncated=truncated)


def _sample(p: np.ndarray, top_k: int | None, top_p: float | None, rng: np.random.Generator) -> int:
    """A token drawn from p (V,) kept to its top_k most likely, then to the fewest whose sum reaches top_p (the
    most likely first, as transformers' TopKLogitsWarper then TopPLogitsWarper), renormalised."""
    order = np.argsort(-p, kind="stable")
    keep = len(p) if top_k is None else min(top_k, len(p))
    if top_p is not None:
        cumulative = np.cumsum(p[order[:keep]]) / p[order[:keep]].sum()
        keep = min(keep, int(np.searchsorted(cumulative, top_p)) + 1)
    kept = order[:keep]
    return int(kept[rng.choice(keep, p=p[kept] / p[kept].sum())])


def _stop_ids(loaded: LoadedModel, stop) -> set[int]:
    """The token ids `stop` names: an id, a list of ids, or a string of one token (to_single_token)."""
    if stop is None:
        return set()
    if isinstance(stop, str):
        return {to_single_token(loaded, stop)}
    return {int(stop)} if isinstance(stop, int) else {int(i) for i in stop}


def _rows_fit(loaded: LoadedModel, prompt: int, new: int) -> None:
    """NotEnoughMemory before a generation whose recorded rows (float32, L x H x keys, one per step) would not fit
    in half of the memory available now."""
    config = loaded.network.config
    layers = int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 0) or 1)
    heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_head", 0) or 1)
    rows = 4 * layers * heads * sum(prompt + t for t in range(new))
    free = available_bytes()
    if rows > free // 2:
        raise NotEnoughMemory(f"{new:,} new tokens after {prompt:,} would record {rows / 1e9:.1f} GB of attention "
                              f"rows ({layers} layers x {heads} heads x every key, each step), more than half of the "
                              f"{free / 1e9:.1f} GB free here: ask for fewer")


def _right_aligned(row: np.ndarray, keys: int) -> np.ndarray:
    """A layer's weights over the keys its cache holds, placed over all `keys` so far: a sliding-window
    layer's cache keeps only the latest keys, and the earlier ones get weight 0 (as in a full pass).
    Shapes: (H, k) -> (H, keys)."""
    out = np.zeros((row.shape[0], keys), dtype=row.dtype)
    out[:, keys - row.shape[1]:] = row
    return out
