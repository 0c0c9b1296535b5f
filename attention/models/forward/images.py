"""Images for a vision transformer: a stranger's file read safely, and an image's tokens named by its patches.

A vision transformer (ViT, DeiT, BEiT, DINOv2, CLIP's and SigLIP's vision towers) cuts the image its
processor made into a grid of square patches, reads each patch as one token, and puts a few tokens of its
own in front: "[CLS]" (a summary the classifier reads), DeiT's "distillation" token, DINOv2's "register 1",
"register 2", ... (Darcet et al. 2024: spare tokens that take over the role the high-norm patches played).
SigLIP has none. Its heads are read as a text model's are (attention.models.forward.running); this module
says which token is which patch (`ImagePatches`) and turns an upload into pixels, or says why not.

Uploads are files from strangers (`read_image`): at most MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS pixels (checked from
the header before any pixel is decoded, and Pillow's own MAX_IMAGE_PIXELS set to the same limit, so a
decompression bomb is refused, never decoded), no side longer than MAX_IMAGE_SIDE or shorter than
MIN_IMAGE_SIDE, one of IMAGE_FORMATS; every refusal says which rule it broke.

Shapes: C channels, h x w pixels, rows x cols patches, p pixels a patch side.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAX_IMAGE_BYTES = 10_000_000  # an upload's file size
MAX_IMAGE_PIXELS = 40_000_000  # width x height, read from the header before decoding (a bomb is refused)
MAX_IMAGE_SIDE = 10_000  # pixels: a 20,000-pixel-wide strip is refused, not squeezed into a square
MIN_IMAGE_SIDE = 8  # pixels: the digits model's own size; anything smaller has no patches to read
IMAGE_FORMATS = ("PNG", "JPEG", "GIF", "BMP", "WEBP")  # what Pillow reads for us (a GIF's first frame)
IMAGE_FORMATS_NOTE = "PNG, JPEG, GIF (its first frame), BMP or WebP"

# The tokens each family puts before its patches (model_type -> names); registers are counted from the config.
PREFIX_TOKENS = {
    "vit": ("[CLS]",), "beit": ("[CLS]",), "data2vec-vision": ("[CLS]",), "dinov2": ("[CLS]",),
    "deit": ("[CLS]", "distillation"), "clip_vision_model": ("[CLS]",), "siglip_vision_model": (),
    "dinov2_with_registers": ("[CLS]",),
}
VISION_TYPES = frozenset(PREFIX_TOKENS) | {"clip", "siglip"}  # a whole CLIP or SigLIP: its vision tower is read


@dataclass(frozen=True)
class ExampleImages:
    """Images to pick on the image page: the digits model's held-out test digits (its training script chose
    them from the split it never trained on). images: each (8, 8) uint8, white digits on black."""

    images: tuple[np.ndarray, ...]
    names: tuple[str, ...]  # "a 3 (test digit 41)"
    labels: tuple[str, ...]  # the true classes
    accuracy: float | None  # the model's accuracy over the whole held-out split, as its script measured it
    about: str  # where they come from, for the picker's help


class ImageRefused(ValueError):
    """An image this app does not read; the message says which rule it broke, in words for the user."""


@dataclass(frozen=True)
class ImagePatches:
    """Which token of an image model's input is which patch, and the pixels the model saw.

    pixels (h, w, 3) uint8: the processor's output mapped back to 0..255 for drawing (its mean and std
    undone), so patch (r, c) covers pixels [r*p:(r+1)*p, c*p:(c+1)*p]. pixel_values (C, h, w) float32: what
    the model read, kept so that the model's own pass can be run again on exactly it (the guard, checks)."""

    pixels: np.ndarray
    pixel_values: np.ndarray
    rows: int
    cols: int
    patch: int  # p: pixels per patch side
    prefix: tuple[str, ...]  # the tokens before the patches, in order ("[CLS]", "register 1", ...)
    labels: tuple[str, ...] = ()  # a classifier's class names (empty: the model does not classify)
    class_logits: np.ndarray | None = None  # (classes,) float32 the classifier's logits for this image

    def __post_init__(self):
        for a in (self.pixels, self.pixel_values, self.class_logits):
            if a is not None:
                a.flags.writeable = False

    @property
    def first_patch(self) -> int:
        """The token index of patch (0, 0): the prefix tokens come first."""
        return len(self.prefix)

    @property
    def n_patches(self) -> int:
        return self.rows * self.cols

    def token_of(self, row: int, col: int) -> int:
        """The token index of patch (row, col), 0-based."""
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            raise ValueError(f"patch ({row + 1}, {col + 1}) is outside the {self.rows} x {self.cols} grid")
        return self.first_patch + row * self.cols + col

    def patch_at(self, x: float, y: float) -> tuple[int, int]:
        """(row, col) of the patch under pixel (x, y) of `pixels`, clipped to the grid (a click's place)."""
        return (min(self.rows - 1, max(0, int((y + 0.5) // self.patch))),
                min(self.cols - 1, max(0, int((x + 0.5) // self.patch))))

    def patch_of(self, token: int) -> tuple[int, int] | None:
        """(row, col) of a token, 0-based; None for a prefix token ([CLS], a register)."""
        i = token - self.first_patch
        return None if i < 0 else divmod(i, self.cols)

    def on_grid(self, values: np.ndarray) -> np.ndarray:
        """The patches' part of per-token values, laid out as the image is. Shapes: (..., n) -> (..., rows, cols)."""
        values = np.asarray(values)
        return values[..., self.first_patch:self.first_patch + self.n_patches].reshape(
            *values.shape[:-1], self.rows, self.cols)

    @property
    def predicted(self) -> tuple[str, float] | None:
        """The class the classifier picks and its probability (softmax of class_logits); None without one."""
        if self.class_logits is None or not len(self.labels):
            return None
        z = self.class_logits.astype(np.float64)
        p = np.exp(z - z.max())
        p /= p.sum()
        best = int(p.argmax())
        return self.labels[best], float(p[best])


def token_names(prefix: tuple[str, ...], rows: int, cols: int) -> tuple[str, ...]:
    """Every token's name: the prefix, then "patch (row, col)" counted from 1, row by row."""
    return (*prefix, *(f"patch ({r + 1}, {c + 1})" for r in range(rows) for c in range(cols)))


def prefix_tokens(config) -> tuple[str, ...]:
    """The tokens a family puts before its patches; ValueError for a family not named in PREFIX_TOKENS."""
    kind = str(getattr(config, "model_type", ""))
    if kind not in PREFIX_TOKENS:
        raise ValueError(f"the image family “{kind}” is not one whose tokens this app can name (it reads "
                         f"{', '.join(sorted(PREFIX_TOKENS))})")
    registers = int(getattr(config, "num_register_tokens", 0) or 0)
    return (*PREFIX_TOKENS[kind], *(f"register {i + 1}" for i in range(registers)))


def image_patches(config, processor, pixel_values, n_tokens: int, *, labels=(), class_logits=None) -> ImagePatches:
    """The ImagePatches of one image as the model read it: its grid from the pixel values' size and the
    config's patch size; ValueError when the token count does not match (a family that pools or drops patches).
    Shapes: pixel_values (C, h, w)."""
    values = np.asarray(pixel_values, dtype=np.float32)
    p = int(getattr(config, "patch_size", 0) or 0)
    if values.ndim != 3 or p <= 0:
        raise ValueError(f"pixel values of shape {values.shape} with patch size {p} make no grid of patches")
    rows, cols = values.shape[1] // p, values.shape[2] // p
    prefix = prefix_tokens(config)
    if len(prefix) + rows * cols != n_tokens:
        raise ValueError(f"the model read {n_tokens} tokens, not the {len(prefix)} + {rows} x {cols} patches its "
                         f"{values.shape[1]} x {values.shape[2]} image makes: its tokens cannot be named")
    return ImagePatches(pixels=display_pixels(processor, values), pixel_values=values, rows=rows, cols=cols, patch=p,
                        prefix=prefix, labels=tuple(labels), class_logits=class_logits)


def display_pixels(processor, values: np.ndarray) -> np.ndarray:
    """(C, h, w) normalised pixel values -> (h, w, 3) uint8: the processor's mean and std undone, its rescale
    undone (to 0..255), one channel repeated to three."""
    c = values.shape[0]
    mean = np.asarray(getattr(processor, "image_mean", None) or [0.0] * c, dtype=np.float32).reshape(-1, 1, 1)
    std = np.asarray(getattr(processor, "image_std", None) or [1.0] * c, dtype=np.float32).reshape(-1, 1, 1)
    x = values * (std if getattr(processor, "do_normalize", True) else 1) + (mean if getattr(
        processor, "do_normalize", True) else 0)
    scale = float(getattr(processor, "rescale_factor", 1 / 255)) if getattr(processor, "do_rescale", True) else 1.0
    x = np.clip(np.rint(x / scale), 0, 255).astype(np.uint8).transpose(1, 2, 0)
    return np.repeat(x, 3, axis=2) if x.shape[2] == 1 else x[..., :3]


def read_image(source, *, max_bytes: int = MAX_IMAGE_BYTES):
    """A PIL RGB image from a PIL image, a numpy array ((h, w) grey or (h, w, 3 | 4), uint8 or floats in
    [0, 1]), a file's bytes, a path or an open file; ImageRefused with the broken rule otherwise."""
    from PIL import Image

    if isinstance(source, Image.Image):
        _check_size(*source.size)
        return _rgb(source)
    if isinstance(source, np.ndarray):
        return _rgb(_from_array(source))
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.is_file():
            raise ImageRefused(f"There is no image file at {path}.")
        if path.stat().st_size > max_bytes:
            raise ImageRefused(_too_big(path.stat().st_size, max_bytes))
        source = path.read_bytes()
    elif hasattr(source, "read"):
        source = source.read(max_bytes + 1)
    if not isinstance(source, bytes | bytearray):
        raise ImageRefused(f"An image is a file, an array or a PIL image, not a {type(source).__name__}.")
    if len(source) > max_bytes:
        raise ImageRefused(_too_big(len(source), max_bytes))
    if not source:
        raise ImageRefused("The file is empty.")
    return _decode(bytes(source))


def _decode(data: bytes):
    from PIL import Image, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS  # Pillow's own bomb check at our limit (never off)
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data))  # reads the header only
        except UnidentifiedImageError:
            raise ImageRefused(f"This file is not an image this app reads: use {IMAGE_FORMATS_NOTE}.") from None
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageRefused(_bomb()) from None
        if image.format not in IMAGE_FORMATS:
            raise ImageRefused(f"{image.format} images are not read here: use {IMAGE_FORMATS_NOTE}.")
        _check_size(*image.size)
        try:
            image.load()
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageRefused(_bomb()) from None
        except (OSError, SyntaxError, ValueError) as err:  # a truncated or damaged file
            raise ImageRefused(f"The {image.format} file is damaged or cut short, so it cannot be read "
                               f"({str(err)[:120]}).") from None
    return _rgb(image)


def _check_size(width: int, height: int) -> None:
    if width * height > MAX_IMAGE_PIXELS:
        raise ImageRefused(f"The image is {width:,} x {height:,} pixels: more than the {MAX_IMAGE_PIXELS:,} pixels "
                           "this app decodes. Scale it down first.")
    if max(width, height) > MAX_IMAGE_SIDE:
        raise ImageRefused(f"The image is {width:,} x {height:,} pixels: a side longer than {MAX_IMAGE_SIDE:,} "
                           "pixels. Crop or scale it first.")
    if min(width, height) < MIN_IMAGE_SIDE:
        raise ImageRefused(f"The image is {width:,} x {height:,} pixels: a side shorter than {MIN_IMAGE_SIDE} "
                           "pixels leaves nothing for the model's patches to read.")


def _from_array(a: np.ndarray):
    from PIL import Image

    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (1, 3, 4)):
        raise ImageRefused(f"An image array is (height, width) or (height, width, 1, 3 or 4 channels), not {a.shape}.")
    _check_size(a.shape[1], a.shape[0])
    if a.dtype != np.uint8:
        x = np.asarray(a, dtype=np.float64)
        if not np.all(np.isfinite(x)) or x.min() < 0 or x.max() > 1:
            raise ImageRefused("A float image array holds values in [0, 1]; give 0..255 as uint8.")
        a = np.rint(x * 255).astype(np.uint8)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[..., 0]
    return Image.fromarray(a)


def _rgb(image):
    """Any mode (grey, palette, CMYK, with alpha) as RGB; transparency over white."""
    from PIL import Image

    if image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")


def _too_big(size: int, limit: int) -> str:
    return f"The file is {size / 1e6:.1f} MB: images up to {limit / 1e6:.0f} MB are read here."


def _bomb() -> str:
    return (f"The image declares more than {MAX_IMAGE_PIXELS:,} pixels (a decompression bomb, or simply too "
            "large): it is refused before decoding.")
