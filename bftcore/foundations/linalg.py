"""Sparse factorisations shared by the models: one place for how a symmetric saddle-point matrix is factorised.

The bordered (KKT) systems of the models, ``[[A, B], [B^T, 0]]`` with A symmetric and B a constraint (the per-x
normalisation of a density, the nodes held at zero on a face of field P), are factorised by SciPy's SuperLU with the
options :data:`SADDLE_LU`.
"""
from __future__ import annotations

import scipy.sparse.linalg as spl

#: SuperLU's options for a symmetric saddle-point matrix: the minimum-degree ordering of ``A^T + A`` kept (symmetric
#: mode), a diagonal pivot taken unless it is below a tenth of its column's largest entry.  With SciPy's defaults
#: (partial pivoting with threshold 1) the pivots leave the ordering and the factor fills in.  Measured on the KKT
#: matrices the models factorise (the same residuals, 1e-15 to 3e-14):
#:
#: * field P's Newton face at 128 x 128 with nodes held at zero (16 388 rows): 39 s and 25 million nonzeros with the
#:   defaults, 0.31 s and 1.5 million with these; at 64 x 64 0.49 s against 0.03 s;
#: * the robust density's and the local switch density's Newton systems at 128 x 128: 0.47 s against 0.12 s
#:   (3.4 million nonzeros against 0.9 million).
#:
#: A zero threshold (always the diagonal) was faster still on field P (0.18 s) but has no guard against a zero pivot
#: in the multipliers' block.
SADDLE_LU = dict(permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.1, options={"SymmetricMode": True})


def saddle_lu(kkt):
    """SuperLU's factorisation of a symmetric saddle-point matrix (CSC), with :data:`SADDLE_LU`."""
    return spl.splu(kkt, **SADDLE_LU)
