"""Tiny random-weight models of every family the app knows, built from transformers configs (no download):
the fixtures of the family tests (tests/test_families.py and 16 more) and of docs/models.md (benchmarks.families).

Each is built twice from the same weights: through our own loader (`from_model`, the guard included) and as a
plain eager twin, the reference (`build`); or saved as a transformers folder for load_model (`saved`).
Configs are as small as a family allows, with attention windows of 4 tokens where a family has windows, so
the 17-token TEXT is longer than every window.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
import transformers as tf

TEXT = "The quick brown fox jumps over the lazy dog near the river bank today again"  # 17 BERT tokens
V = 30522  # the bundled MiniLM tokenizer's vocabulary, shared by every tiny model
SMALL = dict(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, intermediate_size=64, vocab_size=V)
GQA = dict(SMALL, num_key_value_heads=2)


@dataclass(frozen=True)
class TinyFamily:
    model: type  # the transformers class (with its LM head for decoders)
    config: object  # () -> a config
    architecture: str  # as attention.models.forward.registry names it
    w_o: str | None  # the test's own path to layer {layer}'s output projection (None: not ablated here)


FAMILIES = {
    "gpt2": TinyFamily(tf.GPT2LMHeadModel, lambda: tf.GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=V),
                       "decoder-only", "transformer.h.{layer}.attn.c_proj"),
    "gptj": TinyFamily(tf.GPTJForCausalLM, lambda: tf.GPTJConfig(n_layer=2, n_head=4, n_embd=32, rotary_dim=4,
                                                                 vocab_size=V),
                       "decoder-only", "transformer.h.{layer}.attn.out_proj"),
    "gpt_neox": TinyFamily(tf.GPTNeoXForCausalLM, lambda: tf.GPTNeoXConfig(**SMALL), "decoder-only",
                           "gpt_neox.layers.{layer}.attention.dense"),
    "opt": TinyFamily(tf.OPTForCausalLM, lambda: tf.OPTConfig(num_hidden_layers=2, num_attention_heads=4,
                                                              hidden_size=32, ffn_dim=64, word_embed_proj_dim=32,
                                                              vocab_size=V),
                      "decoder-only", "model.decoder.layers.{layer}.self_attn.out_proj"),
    "llama": TinyFamily(tf.LlamaForCausalLM, lambda: tf.LlamaConfig(**GQA), "decoder-only",
                        "model.layers.{layer}.self_attn.o_proj"),
    "mistral": TinyFamily(tf.MistralForCausalLM, lambda: tf.MistralConfig(**GQA, sliding_window=4), "decoder-only",
                          "model.layers.{layer}.self_attn.o_proj"),
    "mixtral": TinyFamily(tf.MixtralForCausalLM, lambda: tf.MixtralConfig(**GQA, sliding_window=4,
                                                                          num_local_experts=2, num_experts_per_tok=1),
                          "decoder-only", "model.layers.{layer}.self_attn.o_proj"),
    "qwen2": TinyFamily(tf.Qwen2ForCausalLM, lambda: tf.Qwen2Config(**GQA), "decoder-only",
                        "model.layers.{layer}.self_attn.o_proj"),
    "qwen3": TinyFamily(tf.Qwen3ForCausalLM, lambda: tf.Qwen3Config(**GQA, head_dim=8), "decoder-only",
                        "model.layers.{layer}.self_attn.o_proj"),
    "gemma": TinyFamily(tf.GemmaForCausalLM, lambda: tf.GemmaConfig(**dict(GQA, num_key_value_heads=1), head_dim=8),
                        "decoder-only", "model.layers.{layer}.self_attn.o_proj"),
    "gemma2": TinyFamily(tf.Gemma2ForCausalLM, lambda: tf.Gemma2Config(**GQA, head_dim=8, sliding_window=4,
                                                                       query_pre_attn_scalar=16,
                                                                       attn_logit_softcapping=0.05),
                         "decoder-only", "model.layers.{layer}.self_attn.o_proj"),
    "gemma3": TinyFamily(tf.Gemma3ForCausalLM, lambda: tf.Gemma3TextConfig(
        **GQA, head_dim=8, sliding_window=4, query_pre_attn_scalar=16,
        layer_types=["sliding_attention", "full_attention"]), "decoder-only", "model.layers.{layer}.self_attn.o_proj"),
    "phi": TinyFamily(tf.PhiForCausalLM, lambda: tf.PhiConfig(**SMALL), "decoder-only",
                      "model.layers.{layer}.self_attn.dense"),
    "phi3": TinyFamily(tf.Phi3ForCausalLM, lambda: tf.Phi3Config(**GQA, pad_token_id=0), "decoder-only",
                       "model.layers.{layer}.self_attn.o_proj"),
    "olmo2": TinyFamily(tf.Olmo2ForCausalLM, lambda: tf.Olmo2Config(**GQA), "decoder-only",
                        "model.layers.{layer}.self_attn.o_proj"),
    "stablelm": TinyFamily(tf.StableLmForCausalLM, lambda: tf.StableLmConfig(**GQA, partial_rotary_factor=0.5),
                           "decoder-only", "model.layers.{layer}.self_attn.o_proj"),
    "falcon": TinyFamily(tf.FalconForCausalLM, lambda: tf.FalconConfig(
        num_hidden_layers=2, num_attention_heads=4, hidden_size=32, vocab_size=V, alibi=True,
        new_decoder_architecture=False, multi_query=False), "decoder-only",
        "transformer.h.{layer}.self_attention.dense"),
    "bloom": TinyFamily(tf.BloomForCausalLM, lambda: tf.BloomConfig(n_layer=2, n_head=4, hidden_size=32, vocab_size=V),
                        "decoder-only", "transformer.h.{layer}.self_attention.dense"),
    "bert": TinyFamily(tf.BertModel, lambda: tf.BertConfig(**SMALL), "encoder-only",
                       "encoder.layer.{layer}.attention.output.dense"),
    "roberta": TinyFamily(tf.RobertaModel, lambda: tf.RobertaConfig(**SMALL), "encoder-only",
                          "encoder.layer.{layer}.attention.output.dense"),
    "distilbert": TinyFamily(tf.DistilBertModel, lambda: tf.DistilBertConfig(n_layers=2, n_heads=4, dim=32,
                                                                             hidden_dim=64),
                             "encoder-only", "transformer.layer.{layer}.attention.out_lin"),
    "albert": TinyFamily(tf.AlbertModel, lambda: tf.AlbertConfig(**SMALL, embedding_size=16), "encoder-only", None),
    "electra": TinyFamily(tf.ElectraModel, lambda: tf.ElectraConfig(**SMALL, embedding_size=16), "encoder-only",
                          "encoder.layer.{layer}.attention.output.dense"),
    "deberta_v2": TinyFamily(tf.DebertaV2Model, lambda: tf.DebertaV2Config(**SMALL), "encoder-only",
                             "encoder.layer.{layer}.attention.output.dense"),
    "modernbert": TinyFamily(tf.ModernBertModel, lambda: tf.ModernBertConfig(
        **dict(SMALL, num_hidden_layers=3), local_attention=4, global_attn_every_n_layers=3, pad_token_id=0),
        "encoder-only", "layers.{layer}.attn.Wo"),
    "t5": TinyFamily(tf.T5ForConditionalGeneration, lambda: tf.T5Config(
        num_layers=2, num_decoder_layers=2, d_model=32, num_heads=4, d_kv=8, d_ff=64, vocab_size=V,
        decoder_start_token_id=0), "encoder-decoder", None),
    "bart": TinyFamily(tf.BartForConditionalGeneration, lambda: tf.BartConfig(
        encoder_layers=2, decoder_layers=2, d_model=32, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, max_position_embeddings=128), "encoder-decoder", None),
    "marian": TinyFamily(tf.MarianMTModel, lambda: tf.MarianConfig(
        encoder_layers=2, decoder_layers=2, d_model=32, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, max_position_embeddings=128, decoder_start_token_id=0,
        pad_token_id=0), "encoder-decoder", None),
}

# Families without an entry in the anatomy's table: their parts are read from the module tree and confirmed by a
# pass (attention.models.forward.anatomy_inferred). Granite with its real checkpoints' multipliers (granite-3.0:
# embeddings x 12, each block's writes x 0.22, logits / 8, scores x 1/64); GPT-BigCode with multi-query attention
# (q, k, v side by side in c_attn) and without (c_attn head by head).
OUTSIDE = {
    "granite": TinyFamily(tf.GraniteForCausalLM, lambda: tf.GraniteConfig(
        **GQA, embedding_multiplier=12.0, residual_multiplier=0.22, logits_scaling=8.0, attention_multiplier=1 / 64),
        "decoder-only", "model.layers.{layer}.self_attn.o_proj"),
    "gpt_bigcode": TinyFamily(tf.GPTBigCodeForCausalLM, lambda: tf.GPTBigCodeConfig(
        n_layer=2, n_head=4, n_embd=32, vocab_size=V, multi_query=True), "decoder-only",
        "transformer.h.{layer}.attn.c_proj"),
    "gpt_bigcode_mha": TinyFamily(tf.GPTBigCodeForCausalLM, lambda: tf.GPTBigCodeConfig(
        n_layer=2, n_head=4, n_embd=32, vocab_size=V, multi_query=False), "decoder-only",
        "transformer.h.{layer}.attn.c_proj"),
}
EVERY = {**FAMILIES, **OUTSIDE}


def tokenizer():
    """The bundled MiniLM tokenizer: every tiny model reads BERT tokens."""
    from attention.models import minilm_dir

    return tf.AutoTokenizer.from_pretrained(minilm_dir())


def build(name: str, tok):
    """(ours, reference): the same random weights through from_model, and as a plain eager twin."""
    from attention.models import from_model

    family = EVERY[name]
    torch.manual_seed(0)
    config = family.config()
    config._attn_implementation = "eager"
    reference = family.model(config).eval()
    return from_model(copy.deepcopy(reference), tok, name=name), reference


def saved(name: str, folder, tok, **config_changes):
    """A tiny family with seeded random weights (its config changed by `config_changes`) saved with `tok` as
    a transformers folder, for load_model(folder): returns the model, as the reference."""
    family = EVERY[name]
    torch.manual_seed(0)
    config = family.config()
    for key, value in config_changes.items():
        setattr(config, key, value)
    reference = family.model(config).eval()
    reference.save_pretrained(folder)
    tok.save_pretrained(folder)
    return reference


def own_attentions(reference, att) -> tuple[np.ndarray, ...]:
    """The reference's own eager weights on att's tokens: per layer (H, n, n), self-attention."""
    device = next(reference.parameters()).device
    ids = torch.tensor(att.token_ids, device=device)[None]
    extra = {} if att.target_ids is None else {"decoder_input_ids": torch.tensor(att.target_ids, device=device)[None]}
    with torch.no_grad():
        out = reference(input_ids=ids, output_attentions=True, **extra)
    own = out.encoder_attentions if att.architecture == "encoder-decoder" else out.attentions
    return tuple(a[0].float().cpu().numpy() for a in own)  # float32 (a half-precision model's own are rounded)


def feature_trials(loaded, att, tok) -> dict:
    """Each feature of attention.models.forward.capabilities -> a call that runs it on `att` (TEXT), for a check
    that a family's capabilities say what it actually does (tests/test_families.py, benchmarks.families)."""
    from attention.models import (
        composition,
        contrast,
        corpus_survey,
        direct_logit_attribution,
        generate,
        head_ablation,
        head_ablation_cosine,
        head_roles,
        logit_lens,
        qk_attribution,
        run_with_cache,
    )

    decoder = att.next_logits is not None
    pair = contrast(att, tok, " dog", " cat") if decoder else None
    last = len(att.tokens) - 1
    return {
        "hook points": lambda: run_with_cache(loaded, TEXT),
        "head effects": (lambda: head_ablation(loaded, att, pair)) if decoder else
                        (lambda: head_ablation_cosine(loaded, att, "fox")),
        "direct attribution": lambda: direct_logit_attribution(loaded, att, pair),
        "logit lens": lambda: logit_lens(loaded, att),
        "generation": lambda: generate(loaded, TEXT, max_new_tokens=2),
        "roles": lambda: head_roles(loaded, repeat=5),
        "corpus survey": lambda: corpus_survey(loaded, [TEXT]),
        "composition": lambda: composition(loaded, att.n_layers - 1, 0),
        "why this key": lambda: qk_attribution(loaded, att, att.n_layers - 1, 0, last, last - 1),
    }
