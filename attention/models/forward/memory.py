"""Memory, checked before it is spent: what a model needs, from its config alone, against what the process may use.

    weights   the parameters of the network the config describes, built on PyTorch's meta device (shapes
              only, nothing allocated) × the bytes of the dtype it will load in
    working   per token of input, what attend() keeps (in the process's memory, wherever the model runs):
              q, k, v of every layer (float32), the hidden states (L + 1 vectors), and one chunk of weights;
              per pair of tokens, the mask (n × n: one byte kept, one while it is read); × the token limit;
              on the CPU also the pass's activations per token, and while loading the largest tensor twice
    device    on a GPU, the weights and the pass's own working memory there: per token, one layer's
              activations in the model's dtype and their float32 copies, and what the result keeps there
              (q, k, v of every layer and the hidden states, in the model's dtype: attention.models.forward.
              device_arrays); per pair, the additive mask and the kept bool mask; the survey's buffers.
              What stays in the process's memory is then the survey's per-token sums alone
    budget    what the process may use: the memory the system says is available (MemAvailable, or the cgroup's
              limit when lower), or an operator's cap ATTENTION_EXPLORER_MEMORY_GB when set; on a GPU also
              its free memory (torch.cuda.mem_get_info); HEADROOM of each

A model whose weights and working memory at MIN_TOKENS do not fit is refused before anything is allocated,
with the figures and the ways out (half precision, a GPU, a shorter input limit). Where the weights fit but
the working memory at the model's token limit does not, the limit is lowered to what fits, and said.
The limit also never passes LONG_INPUT_TOKENS on the device (what a page waits for: seconds, not minutes).

Shapes: L layers, H heads, H_kv KV heads, d head size, D model size, I MLP size, n tokens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from attention.models.forward.anatomy import layer_windows
from attention.models.forward.survey_sums import GPU_CHUNK_FLOATS

GB = 1_000_000_000  # decimal, as model cards count ("8B parameters in bfloat16: 16 GB")
HEADROOM = 0.8  # of the budget a model may plan to use: the rest is Python, the page and other sessions
MEMORY_ENV = "ATTENTION_EXPLORER_MEMORY_GB"
MIN_TOKENS = 64  # below this a model is refused rather than shown on a few tokens
LONG_INPUT_TOKENS = {"cpu": 4096, "cuda": 32768}  # the most tokens a model reads on each kind of device


@dataclass(frozen=True)
class MemoryPlan:
    """What a model needs and what there is, in bytes."""

    weights: int  # the parameters in the dtype they load in
    per_token: int  # working memory per token of input, in the process's memory (module docstring)
    budget: int  # what the process may use (HEADROOM of what is available)
    max_tokens: int  # the token limit that fits (at most the model's own and LONG_INPUT_TOKENS)
    dtype: str
    device: str = "cpu"  # where the weights go: "cpu" or "cuda"
    per_pair: int = 2  # working memory per pair of tokens (the mask), in the process's memory
    device_per_token: int = 0  # on a GPU: the pass's working memory per token there
    device_per_pair: int = 0  # on a GPU: per pair of tokens there (the additive mask)
    device_budget: int = 0  # on a GPU: HEADROOM of its free memory
    survey_per_pair: int = 0  # on a GPU: the survey's three chunk buffers per pair of tokens (float32 per head)...
    survey_most: int = 0  # ...and at their largest (chunks of GPU_CHUNK_FLOATS)
    host_fixed: int = 0  # in the process's memory whatever the length: W_O copied as float32 (a GPU's model, or
    # one in half precision), read once per model
    loading: int = 0  # while loading, in the process's memory: the largest tensor twice (in the file's pages
    # and in the network) when the weights load on the CPU

    def needs(self, n: int) -> tuple[int, int]:
        """Bytes (process memory, GPU memory) for an input of n tokens: the weights in the first where they
        load on the CPU, in the second on a GPU."""
        host = self.host_fixed + self.per_token * n + self.per_pair * n * n
        if self.device != "cuda":
            return self.weights + self.loading + host, 0
        survey = min(self.survey_most, self.survey_per_pair * n * n)
        return host, self.weights + self.device_per_token * n + self.device_per_pair * n * n + survey

    def fits(self, n: int) -> bool:
        """Whether a text of n tokens fits: in the process's budget, and on a GPU in its own."""
        host, gpu = self.needs(n)
        return host <= self.budget and (self.device != "cuda" or gpu <= self.device_budget)


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
    return sum(tensor_bytes(config, auto_class, dtype))


def tensor_bytes(config, auto_class, dtype: torch.dtype = torch.float32) -> list[int]:
    """Bytes of each parameter and buffer of the network `config` describes, in `dtype` (tied weights once),
    from the meta device."""
    build = getattr(auto_class, "from_config", None) or auto_class  # an Auto class, or a model class itself
    with torch.device("meta"):
        network = build(config)
    tensors = {id(t): t for t in (*network.parameters(), *network.buffers())}  # tied weights counted once
    return [t.numel() * (torch.finfo(dtype).bits // 8 if t.is_floating_point() else t.element_size())
            for t in tensors.values()]


@dataclass(frozen=True)
class Shape:
    """The sizes a config gives (module docstring's letters)."""

    L: int
    D: int
    H: int
    H_kv: int
    d: int
    mlp: int  # I

    @classmethod
    def of(cls, config) -> Shape:
        """The shape a transformers config declares, whatever each family calls its fields."""
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        D = int(_first(text, "hidden_size", "n_embd", "d_model", "dim"))
        H = int(_first(text, "num_attention_heads", "n_head", "num_heads", "n_heads"))
        return cls(L=int(_first(text, "num_hidden_layers", "n_layer", "num_layers", "n_layers")), D=D, H=H,
                   H_kv=int(getattr(text, "num_key_value_heads", None) or H),
                   d=int(getattr(text, "head_dim", None) or D // H),
                   mlp=int(getattr(text, "intermediate_size", None) or getattr(text, "n_inner", None) or 4 * D))


def per_token_bytes(config) -> int:
    """Working memory per token of input (module docstring), float32: q, k, v per layer, the hidden states,
    and one chunk of weights (H rows of at most 4,096 keys)."""
    s = Shape.of(config)
    return 4 * (s.L * (s.H + 2 * s.H_kv) * s.d + (s.L + 1) * s.D + s.H * 4096)


def kept_on_device_bytes(config, dtype: torch.dtype) -> int:
    """Per token, what a GPU's result keeps there in the model's dtype: q, k, v of every layer and the
    hidden states (L + 1 vectors)."""
    s = Shape.of(config)
    return torch.finfo(dtype).bits // 8 * (s.L * (s.H + 2 * s.H_kv) * s.d + (s.L + 1) * s.D)


def survey_bytes(config) -> int:
    """Per token, the survey's sums kept in the process's memory (float64): each head's column mass and
    majority counts, and its mass at each offset (two per token)."""
    s = Shape.of(config)
    return 8 * 4 * s.L * s.H


def activation_bytes(config, dtype: torch.dtype) -> int:
    """A pass's working memory per token wherever it runs: one layer's activations in `dtype` (the residual
    stream and its norm, the MLP's three widths, q, k, v and the attention output) and the float32 copies of
    q, k, v that capture makes. On a GPU one chunk of our kernel's scores (H rows of 4,096 keys) comes on top."""
    s = Shape.of(config)
    qkv = (2 * s.H + 2 * s.H_kv) * s.d
    return torch.finfo(dtype).bits // 8 * (4 * s.D + 3 * s.mlp + qkv) + 4 * qkv


def long_input_tokens(device) -> int:
    """LONG_INPUT_TOKENS for a device (a torch.device or its name)."""
    return LONG_INPUT_TOKENS.get(torch.device(device).type, LONG_INPUT_TOKENS["cpu"])


def _first(config, *names: str):
    for name in names:
        if getattr(config, name, None):
            return getattr(config, name)
    raise NotEnoughMemory(f"the model's configuration does not say its {names[0]}, so its memory cannot be checked")


def _windows(config, n_layers: int) -> tuple[int | None, ...]:
    """Each layer's sliding window (None: global), from the text model's config."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return layer_windows(text, n_layers)


def gpu_free_bytes(device: torch.device) -> int:
    """Free memory on a CUDA device (what the driver reports), or the operator's cap when lower."""
    free, _ = torch.cuda.mem_get_info(device)
    cap = os.environ.get(MEMORY_ENV)
    return min(free, int(float(cap) * GB)) if cap else free


def plan_memory(config, auto_class, *, max_tokens: int, dtype: torch.dtype = torch.float32,
                name: str = "this model", device: torch.device | str = "cpu", placed: bool = False) -> MemoryPlan:
    """The model's needs against the budget on `device`: a MemoryPlan whose max_tokens is what fits (at most
    `max_tokens` and LONG_INPUT_TOKENS there), or NotEnoughMemory (figures and ways out) before anything is
    allocated. `placed`: accelerate places the weights (a device_map, with its own check of each device), so
    only the working memory is counted here."""
    device = torch.device(device)
    on_gpu = device.type == "cuda"
    dtype_name = str(dtype).removeprefix("torch.")
    sizes = [0] if placed else tensor_bytes(config, auto_class, dtype)
    shape, size = Shape.of(config), torch.finfo(dtype).bits // 8
    # On a GPU: q, k, v and the hidden states are held twice for a moment (each call's own, and the stacks
    # being filled); each distinct mask (a sliding window's is another) as the model's additive mask and the
    # kept bool one, and ~4 bytes a pair of temporaries while it is read.
    masks = len(set(_windows(config, shape.L)))
    plan = MemoryPlan(weights=sum(sizes), loading=2 * max(sizes) if not on_gpu else 0,
                      per_token=(survey_bytes(config) if on_gpu else
                                 per_token_bytes(config) + activation_bytes(config, dtype)),
                      budget=int(available_bytes() * HEADROOM), max_tokens=0, dtype=dtype_name,
                      device=device.type, per_pair=0 if on_gpu else 2,
                      device_per_token=(activation_bytes(config, dtype) + 2 * kept_on_device_bytes(config, dtype)
                                        if on_gpu else 0),
                      device_per_pair=masks * (size + 1) + 4 if on_gpu else 0,
                      device_budget=int(gpu_free_bytes(device) * HEADROOM) if on_gpu else 0,
                      survey_per_pair=3 * 4 * shape.H if on_gpu else 0,
                      survey_most=3 * 4 * GPU_CHUNK_FLOATS if on_gpu else 0,
                      host_fixed=(4 * shape.L * shape.H * shape.d * shape.D
                                  if on_gpu or dtype != torch.float32 else 0))
    ceiling = min(max_tokens, long_input_tokens(device))
    lo, hi = 0, ceiling  # the most tokens that fit: needs() grows with n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if plan.fits(mid) else (lo, mid - 1)
    if lo < min(MIN_TOKENS, ceiling):
        tokens = min(ceiling, MIN_TOKENS)
        host, gpu = plan.needs(tokens)
        on_device = on_gpu and gpu > plan.device_budget
        where, need, usable = (("the GPU", gpu, plan.device_budget) if on_device else
                               ("the memory this server may use", host, plan.budget))
        more = need - (plan.weights if on_device or not on_gpu else 0)  # the weights are counted where they go
        available = usable / HEADROOM
        raise NotEnoughMemory(
            f"{name} does not fit in {where}: its weights need {plan.weights / GB:.1f} GB in {dtype_name} and "
            f"reading {tokens} tokens {more / GB:.2f} GB more, against {usable / GB:.1f} GB usable "
            f"({HEADROOM:.0%} of the {available / GB:.1f} GB available). Ways "
            f"out: half precision (from Python, load_model(..., dtype=\"bfloat16\"): its weights would need "
            f"{weight_bytes(config, auto_class, torch.bfloat16) / GB:.1f} GB), a GPU or a machine with more "
            f"memory ({MEMORY_ENV} caps what this server uses), or a smaller model. Nothing was loaded.")
    return replace(plan, max_tokens=int(lo))
