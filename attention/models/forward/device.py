"""Where the work runs: the compute device and the number of torch threads.

    compute_device()   $ATTENTION_EXPLORER_DEVICE: cpu (default), cuda, cuda:1...; cuda where none is available
                       warns and falls back to the CPU
    work_threads(n)    every core while a pass over n >= LONG_WORK_TOKENS tokens runs, one thread otherwise

Models, recomputed weights and the survey all run where compute_device() says; device_arrays keeps a GPU
pass's arrays there.
"""

from __future__ import annotations

import contextlib
import os
import warnings

import torch

LONG_WORK_TOKENS = 256  # from this length on, forward passes and surveys use every core


@contextlib.contextmanager
def work_threads(n_tokens: int):
    """Every core for long work, for its duration. The server runs short work on one torch thread, so that
    sessions share the cores (serving.configure_process); from a few hundred tokens on, a pass takes
    long enough that two threads on this 2-core machine nearly halve it (512 tokens: 0.38 s -> 0.19 s)."""
    if n_tokens < LONG_WORK_TOKENS:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(max(before, os.cpu_count() or 1))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def compute_device() -> torch.device:
    """The device models and recomputation run on: $ATTENTION_EXPLORER_DEVICE (cpu, cuda, cuda:1...).

    Asking for cuda where none is available warns and falls back to the CPU.
    """
    asked = os.environ.get("ATTENTION_EXPLORER_DEVICE", "cpu").strip().lower() or "cpu"
    if asked.startswith("cuda") and not torch.cuda.is_available():
        warnings.warn(f"ATTENTION_EXPLORER_DEVICE={asked} but no CUDA device is available; using the CPU",
                      stacklevel=2)
        return torch.device("cpu")
    device = torch.device(asked)
    if device.type == "cuda" and device.index is None:  # "cuda" names the current GPU: say which, so that it
        device = torch.device("cuda", torch.cuda.current_device())  # equals its tensors' device ("cuda:0")
    return device
