"""Arrays a result keeps on the GPU: q, k, v, the masks and the hidden states of a pass that ran there.

On a CPU a result holds numpy arrays. On a GPU copying every layer's q, k and v back as float32 would cost
more than the pass itself (a 1B model at 32,768 tokens: 11 GB of RAM and seconds of copying) and every view
would send them back again; so there they stay where the model made them, in its dtype, as DeviceArrays.
A DeviceArray reads like the numpy array it stands for: `a[index]` copies that slice back (float32, or bool
for a mask), `np.asarray(a)` copies all of it, and `shape`, `ndim`, `dtype`, `len()` answer as numpy would.
Code that works on the device (attention.models.forward.recompute) takes `a.tensor` itself.

Shapes: whatever the array's (q (L, H, n, d), a mask (n, m)...).
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np
import torch

from attention.models.forward.device import compute_device


class DeviceArray(np.lib.mixins.NDArrayOperatorsMixin):
    """A read-only array held as a torch tensor (on a GPU, in the model's dtype), read as numpy.

    Indexing copies the slice; arithmetic, numpy functions and any other ndarray method (`a.sum()`,
    `a | b`) work on a copy of the whole array: right for any code written for numpy, and what views of
    long inputs avoid by indexing first or by working on `tensor`."""

    def __init__(self, tensor: torch.Tensor, origin: tuple[DeviceArray, tuple] | None = None):
        self.tensor = tensor.detach()
        self._origin = origin  # (the array it is a part of, where), set by part(); None: a whole array

    @property
    def origin(self) -> tuple[DeviceArray, tuple]:
        """The whole array this one is a part of (itself when whole), and which part: a key for copies of
        it kept elsewhere (recompute.on_device), valid while that array lives."""
        return (self, ()) if self._origin is None else self._origin

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.shape)

    @property
    def ndim(self) -> int:
        return self.tensor.ndim

    @property
    def dtype(self) -> np.dtype:
        """What reading gives: bool for a mask, float32 otherwise (as capture made numpy arrays before)."""
        return np.dtype(bool) if self.tensor.dtype == torch.bool else np.dtype(np.float32)

    @property
    def nbytes(self) -> int:
        """Bytes it holds where it is (on the GPU), not in the process's memory."""
        return self.tensor.numel() * self.tensor.element_size()

    def __len__(self) -> int:
        return self.tensor.shape[0]

    def __getitem__(self, index) -> np.ndarray:
        if _reversed(index):  # torch has no negative steps
            return np.asarray(self)[index]
        return _host(self.tensor[_torch_index(index)])

    def __bool__(self) -> bool:
        if self.tensor.numel() != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous.")
        return bool(self.tensor)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        a = _host(self.tensor)
        return a if dtype is None else a.astype(dtype, copy=False)

    def astype(self, dtype, copy: bool = True) -> np.ndarray:
        return np.asarray(self).astype(dtype)

    def all(self) -> bool:
        return bool(self.tensor.all())

    def any(self) -> bool:
        return bool(self.tensor.any())

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(np.asarray(x) if isinstance(x, DeviceArray) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __getattr__(self, name: str):
        if name.startswith("__") or not hasattr(np.ndarray, name):
            raise AttributeError(name)
        return getattr(np.asarray(self), name)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, {self.tensor.dtype} on {self.tensor.device})"


def _host(t: torch.Tensor) -> np.ndarray:
    """A tensor as numpy in the process's memory: float32 (bool stays bool)."""
    if t.dtype != torch.bool:
        t = t.to(torch.float32)
    return t.cpu().numpy()


def _torch_index(index):
    """A numpy index as torch takes it: arrays of bools stay masks, arrays of any integer type become int64
    (torch reads uint8 as a mask), numpy scalars become Python's."""
    if isinstance(index, tuple):
        return tuple(_torch_index(i) for i in index)
    if isinstance(index, (np.ndarray, list)):
        a = np.asarray(index)
        return torch.as_tensor(a if a.dtype == bool else a.astype(np.int64))
    if isinstance(index, (np.integer, np.bool_)):
        return index.item()
    return index


def _reversed(index) -> bool:
    """The index holds a slice with a negative step."""
    return any(isinstance(i, slice) and (i.step or 1) < 0 for i in (index if isinstance(index, tuple) else (index,)))


_resident: contextvars.ContextVar[torch.device | None] = contextvars.ContextVar("resident", default=None)


def resident_device() -> torch.device | None:
    """Where a pass's arrays stay: the compute device when it is a GPU, else None (numpy, in memory)."""
    if _resident.get() is not None:
        return _resident.get()
    device = compute_device()
    return device if device.type == "cuda" else None


@contextlib.contextmanager
def resident_on(device: str | torch.device):
    """Keep the arrays of passes run inside the block on `device` whatever it is: the GPU's path, on the CPU
    (how make test checks it without a GPU)."""
    token = _resident.set(torch.device(device))
    try:
        yield
    finally:
        _resident.reset(token)


def kept(t: torch.Tensor, device: torch.device | None = None) -> np.ndarray | DeviceArray:
    """What a result keeps of a tensor the pass made: on `device` (default resident_device()) a DeviceArray
    in the tensor's own dtype, contiguous; without one a float32 numpy array in row-major order (the
    model's q, k and v arrive as transposed views, and a matmul over such a view copies it on every chunk)."""
    device = resident_device() if device is None else device
    if device is not None:
        return DeviceArray(t.detach().to(device).contiguous())
    return t.detach().to(torch.float32).cpu().contiguous().numpy()


def part(a, index):
    """a[index] left where it is: a DeviceArray's part as a DeviceArray viewing the same memory (one layer's
    q for the GPU's own work, nothing copied), a numpy array's as numpy."""
    if not isinstance(a, DeviceArray):
        return a[index]
    root, where = a.origin
    return DeviceArray(a.tensor[_torch_index(index)], origin=(root, (*where, repr(index))))
