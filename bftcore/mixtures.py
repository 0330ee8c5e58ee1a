"""Mixtures of Gaussian prior factors: mixing coefficients, reduced fixed points, beta sweeps, basins.

Shared by the density model (eqs. (713)-(718)) and by Gaussian regression with a mixture of Gaussian process
priors ([001] Sects. 4.2-4.5, CONVENTIONS.md §3).  This module holds the ONE implementation of the mixing
coefficients a_j and of the mixture energy; the energies of both models call it.
"""
from __future__ import annotations

import numpy as np

BETA_MIN, BETA_MAX = 1e-12, 1e12


def _check_beta(beta) -> float:
    b = float(beta)
    if not (np.isfinite(b) and b > 0):
        raise ValueError(f"the mixture inverse temperature beta must be a finite number > 0, got {beta!r}")
    return b


def _check_weights(prior_energies, weights):
    E = np.asarray(prior_energies, dtype=float)
    p = np.asarray(weights, dtype=float)
    if E.ndim != 1 or p.shape != E.shape:
        raise ValueError(f"need one prior energy per mixture weight, got energies of shape {E.shape} "
                         f"and weights of shape {p.shape}")
    if E.size == 0:
        raise ValueError("a mixture needs at least one component")
    if np.any(~np.isfinite(p)) or np.any(p < 0) or not p.sum() > 0:
        raise ValueError(f"mixture weights p_j must be finite, >= 0 and not all zero, got {p.tolist()}")
    if np.any(np.isnan(E)):
        raise ValueError(f"prior energies contain NaN: {E.tolist()}")
    return E, p / p.sum()


def mixing_coefficients(prior_energies, weights, beta: float) -> np.ndarray:
    """Mixing coefficients a_j = p_j exp(-beta E_j) / sum_k p_k exp(-beta E_k), eq. (718) with beta.

    ``prior_energies`` already include lambda (density: ``lambda * E_0j``, eq. (715); regression: the component
    prior energy ``(lambda/2)(h - t_j, K_X (h - t_j))``, eq. (23) [001]).  Computed relative to the smallest energy
    of a component with p_j > 0, so nothing overflows for beta in [1e-6, 1e6] and beyond; components with
    p_j = 0 get a_j = 0.
    """
    b = _check_beta(beta)
    E, p = _check_weights(prior_energies, weights)
    live = p > 0
    shift = np.where(live, E - np.min(E[live]), np.inf)
    with np.errstate(over="ignore", invalid="ignore"):
        w = np.where(live, p * np.exp(-b * shift), 0.0)
    return w / w.sum()


def mixture_energy(prior_energies, weights, beta: float) -> float:
    """Mixture energy -(1/beta) ln sum_j p_j exp(-beta E_j) (eq. (713) with beta; (18) [001]), weights normalised.

    Written as ``E_min - (1/beta) log1p(sum_j p_j expm1(-beta (E_j - E_min)))`` so that it stays accurate both for
    beta -> 0 (where it tends to sum_j p_j E_j) and for beta -> infinity (where it tends to min_j E_j).
    """
    b = _check_beta(beta)
    E, p = _check_weights(prior_energies, weights)
    live = p > 0
    e_min = float(np.min(E[live]))
    d = E[live] - e_min
    with np.errstate(over="ignore", invalid="ignore"):
        s = float(np.sum(p[live] * np.expm1(-b * d)))
    return e_min - np.log1p(max(s, -1.0 + 1e-300)) / b
