"""Our attention kernel: what attend() runs each self-attention layer with, the survey summed as it goes.

Shapes: a call's q (H, n, d), k and v (H_kv, m, d) -> output (n, H, d).
"""

from __future__ import annotations

import numpy as np
import torch

from attention.models.forward.device import compute_device
from attention.models.forward.head_survey import HeadSurvey
from attention.models.forward.model_attention import ModelAttention
from attention.models.forward.recompute import layer_scores, row_chunks
from attention.models.forward.survey_pass import finish_survey
from attention.models.forward.survey_sums import SurveySums


class SurveyKernel:
    """The attention kernel attend() runs the model with (an attention.models.forward.capture.OwnKernel): for each
    layer, a chunk of query rows at a time, the weights softmax(masked scaled q k^T) as the model's eager
    kernel makes them, the layer's output (weights @ v) from them, and the survey's sums from the same
    weights. The scores are computed once, where the fused kernel would compute and drop them, so the grid
    costs no second pass.

    Calls it cannot follow (more calls than layers, a query length that changes) are left to the fused
    kernel, and `survey` then answers None (the survey makes its own pass when asked).
    Shapes: a call's q (H, n, d), k and v (H_kv, m, d) -> output (n, H, d).
    """

    def __init__(self, n_layers: int):
        self.n_layers = n_layers
        self.layers_done = 0
        self.followed = True
        self._totals: SurveySums | None = None
        self._later_keys: dict[int, bool] = {}  # id(mask) -> whether some query sees a later key

    def __call__(self, call) -> torch.Tensor | None:
        H, n, d = call.q.shape
        n_kv, m, _ = call.k.shape
        if self._totals is None:
            self._totals = SurveySums(self.n_layers, H, n, m)
        t = self._totals
        if self.layers_done >= self.n_layers or t.entropy.shape[1] != H or t.column_mass.shape[2] != m \
                or t.n != n or call.v.shape[-1] != d:
            self.followed = False
            return None
        mask = call.mask
        if id(mask) not in self._later_keys:
            no_later = call.causal or (mask is not None and n == m and not np.triu(mask, 1).any())
            self._later_keys[id(mask)] = not no_later
        causal = not self._later_keys[id(mask)]
        device = compute_device()
        v = torch.from_numpy(call.v).to(device)
        out = torch.empty(n, H, d, device=device)
        for rows in row_chunks(n, t.rows_per_chunk):
            keys = rows.stop if causal else m
            scores = layer_scores(call.q, call.k, scale=call.scale, mask=mask, causal=call.causal, rows=rows,
                                  keys=keys, softcap=call.softcap, out=t.scores)
            w = t.add(self.layers_done, rows, scores, causal)  # (H, r, keys), grouped by the KV head they read
            r = rows.stop - rows.start
            grouped = torch.matmul(w.view(n_kv, H // n_kv * r, keys), v[:, :keys])  # (H_kv, group * r, d)
            out[rows] = grouped.view(H, r, d).transpose(0, 1)
        self.layers_done += 1
        return out

    def survey(self, att: ModelAttention) -> HeadSurvey | None:
        """The survey of `att`, the result of the forward pass this kernel ran in; None unless the kernel
        made every self-attention layer of it."""
        s = att.self_attn
        t = self._totals
        if (not self.followed or t is None or self.layers_done != s.n_layers or not s.captured
                or t.n != s.n_queries or t.column_mass.shape[1:] != (s.n_heads, s.n_keys)):
            return None
        return finish_survey(att, t)

