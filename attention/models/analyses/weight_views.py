"""TransformerLens's weight views on a loaded model (issue 72): W_Q, W_K, W_V, W_O for every layer and head, W_U, and
the factored W_QK = W_Q W_K^T and W_OV = W_V W_O with their SVD and eigenvalues, as TransformerLens's
FactoredMatrix gives them.

    >>> w = weights(m)                       # every layer's, in the model's own values (float32)
    >>> w.W_Q.shape                          # (L, H, D, d)  x @ W_Q[l, h] is head h's query (before rotary)
    >>> w.OV[19, 6].eigenvalues              # (d,) complex: positive real parts mean the head copies
    >>> U, S, Vh = w.QK[19, 6].svd()         # of the D x D bilinear form, from its D x d factors

Conventions, TransformerLens's where it has one: row vectors (x @ W); grouped-query heads' W_K and W_V repeated
to every query head (as TL's W_K property does); unfolded (the norms' weights are not folded into W_Q..W_V nor
the final norm's into W_U: TL's fold_ln=False); W_U times the logit scale where the family scales its logits
(Granite), so normalized @ W_U are the model's logits. W_QK leaves rotary positions out (its scores depend on the
distance) and a family with a q/k norm between the projection and the score (Qwen3, OLMo-2, Gemma 3) is refused
for W_QK, since its scores are not x W_QK y. Families whose q, k and v come from one fused projection are refused
(composition_scores.head_matrices says so). Shapes: L layers, H heads, D model size, d head size, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attention.models.analyses.composition_scores import head_matrices
from attention.models.forward.anatomy import parameter
from attention.models.forward.model import LoadedModel

QK_NORMS = ("q_norm", "k_norm", "q_layernorm", "k_layernorm")  # modules that normalise q or k before the score


@dataclass(frozen=True)
class FactoredMatrix:
    """A @ B kept as its factors, as TransformerLens's FactoredMatrix: A (..., m, r), B (..., r, n), r small.
    Index the leading axes (`QK[19, 6]`); AB is the whole product, BA the r x r one that has its non-zero
    eigenvalues."""

    A: torch.Tensor
    B: torch.Tensor

    def __getitem__(self, index) -> FactoredMatrix:
        return FactoredMatrix(self.A[index], self.B[index])

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.A.shape[:-1], self.B.shape[-1])

    @property
    def AB(self) -> torch.Tensor:  # noqa: N802 - TransformerLens's name
        return self.A @ self.B

    @property
    def BA(self) -> torch.Tensor:  # noqa: N802
        return self.B @ self.A

    @property
    def T(self) -> FactoredMatrix:  # noqa: N802
        return FactoredMatrix(self.B.transpose(-1, -2), self.A.transpose(-1, -2))

    def svd(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(U (..., m, r), S (..., r), Vh (..., r, n)) of AB, from the factors: A = Qa Ra and B^T = Qb Rb (QR),
        so AB = Qa (Ra Rb^T) Qb^T and only the r x r middle is decomposed. Float64 inside."""
        qa, ra = torch.linalg.qr(self.A.double())
        qb, rb = torch.linalg.qr(self.B.double().transpose(-1, -2))
        u, s, vh = torch.linalg.svd(ra @ rb.transpose(-1, -2))
        dtype = self.A.dtype
        return (qa @ u).to(dtype), s.to(dtype), (vh @ qb.transpose(-1, -2)).to(dtype)

    @property
    def S(self) -> torch.Tensor:  # noqa: N802
        return self.svd()[1]

    @property
    def eigenvalues(self) -> torch.Tensor:
        """The r eigenvalues of BA, complex: AB's non-zero eigenvalues are among them (m == n)."""
        if self.A.shape[-2] != self.B.shape[-1]:
            raise ValueError(f"eigenvalues of a square product only, not {self.shape[-2:]}")
        return torch.linalg.eigvals(self.BA.double())

    def norm(self) -> torch.Tensor:
        """The Frobenius norm of AB, through r x r matrices: ||AB||^2 = tr((A^T A)(B B^T))."""
        a, b = self.A.double(), self.B.double()
        gram = (a.transpose(-1, -2) @ a) * (b @ b.transpose(-1, -2)).transpose(-1, -2)
        return gram.sum((-1, -2)).clamp(min=0).sqrt().to(self.A.dtype)


@dataclass(frozen=True)
class Weights:
    """Every layer's per-head weights in x @ W form (module docstring). Shapes: W_Q, W_K, W_V (L, H, D, d),
    W_O (L, H, d, D), W_U (D, V) or None (an encoder without a language-model head)."""

    model: str
    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    W_O: torch.Tensor
    W_U: torch.Tensor | None
    qk_norm: str | None = None  # why W_QK is refused (a q/k norm), or None

    @property
    def QK(self) -> FactoredMatrix:  # noqa: N802 - TransformerLens's name
        """W_QK = W_Q W_K^T, (L, H, D, D) factored: a query x and key y score x W_QK y^T, times the scaling, where
        the family has no rotary positions and no q/k norm."""
        if self.qk_norm:
            raise ValueError(self.qk_norm)
        return FactoredMatrix(self.W_Q, self.W_K.transpose(-1, -2))

    @property
    def OV(self) -> FactoredMatrix:  # noqa: N802
        """W_OV = W_V W_O, (L, H, D, D) factored: what head h writes for a key x (times its weight), x W_OV."""
        return FactoredMatrix(self.W_V, self.W_O)


def weights(loaded: LoadedModel) -> Weights:
    """The model's per-head weights and W_U (float32, on the CPU). ValueError for a family whose q, k, v this
    package cannot split into heads (a fused projection)."""
    per_layer = [head_matrices(loaded, layer) for layer in range(len(loaded.anatomy.blocks))]
    stacked = {name: torch.stack([m[name] for m in per_layer]).float() for name in ("W_Q", "W_K", "W_V", "W_O")}
    parts = loaded.anatomy
    w_u = None
    if parts.unembed is not None:
        w_u = parameter(parts.unembed).detach().float().cpu().T * parts.logit_scale  # (D, V)
    inside = [name for name, _ in parts.blocks[0].named_modules()]
    found = [norm for norm in QK_NORMS if any(name.endswith(norm) for name in inside)]
    why = (f"{loaded.spec.name} ({parts.model_type}) normalises q and k ({found[0]}) between the projections and "
           "the score: its scores are not x W_QK y, so W_QK is not given") if found else None
    return Weights(model=loaded.spec.name, W_U=w_u, qk_norm=why, **stacked)
