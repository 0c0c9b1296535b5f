"""Vision transformers (issue 45): image models read exactly or refused, an image's tokens named by their patches,
rollout held to its formula, a hostile image suite, and the image page.

Every model here is a tiny random one of its family, built from a config and saved to a folder, so
load_model reads it as a researcher's own folder would be; weights are held to the model's own eager
output_attentions, computed by transformers with our capture switched off."""

import io
import json
import struct
import zlib

import numpy as np
import pytest
import torch

from attention.models import (
    ImageRefused,
    attend_image,
    attention_rollout,
    export_npz,
    from_attentions,
    heads_looking,
    high_norm_tokens,
    image_patches,
    load_model,
    load_npz,
    patch_looks,
    read_image,
    rollout,
    token_norms,
)

COMMON = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64, image_size=32,
              patch_size=8)


def _families():
    from transformers import (
        BeitConfig,
        BeitModel,
        CLIPConfig,
        CLIPModel,
        CLIPVisionConfig,
        CLIPVisionModel,
        DeiTConfig,
        DeiTModel,
        Dinov2WithRegistersConfig,
        Dinov2WithRegistersModel,
        SiglipVisionConfig,
        SiglipVisionModel,
        ViTConfig,
        ViTModel,
    )

    return {  # folder -> (model, the tokens it puts before its patches)
        "vit": (ViTModel(ViTConfig(**COMMON)), ("[CLS]",)),
        "deit": (DeiTModel(DeiTConfig(**COMMON)), ("[CLS]", "distillation")),
        "dinov2-registers": (Dinov2WithRegistersModel(Dinov2WithRegistersConfig(**COMMON, num_register_tokens=4)),
                             ("[CLS]", "register 1", "register 2", "register 3", "register 4")),
        "clip-vision": (CLIPVisionModel(CLIPVisionConfig(**COMMON)), ("[CLS]",)),
        "siglip-vision": (SiglipVisionModel(SiglipVisionConfig(**COMMON)), ()),
        "beit": (BeitModel(BeitConfig(**COMMON, use_relative_position_bias=True)), ("[CLS]",)),
        "clip-whole": (CLIPModel(CLIPConfig(vision_config=COMMON, text_config=dict(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64))), ("[CLS]",)),
    }


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Each family saved with save_pretrained beside a ViT image processor (32 x 32), as a user's folder."""
    from transformers import ViTImageProcessor

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("vision")
    found = {}
    for name, (model, prefix) in _families().items():
        if name == "beit":  # a learned relative position bias, not zeros: the scores carry a bias
            for module in model.modules():
                if hasattr(module, "relative_position_bias_table"):
                    torch.nn.init.normal_(module.relative_position_bias_table, std=1.0)
        model.save_pretrained(root / name)
        ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(root / name)
        found[name] = (root / name, prefix)
    return found


def _image(seed: int = 1, size=(40, 50)) -> np.ndarray:
    return (np.random.default_rng(seed).random((*size, 3)) * 255).astype(np.uint8)


def _own_weights(loaded, att) -> np.ndarray:
    """The model's own eager output_attentions on the pixels `att` read, capture switched off: (L, H, n, n)."""
    network = loaded.network
    network.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = network(pixel_values=torch.from_numpy(np.array(att.image.pixel_values))[None],
                          output_attentions=True)
    finally:
        network.set_attn_implementation("explorer_capture")
    return np.stack([a[0].numpy() for a in out.attentions])


@pytest.mark.parametrize("name", ["vit", "deit", "dinov2-registers", "clip-vision", "siglip-vision", "beit",
                                  "clip-whole"])
def test_each_image_family_equals_its_own_eager_attention_and_names_its_patches(folders, name):
    folder, prefix = folders[name]
    loaded = load_model(str(folder))
    assert loaded.spec.inputs == "image" and loaded.check is not None
    att = attend_image(loaded, _image(), name="noise")
    grid = att.image
    assert (grid.rows, grid.cols, grid.patch) == (4, 4, 8) and grid.prefix == prefix
    assert att.tokens[:len(prefix)] == prefix and att.tokens[len(prefix)] == "patch (1, 1)"
    assert att.tokens[-1] == "patch (4, 4)" and len(att.tokens) == len(prefix) + 16
    assert att.special.tolist() == [True] * len(prefix) + [False] * 16
    own = _own_weights(loaded, att)
    assert own.shape == att.weights.shape
    assert np.abs(att.weights - own).max() <= 1e-5
    if name == "beit":  # its bias makes the weights the model's own, not rebuilt from q and k
        assert att.self_attn.bias and loaded.check.own_weights
    else:
        assert att.self_attn.captured and not att.self_attn.bias
    # a patch's token is the one its (row, col) names, and its row of weights lands on the grid
    assert att.tokens[grid.token_of(2, 3)] == "patch (3, 4)" and grid.patch_of(grid.token_of(2, 3)) == (2, 3)
    looks = patch_looks(att, 1, 2, grid.token_of(2, 3))
    row = own[1, 2, grid.token_of(2, 3)]
    assert np.allclose(looks.on_image.ravel(), row[len(prefix):], atol=1e-5)
    assert np.allclose(looks.prefix, row[:len(prefix)], atol=1e-5)
    assert np.allclose(heads_looking(att, 1, 0).reshape(4, -1), own[1, :, 0, len(prefix):], atol=1e-5)


def test_a_text_model_refuses_an_image_and_an_image_model_refuses_text(folders, minilm):
    loaded = load_model(str(folders["vit"][0]))
    with pytest.raises(ValueError, match="reads images, not text"):
        from attention.models import attend

        attend(loaded, "I sat on the river bank.")
    with pytest.raises(ValueError, match="reads text, not images"):
        from attention.models import attend_image

        attend_image(minilm, _image())


def test_an_image_result_saves_and_reopens_and_from_attentions_reads_a_models_own_output(folders):
    loaded = load_model(str(folders["dinov2-registers"][0]))
    att = attend_image(loaded, _image(2), name="noise")
    again = load_npz(export_npz(att))
    assert again.tokens == att.tokens and again.image.prefix == att.image.prefix
    assert np.array_equal(again.image.pixels, att.image.pixels)
    assert np.abs(again.weights - att.weights).max() == 0
    # a notebook's own pass: transformers' output_attentions and the processor's pixels
    pixels = loaded.processor(images=read_image(_image(2)), return_tensors="pt")["pixel_values"]
    own = _own_weights(loaded, att)
    grid = image_patches(loaded.network.config, loaded.processor, pixels[0], own.shape[-1])
    given = from_attentions(None, [torch.from_numpy(w)[None] for w in own], image=grid, model_name="mine")
    assert given.tokens == att.tokens and given.text == "mine"
    assert np.abs(given.weights - att.weights).max() <= 1e-5
    assert np.allclose(attention_rollout(given), attention_rollout(att), atol=1e-5)


def test_rollout_equals_its_formula_on_a_hand_made_three_layer_example():
    """Three layers, two heads, three tokens; Â = (A_mean + I) / 2 (rows already sum to 1), R = Â3 Â2 Â1."""
    a = np.array([
        [[[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]], [[0, 1, 0], [0, 0, 1], [1, 0, 0]]],
        [[[0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0, 0, 1]], [[1 / 3, 1 / 3, 1 / 3], [0.6, 0.2, 0.2], [0.5, 0.5, 0]]],
        [[[0, 0, 1], [1, 0, 0], [0, 1, 0]], [[0.25, 0.25, 0.5], [0.5, 0.25, 0.25], [0.25, 0.5, 0.25]]],
    ])
    hats = []
    for layer in a:
        mean = [[(layer[0][i][j] + layer[1][i][j]) / 2 for j in range(3)] for i in range(3)]
        hats.append([[0.5 * mean[i][j] + 0.5 * (i == j) for j in range(3)] for i in range(3)])

    def times(x, y):
        return [[sum(x[i][k] * y[k][j] for k in range(3)) for j in range(3)] for i in range(3)]

    by_hand = [hats[0], times(hats[1], hats[0]), times(hats[2], times(hats[1], hats[0]))]
    assert np.allclose(rollout(a.mean(axis=1)), np.array(by_hand), atol=1e-12)
    # and through a result: the same rollout, whatever reads it
    from attention.models import ImagePatches

    grid = ImagePatches(pixels=np.zeros((2, 2, 3), np.uint8), pixel_values=np.zeros((3, 2, 2), np.float32), rows=1,
                        cols=2, patch=1, prefix=("[CLS]",))
    att = from_attentions(None, [torch.from_numpy(layer[None]).float() for layer in a], image=grid)
    assert att.tokens == ("[CLS]", "patch (1, 1)", "patch (1, 2)")
    assert np.allclose(attention_rollout(att), np.array(by_hand), atol=1e-6)


def test_token_norms_and_high_norm_tokens_read_the_hidden_states(folders):
    loaded = load_model(str(folders["vit"][0]))
    att = attend_image(loaded, _image(3))
    norms = token_norms(att)
    assert norms.shape == (att.n_layers + 1, len(att.tokens))
    assert np.allclose(norms[-1], np.linalg.norm(att.hidden[-1], axis=-1), rtol=1e-6)
    median = np.median(norms[-1][1:])
    assert set(high_norm_tokens(att, -1, factor=1.0)) == set(np.flatnonzero(norms[-1] > median))
    assert high_norm_tokens(att, -1, factor=1e9).size == 0


# --- a hostile image suite: every file gets a message, none a traceback ------------------------------------------
def _png(image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _declaring(png: bytes, width: int, height: int) -> bytes:
    """The PNG with its header (IHDR) rewritten to declare width x height, its checksum made right: a
    decompression bomb's header without the bomb."""
    start = png.index(b"IHDR")
    body = png[start:start + 17]
    body = body[:4] + struct.pack(">II", width, height) + body[12:]
    return png[:start] + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF) + png[start + 21:]


def test_hostile_images_each_get_a_message():
    from PIL import Image

    good = _png(Image.fromarray(_image(4, (64, 64))))
    cmyk = io.BytesIO()
    Image.new("CMYK", (32, 32), (0, 255, 255, 0)).save(cmyk, format="JPEG")
    tiff = io.BytesIO()
    Image.new("RGB", (32, 32)).save(tiff, format="TIFF")
    hostile = {
        "bomb": (_declaring(good, 60_000, 60_000), "decompression bomb"),
        "truncated": (good[:len(good) // 2], "damaged or cut short"),
        "one pixel": (_png(Image.new("RGB", (1, 1))), "shorter than 8"),
        "20,000 wide": (_png(Image.new("L", (20_000, 10))), "longer than 10,000"),
        "not an image": (b"%PDF-1.4 certainly not a picture", "not an image this app reads"),
        "tiff": (tiff.getvalue(), "TIFF images are not read here"),
        "empty": (b"", "empty"),
        "too many bytes": (good + b"\0" * 10_000_001, "images up to 10 MB"),
    }
    for case, (data, said) in hostile.items():
        with pytest.raises(ImageRefused, match=said):
            read_image(data)
        assert case
    rgb = read_image(cmyk.getvalue())  # CMYK is an image: read as RGB
    assert rgb.mode == "RGB" and rgb.size == (32, 32) and rgb.getpixel((0, 0))[0] > 200
    assert read_image(good).size == (64, 64)
    with pytest.raises(ImageRefused, match="values in \\[0, 1\\]"):
        read_image(np.full((16, 16), 3.0))
    with pytest.raises(ImageRefused, match="height, width"):
        read_image(np.zeros((4, 16, 16, 3), np.uint8))


def test_a_folder_without_an_image_processor_is_refused_with_the_reason(folders, tmp_path):
    from attention.models import ModelUnavailable

    folder = tmp_path / "no-processor"
    folder.mkdir()
    source = folders["vit"][0]
    for file in source.iterdir():
        if file.name != "preprocessor_config.json":
            (folder / file.name).write_bytes(file.read_bytes())
    assert "auto_map" not in json.loads((folder / "config.json").read_text())
    with pytest.raises(ModelUnavailable, match="image processor"):
        load_model(str(folder))


# --- the bundled digits model and the page ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits():
    return load_model("vit-digits")


def test_the_digits_model_reads_its_held_out_examples_as_its_script_recorded(digits):
    """The examples' predictions through load_model (our capture, the guard) are those the training script
    recorded with transformers alone; the guard held the rebuilt weights to the model's own."""
    from attention.models import example_images
    from attention.models.forward.bundled import image_model_dir

    examples = example_images()
    with np.load(image_model_dir("vit-digits") / "test_digits.npz") as saved:
        recorded = [str(int(p)) for p in saved["predicted"]]
    read = [attend_image(digits, image).image.predicted[0] for image in examples.images]
    assert read == recorded
    assert examples.accuracy >= 0.95 and len(examples.images) >= 10
    assert digits.check.gap <= 1e-5
    att = attend_image(digits, examples.images[0])
    assert att.tokens[0] == "[CLS]" and (att.image.rows, att.image.cols, att.image.patch) == (4, 4, 2)
    assert att.image.pixels.shape == (8, 8, 3)
    assert np.array_equal(att.image.pixels[..., 0], examples.images[0])  # what the model saw is the digit


@pytest.mark.slow
def test_the_image_page_draws_where_a_clicked_patch_looks_as_the_model_computes_it(digits):
    """The page opens on the digits model and a test digit; a click on a patch makes it the query, and the
    picture's weights are that patch's row of the model's own eager attention (not our code's); the choices
    hold after a visit to another page."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../app.py", default_timeout=600)
    at.run()
    at.switch_page("pages/image_model.py").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.title[0].value == "Attention in an image model"
    at.selectbox(key="image.example").set_value(3).run()
    here = "vit-digits.example 3"  # the pickers are keyed by model and image
    at.selectbox(key=f"image.head.{here}").set_value("head 2").run()
    at.number_input(key=f"image.layer.{here}").set_value(2).run()
    query = at.selectbox(key=f"image.query.{here}").value
    # what a click on patch (2, 3) sends: the point under the pointer, in the image's pixels (2 x 2 a patch)
    at.session_state[f"image.picture.{here}.{query}"] = {"selection": {"points": [{"x": 4.6, "y": 2.4}]}}
    at.run()
    assert not at.exception
    assert at.selectbox(key=f"image.query.{here}").value == "patch (2, 3)"
    spec = json.loads(at.get("plotly_chart")[1].proto.spec)  # [0] the plain image, [1] where the patch looks
    assert "patch (2, 3)" in spec["layout"]["title"]["text"] and "layer 2, head 2" in spec["layout"]["title"]["text"]
    assert any("the most" in m.value and "patch (" in m.value for m in at.markdown)
    from attention.models import example_images

    att = attend_image(digits, example_images().images[3])
    own = _own_weights(digits, att)
    from tests.test_pages import array

    drawn = array(spec["data"][1]["z"]).astype(float)  # the heatmap over the image
    assert np.allclose(drawn.ravel(), own[1, 1, att.image.token_of(1, 2), 1:], atol=1e-5)
    assert len(at.get("plotly_chart")) == 6  # the image, where it looks, every head, [CLS], rollout, norms
    # another page and back: the digit, layer, head and patch hold
    at.switch_page("pages/model_heads.py").run()
    at.switch_page("pages/image_model.py").run()
    assert not at.exception
    assert at.selectbox(key="image.example").value == 3 and at.number_input(key=f"image.layer.{here}").value == 2
    assert at.selectbox(key=f"image.head.{here}").value == "head 2"
    assert at.selectbox(key=f"image.query.{here}").value == "patch (2, 3)"
    # another digit: the layer, head and patch hold (they are the model's, not the image's)
    at.selectbox(key="image.example").set_value(5).run()
    there = "vit-digits.example 5"
    assert at.number_input(key=f"image.layer.{there}").value == 2
    assert at.selectbox(key=f"image.query.{there}").value == "patch (2, 3)"
    assert "patch (2, 3)" in json.loads(at.get("plotly_chart")[1].proto.spec)["layout"]["title"]["text"]
