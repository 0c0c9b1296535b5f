"""Benchmark parts that run in Python: the core trace, model loading and attend(), payload sizes, BertViz.

Heavy or memory-hungry steps run in a subprocess (`python -m benchmarks.compute JOB ...`) so their time
and peak RSS are their own, not the benchmark runner's.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from attention.models import attend
from benchmarks.common import text_of_tokens, timed
from serving import malloc_environment

ROOT = Path(__file__).resolve().parent.parent
def core(sizes=(3, 64, 512), d: int = 64) -> list[dict]:
    """Our numpy trace (every step kept, float64) against torch's fused SDPA (float32, output only)."""
    import torch
    import torch.nn.functional as F

    from attention import scaled_dot_product_attention

    rows = []
    rng = np.random.default_rng(0)
    for n in sizes:
        q, k, v = (rng.normal(size=(n, d)) for _ in range(3))
        tq, tk, tv = (torch.tensor(a, dtype=torch.float32) for a in (q, k, v))
        repeats = 200 if n <= 64 else 30
        ours = timed(lambda q=q, k=k, v=v: scaled_dot_product_attention(q, k, v), repeats)
        with torch.inference_mode():
            peer = timed(lambda tq=tq, tk=tk, tv=tv: F.scaled_dot_product_attention(tq, tk, tv), repeats)
        rows.append({"n": n, "ours": ours, "torch": peer})
    return rows


def _child(job: str, *args: str, env: dict | None = None) -> dict:
    """Run `python -m benchmarks.compute job args` and return the JSON it prints last."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.compute", job, *args], cwd=ROOT, capture_output=True,
                         text=True, env=dict(os.environ, HF_HUB_OFFLINE="1", **(env or {})), timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark job {job} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def models(smoke: bool) -> dict:
    """Load times (fresh processes), attend() times, and peak RSS with both models loaded."""
    result = {"minilm_load": [], "smollm2_cached": [], "smollm2_first": None, "import": []}
    for _ in range(1 if smoke else 3):
        r = _child("load", "minilm")
        result["minilm_load"].append(r["load"])
        result["import"].append(r["import"])
    if not smoke:
        with tempfile.TemporaryDirectory() as cache:
            result["smollm2_first"] = _child("load", "smollm2", env={"ATTENTION_EXPLORER_CACHE": cache})["load"]
        _child("load", "smollm2")  # make sure the user cache holds a converted copy
        for _ in range(3):
            result["smollm2_cached"].append(_child("load", "smollm2")["load"])
    result["attend"] = _child("attend", "1" if smoke else "0")
    result["both_rss"] = None if smoke else _child("both")["max_rss_mb"]
    return result


def long_inputs(smoke: bool) -> list[dict]:
    """Per model and length: forward pass, survey of every head, bytes stored, peak RSS of the process.

    A child process per model, with the server's malloc settings (serving.configure_process), so the
    figures are those the app gets.
    """
    env = malloc_environment()
    plan = [("minilm", "512")] if smoke else [("minilm", "512"), ("smollm2", "1024,2048,4096")]
    return [row for name, sizes in plan for row in _child("long", name, sizes, env=env)["rows"]]


def effects(smoke: bool) -> dict:
    """Head effects on the Mary/John prompt and generation, SmolLM2, with the server's malloc settings."""
    env = malloc_environment()
    return _child("effects", "1" if smoke else "0", env=env)


def corpus(smoke: bool) -> dict:
    """The corpus survey over the default corpus against the model's plain forward passes over the same
    texts, and the corpus page's views once the survey is loaded (a child process, server malloc settings)."""
    return _child("corpus", "1" if smoke else "0", env=malloc_environment())


def qk(smoke: bool) -> dict:
    """Why this key: one (layer, head, query, key) split, and the same against the mean key, against the model's
    own forward pass over the same text (sdpa, nothing captured), SmolLM2 (MiniLM in a smoke run)."""
    return _child("qk", "1" if smoke else "0", env=malloc_environment())


def ray_corpus(smoke: bool) -> dict | None:
    """The corpus job on 2 local Ray workers against the same job in this process (MiniLM, the default corpus):
    Ray's overhead on one machine. Not run in a smoke run (a Ray cluster takes ~10 s to start)."""
    return None if smoke else _child("ray", env=malloc_environment())


def big_models(smoke: bool) -> dict:
    """Models researchers bring, on this CPU (issue 31): a Llama-3.2-1B-shaped model with random weights in
    bfloat16 (load time, peak RSS ÷ its weight bytes, attend() at 512 tokens ÷ its own forward pass), and the
    memory estimate's error, estimated ÷ measured peak RSS growth, for MiniLM, SmolLM2 and that model. A child
    process per model, so that each peak is its own. A smoke run measures MiniLM alone."""
    rows = [_child("big", "minilm", "512")]
    if smoke:
        return {"rows": rows}
    rows.append(_child("big", "smollm2", "512"))
    with tempfile.TemporaryDirectory() as folder:
        _child("build_1b", folder)
        rows.append(_child("big", folder, "512"))
    rows[-1]["model"] = "Llama-3.2-1B shape (random weights, bfloat16)"
    return {"rows": rows}


def gpu(smoke: bool) -> dict:
    """The GPU section (benchmarks.gpu) where this machine has a CUDA device; else the figures recorded on one
    (benchmarks/gpu_h100.json), said to be recorded."""
    import torch

    if not torch.cuda.is_available():
        return dict(json.loads((ROOT / "benchmarks" / "gpu_h100.json").read_text()), recorded=True)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "gpu.json"
        subprocess.run([sys.executable, "-m", "benchmarks.gpu", str(out), *(["--smoke"] if smoke else [])], cwd=ROOT,
                       check=True, env=dict(os.environ, HF_HUB_OFFLINE="1", ATTENTION_EXPLORER_DEVICE="cuda"),
                       timeout=1800)
        return dict(json.loads(out.read_text()), recorded=False)


def payload(smoke: bool, with_bertviz: bool) -> list[dict]:
    """JSON bytes of the all-heads grid figure vs BertViz model_view HTML, same model and sentence."""
    from attention import figures
    from attention.models import load_model, survey

    m = load_model("minilm")
    rows = []
    for n in (16,) if smoke else (16, 128, 512):
        att = attend(m, text_of_tokens(m.tokenizer, n))
        found = survey(att)
        fig = figures.head_grid(found.tiles, hover_extra=found.special_mass, hover_label="on the first/special tokens")
        row = {"n": len(att.tokens), "grid_bytes": len(fig.to_json().encode())}
        if with_bertviz:
            row.update(_child("bertviz", str(n)))
        rows.append(row)
    return rows


# --- jobs run in a child process ------------------------------------------------------------------------
def _job_load(name: str) -> dict:
    t = time.perf_counter()
    import transformers  # noqa: F401 - timed separately: every first load in a process pays it

    from attention.models import load_model

    t_import = time.perf_counter() - t
    t = time.perf_counter()
    load_model(name)
    return {"import": t_import, "load": time.perf_counter() - t}


def _job_attend(smoke: str) -> dict:
    from attention.models import load_model

    out = {}
    plan = {"minilm": (16,)} if smoke == "1" else {"minilm": (16, 128, 512), "smollm2": (16, 128, 256)}
    for name, sizes in plan.items():
        m = load_model(name)
        for n in sizes:
            text = text_of_tokens(m.tokenizer, n)
            got = len(attend(m, text).tokens)
            out[f"{name}@{got}"] = timed(lambda m=m, text=text: attend(m, text), 3 if smoke == "1" else 7)
    return out


def _rss() -> int:
    """This process's resident memory now, bytes."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _job_build_1b(folder: str) -> dict:
    """A Llama-3.2-1B-shaped model with random weights, saved in bfloat16 with SmolLM2's tokenizer."""
    import torch

    from attention.models import load_model
    from benchmarks.gpu import LLAMA_32_1B, random_model

    random_model(LLAMA_32_1B, Path(folder), torch.bfloat16, load_model("smollm2").tokenizer)
    return {}


def _job_big(name: str, n: str) -> dict:
    """Load `name` (a bundled key or a folder) as load_model does, attend() to n tokens: load time, the memory
    plan's estimate against the peak RSS growth, attend() against the model's own forward pass."""
    import torch
    import transformers  # noqa: F401 - imported before the baseline: not the model's memory

    from attention.models import load_model, memory_plan

    torch.set_num_threads(os.cpu_count() or 1)
    base = _rss()
    t = time.perf_counter()
    m = load_model(name, dtype="auto" if name in ("minilm", "smollm2") else "bfloat16")
    load_s = time.perf_counter() - t
    dtype = next(m.network.parameters()).dtype
    plan = memory_plan(m)
    text = text_of_tokens(m.tokenizer, int(n))
    attended = timed(lambda: attend(m, text), 3)
    tokens = len(attend(m, text).tokens)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    plain = plain_forward(m, [int(n)], repeats=3)[int(n)]
    weights = sum(p.numel() * p.element_size() for p in m.network.parameters())
    return {"model": m.spec.label, "dtype": str(dtype).removeprefix("torch."), "tokens": tokens, "load_s": load_s,
            "weights_gb": weights / 1e9, "peak_gb": peak / 1e9, "estimate_gb": plan.needs(tokens)[0] / 1e9,
            "attend": attended, "plain": plain, "token_limit": m.spec.max_tokens}


def _job_both() -> dict:
    from attention.models import load_model

    for name, n in (("minilm", 512), ("smollm2", 256)):
        m = load_model(name)
        attend(m, text_of_tokens(m.tokenizer, n))
    return {"max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _job_long(name: str, sizes: str) -> dict:
    """attend() (the forward pass with our attention kernel, which sums the survey as it goes), then the
    survey as a view asks for it (a lookup when the pass made it), then the model's own transformers forward
    pass on the same tokens (fused SDPA attention, no capture) with the same torch threads: the floor."""
    from attention.models import load_model, survey

    m = load_model(name)
    attend(m, "warm up")
    rows = []
    for n in map(int, sizes.split(",")):
        text = text_of_tokens(m.tokenizer, n)
        t = time.perf_counter()
        att = attend(m, text)
        forward = time.perf_counter() - t
        t = time.perf_counter()
        survey(att)
        rows.append({"model": name, "n": len(att.tokens), "forward": forward, "survey": time.perf_counter() - t,
                     "stored_mb": att.nbytes / 1e6,
                     "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                     "weights_mb": att.n_layers * att.n_heads * len(att.tokens) ** 2 * 4 / 1e6})
        del att
    plain = plain_forward(m, [row["n"] for row in rows], repeats=3)
    for row in rows:
        row["plain"] = plain[row["n"]]
    return {"rows": rows}


def plain_forward(loaded, sizes, repeats: int) -> dict:
    """tokens -> timed() (after a warm-up pass) of the model's own transformers forward pass
    (attn_implementation="sdpa", nothing captured, the next token's logits only, as attend() asks) on a text
    of that many tokens, with the torch threads the server gives a text of that length (recompute.
    work_threads). The model is put back to the app's capture kernel afterwards."""
    import torch

    from attention.models import CAPTURE, has_lm_head, work_threads
    network = loaded.network
    extra = {"logits_to_keep": 1} if has_lm_head(network) else {}
    out = {}
    network.set_attn_implementation("sdpa")
    try:
        for n in sizes:
            ids = loaded.tokenizer(text_of_tokens(loaded.tokenizer, n), return_tensors="pt")["input_ids"]
            with torch.inference_mode(), work_threads(ids.shape[1]):
                out[n] = timed(lambda ids=ids: network(input_ids=ids, **extra), repeats)
    finally:
        network.set_attn_implementation(CAPTURE)
    return out


def _job_effects(smoke: str) -> dict:
    import torch

    from attention.models import (
        LENS_MAX_POSITIONS,
        activation_patching,
        agreement,
        attribution_patching,
        contrast,
        direct_logit_attribution,
        generate,
        head_ablation,
        head_roles,
        load_model,
        logit_lens,
        probe_ids,
        swap_words,
    )
    from attention.toy import examples as ex
    prompt, target, foil = ex.PREDICTION_EXAMPLES["Mary and John"]
    m = load_model("smollm2")
    attend(m, "warm up")

    def scan(how):  # as before the contrast existed: the text is read, then every head removed (or estimated)
        att = attend(m, prompt)
        return how(m, att, contrast(att, m.tokenizer, target, foil))

    exact, estimate = scan(head_ablation), scan(attribution_patching)
    runs = 1 if smoke == "1" else 3
    more = 1 if smoke == "1" else runs + 2  # the quick ones: more runs in a real run, one in a smoke run
    clean = attend(m, prompt)
    corrupt = attend(m, swap_words(prompt, target, foil))
    pair = contrast(clean, m.tokenizer, target, foil)
    probe = torch.tensor(probe_ids(m.tokenizer)[0])[None]
    ids = torch.tensor(clean.token_ids)[None]

    def forward(tokens, **kwargs):
        with torch.inference_mode():
            m.network(input_ids=tokens, **kwargs)

    lens_vectors = torch.from_numpy(clean.hidden[:, -LENS_MAX_POSITIONS:].reshape(-1, clean.hidden.shape[-1]))

    kernel_layer, sdpa_layer = _one_layer(256 if smoke == "1" else 2048)

    def unembed():  # the logit lens's floor: the LM head on the same (L + 1) x n' vectors, nothing else
        with torch.inference_mode():
            m.network.get_output_embeddings()(lens_vectors)

    return {
        "tokens": len(clean.tokens), "heads": int(exact.effect.size),
        "scan": timed(lambda: scan(head_ablation), runs),
        "patching": timed(lambda: scan(attribution_patching), more),
        "generate32": timed(lambda: generate(m, "The capital of France is", max_new_tokens=4 if smoke == "1" else 32),
                            runs),
        "spearman": agreement(estimate, exact).spearman, "baseline": exact.baseline,
        # what heads do, each beside the pass it is measured against, in the same run
        "roles": timed(lambda: head_roles(m), more), "probe_forward": timed(lambda: forward(probe), more),
        "residual_patching": timed(lambda: activation_patching(m, clean, corrupt, pair, site="residual"), runs),
        "attribution": timed(lambda: direct_logit_attribution(m, clean, pair), more),
        "lens": timed(lambda: logit_lens(m, clean, target=pair.target), more),
        "forward_all_logits": timed(lambda: forward(ids), more),
        "unembed_lens_vectors": timed(unembed, more),
        "kernel_layer": timed(kernel_layer, more), "sdpa_layer": timed(sdpa_layer, more),
    }


def _one_layer(n: int):
    """(our kernel, SDPA) on one SmolLM2-shaped causal layer of n tokens (9 query heads, 3 KV heads, d = 64,
    random q, k, v), every core (work_threads): ours makes the weights, the output and the survey's sums, SDPA
    the output only."""
    from types import SimpleNamespace

    import numpy as np
    import torch

    from attention.models import SurveyKernel, work_threads

    rng = np.random.default_rng(0)
    q = rng.standard_normal((9, n, 64), dtype=np.float32)
    k, v = rng.standard_normal((3, n, 64), dtype=np.float32), rng.standard_normal((3, n, 64), dtype=np.float32)
    call = SimpleNamespace(q=q, k=k, v=v, mask=np.tril(np.ones((n, n), bool)), causal=True, scale=0.125, softcap=None)
    kernel = SurveyKernel(1)
    tq, tk, tv = (torch.from_numpy(a)[None] for a in (q, k, v))

    def ours():
        with work_threads(n):
            kernel.layers_done = 0
            kernel(call)

    def sdpa():  # as transformers calls it for a llama layer: K and V repeated for the query heads
        with work_threads(n), torch.inference_mode():
            torch.nn.functional.scaled_dot_product_attention(tq, tk.repeat_interleave(3, 1), tv.repeat_interleave(3, 1),
                                                             is_causal=True, scale=0.125)
    return ours, sdpa


def _job_bertviz(n: str) -> dict:
    import torch
    from bertviz import model_view
    from transformers import AutoModel, AutoTokenizer

    from attention.models import minilm_dir

    tok = AutoTokenizer.from_pretrained(minilm_dir())
    model = AutoModel.from_pretrained(minilm_dir(), attn_implementation="eager").eval()
    inputs = tok(text_of_tokens(tok, int(n)), return_tensors="pt")
    with torch.no_grad():
        attention = model(**inputs, output_attentions=True).attentions
    tokens = tok.convert_ids_to_tokens(inputs["input_ids"][0])
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    html = model_view(attention, tokens, html_action="return").data
    return {"bertviz_bytes": len(html.encode()), "bertviz_seconds": time.perf_counter() - t,
            "bertviz_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rss_before_mb": rss0}


def _job_corpus(smoke: str) -> dict:
    """Per model: the default corpus (30 texts in a smoke run) surveyed, against a plain sdpa forward pass over
    each of the same token ids (the same threads: work_threads of each text's length), and the four views."""
    from attention.models import default_corpus

    texts = default_corpus().texts[:30] if smoke == "1" else default_corpus().texts
    return {name: _corpus_row(name, texts) for name in (("minilm",) if smoke == "1" else ("minilm", "smollm2"))}


def _corpus_row(name: str, texts) -> dict:
    import resource

    import torch

    from attention import figures
    from attention.models import CAPTURE, corpus_survey, has_lm_head, load_model, work_threads

    loaded = load_model(name)
    network = loaded.network
    extra = {"logits_to_keep": 1} if has_lm_head(network) else {}
    ids = [torch.tensor(loaded.tokenizer(t, truncation=True, max_length=128)["input_ids"])[None] for t in texts]

    def plain():
        with torch.inference_mode():
            for x in ids:
                with work_threads(x.shape[1]):
                    network(input_ids=x, **extra)
    network.set_attn_implementation("sdpa")
    try:
        forward = timed(plain, 3)
    finally:
        network.set_attn_implementation(CAPTURE)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kept = {}
    survey_ = timed(lambda: kept.__setitem__("found", corpus_survey(loaded, texts)), 2)
    found = kept["found"]
    views = {
        "map": timed(lambda: figures.corpus_map(found), 5),
        "top examples": timed(lambda: figures.example_rows(found, 1, 2), 5),
        "queries and keys, first (the projection)": timed(lambda: (found.projection_cache.clear(),
                                                                   figures.qk_scatter(found, 1, 2)), 3),
        "queries and keys, again (cached)": timed(lambda: figures.qk_scatter(found, 1, 2), 5),
        "a statistic over the texts": timed(lambda: figures.corpus_statistic(found, 1, 2), 5),
    }
    return {"texts": len(texts), "tokens": int(sum(x.shape[1] for x in ids)), "forward": forward, "survey": survey_,
            "views": views, "points": int(2 * len(found.sample_text)),
            "peak_rss_growth_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}


def _job_qk(smoke: str) -> dict:
    import torch

    from attention.models import CAPTURE, load_model, qk_attribution

    name, sizes = ("minilm", (16,)) if smoke == "1" else ("smollm2", (64, 256))
    loaded = load_model(name)
    rows = []
    for n in sizes:
        att = attend(loaded, text_of_tokens(loaded.tokenizer, n))
        ids = torch.tensor(att.token_ids)[None]

        def forward(ids=ids):
            with torch.inference_mode():
                loaded.network(input_ids=ids)
        loaded.network.set_attn_implementation("sdpa")
        try:
            plain = timed(forward, 5)
        finally:
            loaded.network.set_attn_implementation(CAPTURE)
        for layer in (att.n_layers // 2, att.n_layers - 1):
            query, key = len(att.tokens) - 1, len(att.tokens) - 5
            def split(against=None, att=att, layer=layer, query=query, key=key):
                return qk_attribution(loaded, att, layer, 0, query, key, against=against)
            rows.append({"tokens": len(att.tokens), "layer": layer, "forward": plain, "pair": timed(split, 5),
                         "mean": timed(lambda split=split: split("mean"), 3)})
    return {"model": name, "rows": rows}


def _job_ray() -> dict:
    import tempfile
    from functools import partial

    from attention.models import default_corpus, load_model, survey_file, survey_file_on_ray

    with tempfile.TemporaryDirectory() as folder:
        corpus = Path(folder) / "corpus.txt"
        texts = default_corpus().texts
        corpus.write_text("\n\n".join(texts), encoding="utf-8")
        loaded = load_model("minilm")
        here = timed(lambda: survey_file(loaded, corpus, Path(folder) / "here.safetensors"), 2)
        ray = timed(lambda: survey_file_on_ray(partial(load_model, "minilm"), corpus, Path(folder) / "ray.safetensors",
                                               workers=2), 2)
    return {"texts": len(texts), "here": here, "ray": ray}


if __name__ == "__main__":
    job, *job_args = sys.argv[1:]
    jobs = {"load": _job_load, "attend": _job_attend, "both": _job_both, "bertviz": _job_bertviz, "long": _job_long,
            "effects": _job_effects, "corpus": _job_corpus, "qk": _job_qk, "ray": _job_ray, "big": _job_big,
            "build_1b": _job_build_1b}
    print(json.dumps(jobs[job](*job_args)))


def live_payload() -> int:
    """Bytes of JSON the lookup page's live component receives (attention.toy.live.lookup_payload)."""
    import json

    from attention.toy import examples as ex
    from attention.toy.live import lookup_payload

    data = lookup_payload(ex.FRUIT_QUERY, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS, ex.FRUIT_KEY_FEATURES,
                          ex.FRUIT_VALUE_FEATURES)
    return len(json.dumps(data))
