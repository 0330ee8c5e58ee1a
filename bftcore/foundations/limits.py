"""What a single request may cost: every limit of the input gate, and of what comes out, in one place (issues 11, 25).

Every document — a file, an upload, a share link, the estimator's arguments — passes
:func:`bftcore.foundations.config.validate_config`, which refuses a problem over these limits *before anything is
allocated*, with a :class:`~bftcore.foundations.config.ConfigError` that names the limit and the way out.  The numbers
are chosen so that the worst accepted problem fits in a few hundred MB and a few seconds on the project's 2-core machine
(measurements in ``docs/limits.md``).

What comes out is budgeted like what goes in (:attr:`Limits.max_output_values`): the estimators' draws and
predictions and the exports' tables and figures are counted from the shapes of their inputs, before anything is
converted or allocated (:func:`bftcore.foundations.config.check_output`).

* :data:`LIMITS` is the budget of the dashboard's server (always) and of the CLI and the API (by default).
* :func:`using` changes the budget in force for a block (:func:`active`).
* :data:`UNLIMITED` keeps only the checks that protect correctness (finite numbers, float range, conditioning):
  ``python -m bftcore ... --no-limits`` and ``validate_config(doc, limits=UNLIMITED)`` use it on a researcher's
  own machine.  The server never does.

A run can also be cut off while it runs: :func:`deadline` sets a wall-clock budget that the iteration loops check
(:func:`check_deadline`) and that ends the run with :class:`RunBudgetExceeded`.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import time
from dataclasses import dataclass, replace

from threadpoolctl import ThreadpoolController


@dataclass(frozen=True)
class Limits:
    """A cost budget.  ``None`` means no limit."""

    #: Grid nodes nx * ny of one problem.  128 x 128 solves in 0.04-1.3 s and < 200 MB for the L and P fields
    #: with an l2 prior (docs/limits.md).
    max_nodes: int | None = 16_384
    #: Nodes on one axis (also a cap on the dense nx x nx and ny x ny matrices of the Newton preconditioner).
    max_axis_nodes: int | None = 1_024
    #: Nodes of a field-P problem solved with a sparse factorisation (methods newton and massive) whose prior has
    #: l4 or l6: their wider stencils fill the factor far more.  4 096 (64 x 64 with l6: 6-7 s, at most 300 MB);
    #: 96 x 96 took 14-15 s and 128 x 128 about a minute (docs/limits.md).  It was 2 048 while the factorisation
    #: pivoted off its ordering (128 x 128 with l6 then took 5.3 GB and 6 minutes).
    max_nodes_p_wide: int | None = 4_096
    #: Templates of one prior mixture, and nodes x templates (each template is a full field).
    max_templates: int | None = 16
    max_template_nodes: int | None = 131_072
    #: Data points of one document (the dashboard's own click limit is lower: app.configuration.MAX_POINTS).
    max_points: int | None = 100_000
    #: Iterations of one run (solver.max_iter), and nodes x iterations: the work of a slow method on a big grid
    #: (61 iterations at 128 x 128, where field P with massive relaxation takes about 0.1 s an iteration).
    max_iter: int | None = 100_000
    max_node_iterations: int | None = 1_000_000
    #: beta values of one sweep (each is two fits and two stability checks: about 60 ms on the paper grid, 14 s
    #: on 128 x 128) and nodes x beta values.
    max_sweep_points: int | None = 200
    max_sweep_work: int | None = 15_000
    #: Hyperparameter values of one evidence path, and nodes x values (each value is one warm-started fit and one
    #: log-determinant: 30 values on 64 x 64 are the target of issue 14).
    max_evidence_points: int | None = 200
    max_evidence_work: int | None = 250_000
    #: Fits of one learning curve or bootstrap (sizes x resamples x lambda values; a 10 x 15 fit takes 4-12 ms,
    #: a 64 x 64 one 0.1-0.3 s), nodes x fits, and the largest data set drawn.  A learning curve of 8 sizes x 20
    #: resamples x 5 lambdas on the paper mesh is 800 fits and 120 000 node-fits.
    max_resample_fits: int | None = 20_000
    max_resample_work: int | None = 1_000_000
    #: Rows and columns of a table of d-dimensional inputs (:func:`bftcore.foundations.tables.parse_named_table`,
    #: the replica learning curves of :mod:`bftcore.models.replica_tables`): their kernel matrix is dense, N x N,
    #: and each m of a curve factorises it a few times (O(N^3)): 5 000 rows are 200 MB a matrix and about 3 s a
    #: Cholesky factorisation with one BLAS thread (0.18 s at 2 000 rows, measured), which admits Abalone's 4 177
    #: rows (the paper's Fig 2) with --no-limits for the time.  The sizes m of a curve times its resamples are
    #: bounded by max_resample_fits.
    max_table_rows: int | None = 5_000
    max_table_columns: int | None = 100
    #: Posterior draws times nodes of one call for samples (exact regression draws, Laplace or prior samples): 5
    #: million values are 40 MB of float64; the worst accepted Laplace call (1 220 draws on 64 x 64) peaks at a few
    #: hundred MB with its work arrays (docs/limits.md).
    max_sample_values: int | None = 5_000_000
    #: Numbers of one result handed back or written (issue 25: outputs are budgeted like inputs): sample_y's draws x
    #: query points, a prediction's values (predict, predict_proba, score_samples: one per query point, two with
    #: return_std), predict's covariance (query points squared), and the cells of one exported CSV table or the
    #: values one PNG figure draws.  Checked from the shapes, before any conversion or allocation; 5 million numbers
    #: are 40 MB of float64.
    max_output_values: int | None = 5_000_000
    #: Bytes of one JSON document (file or upload) and nesting depth of its arrays and objects.
    max_document_bytes: int | None = 32 * 1024 * 1024
    max_depth: int | None = 64
    #: Wall-clock seconds of one CLI command (fit, sweep, basins) before it is stopped with a message.
    run_seconds: float | None = 120.0


#: The budget of the server, the CLI and the API (unless lifted explicitly).
LIMITS = Limits()
#: No cost budget (the CLI's ``--no-limits``); correctness checks stay.
UNLIMITED = Limits(**{k: None for k in Limits.__dataclass_fields__})

# Checks of correctness, never lifted: beyond these the arithmetic of the solver is meaningless or overflows.
#: Largest magnitude of any coordinate (axis bounds, data, template parameters).
MAX_COORDINATE = 1e9
#: Largest magnitude of any other number of a document (strengths, weights, masses, template values).
MAX_MAGNITUDE = 1e12
#: Largest magnitude of a number that has units in which it may be anything (lambda, regression's beta, the
#: masses): a guard of the floating-point range only; whether it is too large is judged against the grid and the data.
MAX_SCALED_MAGNITUDE = 1e150
#: Largest condition number accepted for the operators the solver inverts: lambda K against the data term,
#: and scale K + m^2 I of massive relaxation and of the kernel start.
MAX_CONDITION = 1e12
#: Largest magnitude of a template's values in the representation of its field (ln P for field L).
MAX_TEMPLATE_VALUE = 1e4
#: Smallest beta; its inverse scales the mixture energy.
MIN_BETA = 1e-12


def lifted(**changes) -> Limits:
    """:data:`LIMITS` with some limits changed (``None`` lifts one)."""
    return replace(LIMITS, **changes)


_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("bftcore_limits", default=LIMITS)


def active() -> Limits:
    """The budget in force: :data:`LIMITS` unless a :func:`using` block says otherwise."""
    return _ACTIVE.get()


@contextlib.contextmanager
def using(limits: Limits):
    """Within this block, validation without an explicit ``limits`` uses ``limits`` (the CLI's ``--no-limits``:
    a sweep's many fits are then validated under the same budget as its document)."""
    token = _ACTIVE.set(limits)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


class RunBudgetExceeded(RuntimeError):
    """A run went over its wall-clock budget (:func:`deadline`)."""


_DEADLINE: contextvars.ContextVar = contextvars.ContextVar("bftcore_deadline", default=None)


@contextlib.contextmanager
def deadline(seconds: float | None):
    """Within this block, :func:`check_deadline` raises :class:`RunBudgetExceeded` after ``seconds`` of wall time
    (``None``: no budget)."""
    if seconds is None:
        yield
        return
    token = _DEADLINE.set((time.monotonic() + float(seconds), float(seconds)))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_deadline() -> None:
    """Raise :class:`RunBudgetExceeded` if the current :func:`deadline` has passed; called once per iteration."""
    d = _DEADLINE.get()
    if d is not None and time.monotonic() > d[0]:
        raise RunBudgetExceeded(f"stopped after {d[1]:g} s, the time budget of one run; use a coarser grid, "
                                f"fewer iterations or a simpler prior (or --no-limits on your own machine)")


#: BLAS threads of a process that runs bftcore (``BFTCORE_BLAS_THREADS`` in the environment, default 1; ``0`` leaves
#: the BLAS libraries as they are).  The solver does many small dense and sparse operations; multithreaded OpenBLAS
#: only adds contention there, and becomes very slow when the cores are shared (a classroom server with many
#: sessions).
BLAS_THREADS = max(0, int(os.environ.get("BFTCORE_BLAS_THREADS", "1") or 0))
_BLAS: list = []  # the threadpoolctl limiter once applied (numpy's and scipy's BLAS are loaded by then)


def blas_threads() -> None:
    """Called by every run of the API (``run``, ``fit``, ``iterate``), a sweep, basins, the CLI and the benchmark:
    the first call sets the process's BLAS libraries to :data:`BLAS_THREADS` threads through threadpoolctl and
    leaves them so; later calls do nothing.

    Importing bftcore changes nothing (the package used to set ``OPENBLAS_NUM_THREADS`` at import, which did
    nothing when numpy was imported first, and leaked into every subprocess).  The limit is not restored after
    each run: a limit is process-wide, restoring it after every fit cost about 1 ms (OpenBLAS stops and starts its
    threads: 40 % more instructions for a 10 x 15 fit, measured with callgrind), and overlapping runs in several
    threads would undo each other's.  Set ``BFTCORE_BLAS_THREADS=0`` to keep your own setting."""
    if not _BLAS and BLAS_THREADS:
        _BLAS.append(ThreadpoolController().limit(limits=BLAS_THREADS, user_api="blas"))
