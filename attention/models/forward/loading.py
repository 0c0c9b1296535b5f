"""Loading a pretrained model, offline first, with a ModelUnavailable that says what to do on every failure.

`load_model("minilm")` finds the bundled files (attention.models.forward.registry says which package carries
them), builds the network with attention routed through attention.models.forward.capture, puts it on the
compute device (ATTENTION_EXPLORER_DEVICE, attention.models.forward.recompute), and returns the LoadedModel
that attention.models.forward.running runs. It opens as well an operator's folders (`local:<root>/<folder>`), any
saved transformers folder by path (from Python), and allowlisted hub ids; `from_model(model, tokenizer)`
takes a model a notebook already holds. Every model passes the guard (attention.models.forward.guard) first.

Families whose attention classes are chosen from a table of their own (GPT-J, Falcon) cannot take our
attention function: they load with transformers' eager attention and show their own output_attentions.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from attention.focus import DTYPES
from attention.models.forward.bundled import gemma3_dir, image_model_dir, minilm_dir, smollm2_dir
from attention.models.forward.capture import CAPTURE
from attention.models.forward.device import compute_device
from attention.models.forward.guard import check_model
from attention.models.forward.images import VISION_TYPES
from attention.models.forward.memory import MemoryPlan, NotEnoughMemory, long_input_tokens, plan_memory, weight_bytes
from attention.models.forward.model import LoadedModel
from attention.models.forward.registry import (
    BUNDLED,
    IMAGE_MODELS,
    INSTALL_COMMAND,
    LOCAL_PREFIX,
    ModelSpec,
    ModelUnavailable,
    cache_dir,
    hub_allowlist,
    local_models,
    model_label,
)

SMALL_MODEL_BYTES = 2_000_000_000  # "auto" on the CPU: float32 up to this many bytes of float32 weights
IMAGE_TOKEN_LIMIT = 4096  # an image model reads as many tokens as its processor's image makes patches


def load_model(name: str, *, dtype: str = "auto", device_map: str | dict | None = None,
               progress: Callable[[str], None] | None = None, paths: bool = True) -> LoadedModel:
    """Load a bundled model by key (`minilm`, `smollm2`, `gemma3`), an operator's folder (`local:<root>/<folder>`), a
    saved transformers folder by its path (when `paths`: the app passes False, so that nothing a visitor
    types is opened as a path), or an allowlisted hub id; then check it (attention.models.forward.guard).

    `dtype`: "float32", "bfloat16", "float16", or "auto": float32 for a model whose float32 weights take at
    most SMALL_MODEL_BYTES on the CPU, else the checkpoint's own dtype (bfloat16 when it names none). Our
    weights are computed in float32 from the model's own q and k whatever its dtype; the guard holds them to
    its eager kernel within what the dtype's rounding explains.

    `device_map` (a folder or hub model): accelerate's placement, for a model larger than one device: "auto"
    (every GPU, then the CPU, then disk), or a dict {module name: "cuda:0" | "cpu" | "disk"}; layers kept on
    disk are read into memory as they run (their files in cache_dir()/offload). Capture, our kernel, the views
    and the analyses work across devices; those that read weights outside the pass read a layer on disk from
    its offload files (attention.models.forward.anatomy.parameter).

    Raises ModelUnavailable with a message for the user on every failure. One load at a time per process
    (LOADING).
    """
    with LOADING:
        return _load_model(name, dtype, device_map, progress, paths)


# transformers' from_pretrained is not thread-safe: it patches process-wide names while it builds a model
# (PreTrainedModel.tie_weights to a no-op, torch.linspace, the default dtype) and puts back what it found.
# Two loads at once in one server (two sessions asking for two models) could each put back the other's
# patch: tie_weights stayed a no-op, and every later SmolLM2 load left its tied LM head on the meta device
# ("Cannot copy out of meta tensor", make soak, issue 33).
LOADING = threading.Lock()


def _load_model(name: str, dtype: str, device_map, progress, paths: bool) -> LoadedModel:
    if dtype not in DTYPES:
        raise ModelUnavailable(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}.")
    progress = progress or (lambda message: None)
    name = (name or "").strip()
    if device_map is not None and (name in BUNDLED or name in IMAGE_MODELS):
        raise ModelUnavailable(f"{name} is small enough for one device: device_map is for folders and hub models.")
    if name == "minilm":
        loaded = _load_dir(BUNDLED["minilm"], minilm_dir(), dtype)
    elif name == "smollm2":
        loaded = _load_dir(BUNDLED["smollm2"], smollm2_dir(progress), dtype)
    elif name == "gemma3":
        loaded = _load_dir(BUNDLED["gemma3"], gemma3_dir(progress), dtype)
    elif name in IMAGE_MODELS:
        loaded = _load_image_dir(IMAGE_MODELS[name], image_model_dir(name), dtype)
    elif name in (local := local_models()):
        loaded = _load_folder(name, local[name], dtype, device_map)
    elif name.startswith(LOCAL_PREFIX):
        raise ModelUnavailable(f"{model_label(name)} is not among the operator's model folders now (deleted, moved "
                               "or emptied since the list was made, or a link out of its root): pick another model.")
    elif paths and _is_path(name):
        loaded = _load_folder(name, Path(name).expanduser(), dtype, device_map)
    else:
        loaded = _load_hub(name, progress, dtype, device_map)
    return check_model(loaded)


def torch_dtype(dtype: str, config, auto_class):
    """The torch dtype a model loads in (load_model's `dtype`; "auto" decided from the config's size)."""
    import torch

    if dtype != "auto":
        return getattr(torch, dtype)
    own = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    own = getattr(torch, own) if isinstance(own, str) else own
    if compute_device().type == "cpu" and weight_bytes(config, auto_class) <= SMALL_MODEL_BYTES:
        return torch.float32
    return own if own in (torch.float32, torch.bfloat16, torch.float16) else torch.bfloat16


def from_model(model, tokenizer, *, name: str | None = None) -> LoadedModel:
    """A model a notebook already holds (a transformers PreTrainedModel and its tokenizer, or for a vision
    transformer its image processor), ready to attend:
    the same LoadedModel load_model gives, checked by the guard. The model is put in eval mode and its
    attention routed through ours (attention.models.forward.capture: outside our calls it is transformers' eager
    attention; `model.set_attn_implementation("sdpa")` switches it back)."""
    model.eval()
    config = model.config
    if config._attn_implementation != CAPTURE:
        try:
            model.set_attn_implementation(CAPTURE)
        except Exception:  # a family that keeps a table of attention classes: its own weights are shown
            pass
    label = name or str(getattr(config, "_name_or_path", "") or type(model).__name__)
    device = next(model.parameters()).device
    image = _inputs_of(config) == "image"
    spec = ModelSpec(label, f"{label} (from Python)", "encoder-only" if image else _architecture(config, model),
                     IMAGE_TOKEN_LIMIT if image else _token_limit(config, device), inputs=_inputs_of(config))
    return check_model(_loaded(spec, model, tokenizer))


def _is_path(name: str) -> bool:
    """A name meant as a folder: one that exists, or that starts as a path does."""
    return name.startswith(("/", "./", "../", "~")) or Path(name).expanduser().is_dir()


def _load_folder(name: str, folder: Path, dtype: str = "auto", device_map=None) -> LoadedModel:
    """A saved transformers model folder (config.json, weights, tokenizer)."""
    if not folder.is_dir():
        raise ModelUnavailable(f"There is no folder at {folder}.")
    if not (folder / "config.json").is_file():
        raise ModelUnavailable(f"{folder} holds no config.json: it is not a saved transformers model "
                               "(save one with model.save_pretrained(folder) and tokenizer.save_pretrained(folder)).")
    _refuse_remote_code(folder / "config.json")
    try:
        config, architecture, model, tokenizer, max_tokens = _from_source(folder, dtype, device_map)
    except NotEnoughMemory as err:
        raise ModelUnavailable(str(err)) from None
    except Exception as err:
        raise ModelUnavailable(f"{folder} could not be loaded: {type(err).__name__}: {str(err)[:300]}") from err
    spec = ModelSpec(name, model_label(name) if name.startswith("local:") else f"{name} (folder)", architecture,
                     max_tokens, inputs=_inputs_of(config))
    return _loaded(spec, _placed(model), tokenizer)


def _refuse_remote_code(config_file: Path) -> None:
    """A config that names code of its own (auto_map: Python files shipped with the model) is refused before
    anything else is read: this app never runs a model's own code (trust_remote_code stays False)."""
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ModelUnavailable(f"{config_file} is not a readable JSON config ({type(err).__name__}).") from None
    if not isinstance(config, dict):
        raise ModelUnavailable(f"{config_file} is not a transformers config (a JSON object).")
    if "auto_map" in config:
        named = config["auto_map"]
        named = ", ".join(map(str, named)) if isinstance(named, dict) else "its auto_map"
        raise ModelUnavailable(f"{config_file.parent.name} asks to run code of its own ({named[:200]}): this app never "
                               "runs a model's own code. Use a model whose family transformers itself implements.")


def _placed(model):
    """The network in eval mode on the compute device, unless accelerate placed it (a device_map)."""
    model.eval()
    return model if getattr(model, "hf_device_map", None) else model.to(compute_device())


def _from_source(source, dtype: str = "auto", device_map=None):
    """(config, architecture, network, tokenizer, token limit) of a folder or hub id, never with remote code.
    Its memory is checked from the config before the weights are read (attention.models.forward.memory):
    NotEnoughMemory when it does not fit; the token limit is lowered to what fits. An image model gives its
    image processor in the tokenizer's place (_image_source)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(source, trust_remote_code=False)
    if _inputs_of(config) == "image":
        return _image_source(source, config, dtype, device_map)
    architecture = _architecture(config)
    auto = _auto_class(architecture)
    chosen = torch_dtype(dtype, config, auto)
    device = compute_device()
    plan = plan_memory(config, auto, max_tokens=_token_limit(config, device), dtype=chosen, name=str(source),
                       device=device, placed=device_map is not None)
    split = {} if device_map is None else {"device_map": device_map, "offload_folder": str(_offload_folder(source))}
    model = _from_pretrained(auto, source, dtype=chosen, **split)
    return config, architecture, model, _tokenizer(source), plan.max_tokens


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "tokenizer.model",
                   "spiece.model", "sentencepiece.bpe.model")


def _tokenizer(source):
    """The folder's (or hub id's) tokenizer; a folder without one says so in words (transformers' own error blames a
    missing sentencepiece)."""
    from pathlib import Path

    from transformers import AutoTokenizer

    folder = Path(str(source))
    if folder.is_dir() and not any((folder / name).exists() for name in TOKENIZER_FILES):
        raise ValueError(f"the folder {folder} holds no tokenizer (none of {', '.join(TOKENIZER_FILES)}): save the "
                         "model's tokenizer beside its weights (tokenizer.save_pretrained(folder)); every page and "
                         "function here reads text through it")
    return AutoTokenizer.from_pretrained(source, trust_remote_code=False)


def _auto_class(architecture: str):
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    return {"encoder-decoder": AutoModelForSeq2SeqLM, "decoder-only": AutoModelForCausalLM}.get(architecture, AutoModel)


def _from_pretrained(auto, source, **kwargs):
    """auto.from_pretrained with our attention; a family that picks its attention class from a table of its
    own (GPT-J, Falcon: a KeyError for ours) loads with eager attention and shows its own weights."""
    try:
        return auto.from_pretrained(source, attn_implementation=CAPTURE, trust_remote_code=False, **kwargs)
    except KeyError as err:
        if CAPTURE not in str(err):
            raise
        return auto.from_pretrained(source, attn_implementation="eager", trust_remote_code=False, **kwargs)


def _token_limit(config, device) -> int:
    """The most tokens a model reads before its memory is counted: its own position limit, at most
    LONG_INPUT_TOKENS on `device` (attention.models.forward.memory lowers it to what fits)."""
    ceiling = long_input_tokens(device)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    own = getattr(text, "max_position_embeddings", None) or getattr(text, "n_positions", None) or ceiling
    return min(ceiling, int(own))


def memory_plan(loaded: LoadedModel) -> MemoryPlan:
    """The memory plan load_model makes for a model like this one before reading its weights (its config, its
    class, its token limit on its device, its dtype): what `make bench` holds against the memory a pass used."""
    config = loaded.network.config
    dtype = next(loaded.network.parameters()).dtype
    return plan_memory(config, _auto_class(_architecture(config)), max_tokens=_token_limit(config, loaded.device),
                       dtype=dtype)


def _load_dir(spec: ModelSpec, folder: Path, dtype: str = "auto") -> LoadedModel:
    import torch
    from transformers import AutoConfig, AutoTokenizer

    auto = _auto_class(spec.architecture)
    chosen = torch.float32 if dtype == "auto" else getattr(torch, dtype)  # the bundled models are small
    device = compute_device()
    try:
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
    except Exception as err:
        raise ModelUnavailable(f"{spec.label} could not be loaded from {folder}: {type(err).__name__}: {err}. "
                               f"Reinstall it with `{INSTALL_COMMAND}`.") from err
    try:  # its token limit: what fits, at most the registry's for the device
        plan = plan_memory(config, auto, max_tokens=spec.token_limit(device), dtype=chosen, name=spec.label,
                           device=device)
    except NotEnoughMemory as err:
        raise ModelUnavailable(str(err)) from None
    try:  # decoders keep their LM head
        model = _from_pretrained(auto, folder, dtype=chosen)
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception as err:
        raise ModelUnavailable(f"{spec.label} could not be loaded from {folder}: {type(err).__name__}: {err}. "
                               f"Reinstall it with `{INSTALL_COMMAND}`.") from err
    spec = replace(spec, max_tokens=plan.max_tokens, max_tokens_gpu=None)
    return LoadedModel(spec=spec, network=model.eval().to(device), tokenizer=tokenizer)


def _inputs_of(config) -> str:
    """"image" for a vision transformer's config (attention.models.forward.images.VISION_TYPES), else "text"."""
    return "image" if getattr(config, "model_type", None) in VISION_TYPES else "text"


def _loaded(spec: ModelSpec, network, reader) -> LoadedModel:
    """A LoadedModel whose reader is its tokenizer, or for an image model its image processor."""
    if spec.inputs == "image":
        return LoadedModel(spec=spec, network=network, tokenizer=None, processor=reader)
    return LoadedModel(spec=spec, network=network, tokenizer=reader)


def _image_source(source, config, dtype: str = "auto", device_map=None):
    """_from_source for a vision transformer: the network (a classifier where the checkpoint is one, else
    the bare encoder; CLIP's or SigLIP's vision tower alone) and its image processor."""
    import transformers
    from transformers import AutoImageProcessor, AutoModel, AutoModelForImageClassification

    towers = {"clip": "CLIPVisionModel", "siglip": "SiglipVisionModel"}
    archs = " ".join(getattr(config, "architectures", None) or [])
    if config.model_type in towers:
        auto = getattr(transformers, towers[config.model_type])
    else:
        auto = AutoModelForImageClassification if "ForImageClassification" in archs else AutoModel
    chosen = torch_dtype("float32" if dtype == "auto" else dtype, config, auto)
    split = {} if device_map is None else {"device_map": device_map, "offload_folder": str(_offload_folder(source))}
    model = _from_pretrained(auto, source, dtype=chosen, **split)
    try:
        processor = AutoImageProcessor.from_pretrained(source, trust_remote_code=False)
    except Exception as err:
        raise ModelUnavailable(f"{source} holds no image processor (preprocessor_config.json), so how it reads an "
                               f"image is not known: {type(err).__name__}: {str(err)[:200]}") from None
    return config, "encoder-only", model, processor, IMAGE_TOKEN_LIMIT


def _load_image_dir(spec: ModelSpec, folder: Path, dtype: str = "auto") -> LoadedModel:
    try:
        _, _, model, processor, _ = _image_source(folder, _config(folder), dtype)
    except Exception as err:
        raise ModelUnavailable(f"{spec.label} could not be loaded from {folder}: {type(err).__name__}: {err}.") from err
    return _loaded(spec, _placed(model), processor)


def _config(folder: Path):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(folder, trust_remote_code=False)


def _load_hub(model_id: str, progress: Callable[[str], None], dtype: str = "auto", device_map=None) -> LoadedModel:
    allowed = hub_allowlist()
    if not model_id:
        raise ModelUnavailable("No model name given.")
    if model_id not in allowed:
        raise ModelUnavailable(
            f"“{model_id}” is not on this server's allowlist. Allowed: {', '.join(allowed) or 'none (hub disabled)'}."
            " Set ATTENTION_EXPLORER_HUB_MODELS to change it.")
    progress(f"Loading {model_id} from the Hugging Face hub or its local cache…")
    try:
        config, architecture, model, tokenizer, max_tokens = _from_source(model_id, dtype, device_map)
    except NotEnoughMemory as err:
        raise ModelUnavailable(str(err)) from None
    except Exception as err:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false")
        gated = "gated" in str(err).lower() or type(err).__name__ == "GatedRepoError"
        why = ("it is a gated model: accept its licence on its page at huggingface.co, then log in on this server "
               "(hf auth login, or set HF_TOKEN)") if gated else \
            ("this server works offline (HF_HUB_OFFLINE=1): a model from the Hugging Face hub can be opened here "
             "only if it was downloaded before") if offline \
            else f"{type(err).__name__}: {str(err)[:300]}"
        raise ModelUnavailable(f"“{model_id}” could not be loaded: {why}. The bundled models and the toy "
                               "pages work offline.") from err
    spec = ModelSpec(model_id, f"{model_id} (hub)", architecture, max_tokens, inputs=_inputs_of(config))
    return _loaded(spec, _placed(model), tokenizer)


def _offload_folder(source) -> Path:
    """Where a split model's layers on disk are kept: one folder per model under cache_dir()/offload."""
    return cache_dir() / "offload" / hashlib.sha256(str(source).encode()).hexdigest()[:16]


def _architecture(config, model=None) -> str:
    """"encoder-decoder", "decoder-only" (a causal language model: it predicts next tokens) or "encoder-only",
    from the config's architectures, or from the model itself when it is at hand (a config built in code
    names none)."""
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder"
    archs = " ".join(getattr(config, "architectures", None) or ([type(model).__name__] if model is not None else []))
    return "decoder-only" if ("CausalLM" in archs or "LMHead" in archs) else "encoder-only"
