"""attend(): the one place a forward pass over a user's text happens, and own_attention(), the model's own.

`attend(loaded, text)` tokenizes and runs one forward pass while attention.models.forward.capture records
Q, K and V of every layer. The pass never builds a layer's whole (heads, n, n) weights, so memory grows as n
and SmolLM2 reads thousands of tokens: each layer's attention is our SurveyKernel (attention.models.forward.
kernel), which takes the weights a chunk of query rows at a time, makes the layer's output from them and sums
every head's survey as it goes; an encoder-decoder model runs the fused SDPA kernel. Weights are recomputed
from q and k when a view needs them. Two kinds of family keep the model's own output_attentions instead (a
second, eager pass): those that add a learned position bias to their scores (T5), and those whose attention
does not go through transformers' attention interface at all (BLOOM, Falcon, GPT-J, DeBERTa-v2), which
capture cannot see. `own_attention(loaded, att, layer)` returns the model's own weights for one layer: its
eager kernel run beside a pass that repeats attend's, on the very inputs that layer had there (the check the
pages show; the guard does the same inside the probe's own pass, attend's `beside`). The output projections
W_O are read here too, through the family's anatomy (attention.models.forward.anatomy), as views of the
model's parameters.

Shapes: n tokens, t decoder tokens, H heads, m keys, D model size.
"""

from __future__ import annotations

import gc

import numpy as np
import torch

from attention.models.forward.anatomy import has_lm_head, layer_windows
from attention.models.forward.capture import Beside, CapturedCall, recording
from attention.models.forward.device import work_threads
from attention.models.forward.device_arrays import resident_device
from attention.models.forward.images import image_patches, token_names
from attention.models.forward.inputs import ModelInputs, id_inputs, image_inputs, text_inputs
from attention.models.forward.kernel import SurveyKernel
from attention.models.forward.memory import NotEnoughMemory
from attention.models.forward.model import LoadedModel, Progress
from attention.models.forward.model_attention import ModelAttention
from attention.models.forward.registry import model_label
from attention.models.forward.stacks import attention_stack, calls_of, hidden_states_of
from attention.models.forward.tokens import display_tokens


def attend(loaded: LoadedModel, text: str, *, decoder_text: str | None = None, progress: Progress | None = None,
           ids: np.ndarray | None = None, beside: Beside | None = None) -> ModelAttention:
    """Tokenize, run the model once with capture on, and collect everything the pages show.

    `progress(fraction, message)` is told after every attention layer (long inputs take seconds). `ids`
    (token ids, (n,)) runs those tokens as they are instead of tokenizing `text` (a probe of random
    tokens, which would not survive decoding and encoding again); `text` is then only their label.
    `beside(call, eager)` is told, for every attention call, the model's own eager attention computed beside
    the pass from that call's q, k, v and mask (attention.models.forward.capture; the guard's check).

    Arithmetic: the result's weights are recomputed in float32 from the q and k the pass made (in the model's
    dtype), as run_with_cache's hook_pattern is by default. The model's own 16-bit weights (what it multiplied v
    by): run_with_cache(loaded, text, pattern="model"), or own_attention(loaded, result, layer) for one layer.
    """
    if loaded.spec.inputs == "image":
        raise ValueError(f"{loaded.spec.label} reads images, not text: give it an image (attend_image), or open it "
                         "on the page Attention in an image model.")
    return _freeing_gpu(lambda: _attend(loaded, lambda: text_inputs(loaded, text, decoder_text) if ids is None else
                                        id_inputs(loaded, text, ids), progress, decoder_text, beside))


def attend_image(loaded: LoadedModel, image, *, progress: Progress | None = None,
                 name: str | None = None, beside: Beside | None = None) -> ModelAttention:
    """attend() for a vision transformer: `image` (a PIL image, an (h, w) or (h, w, 3) array, a file's bytes,
    a path or an open file, read by attention.models.forward.images.read_image, which refuses what it should)
    goes through the model's own image processor and one forward pass with capture on. The result's tokens
    are "[CLS]", its registers and "patch (row, col)"; `image` on it says which token is which patch and holds
    the pixels the model saw. `name` labels it (its `text`); `beside` as for attend()."""
    if loaded.spec.inputs != "image":
        raise ValueError(f"{loaded.spec.label} reads text, not images.")
    return _freeing_gpu(lambda: _attend(loaded, lambda: image_inputs(loaded, image, name), progress, None, beside))


def _freeing_gpu(run):
    """run(), and where a GPU runs out of memory (results of earlier texts stay on it, and the memory plan,
    made when the model loaded, cannot know how many), once more after freeing what nothing holds; then
    NotEnoughMemory with the figures instead of a traceback."""
    try:
        return run()
    except torch.OutOfMemoryError:
        gc.collect()
        torch.cuda.empty_cache()
    try:
        return run()
    except torch.OutOfMemoryError as err:
        free, total = torch.cuda.mem_get_info()
        raise NotEnoughMemory(
            f"The GPU ran out of memory for this text ({free / 1e9:.1f} GB free of {total / 1e9:.1f} GB once the "
            "pass gave up). Results of earlier texts are kept on it until they leave the app's caches: a "
            "shorter text fits now, or this one after a while.") from err


def _attend(loaded: LoadedModel, make_inputs, progress: Progress | None, decoder_text: str | None,
            beside: Beside | None = None) -> ModelAttention:
    """The forward pass with capture on, over the inputs `make_inputs()` gives (made under the model's lock)."""
    spec, network, tok = loaded.spec, loaded.network, loaded.tokenizer
    expected = _attention_calls(network)
    say = progress or (lambda fraction, message: None)

    label = model_label(spec.name)  # "SmolLM2-135M", as the picker says it, not its key

    def on_call(done: int) -> None:
        say(min(1.0, done / expected), f"Running {label}: attention layer {min(done, expected)} of {expected}")

    encoder_decoder = spec.architecture == "encoder-decoder"
    kernel = _pass_kernel(encoder_decoder, expected)
    inputs, out, calls, own = _captured_pass(loaded, make_inputs, kernel, on_call, beside)
    states = list(out.encoder_hidden_states if encoder_decoder else out.hidden_states)
    next_logits = _logits(out.logits[0, -1]) if inputs.target_ids is None and has_lm_head(network) else None
    class_logits = _logits(out.logits[0]) if inputs.pixels is not None and getattr(out, "logits", None) is not None \
        else None
    del out  # now `states` alone holds the model's hidden states, and _hidden_states frees them as it copies
    hidden = hidden_states_of(states)
    by_stack = {stack: calls_of(calls, stack, encoder_decoder) for stack in ("self", "decoder", "cross")}
    calls.clear()  # each stack's list now holds its calls alone, so copying them can free them
    self_own = None if own is None else (own.encoder_attentions if encoder_decoder else own.attentions)
    w_o = loaded.output_weights
    self_attn = attention_stack(by_stack["self"], w_o, self_own, causal=spec.architecture == "decoder-only")
    result = dict(
        model_name=spec.name, text=inputs.text, decoder_text=decoder_text if inputs.target_ids is not None else None,
        architecture=spec.architecture, self_attn=self_attn, hidden=hidden,
        truncated=inputs.n_input > self_attn.n_queries, n_input_tokens=inputs.n_input,
        next_logits=next_logits, word_ids=inputs.word_ids, offsets=inputs.offsets,
    )
    result.update(_token_fields(loaded, inputs, self_attn.n_queries, class_logits))
    if not encoder_decoder:
        config = network.config.get_text_config() if hasattr(network.config, "get_text_config") else network.config
        result["windows"] = layer_windows(config, result["self_attn"].n_layers)
    if inputs.target_ids is not None:
        result["target_tokens"] = display_tokens(tok, inputs.target_ids[0])[0]
        result["target_ids"] = inputs.target_ids[0].cpu().numpy()
        for stack in ("decoder", "cross"):
            own_w = None if own is None else getattr(own, f"{stack}_attentions")
            result[f"{stack}_attn"] = attention_stack(by_stack[stack], None, own_w, causal=stack == "decoder")
    att = ModelAttention(**result)
    found = kernel.survey(att) if isinstance(kernel, SurveyKernel) and own is None else None
    if found is not None:
        att.self_attn.derived.survey = found
    return att


def _captured_pass(loaded: LoadedModel, make_inputs, kernel, on_call, beside: Beside | None):
    """(inputs, the network's output, the captured calls, the model's own output_attentions or None): one pass
    under the model's lock with capture on; a second, eager one where the family's attention is outside
    transformers' interface (no calls captured) or its scores carry a learned bias."""
    network, encoder_decoder = loaded.network, loaded.spec.architecture == "encoder-decoder"
    names = {id(m): name for name, m in network.named_modules()}
    with loaded.lock, torch.inference_mode():
        inputs = make_inputs()
        with work_threads(inputs.length), recording(names, kernel=kernel, on_call=on_call, beside=beside) as calls:
            out = _forward(network, inputs, output_attentions=False)
        own = None
        if not calls_of(calls, "self", encoder_decoder):  # attention outside the interface: the model's own
            calls = []
            own = out = _forward(network, inputs, output_attentions=True)
            if not own.attentions:
                raise ValueError(f"{loaded.spec.name} returned no attention weights, neither through transformers' "
                                 "attention interface nor as output_attentions.")
        elif any(c.bias for c in calls):  # scores carry a learned bias: keep the model's own weights
            with recording(names, kernel="eager") as calls:
                own = _forward(network, inputs, output_attentions=True)
    return inputs, out, calls, own


def _token_fields(loaded: LoadedModel, inputs: ModelInputs, n: int, class_logits: np.ndarray | None) -> dict:
    """The result's tokens, their ids and special flags: a text's as the tokenizer names them, an image's as
    "[CLS]", its registers and "patch (row, col)", with the patches' places (`image`)."""
    if inputs.pixels is None:
        tokens, special = display_tokens(loaded.tokenizer, inputs.ids[0])
        return dict(tokens=tokens, token_ids=inputs.ids[0].cpu().numpy(), special=special)
    config = loaded.network.config
    labels = [str(label) for _, label in sorted((getattr(config, "id2label", None) or {}).items())]
    image = image_patches(getattr(config, "vision_config", config), loaded.processor, inputs.pixels[0].float().cpu(),
                          n, labels=labels if class_logits is not None else (), class_logits=class_logits)
    return dict(tokens=token_names(image.prefix, image.rows, image.cols), token_ids=np.full(n, -1),
                special=np.arange(n) < image.first_patch, image=image)


def _pass_kernel(encoder_decoder: bool, n_calls: int):
    """The attention kernel a pass over a text runs: attend's, and the checks' that repeat it. One stack of
    self-attention on the CPU: our kernel makes each layer's output and the head survey's sums from the same
    weights (an encoder-decoder model's three stacks run the fused kernel; the survey comes later). On a GPU
    the model's own fused kernel makes the output, q, k and v stay there, and the survey is one pass of its
    own when a view first asks (attention.models.forward.head_survey)."""
    return "sdpa" if encoder_decoder or resident_device() is not None else SurveyKernel(n_calls)


def own_attention(loaded: LoadedModel, att: ModelAttention, layer: int, *, stack: str = "self") -> np.ndarray:
    """The model's own weights of one layer of `att`: a forward pass over the same text, run as attend ran
    it, in which transformers' eager attention computes that layer's weights beside the pass from the q, k
    and mask the layer has there (the pass goes on with its own output, so in 16 bits too they are the
    inputs of the pass `att` came from). What recomputed weights are checked against, at any length (one
    layer is H x n x m floats).

    Shapes: -> (H, n, m) float32.
    """
    return own_attentions(loaded, att, {stack: (layer,)})[stack, layer]


def own_attentions(loaded: LoadedModel, att: ModelAttention, layers: dict[str, tuple[int, ...]]) -> dict:
    """own_attention for several layers of several stacks in one forward pass: {(stack, layer): (H, n, m)}.
    A stack the capture could not see answers with the weights `att` already holds (the model's own)."""
    found, modules = {}, set()
    for stack, wanted in layers.items():
        s = att.attention_stack(stack)
        for layer in wanted:
            if s.captured:
                modules.add(s.modules[layer])
            else:
                found[stack, layer] = s.own_weights[layer]
    if not modules:
        return found
    calls = _repeated_pass(loaded, att, eager_for=modules)
    encoder_decoder = att.architecture == "encoder-decoder"
    for stack, wanted in layers.items():
        in_stack = calls_of(calls, stack, encoder_decoder)  # by position: ALBERT calls one module every layer
        for layer in wanted:
            if (stack, layer) not in found:
                found[stack, layer] = in_stack[layer].weights
    return found


def _repeated_pass(loaded: LoadedModel, att: ModelAttention, *, eager_for: set[str]) -> list[CapturedCall]:
    """A forward pass over the tokens of `att` that repeats the one attend() ran (its kernels, its threads),
    with the eager kernel computed beside the modules in `eager_for` and its weights kept on their calls
    (attention.models.forward.capture): the pass goes on with its own outputs, so each such layer's weights
    come from the inputs it had in the pass `att` came from, not from a pass that earlier eager layers
    changed. Returns the pass's captured calls."""
    names = {id(m): name for name, m in loaded.network.named_modules()}
    encoder_decoder = att.architecture == "encoder-decoder"
    with loaded.lock, torch.inference_mode():
        inputs = _same_inputs(loaded, att)
        kernel = _pass_kernel(encoder_decoder, _attention_calls(loaded.network))
        with work_threads(inputs.length), recording(names, kernel=kernel, eager_for=eager_for) as calls:
            _forward(loaded.network, inputs, output_attentions=False, hidden_states=False)
    return calls


def _same_inputs(loaded: LoadedModel, att: ModelAttention) -> ModelInputs:
    """The inputs `att` was made from: its own token ids (a probe of ids has no text to read), or for an
    encoder-decoder model its text and decoder text again."""
    if att.architecture == "encoder-decoder":
        return text_inputs(loaded, att.text, att.decoder_text)
    if att.image is not None:
        pixels = torch.from_numpy(np.array(att.image.pixel_values))[None].to(loaded.device)
        return ModelInputs(text=att.text, ids=None, mask=None, n_input=len(att.tokens), target_ids=None, word_ids=None,
                       offsets=None, pixels=pixels)
    return id_inputs(loaded, att.text, att.token_ids)


def _forward(network, inputs: ModelInputs, *, output_attentions: bool, hidden_states: bool = True):
    kwargs = dict(output_attentions=output_attentions, output_hidden_states=hidden_states, return_dict=True)
    if inputs.pixels is not None:
        return network(pixel_values=inputs.pixels, **kwargs)
    if inputs.target_ids is not None:
        kwargs["decoder_input_ids"] = inputs.target_ids
    elif has_lm_head(network):
        kwargs["logits_to_keep"] = 1  # the next token's logits only: (1, 1, V), not (1, n, V) (0.8 GB at 4,096)
    return network(input_ids=inputs.ids, attention_mask=inputs.mask, **kwargs)


def _attention_calls(network) -> int:
    """How many attention calls one forward pass makes (for progress): the layers, and for an
    encoder-decoder model its decoder's self- and cross-attention too."""
    config = getattr(network, "config", None)
    config = getattr(config, "vision_config", config)
    n = getattr(config, "num_hidden_layers", None) or getattr(config, "num_layers", None) or 1
    if getattr(config, "is_encoder_decoder", False):
        n += 2 * (getattr(config, "num_decoder_layers", None) or getattr(config, "decoder_layers", None) or n)
    return max(1, int(n))


def _logits(t: torch.Tensor) -> np.ndarray:
    """Logits at the model's own precision (float64 stays float64: a logit difference is read from them),
    half precisions as float32."""
    return t.detach().to(torch.float64 if t.dtype == torch.float64 else torch.float32).cpu().numpy()

