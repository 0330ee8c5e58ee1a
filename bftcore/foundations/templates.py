"""The template registry: one home for every template kind of CONVENTIONS.md §2-§4.

:data:`KINDS` maps ``(model, kind)`` to a :class:`TemplateKind`: the keys a template object of that kind carries
besides ``"kind"``, its label, whether the dashboard's menu offers it, and its form: a density on a grid
(:func:`template_density`, :func:`template_field`) or values on the x nodes for regression
(:func:`template_values`).  The input gate (:mod:`bftcore.foundations.config`) reads the kinds and keys from here and
evaluates every template once to refuse one that is not finite, not a density or absurdly large; the problem
builders (:func:`bftcore.api.build_density`, :class:`bftcore.models.regression.RegressionModel`) and the dashboard's
menus and labels use the same entries.  Errors are ``ValueError`` with the reason; the gate turns them into a
:class:`~bftcore.foundations.config.ConfigError` naming the template.

Also here: the paper's true density (708) and templates (719), (720), raw at the nodes (:mod:`bftcore.models.presets`
re-exports them with the paper's data sets and figure configurations).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .grid import Grid


@dataclass(frozen=True)
class TemplateKind:
    """One template kind: its model, the keys of its object besides ``"kind"``, a menu label, whether the
    dashboard's menu offers it (arrays come from files only) and a formatter of a short label for one object."""

    model: str
    kind: str
    keys: tuple[str, ...]
    label: str
    menu: bool = True

    def describe(self, spec: dict) -> str:
        """Short human name of one template object of this kind (legends, the dashboard's list)."""
        if self.kind == "gaussian":
            return f"Gaussian μ={spec['mu']:g} σ={spec['sigma']:g}"
        if self.kind == "constant":
            return f"constant {spec['value']:g}"
        if self.kind == "linear":
            return f"linear {spec['slope']:g}x{spec['intercept']:+g}"
        return self.label


MODELS = ("density", "regression")

#: The registry, ``(model, kind) -> TemplateKind``, in the order menus and documents list them.
KINDS: dict[tuple[str, str], TemplateKind] = {(k.model, k.kind): k for k in (
    TemplateKind("density", "uniform", (), "uniform"),
    TemplateKind("density", "paper_t1", (), "paper t₁"),
    TemplateKind("density", "paper_t2", (), "paper t₂"),
    TemplateKind("density", "gaussian", ("mu", "sigma"), "Gaussian"),
    TemplateKind("density", "array", ("values",), "array", menu=False),
    TemplateKind("regression", "constant", ("value",), "constant"),
    TemplateKind("regression", "linear", ("slope", "intercept"), "linear trend"),
    TemplateKind("regression", "array", ("values",), "array", menu=False),
)}


def kinds(model: str, menu: bool = False) -> tuple[str, ...]:
    """The template kinds of a model (``"density"`` or ``"regression"``), in registry order; ``menu=True`` only
    those the dashboard's menu offers."""
    return tuple(k.kind for k in KINDS.values() if k.model == model and (k.menu or not menu))


def describe(spec: dict, model: str | None = None) -> str:
    """Short human name of a template object (its kind's :meth:`TemplateKind.describe`)."""
    kind = spec["kind"]
    entry = KINDS.get((model, kind)) if model else next((k for k in KINDS.values() if k.kind == kind), None)
    return entry.describe(spec) if entry is not None else str(kind)

SIGMA_0 = 1.5          # width of the true density (708)
SIGMA_T = 2.0          # width of the templates (719), (720)
MU_2 = 7.5
MU_A = MU_2 + 25 / 9
MU_B = MU_2 - 25 / 9


def _gauss(y, mu, sigma):
    return np.exp(-(y - mu) ** 2 / (2 * sigma ** 2)) / (np.sqrt(2 * np.pi) * sigma)


def paper_true_density(grid: Grid) -> np.ndarray:
    """True conditional density (708): equal mixture of N(h_a(x), 1.5^2) and N(h_b(x), 1.5^2),
    h_a = 125/18 + 5x/9, h_b = 145/18 - 5x/9, raw at the nodes."""
    X, Y = grid.mesh
    ha = 125 / 18 + 5 * X / 9
    hb = 145 / 18 - 5 * X / 9
    return 0.5 * (_gauss(Y, ha, SIGMA_0) + _gauss(Y, hb, SIGMA_0))


def paper_t1(grid: Grid) -> np.ndarray:
    """Template t_1 (719): two Gaussians of width 2 at mu_a = 7.5 + 25/9 and mu_b = 7.5 - 25/9, x-independent."""
    _, Y = grid.mesh
    return 0.5 * (_gauss(Y, MU_A, SIGMA_T) + _gauss(Y, MU_B, SIGMA_T))


def paper_t2(grid: Grid) -> np.ndarray:
    """Template t_2 (720): one Gaussian of width 2 at mu_2 = 7.5, x-independent."""
    _, Y = grid.mesh
    return _gauss(Y, MU_2, SIGMA_T)


def template_density(spec: dict, grid: Grid) -> np.ndarray:
    """A density template as a density (raw at the nodes): uniform, paper t_1 (719), t_2 (720), gaussian."""
    kind = spec["kind"]
    if kind == "uniform":
        return np.full(grid.shape, 1.0 / (grid.y.n * grid.hy))
    if kind == "paper_t1":
        return paper_t1(grid)
    if kind == "paper_t2":
        return paper_t2(grid)
    if kind == "gaussian":
        _, Y = grid.mesh
        s = spec["sigma"]
        with np.errstate(over="ignore", under="ignore"):
            return np.exp(-(Y - spec["mu"]) ** 2 / (2 * s * s)) / (np.sqrt(2 * np.pi) * s)
    raise ValueError(f"template kind {kind!r} has no density form")


def template_field(spec: dict, grid: Grid, fld: str) -> np.ndarray:
    """Template in the representation of the field: ln of the density for field L, the density for field P."""
    if spec["kind"] == "array":
        t = np.asarray(spec["values"], dtype=float)
        if t.shape != grid.shape or not np.all(np.isfinite(t)):
            raise ValueError(f"an array template must be {grid.shape[0]} x {grid.shape[1]} finite numbers, "
                             f"got shape {t.shape}")
        return t
    P = template_density(spec, grid)
    if fld == "P":
        return P
    with np.errstate(divide="ignore"):
        L = np.log(P)
    if not np.all(np.isfinite(L)):
        raise ValueError("it underflows to 0 on the grid, so its log is -inf; widen it or move it onto the grid")
    return L


def template_values(spec, nodes) -> np.ndarray:
    """Values of one regression template t_j(x) at the nodes, from ``{"kind": "constant", "value": c}``,
    ``{"kind": "linear", "slope": a, "intercept": b}`` (t = a x + b) or ``{"kind": "array", "values": [...]}``."""
    nodes = np.asarray(nodes, dtype=float)
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ValueError(f"a regression template must be a dict with a 'kind' in {kinds('regression')}, got {spec!r}")
    kind = spec["kind"]

    def number(key):
        if key not in spec:
            raise ValueError(f"template of kind {kind!r} needs the key {key!r}, got {spec!r}")
        try:
            v = float(spec[key])
        except (TypeError, ValueError):
            raise ValueError(f"template {kind!r}: {key!r} must be a number, got {spec[key]!r}") from None
        if not np.isfinite(v):
            raise ValueError(f"template {kind!r}: {key!r} must be finite, got {spec[key]!r}")
        return v

    if kind == "constant":
        return np.full(nodes.size, number("value"))
    if kind == "linear":
        return number("slope") * nodes + number("intercept")
    if kind == "array":
        try:
            v = np.asarray(spec.get("values"), dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"template 'array': 'values' must be a list of numbers, got {spec.get('values')!r}") \
                from None
        if v.shape != nodes.shape:
            raise ValueError(f"template 'array' needs one value per x node ({nodes.size}), got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError("template 'array' has non-finite values; give finite numbers")
        return v.copy()
    raise ValueError(f"unknown regression template kind {kind!r}; use one of {kinds('regression')} "
                     f"(kinds such as 'paper_t1' or 'uniform' belong to the density model)")
