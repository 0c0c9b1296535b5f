"""What a job saves, read back: one .safetensors file of arrays with a JSON header under one metadata key (a corpus
survey's "corpus_survey", a batch job's "batch_job"). Size-bounded, never unpickled, every failure a ValueError
in words; what the header and arrays must hold is the reader's own (corpus_survey.load_corpus_survey,
batch_job.load_batch_job).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

MAX_FILE_BYTES = 2_000_000_000  # a saved file larger than this is refused before it is read (100,000 IOI pairs'
# batch job on SmolLM2 is ~1.3 GB)


def read_saved(source: str | Path | bytes, key: str, what: str) -> tuple[object, dict[str, np.ndarray]]:
    """(the JSON header under metadata `key`, or None when there is none; the arrays) of a file's path or bytes.
    `what` names the file in errors ("a saved batch job")."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"the file has {len(data):,} bytes; {what} may have at most {MAX_FILE_BYTES:,}")
    try:
        return json.loads(str(metadata(data).get(key, "null"))), load(data)
    except (SafetensorError, ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"this is not {what} (a .safetensors file): {err}") from None
    except RecursionError:  # JSON nested deeper than Python's recursion limit
        raise ValueError(f"this is not {what}: its header is nested too deeply to read") from None


def metadata(data: bytes) -> dict:
    """The metadata of .safetensors bytes: an 8-byte little-endian length, then that much JSON."""
    if len(data) < 8:
        raise ValueError("the file is too short to be a .safetensors file")
    size = int.from_bytes(data[:8], "little")
    if size > len(data) - 8:
        raise ValueError("the file is cut short: its header claims more bytes than it has")
    header = json.loads(data[8:8 + size].decode("utf-8"))
    found = header.get("__metadata__") if isinstance(header, dict) else None
    return found if isinstance(found, dict) else {}
