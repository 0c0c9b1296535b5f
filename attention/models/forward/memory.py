"""Memory, checked before it is spent: what a model needs, from its config alone, against what the process may use.

    weights   the parameters of the network the config describes, built on PyTorch's meta device (shapes
              only, nothing allocated) × the bytes of the dtype it will load in
    working   per token of input, what attend() keeps and makes: q, k, v of every layer (float32), the hidden
              states (L + 1 vectors), and one chunk of weights; × the model's token limit
    budget    what the process may use: the memory the system says is available (MemAvailable, or the cgroup's
              limit when lower), or an operator's cap ATTENTION_EXPLORER_MEMORY_GB when set

A model whose weights and working memory at its token limit do not fit is refused before anything is
allocated, with the figures and the ways out (half precision, a GPU, a shorter input limit). Where the
weights fit but the working memory does not, the token limit is lowered to what fits, and said.

Shapes: L layers, H heads, H_kv KV heads, d head size, D model size, n tokens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

GB = 1_000_000_000  # decimal, as model cards count ("8B parameters in bfloat16: 16 GB")
HEADROOM = 0.8  # of the budget a model may plan to use: the rest is Python, the page and other sessions
MEMORY_ENV = "ATTENTION_EXPLORER_MEMORY_GB"
MIN_TOKENS = 64  # below this a model is refused rather than shown on a few tokens


@dataclass(frozen=True)
class MemoryPlan:
    """What a model needs and what there is, in bytes."""

    weights: int  # the parameters in the dtype they load in
    per_token: int  # working memory per token of input (module docstring)
    budget: int  # what the process may use (HEADROOM of what is available)
    max_tokens: int  # the token limit that fits (at most the model's own)
    dtype: str

    def describe(self) -> str:
        return (f"weights {self.weights / GB:.2f} GB in {self.dtype}, {self.per_token / 1024:.0f} KB per token of "
                f"input, {self.budget / GB:.1f} GB usable")


class NotEnoughMemory(ValueError):
    """A model does not fit; the message gives the figures and the ways out."""


def available_bytes() -> int:
    """What this process may use: MemAvailable (or the cgroup's limit, if lower), or the operator's cap."""
    cap = os.environ.get(MEMORY_ENV)
    if cap:
        try:
            return int(float(cap) * GB)
        except ValueError:
            raise NotEnoughMemory(f"{MEMORY_ENV}={cap!r} is not a number of gigabytes") from None
    free = _meminfo_available()
    limit = _cgroup_limit()
    return min(x for x in (free, limit) if x) if (free or limit) else 8 * GB


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # kibibytes
    except OSError:
        pass
    return None


def _cgroup_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:
            return int(text)
    return None


def weight_bytes(config, auto_class, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of the parameters (and buffers) of the network `config` describes, in `dtype`: built on the
    meta device, so nothing is allocated. `auto_class`: an Auto class (AutoModelForCausalLM) or a model class."""
    build = getattr(auto_class, "from_config", None) or auto_class  # an Auto class, or a model class itself
    with torch.device("meta"):
        network = build(config)
    tensors = {id(t): t for t in (*network.parameters(), *network.buffers())}  # tied weights counted once
    return sum(t.numel() * (torch.finfo(dtype).bits // 8 if t.is_floating_point() else t.element_size())
               for t in tensors.values())


def per_token_bytes(config) -> int:
    """Working memory per token of input (module docstring), float32: q, k, v per layer, the hidden states,
    and one chunk of weights (H rows of at most 4,096 keys)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    L = int(_first(text, "num_hidden_layers", "n_layer", "num_layers", "n_layers"))
    D = int(_first(text, "hidden_size", "n_embd", "d_model", "dim"))
    H = int(_first(text, "num_attention_heads", "n_head", "num_heads", "n_heads"))
    H_kv = int(getattr(text, "num_key_value_heads", None) or H)
    d = int(getattr(text, "head_dim", None) or D // H)
    return 4 * (L * (H + 2 * H_kv) * d + (L + 1) * D + H * 4096)


def _first(config, *names: str):
    for name in names:
        if getattr(config, name, None):
            return getattr(config, name)
    raise NotEnoughMemory(f"the model's configuration does not say its {names[0]}, so its memory cannot be checked")


def plan_memory(config, auto_class, *, max_tokens: int, dtype: torch.dtype = torch.float32,
                name: str = "this model") -> MemoryPlan:
    """The model's needs against the budget: a MemoryPlan whose max_tokens is what fits, or NotEnoughMemory
    (figures and ways out) before anything is allocated."""
    weights = weight_bytes(config, auto_class, dtype)
    per_token = per_token_bytes(config)
    budget = int(available_bytes() * HEADROOM)
    fits = (budget - weights) // per_token if budget > weights else 0
    dtype_name = str(dtype).removeprefix("torch.")
    if fits < min(MIN_TOKENS, max_tokens):
        tokens = min(max_tokens, MIN_TOKENS)
        raise NotEnoughMemory(
            f"{name} does not fit in the memory this server may use: its weights need {weights / GB:.1f} GB in "
            f"{dtype_name} and reading {tokens} tokens {per_token * tokens / GB:.2f} GB more, against "
            f"{budget / GB:.1f} GB usable ({HEADROOM:.0%} of the {budget / HEADROOM / GB:.1f} GB available). Ways "
            f"out: half precision (from Python, load_model(..., dtype=\"bfloat16\"): its weights would need "
            f"{weights / 2 / GB:.1f} GB), a machine with more memory ({MEMORY_ENV} caps what this server uses), or "
            "a smaller model. Nothing was loaded.")
    return MemoryPlan(weights=weights, per_token=per_token, budget=budget, max_tokens=int(min(max_tokens, fits)),
                      dtype=dtype_name)
