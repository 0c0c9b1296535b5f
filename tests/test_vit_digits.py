"""The bundled digits ViT (attention/models/forward/vit_digits/, written by scripts/train_vit_digits.py), read with
transformers alone, as the image-attention page reads it: its held-out accuracy recomputed on the script's own split
through the saved image processor, and its dozen bundled test digits found in that split where they say they are."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "attention" / "models" / "forward" / "vit_digits"
SCRIPT = ROOT / "scripts" / "train_vit_digits.py"


@pytest.fixture(scope="module")
def split():
    """(x_train, x_test, y_train, y_test) from the script itself (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("train_vit_digits", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script.digits_split()


@pytest.fixture(scope="module")
def predicted(split):
    """The saved model's class for each held-out digit: RGB PIL images -> saved processor -> saved model."""
    from PIL import Image
    from transformers import AutoImageProcessor, ViTForImageClassification

    model = ViTForImageClassification.from_pretrained(FOLDER).eval()
    processor = AutoImageProcessor.from_pretrained(FOLDER)
    images = [Image.fromarray(image, mode="L").convert("RGB") for image in split[1]]
    with torch.no_grad():
        logits = model(**processor(images, return_tensors="pt")).logits
    return logits.argmax(-1).numpy()


@pytest.fixture(scope="module")
def examples():
    with np.load(FOLDER / "test_digits.npz") as npz:
        return {key: npz[key] for key in npz.files}


def test_held_out_accuracy_is_what_training_recorded(split, predicted):
    y_test = split[3]
    accuracy = float(np.mean(predicted == y_test))
    recorded = json.loads((FOLDER / "training.json").read_text())
    assert recorded["test_size"] == len(y_test) == 360
    assert accuracy >= 0.95
    assert abs(accuracy - recorded["held_out_accuracy"]) <= 1e-9


def test_bundled_digits_are_held_out_at_their_indices(split, predicted, examples):
    _, x_test, _, y_test = split
    images, labels, indices = examples["images"], examples["labels"], examples["indices"]
    assert images.dtype == np.uint8 and images.shape == (12, 8, 8)
    np.testing.assert_array_equal(x_test[indices], images)
    np.testing.assert_array_equal(y_test[indices], labels)
    assert set(labels.tolist()) == set(range(10)) and len(set(indices.tolist())) == 12
    np.testing.assert_array_equal(predicted[indices], examples["predicted"])
    assert np.sum(examples["predicted"] != labels) == min(1, np.sum(predicted != y_test))
