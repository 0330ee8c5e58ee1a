"""Replica learning curves of GP regression on a table of d-dimensional inputs (seed 002, Malzahn & Opper, Figs 1-2).

A table (CSV with a header) gives N rows of inputs x in R^d and a target column y.  The model is GP regression with
the paper's kernel (its §IV)

    ``K(x, x') = exp(-sum_i (x_i - x'_i)^2 / (l^2 v_i))``,

a per-column scale v_i and noise sigma^2, and two learning curves are computed against the number m of training
examples, both for the *simple bootstrap* of eq. (18) (train on m rows drawn with replacement from the N, test on
all N):

* theory: :func:`bftcore.models.replica.bootstrap_curve` (the replica / variational approximation, eqs. (14)-(19));
* simulation: :func:`simulate_bootstrap`, real resampling with the exact GP posterior.

Each gives the average posterior variance ``[G(x, x)]_x`` and the mean square error ``[(<f(x)> - y)^2]`` on all N
rows (eq. (17), which includes the output noise since y is the noisy target).

Choices the paper leaves open (stated, since the figures' values are not in its text):

* **Target**: standardised over the whole table, ``y -> (y - mean) / sd`` (population sd).  The prior has zero mean
  and K(x, x) = 1, and the paper's sigma^2 = 0.01 and 0.1 only make sense for a target of unit variance.  Errors
  and sigma^2 are therefore in units of the target's variance.  The posterior variance does not depend on y at all.
* **Inputs** (``inputs``, :data:`INPUTS`): each column is first normalised, then enters the kernel through its
  scale v_i computed from the normalised column: ``sqrt-var`` (v_i = sqrt of the column's variance, the paper's
  Boston choice), ``var`` (v_i = the variance, Abalone) or ``ones`` (v_i = 1).  The normalisations: ``range`` (the
  default: each column mapped onto [0, 1] by its minimum and maximum), ``standard`` (mean 0, sd 1) or ``raw``
  (none).  Decision: ``range`` by default, for two reasons.  (1) Units: with ``range`` or ``standard`` no choice of
  scales depends on a column's units; on ``raw`` inputs ``sqrt-var`` weighs a column by the square root of its
  units (dollars or thousands of dollars give other curves).  (2) The paper: on raw Boston inputs the replica
  theory is 25-40 % below the simulation for m from N/2 to 2N (the tax and black columns, with large units,
  dominate the kernel and the rows cluster), against the paper's "good agreement"; with ``range`` it is within
  1 % from m = N/2 to 5N (measured, docs/replica.md), so ``range`` is the reading under which the paper's own claim
  holds.
  With ``var`` the normalisation changes nothing ((c dx)^2 / (c^2 var) = dx^2 / var).  Variances are population
  variances (ddof = 0).
* **Categorical columns**: a column named in ``one_hot`` becomes one 0/1 column per level (``sex=F``, ``sex=I``,
  ``sex=M``, levels sorted), as the paper's M/F/I = 100/010/001; each such column has its own scale v_i like any
  other.  Any other column that is not all numbers is refused.
* **Parts are data sets of their own**: a half or a subset is run as the data a user holding only it would have:
  its inputs are normalised and its scales v_i computed over its own rows (a column with one value in a part tells
  its rows nothing apart and drops out of that part's kernel), so that its curve is the forecast that part makes.
  The target keeps the whole table's standardisation, so that sigma^2 means the same in every part and the parts'
  errors are in the same units.
* **Subsets** (Fig 2's lines, :func:`subset_rows`): the theory of random subsets of the rows drawn without
  replacement, repeated (20 in the paper).
* **Halves** (Fig 1's dot-dashed lines): ``split="order"`` (the paper's) takes rows 1..floor(N/2) and the rest, in
  the table's order; ``split="random"`` a random half and the rest (``SeedSequence([seed, 7919])``).  Each is run
  as a pool of its own (resampled from and tested on).  Boston's rows are ordered by town, so its halves in order
  are different populations (the second half holds the city of Boston's tracts): their posterior-variance curves
  differ from the whole's by up to 16 % where random halves stay within 4 % (docs/replica.md).

The work is dense: the kernel matrix is N x N and the theory factorises it a few times per m (O(N^3)), so tables are
limited to :attr:`bftcore.foundations.limits.Limits.max_table_rows` rows at the door; the simulation factorises the
kernel of the distinct rows drawn (at most min(m, N)) once per resample.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Callable

import numpy as np
import scipy.linalg as sla

from ..foundations.config import ConfigError, check_resampling, read_bytes
from ..foundations.distributed import Cancelled
from ..foundations.limits import Limits, active, blas_threads, check_deadline
from ..foundations.tables import parse_named_table
from . import replica

__all__ = ["SCALES", "INPUTS", "SPLITS", "PARTS", "normalise_inputs", "Settings", "InputTable", "read_input_table",
           "input_table", "column_scales", "part_kernel", "kernel",
           "simulate_bootstrap", "replica_rows", "subset_rows", "BOSTON_SETTINGS", "ABALONE_SETTINGS", "boston_table"]

#: How the per-column scale v_i of the kernel is computed from the column (module docstring).
SCALES = ("sqrt-var", "var", "ones")
#: How each input column is normalised before its scale v_i is computed (module docstring); the first is the default.
INPUTS = ("range", "standard", "raw")
#: How a table is cut into halves: in the table's order (the paper's) or at random.
SPLITS = ("order", "random")
#: The parts of a table a curve is computed for: all of it, and with ``halves`` its first and second half.
PARTS = ("all", "first half", "second half")


@dataclass(frozen=True)
class Settings:
    """The settings of one of the paper's data sets: the target column, l^2, the scales v_i, sigma^2 and the
    categorical columns."""

    target: str
    l2: float
    scales: str
    noise: float
    one_hot: tuple[str, ...] = ()
    inputs: str = INPUTS[0]


#: The paper's settings (§IV): Boston housing (Fig 1) and Abalone (Fig 2; UCI's abalone.data with a header line
#: sex,length,diameter,height,whole,shucked,viscera,shell,rings).
BOSTON_SETTINGS = Settings("medv", 147.1, "sqrt-var", 0.01)
ABALONE_SETTINGS = Settings("rings", 10.0, "var", 0.1, ("sex",))
#: Resamples of the simulation per size m (the paper does not say how many it used).
RESAMPLES = 20


@dataclass(frozen=True)
class InputTable:
    """A checked table: inputs ``X`` (N x d, columns named by ``inputs``), the raw target ``y`` named ``target``,
    and how each column was made (``one_hot``: the categorical columns expanded, with their levels)."""

    X: np.ndarray
    y: np.ndarray
    inputs: tuple[str, ...]
    target: str
    one_hot: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return int(self.y.size)


def _numbers(cells: list[str]) -> np.ndarray | None:
    try:
        values = np.array([float(c) for c in cells], dtype=float)
    except ValueError:
        return None
    return values


def input_table(names: list[str], columns: list[list[str]], target: str, one_hot=(), where: str = "the table",
                limits: Limits | None = None) -> InputTable:
    """The inputs and target of a parsed table (:func:`bftcore.foundations.tables.parse_named_table`): every column
    but ``target`` is an input, numeric, or categorical and named in ``one_hot`` (expanded to 0/1 columns, one per
    level).  ConfigError naming the column and the fix for: a target that is not a column, a non-numeric column
    not in ``one_hot``, a ``one_hot`` name that is not a column (or is the target), a value that is not finite, too
    many input columns after the expansion."""
    limits = limits or active()
    one_hot = tuple(dict.fromkeys(str(c) for c in one_hot))
    shown = ", ".join(repr(n[:40]) for n in names[:20]) + (", ..." if len(names) > 20 else "")
    if target not in names:
        raise ConfigError(f"{where} has no column {target!r} to predict; its columns are {shown}: give one of them "
                          f"as the target")
    for name in one_hot:
        if name not in names:
            raise ConfigError(f"one-hot column {name!r} is not a column of {where} ({shown})")
        if name == target:
            raise ConfigError(f"the target {target!r} cannot be one-hot encoded: the target must be a number")
    y = _numbers(columns[names.index(target)])
    if y is None:
        bad = next(c for c in columns[names.index(target)] if _numbers([c]) is None)
        raise ConfigError(f"the target column {target!r} of {where} holds {bad[:40]!r}, not a number; the target of "
                          f"a regression must be numeric")
    blocks, inputs, levels_of = [], [], {}
    for name, cells in zip(names, columns):
        if name == target:
            continue
        if name in one_hot:
            levels = tuple(sorted(set(cells)))
            levels_of[name] = levels
            for level in levels:
                blocks.append(np.array([c == level for c in cells], dtype=float))
                inputs.append(f"{name}={level}")
            continue
        values = _numbers(cells)
        if values is None:
            bad = next(c for c in cells if _numbers([c]) is None)
            raise ConfigError(f"column {name!r} of {where} holds {bad[:40]!r}, not a number: encode it with "
                              f"--one-hot {name} (one 0/1 column per level), or remove the column")
        blocks.append(values)
        inputs.append(name)
    if limits.max_table_columns is not None and len(inputs) > limits.max_table_columns:
        raise ConfigError(f"{where} has {len(inputs)} input columns after one-hot encoding, over the limit of "
                          f"{limits.max_table_columns}; keep fewer columns or categories")
    X = np.column_stack(blocks)
    for j, name in enumerate(inputs):
        if not np.all(np.isfinite(X[:, j])):
            raise ConfigError(f"column {name!r} of {where} holds NaN or infinity; every value must be a finite "
                              f"number")
    if not np.all(np.isfinite(y)):
        raise ConfigError(f"the target column {target!r} of {where} holds NaN or infinity; every value must be a "
                          f"finite number")
    if y.size < 2:
        raise ConfigError(f"{where} has {y.size} data row; a learning curve needs at least 2 (4 with halves)")
    return InputTable(X, y, tuple(inputs), target, levels_of)


def read_input_table(source, target: str, one_hot=(), where: str | None = None,
                     limits: Limits | None = None) -> InputTable:
    """:func:`input_table` of a file (a path) or of the text or bytes of an upload (``where`` names it): its size,
    rows and columns checked at the door (:mod:`bftcore.foundations.limits`) before anything is parsed."""
    limits = limits or active()
    if isinstance(source, (bytes, bytearray, memoryview, str)) and where is not None:
        raw, name = source, where
    else:
        raw = read_bytes(source, limits, "table", "a CSV table with a header of column names", "table")
        name = str(source)
    names, columns = parse_named_table(raw, name, limits)
    return input_table(names, columns, target, one_hot, name, limits)


def normalise_inputs(X: np.ndarray, inputs: str = INPUTS[0]) -> np.ndarray:
    """The input columns normalised over the rows given (module docstring): ``range`` onto [0, 1] by each column's
    minimum and maximum, ``standard`` to mean 0 and sd 1 (population sd), ``raw`` unchanged.  A column with one
    value becomes 0 (``range``, ``standard``): it tells the rows nothing apart."""
    if inputs not in INPUTS:
        raise ConfigError(f"inputs must be one of {', '.join(INPUTS)} (how each input column is normalised), got "
                          f"{inputs!r}")
    X = np.asarray(X, dtype=float)
    if inputs == "raw":
        return X.copy()
    if inputs == "range":
        low, width = X.min(axis=0), np.ptp(X, axis=0)
    else:
        low, width = X.mean(axis=0), X.std(axis=0)
    flat = ~(width > 0)
    return (X - low) / np.where(flat, 1.0, width) * ~flat


def column_scales(X: np.ndarray, scales: str, names=None, constant: str = "refuse") -> np.ndarray:
    """The kernel's v_i of each input column (``sqrt-var``, ``var`` or ``ones``; population variances).  A column
    with the same value in every row has variance 0, hence no scale: refused by name (``constant="refuse"``, the
    whole table), or given v_i = 1 (``constant="drop"``, a part: its differences are all 0, so it adds nothing to
    the kernel whatever v_i is)."""
    if scales not in SCALES:
        raise ConfigError(f"scales must be one of {', '.join(SCALES)}, got {scales!r}")
    X = np.asarray(X, dtype=float)
    if scales == "ones":
        return np.ones(X.shape[1])
    var = X.var(axis=0)
    flat = np.flatnonzero(var <= 1e-300)
    if flat.size and constant == "refuse":
        names = list(names) if names is not None else [f"column {j + 1}" for j in range(X.shape[1])]
        raise ConfigError(f"input {names[flat[0]]!r} has the same value in every row (variance 0), so its scale "
                          f"v_i = 0 is not defined; remove the column (it tells the rows nothing apart)")
    var[flat] = 1.0
    return np.sqrt(var) if scales == "sqrt-var" else var


def part_kernel(X: np.ndarray, l2: float, scales: str, inputs: str = INPUTS[0], names=None,
                constant: str = "drop") -> tuple[np.ndarray, np.ndarray]:
    """The kernel matrix of the rows ``X`` (a whole table or a part of one) and its scales v_i, both from those
    rows alone: :func:`normalise_inputs`, then :func:`column_scales`, then :func:`kernel`."""
    Z = normalise_inputs(X, inputs)
    v = column_scales(Z, scales, names, constant)
    return kernel(Z, l2, v), v


def kernel(X: np.ndarray, l2: float, v: np.ndarray) -> np.ndarray:
    """The paper's RBF kernel matrix ``K_ab = exp(-sum_i (X_ai - X_bi)^2 / (l^2 v_i))`` (§IV; no factor 2, so l^2
    is 2 eta^2 of the usual squared-exponential).  Computed from the scaled coordinates z = x / sqrt(l^2 v) as
    |z_a|^2 + |z_b|^2 - 2 z_a.z_b, clipped at 0 (rounding), with the diagonal exactly 1."""
    l2 = float(l2)
    if not np.isfinite(l2) or l2 <= 0:
        raise ConfigError(f"l2 (the kernel's l^2) must be a finite number > 0, got {l2!r}")
    Z = np.asarray(X, dtype=float) / np.sqrt(l2 * np.asarray(v, dtype=float))[None, :]
    sq = np.einsum("ai,ai->a", Z, Z)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (Z @ Z.T), 0.0)
    K = np.exp(-d2)
    np.fill_diagonal(K, 1.0)
    return 0.5 * (K + K.T)


def simulate_bootstrap(K: np.ndarray, y: np.ndarray, noise_var: float, m_values, resamples: int = RESAMPLES,
                       seed: int = 0, cancel: Callable[[], bool] | None = None,
                       progress: Callable[[int, int], None] | None = None) -> dict[str, list[float]]:
    """Real resampling of the simple bootstrap (eq. (18)): for each m, ``resamples`` training sets of m rows drawn
    with replacement from the N, the exact GP posterior of each, tested on all N rows.

    A row drawn c times with noise sigma^2 is one observation of the same y with noise sigma^2 / c, so the
    posterior is that of the distinct rows D: ``A = K_DD + sigma^2 diag(1/c)``, posterior variance ``K_ii - K_iD
    A^-1 K_Di`` and mean ``K_ND A^-1 y_D`` (one Cholesky of |D| <= min(m, N) rows a resample).  Resample r of size
    index k draws from ``SeedSequence([seed, k, r])``.  Returns per m the means over resamples of the average
    posterior variance and of the mean square error on all N, with their standard errors (``*_se``).

    ``cancel()`` is polled between resamples and ends the run with
    :class:`bftcore.foundations.distributed.Cancelled`, as the time budget (:func:`bftcore.foundations.limits
    .deadline`) does with RunBudgetExceeded; ``progress(done, total)`` counts resamples."""
    blas_threads()
    K = np.asarray(K, dtype=float)
    y = np.asarray(y, dtype=float)
    N = y.size
    kdiag = np.diag(K)
    ms = [int(m) for m in m_values]
    out: dict[str, list[float]] = {"m": [], "posterior_variance": [], "posterior_variance_se": [],
                                   "test_error": [], "test_error_se": []}
    total, done = len(ms) * int(resamples), 0
    for k, m in enumerate(ms):
        pv, err = np.empty(resamples), np.empty(resamples)
        for r in range(resamples):
            if cancel is not None and cancel():
                raise Cancelled("the replica learning curve was cancelled")
            check_deadline()
            rng = np.random.default_rng(np.random.SeedSequence([int(seed), k, r]))
            counts = np.bincount(rng.integers(0, N, m), minlength=N)
            D = np.flatnonzero(counts)
            A = K[np.ix_(D, D)] + np.diag(noise_var / counts[D])
            W = sla.cho_solve(sla.cho_factor(A, lower=True, check_finite=False), K[D, :], check_finite=False)
            pv[r] = float(np.mean(kdiag - np.einsum("dn,dn->n", K[D, :], W)))
            err[r] = float(np.mean((W.T @ y[D] - y) ** 2))
            done += 1
            if progress is not None:
                progress(done, total)
        se = 1.0 / np.sqrt(resamples)
        out["m"].append(m)
        out["posterior_variance"].append(float(pv.mean()))
        out["posterior_variance_se"].append(float(pv.std(ddof=1) * se) if resamples > 1 else 0.0)
        out["test_error"].append(float(err.mean()))
        out["test_error_se"].append(float(err.std(ddof=1) * se) if resamples > 1 else 0.0)
    return out


def _parts(N: int, halves: bool, split: str = SPLITS[0], seed: int = 0) -> list[tuple[str, np.ndarray]]:
    if split not in SPLITS:
        raise ConfigError(f"split must be one of {', '.join(SPLITS)} (halves in the table's order, or at random), "
                          f"got {split!r}")
    rows = [("all", np.arange(N))]
    if halves:
        if N < 4:
            raise ConfigError(f"halves need at least 4 rows (2 a half), the table has {N}")
        order = np.arange(N)
        if split == "random":
            order = np.random.default_rng(np.random.SeedSequence([int(seed), 7_919])).permutation(N)
        rows += [("first half", np.sort(order[:N // 2])), ("second half", np.sort(order[N // 2:]))]
    return rows


def replica_rows(table: InputTable, l2: float, noise_var: float, sizes, scales: str = "sqrt-var",
                 halves: bool = False, resamples: int = RESAMPLES, seed: int = 0, simulate: bool = True,
                 inputs: str = INPUTS[0], split: str = SPLITS[0],
                 cancel: Callable[[], bool] | None = None, progress: Callable[[int, int], None] | None = None,
                 limits: Limits | None = None) -> dict[str, Any]:
    """The replica theory and the bootstrap simulation of one table (module docstring): one row per size m and
    part (``all``, and with ``halves`` ``first half`` and ``second half``, cut by ``split``), each with ``m``,
    ``part``, ``N`` (rows of the part), ``theory_variance``, ``simulated_variance`` (and
    ``simulated_variance_se``), ``theory_error``, ``simulated_error`` (and ``simulated_error_se``); the simulated
    values are None with ``simulate=False``.

    The document also says what was run: ``target``, ``inputs`` (the input columns), ``one_hot``, ``l2``,
    ``noise``, ``scales`` with the whole table's values ``v`` (and each part's, ``v_parts``), ``normalisation`` (of
    the inputs, :data:`INPUTS`), ``split``, ``standardisation`` (of the target: its mean and sd), ``resamples``,
    ``seed``, ``sizes``."""
    limits = limits or active()
    noise_var = float(noise_var)
    if not np.isfinite(noise_var) or noise_var <= 0:
        raise ConfigError(f"the noise variance sigma^2 must be a finite number > 0, got {noise_var!r}")
    sizes = sorted({int(m) for m in sizes})
    if not sizes or sizes[0] < 1:
        raise ConfigError(f"the sizes m must be positive whole numbers, got {sizes}")
    resamples = int(resamples)
    if simulate and resamples < 2:
        raise ConfigError(f"the simulation needs at least 2 resamples a size (for its standard error), got "
                          f"{resamples}")
    parts = _parts(table.rows, halves, split, seed)
    if simulate:
        check_resampling(len(sizes) * resamples * len(parts), 1, max(sizes), limits)
    K, v = part_kernel(table.X, l2, scales, inputs, table.inputs, constant="refuse")
    mean, sd = float(table.y.mean()), float(table.y.std())
    if sd <= 0:
        raise ConfigError(f"the target {table.target!r} has the same value in every row; there is nothing to learn")
    y = (table.y - mean) / sd
    rows: list[dict] = []
    v_parts: dict[str, list[float]] = {}
    total = len(sizes) * resamples * len(parts)
    offset = 0
    for name, idx in parts:
        Kp, vp = (K, v) if name == "all" else part_kernel(table.X[idx], l2, scales, inputs)
        yp = y[idx]
        v_parts[name] = vp.tolist()
        theory = replica.bootstrap_curve(Kp, yp, noise_var, sizes)
        sim = None
        if simulate:
            base = offset
            report: Callable[[int, int], None] | None = None
            if progress is not None:
                def report(d: int, _t: int, b: int = base) -> None:
                    progress(b + d, total)
            sim = simulate_bootstrap(Kp, yp, noise_var, sizes, resamples, seed, cancel, report)
            offset += len(sizes) * resamples
        for k, m in enumerate(sizes):
            rows.append({"m": m, "part": name, "N": int(idx.size),
                         "theory_variance": theory["posterior_variance"][k],
                         "simulated_variance": None if sim is None else sim["posterior_variance"][k],
                         "simulated_variance_se": None if sim is None else sim["posterior_variance_se"][k],
                         "theory_error": theory["test_error"][k],
                         "simulated_error": None if sim is None else sim["test_error"][k],
                         "simulated_error_se": None if sim is None else sim["test_error_se"][k]})
    return {"rows": rows, "target": table.target, "inputs": list(table.inputs),
            "one_hot": {k: list(v) for k, v in table.one_hot.items()}, "l2": float(l2), "noise": noise_var,
            "scales": scales, "v": v.tolist(), "v_parts": v_parts, "normalisation": inputs, "split": split,
            "N": table.rows, "sizes": sizes, "halves": bool(halves),
            "resamples": resamples if simulate else 0, "seed": int(seed),
            "standardisation": {"target_mean": mean, "target_sd": sd,
                                "text": "target standardised over the whole table: (y - mean) / sd; inputs "
                                        f"normalised ({inputs}) and scaled by v_i ({scales}) over each part's own "
                                        "rows"},
            "kind": "replica", "approximation": True}


def subset_rows(table: InputTable, l2: float, noise_var: float, sizes, subset: int, repeats: int = 20,
                scales: str = "sqrt-var", seed: int = 0, cancel: Callable[[], bool] | None = None,
                inputs: str = INPUTS[0]) -> list[dict]:
    """Fig 2's theory lines: the replica theory of ``repeats`` random subsets of ``subset`` rows drawn *without*
    replacement (subset r from ``SeedSequence([seed, 5381, r])``), each a data set of its own (its inputs
    normalised and its scales computed over its rows), with the target's standardisation of the whole table.  One
    row per size m, part ``"random <subset> rows"``, with the mean over the subsets of ``theory_variance`` and
    ``theory_error`` and their range (``*_min``, ``*_max``: the paper's bars, 20 repetitions); ``simulated_*`` are
    None (the paper simulates on the whole table: the ``all`` rows)."""
    subset, repeats = int(subset), int(repeats)
    if not 2 <= subset <= table.rows:
        raise ConfigError(f"a subset takes 2 to {table.rows} rows (the table's), got {subset}")
    if repeats < 1:
        raise ConfigError(f"repeats must be at least 1, got {repeats}")
    noise_var = float(noise_var)
    if not np.isfinite(noise_var) or noise_var <= 0:
        raise ConfigError(f"the noise variance sigma^2 must be a finite number > 0, got {noise_var!r}")
    sizes = sorted({int(m) for m in sizes})
    part_kernel(table.X, l2, scales, inputs, table.inputs, constant="refuse")   # the whole table's refusals
    y = (table.y - table.y.mean()) / table.y.std()
    pv, eps = np.empty((repeats, len(sizes))), np.empty((repeats, len(sizes)))
    for r in range(repeats):
        if cancel is not None and cancel():
            raise Cancelled("the replica learning curve was cancelled")
        check_deadline()
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 5_381, r]))
        idx = np.sort(rng.choice(table.rows, size=subset, replace=False))
        curve = replica.bootstrap_curve(part_kernel(table.X[idx], l2, scales, inputs)[0], y[idx], noise_var, sizes)
        pv[r], eps[r] = curve["posterior_variance"], curve["test_error"]
    part = f"random {subset} rows"
    return [{"m": m, "part": part, "N": subset, "repeats": repeats,
             "theory_variance": float(pv[:, k].mean()), "theory_variance_min": float(pv[:, k].min()),
             "theory_variance_max": float(pv[:, k].max()), "simulated_variance": None, "simulated_variance_se": None,
             "theory_error": float(eps[:, k].mean()), "theory_error_min": float(eps[:, k].min()),
             "theory_error_max": float(eps[:, k].max()), "simulated_error": None, "simulated_error_se": None}
            for k, m in enumerate(sizes)]


def boston_table() -> InputTable:
    """Boston housing (MASS::Boston, 506 rows, 13 inputs, target ``medv``), shipped as ``bftcore/data/boston.csv``
    (its provenance is in the file's header)."""
    raw = (resources.files("bftcore.data") / "boston.csv").read_bytes()
    return read_input_table(raw, BOSTON_SETTINGS.target, where="boston.csv")



def figure_panels(doc: dict) -> list[dict]:
    """The panels of a :func:`replica_rows` document as Fig 1 draws them: posterior variance (left) and mean square
    error (right) against m, log-log; theory as lines (``all`` solid, the halves dot-dashed), simulation as
    symbols."""
    panels = []
    for key, title, ylabel in (("variance", "posterior variance", "[G(x, x)]_x"),
                               ("error", "mean square generalisation error (on the N rows)", "ε")):
        curves = []
        parts = list(dict.fromkeys(r["part"] for r in doc["rows"]))
        for k, part in enumerate(parts):
            rows = [r for r in doc["rows"] if r["part"] == part]
            m = [r["m"] for r in rows]
            curves.append({"label": f"theory, {part} (N = {rows[0]['N']})", "x": m,
                           "y": [r[f"theory_{key}"] for r in rows], "colour": k,
                           "style": "solid" if part == "all" else "dashdot"})
            if rows[0][f"simulated_{key}"] is not None:
                curves.append({"label": f"simulation, {part}", "x": m, "y": [r[f"simulated_{key}"] for r in rows],
                               "colour": k, "style": "points"})
        panels.append({"title": title, "xlabel": "m (training examples drawn with replacement)", "ylabel": ylabel,
                       "logx": True, "logy": True, "curves": curves})
    return panels

