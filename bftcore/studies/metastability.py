"""Metastable mixture solutions you can watch (issue 28): restarts from every template and from cold, the verdict
"a lower solution exists", and the branches of the mixing coefficient against beta through the current beta.

A mixture of Gaussian prior factors has several MAP solutions above its bifurcation ([001] Sect. 4.2, [000]
Sect. 6.3): which one a run ends on depends on where it starts.  The live view of the dashboard warm-starts every
change from the solution on screen, so on its own it never leaves the branch it is on.  This module compares:

* **Restarts** (:func:`restarts`): the MAP of the same problem from each template ``t_j`` and from cold (a
  density: uniform L; a regression: the complete average (41) of [001]), with the document's own solver given
  enough iterations to end (:data:`RESTART_SOLVER`; Newton when the document shows the paper's relaxation, which
  takes hundreds of iterations to cross a plateau).  The energies are the documents' own (the record's
  ``energy``), so they compare with the run on screen.
* **The verdict** (:func:`verdict`): the lowest restart whose energy is below the current solution's by more
  than the rounding of the energy (:data:`ENERGY_REL_TOL` of its size), and which is another solution (its mixing
  coefficients differ by more than :data:`MIXING_TOL`): "metastable: a solution with energy lower by 12.3 exists
  (from cold)".
* **Branches** (:func:`branches`): from each start, the solution at the current beta followed by continuation
  (each solve warm-started from its neighbour's field) up and down a log grid of :data:`BRANCH_POINTS` betas
  around the current one (a decade each way, :data:`BRANCH_DECADES`).  A branch ends where its solution stops
  existing; past that beta the continuation falls onto another branch, which the plot shows as a jump.  Points
  are reported as they are computed (``on_point``), so a view fills the diagram progressively.

Decisions: the starts are those the issue names (each template, and cold); the sweep of the β-sweep tab
(:func:`bftcore.studies.workflows.sweep_document`) remains the exhaustive tool with bifurcation refinement and
stability checks.  Only mixtures (two or more templates) get either.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from ..foundations.config import Valid, checked, copy_document, kind_of

#: The restarts' solver settings: the document's own method (Newton for the paper's relaxation) with room to end.
RESTART_SOLVER = {"min_iter": 1, "max_iter": 300}
#: A restart is "lower" when its energy is below the current one by more than this fraction of |E| (plus this
#: absolute amount for energies near zero): above the rounding a converged Newton reaches (1e-10 relative).
ENERGY_REL_TOL = 1e-6
#: ... and it is another solution when some mixing coefficient differs by more than this.
MIXING_TOL = 1e-3
#: Betas of each branch (odd: the current beta is the middle one) and decades covered each way.
BRANCH_POINTS = 13
BRANCH_DECADES = 1.0


def applies(cfg: dict) -> bool:
    """Whether a document gets the metastability check: a mixture (two or more templates)."""
    return len(cfg.get("templates") or []) >= 2


def starts(cfg: dict) -> list[tuple[str, str]]:
    """(init name, label) of each start: every template, then cold."""
    n = len(cfg.get("templates") or [])
    cold = "uniform" if kind_of(cfg).y_on_grid else "average"  # a density's flat L; a regression's average (41)
    return [(f"template:{j}", f"template {j + 1}") for j in range(n)] + [(cold, "cold")]


def _document(cfg: dict, beta: float, init: str) -> Valid:
    doc = copy_document(cfg)
    doc["beta"] = float(beta)
    doc.pop("choose", None)
    solver = doc.setdefault("solver", {})
    solver.update(RESTART_SOLVER)
    solver["init"] = init
    if solver.get("method") in ("massive", "gradient"):
        solver["method"] = "newton"
    return checked(doc)


def solve(cfg: dict, beta: float, init: str, field=None):
    """The MAP of ``cfg`` at ``beta`` from the start ``init`` (or from ``field`` when given): the fit."""
    valid = _document(cfg, beta, init)
    return kind_of(valid).solve(valid, None if field is None else np.array(field, copy=True))


def _summary(fit, start: str, label: str, beta: float) -> dict:
    last = fit.last
    mixing = [] if last.mixing is None else [float(a) for a in last.mixing]
    return {"start": start, "label": label, "beta": float(beta), "energy": float(last.energy), "mixing": mixing,
            "converged": bool(getattr(last, "converged", True))}


def restarts(config: dict, cancel: Callable[[], bool] | None = None) -> list[dict]:
    """The solution from each start (:func:`starts`) at the document's beta: ``{"start", "label", "beta",
    "energy", "mixing", "converged", "field"}`` each (``field``: the solver's field, the warm start of a jump).
    A start whose solve fails is left out."""
    cfg = checked(config)
    beta = float(cfg.get("beta", 1.0))
    out = []
    for init, label in starts(cfg):
        if cancel is not None and cancel():
            raise InterruptedError("the restarts were cancelled")
        try:
            fit = solve(cfg, beta, init)
        except (ValueError, ArithmeticError):
            continue
        out.append({**_summary(fit, init, label, beta), "field": fit.field})
    return out


def _tolerance(energy: float) -> float:
    return ENERGY_REL_TOL * (1.0 + abs(energy))


def verdict(energy: float, mixing, found: list[dict], converged: bool = True) -> dict | None:
    """The alarm for a current solution of ``energy`` and ``mixing`` against the restarts ``found``: the lowest
    one that is lower by more than the energy's rounding and is another solution; None when there is none.  For a
    run that ended on its iteration limit (``converged`` False) the message says "not converged" instead.

    ``{"message", "delta", "start", "label", "energy", "mixing"}``, the message e.g. "metastable: a solution with
    energy lower by 12.3 exists (from cold)"."""
    if not math.isfinite(energy):
        return None
    current = np.asarray(mixing if mixing is not None else [], dtype=float)
    best = None
    for r in sorted(found, key=lambda r: r["energy"]):
        delta = energy - r["energy"]
        if not delta > _tolerance(energy):
            break
        other = np.asarray(r["mixing"], dtype=float)
        if current.size and other.size == current.size and np.max(np.abs(other - current)) <= MIXING_TOL:
            continue  # the same solution, drawn lower only by the rounding of a slower solver
        best = r
        break
    if best is None:
        return None
    delta = energy - best["energy"]
    if converged:
        message = f"metastable: a solution with energy lower by {delta:.3g} exists (from {best['label']})"
    else:  # a run stopped by its iteration limit is not at a solution: say so, not "metastable"
        message = (f"not converged: a solution with energy lower by {delta:.3g} exists (from {best['label']}); "
                   f"run longer or use Newton")
    return {"message": message, "converged": bool(converged),
            "delta": delta, "start": best["start"], "label": best["label"], "energy": best["energy"],
            "mixing": list(best["mixing"])}


def branch_betas(beta: float, n: int = BRANCH_POINTS, decades: float = BRANCH_DECADES) -> np.ndarray:
    """``n`` betas log-spaced over ``decades`` each way of ``beta``, which is the middle one (exactly)."""
    half = (int(n) - 1) // 2
    steps = np.arange(-half, half + 1) * (decades / max(half, 1))
    out = float(beta) * 10.0 ** steps
    out[half] = float(beta)
    return out


def branches(config: dict, betas=None, cancel: Callable[[], bool] | None = None,
             on_point: Callable[[int, dict], None] | None = None) -> dict:
    """The branch through the document's beta from each start, followed up and down ``betas`` (default
    :func:`branch_betas`) by continuation.

    Returns ``{"betas": [...], "beta": the document's beta, "branches": [{"start", "label", "beta": [...],
    "mixing": [[...]], "energy": [...]} per start]}``, each branch's points in ascending beta.  ``on_point(i,
    point)`` is called after every solve (``i`` the branch's index, ``point`` its summary), for a progressive
    view.  Failed solves leave a gap (the continuation goes on from the last field)."""
    cfg = checked(config)
    beta0 = float(cfg.get("beta", 1.0))
    grid = branch_betas(beta0) if betas is None else np.asarray(betas, dtype=float)
    mid = int(np.argmin(np.abs(np.log(grid / beta0))))
    out = {"betas": grid.tolist(), "beta": beta0, "branches": []}
    for i, (init, label) in enumerate(starts(cfg)):
        points = _follow(cfg, grid, mid, init, label, cancel,
                         None if on_point is None else functools.partial(on_point, i))
        points.sort(key=lambda p: p["beta"])
        out["branches"].append({"start": init, "label": label, "beta": [p["beta"] for p in points],
                                "mixing": [p["mixing"] for p in points], "energy": [p["energy"] for p in points]})
    return out


def _follow(cfg: Valid, grid: np.ndarray, mid: int, init: str, label: str, cancel, on_point) -> list[dict]:
    """One branch: the solve at ``grid[mid]`` from the start ``init``, then up and down the grid, each solve from
    its neighbour's field (a failed solve is skipped, and the next goes on from the last field)."""
    points: list[dict] = []

    def step(k: int, field):
        if cancel is not None and cancel():
            raise InterruptedError("the branches were cancelled")
        try:
            fit = solve(cfg, grid[k], init, field)
        except (ValueError, ArithmeticError):
            return field
        point = _summary(fit, init, label, grid[k])
        points.append(point)
        if on_point is not None:
            on_point(point)
        return fit.field

    middle = step(mid, None)
    for order in (range(mid + 1, grid.size), range(mid - 1, -1, -1)):
        field = middle
        for k in order:
            field = step(k, field)
    return points
