"""The session model of the dashboard: one :class:`BFTSession` per browser session.

Everything a user can change lives here as a parameter; the views in ``app/views`` only watch it.  The model
talks to the solver exclusively through ``bftcore.api`` and ``bftcore.config`` (one implementation of each
formula: the CLI, the tests and the dashboard run the same code), and it round-trips the JSON configuration
document of CONVENTIONS.md §4 with :meth:`BFTSession.to_config` / :meth:`BFTSession.load_config`.  Any valid
document loads: what the controls cannot show (several prior orders at once, repeated or array templates,
unnormalised weights, another grid or domain, a regression truth) is kept as it is, shown read-only, and written
back unchanged.

How the solver runs without blocking the server
-----------------------------------------------
A run is a ``bftcore.api.iterate`` generator.  When the session is served, one *runner* task per session (an
``asyncio`` task on the Bokeh event loop) advances the current run one iteration at a time in a worker thread
(see *Worker pools* below), so the event loop never waits for the solver.  Records are coalesced into *frames*: the
first frame of a run goes out as soon as iteration 1 exists (that is what a click waits for), later frames at most
every :data:`MIN_FRAME_S` seconds (about 10 per second per session), and the final state always.  A frame is
applied on the session's document (``add_next_tick_callback``, so the views touch Bokeh models under the document
lock) under a document hold released by :func:`release_as_one_message`, so one frame is one websocket message.
Iterations are paced by ``frame_ms`` so a run plays out visibly.

Any change that alters the problem (a click, a slider, a preset, an upload) replaces the current run by a new one
warm-started from the field on screen.  Only the runner advances a generator; when it comes back from the worker
thread with a record of a replaced run it drops the record, closes that generator and goes on with the newest run.
So a burst of clicks costs one iteration of stale work at most, and only the latest state is solved.

Without a server (tests, notebooks) the same methods step the generator synchronously.

What one session may cost the server (issue 11)
-----------------------------------------------
Every input is untrusted: a share link (``app.views.share.read_url``) and an upload (:meth:`BFTSession.load_config`)
pass the gate of ``bftcore.config`` with the server's budget ``bftcore.limits.LIMITS``, an upload is also started on
a trial (iteration 0) before it replaces anything, and the parameters themselves refuse values that would break
:meth:`BFTSession.to_config` (points, orders, weights, the initialisation).

*Worker pools.*  ``asyncio.to_thread`` would put every session's iterations on the loop's default executor, shared
by all sessions: three 16 000-node solves filled it and a click on the paper grid queued behind them.  Runs above
:data:`HEAVY_NODES` grid nodes (a quarter of that for field P, whose sparse factorisations cost most) and beta
sweeps go through one thread, ``_HEAVY_POOL``, in turn across sessions; smaller runs have threads of their own,
``_LIGHT_POOLS``.  However many heavy links are open, they take one core between them and a small problem's click
is computed at once.  Every executor has one thread and a run keeps its executor from its first iteration to the
close of its generator: scipy's SuperLU frees a factorisation only on the thread that made it.

*Compute budget.*  The runner adds up the seconds each run spends inside the worker thread; past
:data:`RUN_COMPUTE_S` the run is stopped with a message and its last iteration stays on screen (a sweep gets the
same budget as a wall-clock deadline).

*Memory.*  When the browser session ends, :meth:`BFTSession.close` stops the run and drops every array the session
holds, and :func:`release_memory` gives the freed pages back to the system; a fixed glibc mmap threshold (set at
import) keeps large arrays out of the worker threads' heaps, which glibc would otherwise keep.

Nothing mutable is shared between sessions: each session builds its own ``BFTSession`` and its own views.
"""
from __future__ import annotations

import asyncio
import contextlib
import copy
import ctypes
import io
import itertools
import re
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import param

from bftcore import api, config, mixtures, presets
from bftcore.config import parse_document, validate_config, validate_sweep
from bftcore.grid import Axis, Grid
from bftcore.limits import MAX_COORDINATE, MAX_MAGNITUDE, MIN_BETA, RunBudgetExceeded, deadline

#: Largest number of data points a session accepts (clicks beyond it are refused with a message).
MAX_POINTS = 2000
#: Bounds of the parameters that are coordinates (domain, data, template parameters): the gate's own range.  Every
#: other number has the gate's bound MAX_MAGNITUDE, so a session never holds a number the gate refuses for its size
#: (a link's gauss_mu=1e300 is refused by name even while no Gaussian template is in use).
COORDINATE = (-MAX_COORDINATE, MAX_COORDINATE)
#: Bounds of a parameter >= 0 (a prior strength, a weight p_j, a mass); > 0 with ``inclusive_bounds=POSITIVE``.
MAGNITUDE, POSITIVE = (0.0, MAX_MAGNITUDE), (False, True)
#: Depth of the undo stack.
UNDO_DEPTH = 100
#: Seconds of computing (time inside the worker thread, not pacing or queueing) one run may take on the server;
#: past it the run is stopped with a message and the last iteration stays on screen.  The problems the budget of
#: bftcore.limits accepts take 1-5 s alone on the project's machine, except field P by Newton at 128 x 128 with a
#: weak prior (l2 = 0.025: 9-13 s an iteration, in SuperLU's factorisation), which this stops after 2 or 3.  A single
#: iteration is never interrupted: the budget is checked between iterations.
RUN_COMPUTE_S = 20.0
#: A run is *heavy* above this many grid nodes (field P: a quarter of it, for its sparse factorisations).
#: Heavy iterations of every session go through one worker thread, in turn; light ones have threads of their
#: own, so a click on the paper grid never waits behind 16 000-node solves of other sessions.
HEAVY_NODES = 4096
#: Worker threads of the light runs.  Each is an executor of one thread, and a run keeps its thread for its whole
#: life, the close of its generator included: scipy's SuperLU gives a factorisation's memory back only on the
#: thread that made it (scipy issue 15921), and a 128 x 128 massive-relaxation run closed from the event loop left
#: 150 MB behind for good.
LIGHT_THREADS = 4
_LIGHT_POOLS = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"bft-light-{k}") for k in range(LIGHT_THREADS)]
_LIGHT_TURN = itertools.cycle(_LIGHT_POOLS)
_HEAVY_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bft-heavy")
#: Shortest time between two frames pushed to the browser while a run plays (at most ~10 frames/s).
MIN_FRAME_S = 0.15
#: Shortest time between two updates of the secondary views (traces, mixing, regression curve, status line)
#: within a run, counted from the start of the run; the last frame of a run (and of a step or a pause) always
#: updates them.  The heatmap moves with every frame.  Each plot a frame touches costs the browser a re-render
#: (5-50 ms in headless Chromium on the project's machine; a trace restarted with one or two iterations also
#: changes its axis labels and so the layout), so a click's first frames touch the heatmap alone, and a run
#: shorter than this updates the secondary views once, at its end.
SECONDARY_FRAME_S = 1.0

#: A browser that has not yet applied the previous frame gets no new one (records are coalesced instead), for at
#: most this long.  Frames then follow what each browser can draw: on a loaded machine a page receives fewer,
#: fuller frames instead of a queue of stale ones; the first frame of a run and the final one are never held.
ACK_TIMEOUT_S = 1.0

#: Grid resolutions offered, nx×ny on the paper domain x in [1, 10], y in [1, 15].
GRID_SIZES = {"10×15 (paper)": (10, 15), "19×29": (19, 29), "28×43": (28, 43),
              "46×71": (46, 71), "64×96": (64, 96), "91×141": (91, 141)}
#: Menu entry shown when the grid came from a file or preset that is not one of GRID_SIZES.
CUSTOM_GRID = "as loaded (custom)"
X_RANGE = (1.0, 10.0)
Y_RANGE = (1.0, 15.0)

MODELS = {"density, prior on L": ("density", "L"), "density, prior on P": ("density", "P"),
          "regression": ("regression", None)}
DENSITY_TEMPLATES = ["uniform", "paper_t1", "paper_t2", "gaussian"]
REGRESSION_TEMPLATES = ["constant", "linear"]
TEMPLATE_LABELS = {"uniform": "uniform", "paper_t1": "paper t₁", "paper_t2": "paper t₂",
                   "gaussian": "Gaussian", "constant": "constant", "linear": "linear trend", "array": "array"}
KEEP_CURRENT = "keep current"
INITS = ["uniform", "kernel", "empirical", "template 1", "template 2", "template 3", "template 4", KEEP_CURRENT]
ORDERS = ["l2", "l4", "l6"]
METHODS = list(config.METHODS)
DISPLAYS = ["P", "ln P", "true density", "empirical density"]

#: Parameters that define the problem; changing one restarts the solver (warm).
CONFIG_PARAMS = ["model", "x_min", "x_max", "nx", "y_min", "y_max", "ny", "boundary_x", "boundary_y", "lam",
                 "lam_x", "lam_y", "mass2", "order", "order_coef", "extra_orders", "templates", "w_uniform",
                 "w_paper_t1", "w_paper_t2", "w_gaussian", "gauss_mu", "gauss_sigma", "w_constant", "const_value",
                 "w_linear", "lin_slope", "lin_intercept", "file_templates", "file_weights", "beta", "method",
                 "solver_mass2", "init", "init_mass2", "min_iter", "max_iter", "tol", "truth", "regression_truth",
                 "data"]
#: Parameters kept in the URL so that a link reproduces the state.
URL_PARAMS = CONFIG_PARAMS + ["grid_size", "display", "frame_ms", "preset"]


def preset_catalogue() -> dict:
    """Preset name -> (configuration document, explanation): every entry of bftcore.presets.PRESETS (the dashboard
    loads any valid document)."""
    return dict(presets.PRESETS)


def template_label(spec: dict) -> str:
    """Short human name of a template object of CONVENTIONS §4."""
    kind = spec["kind"]
    if kind == "gaussian":
        return f"Gaussian μ={spec['mu']:g} σ={spec['sigma']:g}"
    if kind == "constant":
        return f"constant {spec['value']:g}"
    if kind == "linear":
        return f"linear {spec['slope']:g}x{spec['intercept']:+g}"
    return TEMPLATE_LABELS.get(kind, kind)


class _Done:
    """Marker for an exhausted generator."""


def _next_record(gen):
    try:
        return next(gen)
    except StopIteration:
        return _Done


def _timed_next(gen):
    """The next record of ``gen`` and the seconds it took (measured in the worker thread)."""
    t0 = time.perf_counter()
    rec = _next_record(gen)
    return rec, time.perf_counter() - t0


def _close_generator(gen, release: bool) -> None:
    """Close a run's generator on its worker thread (:meth:`_Run.close`), then give memory back if ``release``."""
    gen.close()
    if release:
        release_memory()


def _glibc():
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:  # not glibc (macOS, musl, Windows): nothing to tune
        return None


_LIBC = _glibc()
if _LIBC is not None:
    # glibc raises its mmap threshold after a large block is freed, up to 32 MB, so that later arrays of a few MB
    # land in the heaps of the worker threads, which are never given back to the system: a closed 128 x 128
    # session left its gigabyte behind.  A fixed threshold keeps every array above 128 KiB in its own mapping,
    # returned to the system when freed.
    _LIBC.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD


def release_memory() -> None:
    """Give the memory freed by closed sessions back to the system (glibc keeps freed heap pages otherwise)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _trial_start(cfg: dict) -> None:
    """Build the problem of a validated document and its start field (iteration 0), then drop them: what the
    solver cannot even start is refused before a session takes it."""
    gen = api.iterate(cfg)
    try:
        next(gen)
    finally:
        gen.close()


def _sweep_within_budget(cfg, beta_min, beta_max, n):
    """A sweep in a worker thread, stopped after :data:`RUN_COMPUTE_S` seconds."""
    with deadline(RUN_COMPUTE_S):
        return mixtures.sweep_document(cfg, beta_min, beta_max, n)


def _is_heavy(cfg: dict) -> bool:
    nodes = cfg["grid"]["x"]["n"] * (cfg["grid"]["y"]["n"] if cfg["model"] == "density" else 1)
    field_p = cfg["model"] == "density" and cfg["prior"]["field"] == "P"
    return nodes > (HEAVY_NODES // 4 if field_p else HEAVY_NODES)


def _number_within(v, lo: float, hi: float) -> bool:
    """``v`` is a number (not a bool) in [lo, hi]; False for NaN, infinities and integers beyond the float range."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return lo <= float(v) <= hi
    except OverflowError:
        return False


class _Points(param.List):
    """Data points: [x, y] pairs of numbers within the gate's coordinates, at most :data:`MAX_POINTS` of them."""

    def _validate(self, val):
        super()._validate(val)
        if len(val) > MAX_POINTS:
            raise ValueError(f"{len(val)} points; the dashboard takes at most {MAX_POINTS}")
        for k, p in enumerate(val):
            if not (isinstance(p, (list, tuple)) and len(p) == 2 and all(_number_within(v, *COORDINATE) for v in p)):
                raise ValueError(f"point {k} must be [x, y] with two finite numbers of at most {MAX_COORDINATE:g} "
                                 f"in magnitude, got {str(p)[:40]}")


class _Orders(param.Dict):
    """Further prior orders {"l2" | "l4" | "l6": coefficient >= 0}."""

    def _validate(self, val):
        super()._validate(val)
        for k, v in val.items():
            if k not in ORDERS or not _number_within(v, *MAGNITUDE):
                raise ValueError(f"further prior orders take {', '.join(ORDERS)} with numbers from 0 to "
                                 f"{MAX_MAGNITUDE:g}, got {k!r}: {str(v)[:20]}")


class _Weights(param.List):
    """Prior weights p_j of a file's templates: numbers >= 0."""

    def _validate(self, val):
        super()._validate(val)
        if not all(_number_within(v, *MAGNITUDE) for v in val):
            raise ValueError(f"template weights must be numbers from 0 to {MAX_MAGNITUDE:g}, got {str(val)[:40]}")


_TEMPLATE_INIT = re.compile(r"template ([1-9]|1[0-6])")


class _Init(param.Selector):
    """The initialisation menu, plus "template N" for any of a file's templates (N up to 16)."""

    def _validate(self, val):
        if not (val in INITS or (isinstance(val, str) and _TEMPLATE_INIT.fullmatch(val))):
            raise ValueError(f"the initialisation must be one of {', '.join(INITS[:3])}, '{KEEP_CURRENT}' or "
                             f"'template N', got {str(val)[:40]!r}")
        super()._validate(val)


class _Run:
    """One solve: the generator, the configuration it solves, and how far the browser has seen it."""

    __slots__ = ("gen", "cfg", "key", "warm", "start", "last", "fresh", "pushed", "done", "unshown", "shown_at",
                 "compute_s", "pool")

    def __init__(self, gen, cfg, key, warm):
        self.gen, self.cfg, self.key, self.warm = gen, cfg, key, warm
        self.start = None    # the record of iteration 0 (the start field), kept for the export of a warm start
        self.last = None     # the latest record computed
        self.fresh = True    # no frame of this run applied yet: the first one replaces the traces
        self.pushed = False  # the runner has sent a frame of this run
        self.done = False
        self.unshown = []    # history entries not yet given to the secondary views
        self.shown_at = time.perf_counter()  # when the secondary views were last updated (or the run began)
        self.compute_s = 0.0  # seconds spent computing this run's records (the server's RUN_COMPUTE_S)
        self.pool = _HEAVY_POOL if _is_heavy(cfg) else next(_LIGHT_TURN)  # the one thread of this run

    def close(self, on_worker: bool, release: bool = False) -> None:
        """Close the generator; ``on_worker`` (served): on this run's own thread, after the iteration it may be
        computing.  ``release`` then gives the freed memory back to the system (the session has ended)."""
        if on_worker:
            self.pool.submit(_close_generator, self.gen, release)
        else:
            self.gen.close()


def _grid_key(cfg: dict):
    """What a field's shape and meaning depend on: a warm start is only taken from a run with the same key."""
    g = cfg["grid"]
    return (cfg["model"], cfg["prior"].get("field"), tuple(sorted(g["x"].items())), tuple(sorted(g["y"].items())))


def release_as_one_message(doc) -> None:
    """End the document's hold and send its held changes to each browser as ONE patch message.

    Bokeh's ``unhold`` replays the held events one by one and its server session writes one PATCH-DOC message per
    event: a frame (image, colour range, serial) went out as four messages, and the page repainted for each. Here
    the events are replayed exactly as ``unhold`` does (Python property callbacks and every other listener run),
    except that the server session's per-event writer is given the events to collect, and one message carrying all
    of them is then queued on the session's pending writes, which Bokeh awaits once the document lock is released.
    The write goes through Bokeh's ``send_message``, which logs a socket that closed meanwhile instead of raising.
    Without a server session (tests, a page not yet connected) it is Bokeh's ``unhold``."""
    from bokeh.document.events import DocumentPatchedEvent

    session = getattr(getattr(doc, "session_context", None), "session", None)
    if (session is None or getattr(session, "_pending_writes", None) is None
            or not all(hasattr(session, a) for a in ("_subscribed_connections", "_current_patch_connection",
                                                      "_document_patched"))):
        doc.unhold()  # not served, or a Bokeh whose server session differs: one message per change, as Bokeh does
        return
    collected = []
    session._document_patched = collected.append  # shadows the bound method for the replay below only
    try:
        doc.unhold()  # replays every held event; those for the browser land in `collected`
    finally:
        del session._document_patched
    for conn in list(session._subscribed_connections):
        # as Bokeh does: a change the browser itself sent is not echoed back to that browser
        events = [e for e in collected if isinstance(e, DocumentPatchedEvent)
                  and not (e.setter is session and conn is session._current_patch_connection)]
        if events:
            session._pending_writes.append(conn._socket.send_message(conn.protocol.create("PATCH-DOC", events)))


@contextlib.contextmanager
def one_message(doc):
    """Hold the document's changes made inside and send them as one message (:func:`release_as_one_message`).

    Bokeh's own hold, not ``pn.io.hold``: a frame applied before the browser connected (a link with data in its
    query starts a run while the page is built) left the document held under ``pn.io.hold``, and every later frame
    of that session was collected and never sent.  Inside a hold that is already open this adds to it."""
    if doc is None or doc.callbacks.hold_value:
        yield
        return
    doc.hold("combine")
    try:
        yield
    finally:
        release_as_one_message(doc)


class BFTSession(param.Parameterized):
    """All state of one dashboard session: data, hyperparameters, solver progress and messages."""

    # --- model and prior -------------------------------------------------------------------------------------
    model = param.Selector(default="density, prior on L", objects=list(MODELS), doc="Model and prior field.")
    lam = param.Number(1.0, bounds=MAGNITUDE, inclusive_bounds=POSITIVE, softbounds=(0.01, 5.0),
                       label="λ (prior strength)")
    lam_x = param.Number(1.0, bounds=MAGNITUDE, softbounds=(0.0, 5.0), label="λ_x")
    lam_y = param.Number(1.0, bounds=MAGNITUDE, softbounds=(0.0, 5.0), label="λ_y")
    mass2 = param.Number(0.0, bounds=MAGNITUDE, softbounds=(0.0, 2.0), label="mass m² (l0)")
    order = param.Selector(default="l2", objects=ORDERS, label="prior order")
    order_coef = param.Number(0.025, bounds=MAGNITUDE, softbounds=(0.0, 2.0),
                              label="coefficient of the order")
    extra_orders = _Orders({}, doc="Coefficients of further prior orders {'l4': c, ...} that a loaded file "
                                      "sets besides the order of the slider; kept in the prior, shown read-only.")
    # --- templates and mixture -------------------------------------------------------------------------------
    templates = param.ListSelector(default=[], objects=DENSITY_TEMPLATES + REGRESSION_TEMPLATES,
                                   label="templates t_j")
    w_uniform = param.Number(1.0, bounds=MAGNITUDE, inclusive_bounds=POSITIVE, softbounds=(0.01, 10.0),
                             label="p (uniform)")
    w_paper_t1 = param.Number(1.0, bounds=MAGNITUDE, inclusive_bounds=POSITIVE, softbounds=(0.01, 10.0),
                              label="p (paper t₁)")
    w_paper_t2 = param.Number(1.0, bounds=MAGNITUDE, inclusive_bounds=POSITIVE, softbounds=(0.01, 10.0),
                              label="p (paper t₂)")
    w_gaussian = param.Number(1.0, bounds=MAGNITUDE, inclusive_bounds=POSITIVE, softbounds=(0.01, 10.0),
                              label="p (Gaussian)")
    gauss_mu = param.Number(8.0, bounds=COORDINATE, softbounds=Y_RANGE, label="Gaussian centre μ")
    gauss_sigma = param.Number(2.0, bounds=(0.0, MAX_COORDINATE), inclusive_bounds=POSITIVE,
                               softbounds=(0.3, 10.0), label="Gaussian width σ")
    w_constant = param.Number(1.0, bounds=MAGNITUDE, inclusive_bounds=POSITIVE, softbounds=(0.01, 10.0),
                              label="p (constant)")
    const_value = param.Number(7.5, bounds=COORDINATE, softbounds=Y_RANGE, label="constant value")
    w_linear = param.Number(1.0, bounds=MAGNITUDE, inclusive_bounds=POSITIVE, softbounds=(0.01, 10.0),
                            label="p (linear)")
    lin_slope = param.Number(0.5, bounds=COORDINATE, softbounds=(-3.0, 3.0), label="slope")
    lin_intercept = param.Number(5.0, bounds=COORDINATE, softbounds=(-20.0, 30.0), label="intercept")
    file_templates = param.List([], item_type=dict, doc="Templates of a loaded file that the menu cannot show "
                                                        "(repeated kinds, arrays, another order); when not empty "
                                                        "they are the templates, read-only.")
    file_weights = _Weights([], doc="Prior weights p_j of file_templates, exactly as in the file.")
    beta = param.Number(1.0, bounds=(MIN_BETA, MAX_MAGNITUDE), label="β (mixture temperature)")
    # --- solver and grid -------------------------------------------------------------------------------------
    method = param.Selector(default="newton", objects=METHODS, label="solver")
    solver_mass2 = param.Number(0.01, bounds=MAGNITUDE, softbounds=(1e-3, 2.0), label="relaxation m²")
    init = _Init(default="kernel", objects=INITS, check_on_set=False, label="initialisation")
    init_mass2 = param.Number(0.1, bounds=MAGNITUDE, inclusive_bounds=POSITIVE, softbounds=(1e-3, 10.0),
                              label="kernel init m_C²")
    min_iter = param.Integer(4, bounds=(0, 100_000), label="min iterations")
    max_iter = param.Integer(50, bounds=(0, 100_000), softbounds=(1, 1000), label="max iterations")
    tol = param.Number(1e-8, bounds=MAGNITUDE, label="tolerance (max field change)")
    grid_size = param.Selector(default="10×15 (paper)", objects=list(GRID_SIZES) + [CUSTOM_GRID],
                               label="grid nx×ny")
    x_min = param.Number(X_RANGE[0], bounds=COORDINATE)
    x_max = param.Number(X_RANGE[1], bounds=COORDINATE)
    nx = param.Integer(10, bounds=(1, 1024))
    y_min = param.Number(Y_RANGE[0], bounds=COORDINATE)
    y_max = param.Number(Y_RANGE[1], bounds=COORDINATE)
    ny = param.Integer(15, bounds=(1, 1024))
    boundary_x = param.Selector(default="periodic", objects=["periodic", "neumann"], label="x boundary")
    boundary_y = param.Selector(default="periodic", objects=["periodic", "neumann"], label="y boundary")
    truth = param.Selector(default="paper", objects=["paper", "none"], label="true density")
    regression_truth = param.ClassSelector(default=None, class_=(dict, list), allow_None=True,
                                           doc="Regression 'truth' of a loaded file (a template object or values "
                                               "on the x nodes), kept as it is.")
    data = _Points(default=[[3.0, 3.0], [7.0, 12.0]], item_type=list, doc="Data points [x, y].")
    # --- display and animation -------------------------------------------------------------------------------
    display = param.Selector(default="P", objects=DISPLAYS, label="heatmap shows")
    click_mode = param.Selector(default="add", objects=["add", "remove"], label="a click on the canvas")
    frame_ms = param.Integer(60, bounds=(0, 1000), label="animation: ms per iteration")
    live = param.Boolean(True, label="re-solve on every change")
    preset = param.String("", regex=r"^[\w .-]{0,64}$", doc="Name of the last preset loaded ('' when edited by hand).")
    # --- outputs (read by the views) -------------------------------------------------------------------------
    record = param.Parameter(None, doc="Latest solver record on screen (attributes of api.Record).")
    history = param.List([], doc="One dict per iteration of the current run: iteration, energy, errors, mixing.")
    run_id = param.Integer(0, doc="Incremented when the first frame of a new run is shown (the traces restart).")
    running = param.Boolean(False, doc="True while the solver animation plays.")
    converged = param.Boolean(False)
    result = param.Dict(None, allow_None=True, doc="Exact regression quantities of the finished run.")
    sweep = param.Dict(None, allow_None=True, doc="Last beta sweep document (CONVENTIONS §4).")
    sweeping = param.Boolean(False)
    message = param.String("", doc="Last message to the user (errors, refused input).")
    status = param.String("")

    def __init__(self, doc=None, **params):
        super().__init__(**params)
        self._doc = doc              # Bokeh document when served; None runs everything synchronously
        self._run = None             # the current run (_Run) or None
        self._shown_key = None       # _grid_key of the run whose field is in self.record
        self._shown_run = None       # the run whose record is on screen (its start field is the export's init)
        self._playing = False        # the runner keeps going while True
        self._steps = 0              # single steps requested while paused
        self._runner = None          # the session's runner task (served only)
        self.frame_serial = 0        # frames with records applied (the canvas sends it to the browser with the image)
        self.frame_acked = None      # the last serial the browser reported as applied; None: it never reported
        self._undo = []
        self._quiet = False          # suppress auto re-solve while a batch of parameters is applied
        self._closed = False         # the browser session ended (close)
        self.param.watch(self._on_grid_size, ["grid_size"])
        self.param.watch(self._on_model_change, ["model"])
        self.param.watch(self._on_problem_change, list(CONFIG_PARAMS))

    # ===================================================================== configuration document
    @property
    def grid(self) -> Grid:
        return Grid(Axis(float(self.x_min), float(self.x_max), int(self.nx), self.boundary_x),
                    Axis(float(self.y_min), float(self.y_max), int(self.ny), self.boundary_y))

    @property
    def is_regression(self) -> bool:
        return MODELS[self.model][0] == "regression"

    def _on_grid_size(self, event):
        """A menu choice sets the paper domain at that resolution (one restart for all six numbers)."""
        if event.new in GRID_SIZES:
            nx, ny = GRID_SIZES[event.new]
            self.param.update(x_min=X_RANGE[0], x_max=X_RANGE[1], nx=nx, y_min=Y_RANGE[0], y_max=Y_RANGE[1],
                              ny=ny)

    def template_kinds(self) -> list[str]:
        """Active menu template kinds of the current model, in the fixed order of the configuration."""
        if self.file_templates:
            return []
        allowed = REGRESSION_TEMPLATES if self.is_regression else DENSITY_TEMPLATES
        return [k for k in allowed if k in self.templates]

    def _template_dict(self, kind: str) -> dict:
        if kind == "gaussian":
            return {"kind": "gaussian", "mu": self.gauss_mu, "sigma": self.gauss_sigma}
        if kind == "constant":
            return {"kind": "constant", "value": self.const_value}
        if kind == "linear":
            return {"kind": "linear", "slope": self.lin_slope, "intercept": self.lin_intercept}
        return {"kind": kind}

    def template_specs(self) -> tuple[list[dict], list[float]]:
        """The templates and prior weights p_j of the configuration: the file's, or the menu's (normalised)."""
        if self.file_templates:
            return copy.deepcopy(self.file_templates), [float(w) for w in self.file_weights]
        kinds = self.template_kinds()
        weights = [float(getattr(self, f"w_{k}")) for k in kinds]
        total = sum(weights)
        return [self._template_dict(k) for k in kinds], [w / total for w in weights]

    def template_labels(self) -> list[str]:
        return [template_label(t) for t in self.template_specs()[0]]

    def to_config(self) -> dict:
        """The JSON configuration document (CONVENTIONS §4) of the current state."""
        model, field = MODELS[self.model]
        templates, weights = self.template_specs()
        prior = {"lambda": self.lam, "lambda_x": self.lam_x, "lambda_y": self.lam_y, "l0": self.mass2,
                 "l2": 0.0, "l4": 0.0, "l6": 0.0}
        prior.update({k: float(v) for k, v in self.extra_orders.items() if k in ORDERS})
        prior[self.order] = self.order_coef
        if field:
            prior = {"field": field, **prior}
        init = self.init
        if _TEMPLATE_INIT.fullmatch(init):
            init = f"template:{int(init.split()[1]) - 1}"
        elif init == KEEP_CURRENT:
            init = "kernel"  # the solver gets the current field separately; see export_config for files
        doc = {
            "model": model,
            "grid": {"x": {"min": float(self.x_min), "max": float(self.x_max), "n": int(self.nx),
                           "boundary": self.boundary_x},
                     "y": {"min": float(self.y_min), "max": float(self.y_max), "n": int(self.ny),
                           "boundary": self.boundary_y}},
            "data": [[float(x), float(y)] for x, y in self.data],
            "prior": prior,
            "templates": templates,
            "weights": weights,
            "beta": float(self.beta),
            "solver": {"method": self.method, "mass2": self.solver_mass2, "init": init,
                       "init_mass2": self.init_mass2, "min_iter": int(self.min_iter),
                       "max_iter": int(self.max_iter), "tol": float(self.tol)},
        }
        if model == "density" and self.truth == "paper":  # the paper truth (708) is a density
            doc["truth"] = "paper"
        elif model == "regression" and self.regression_truth is not None:
            doc["truth"] = copy.deepcopy(self.regression_truth)
        return doc

    def export_config(self) -> dict:
        """The document to download: :meth:`to_config`, except that with the initialisation "keep current" the
        start field of the run on screen is written into the file, so `python -m bftcore fit` replays that run.

        ``solver.init`` of CONVENTIONS §4 takes no array, so the start field goes in as an extra template of kind
        "array" with prior weight p = 0 (a_j = 0 exactly: it changes neither the energy minimised nor its
        minimum) and ``solver.init`` points at it.  A problem without templates gets the zero template
        t = 0 with p = 1 first, which is the prior of "no template".  The mixing list of the result then has one
        more entry (0) per added template."""
        doc = self.to_config()
        run = self._shown_run
        if self.init != KEEP_CURRENT or run is None or not run.warm or run.start is None:
            return doc
        model, field = MODELS[self.model]
        if model == "regression":
            start = np.asarray(run.start.h, float).tolist()
        else:
            start = np.asarray(run.start.L if field == "L" else run.start.P, float).tolist()
        if not doc["templates"]:
            zero = np.zeros(self.nx).tolist() if model == "regression" else \
                np.zeros((self.nx, self.ny)).tolist()
            doc["templates"], doc["weights"] = [{"kind": "array", "values": zero}], [1.0]
        doc["templates"].append({"kind": "array", "values": start})
        doc["weights"].append(0.0)
        doc["solver"]["init"] = f"template:{len(doc['templates']) - 1}"
        return doc

    def _menu_templates(self, doc: dict, model: str):
        """Parameter values that show the document's templates with the menu, or None when it cannot (then
        they are kept as file templates)."""
        allowed = REGRESSION_TEMPLATES if model == "regression" else DENSITY_TEMPLATES
        tpl, weights = doc.get("templates", []), [float(w) for w in doc.get("weights", [])]
        kinds = [t["kind"] for t in tpl]
        if len(set(kinds)) != len(kinds) or any(k not in allowed for k in kinds):
            return None
        if kinds != [k for k in allowed if k in kinds]:  # the menu writes templates in a fixed order
            return None
        if tpl and (any(w <= 0 for w in weights) or [w / sum(weights) for w in weights] != weights):
            return None  # the menu writes normalised weights; anything else must stay exactly as in the file
        out = {"templates": kinds, "file_templates": [], "file_weights": []}
        for t, w in zip(tpl, weights):
            kind = t["kind"]
            out[f"w_{kind}"] = w
            if kind == "gaussian":
                out.update(gauss_mu=t["mu"], gauss_sigma=t["sigma"])
            elif kind == "constant":
                out["const_value"] = t["value"]
            elif kind == "linear":
                out.update(lin_slope=t["slope"], lin_intercept=t["intercept"])
        return out

    def _params_from_config(self, doc: dict) -> dict:
        """Parameter values for a validated document (anything ``validate_config`` accepts)."""
        out = {}
        model = doc.get("model", "density")
        field = doc.get("prior", {}).get("field", "L")
        out["model"] = "regression" if model == "regression" else f"density, prior on {field}"
        g = doc["grid"]
        out.update(x_min=float(g["x"]["min"]), x_max=float(g["x"]["max"]), nx=int(g["x"]["n"]),
                   y_min=float(g["y"]["min"]), y_max=float(g["y"]["max"]), ny=int(g["y"]["n"]),
                   boundary_x=g["x"]["boundary"], boundary_y=g["y"]["boundary"])
        size = (out["nx"], out["ny"])
        paper = (out["x_min"], out["x_max"], out["y_min"], out["y_max"]) == (*X_RANGE, *Y_RANGE)
        names = {v: k for k, v in GRID_SIZES.items()}
        out["grid_size"] = names[size] if paper and size in names else CUSTOM_GRID
        pr = doc["prior"]
        out.update(lam=pr["lambda"], lam_x=pr["lambda_x"], lam_y=pr["lambda_y"], mass2=pr.get("l0", 0.0))
        orders = [o for o in ORDERS if pr.get(o, 0.0)]
        out["order"] = orders[0] if orders else "l2"
        out["order_coef"] = float(pr.get(out["order"], 0.0))
        out["extra_orders"] = {o: float(pr[o]) for o in orders[1:]}
        menu = self._menu_templates(doc, model)
        if menu is None:
            menu = {"templates": [], "file_templates": copy.deepcopy(doc.get("templates", [])),
                    "file_weights": [float(w) for w in doc.get("weights", [])]}
        out.update(menu)
        out["beta"] = float(doc.get("beta", 1.0))
        s = doc["solver"]
        init = s.get("init", "kernel")
        if init.startswith("template:"):
            init = f"template {int(init.split(':')[1]) + 1}"
        out.update(method=s["method"], solver_mass2=s.get("mass2", 0.01), init=init,
                   init_mass2=s.get("init_mass2", 0.1), min_iter=int(s.get("min_iter", 4)),
                   max_iter=int(s.get("max_iter", 50)), tol=float(s.get("tol", 1e-8)))
        if model == "density":
            out["truth"] = "paper" if doc.get("truth") == "paper" else "none"
            out["regression_truth"] = None
        else:
            out["regression_truth"] = copy.deepcopy(doc.get("truth"))
        out["data"] = [[float(x), float(y)] for x, y in doc.get("data", [])]
        if len(out["data"]) > MAX_POINTS:
            raise ValueError(f"{len(out['data'])} data points; the dashboard takes at most {MAX_POINTS}")
        for name, value in out.items():  # a value the parameters refuse is refused, never clipped
            p = self.param[name]
            try:
                p._validate(value)
            except Exception as e:
                raise ValueError(f"{p.label or name} = {value!r} is outside what the dashboard allows: {e}") from None
        return out

    def load_config(self, doc, *, preset: str = "") -> bool:
        """Load a configuration document (dict, JSON text or bytes).

        The document passes the gate of ``bftcore`` (``parse_document``, ``validate_config`` with the server's
        budget) and the solver builds its start (iteration 0) on a trial before anything of the session changes:
        a bad document is refused with a message in :attr:`message` and leaves the state exactly as it was.
        Returns True when loaded.
        """
        try:
            if isinstance(doc, (str, bytes, bytearray)):
                doc = parse_document(doc, "the file" if not preset else f"preset {preset!r}")
            doc = validate_config(doc)
            values = self._params_from_config(doc)
            _trial_start(doc)
        except Exception as e:  # noqa: BLE001 - whatever the gate or the trial start raise (scipy's RuntimeError of a
            # singular factor, MemoryError, RecursionError, ...), the document is refused and the session kept
            reason = e.args[0] if isinstance(e, KeyError) and e.args else e
            if isinstance(e, MemoryError):
                reason = "it does not fit in the server's memory"
            text = " ".join(str(reason).split()).rstrip(".") or type(e).__name__
            self.message = f"Refused the configuration: {text[:400]}. Nothing was changed."
            return False
        self._push_undo()
        self._quiet = True
        try:
            self.param.update(**values, preset=preset)
        finally:
            self._quiet = False
        kept = []
        if self.extra_orders:
            kept.append("further prior orders")
        if self.file_templates:
            kept.append("templates the menu cannot show")
        if self.grid_size == CUSTOM_GRID:
            kept.append("its own grid")
        note = f" It has {', '.join(kept)}: kept as they are, shown read-only." if kept else ""
        self.message = (f"Loaded preset '{preset}'." if preset else "Loaded the configuration.") + note
        self.reset(play=self.live)
        return True

    def load_preset(self, name: str) -> bool:
        catalogue = preset_catalogue()
        if name not in catalogue:
            self.message = f"Unknown preset {name!r}."
            return False
        return self.load_config(catalogue[name][0], preset=name)

    def use_menu_templates(self):
        """Drop the file's templates and go back to the template menu."""
        self.param.update(file_templates=[], file_weights=[])

    # ===================================================================== data points
    def _push_undo(self):
        self._undo.append(copy.deepcopy(self.data))
        del self._undo[:-UNDO_DEPTH]

    def _snap_point(self, x: float, y: float) -> list[float]:
        """The node nearest to a click.  The canvas draws each node as a cell of one grid spacing, so a click
        anywhere in an edge cell (up to half a spacing outside [min, max]) belongs to the edge node."""
        grid = self.grid

        def into_edge_cell(v, axis):
            inside = min(max(v, axis.min), axis.max)
            return inside if abs(v - inside) <= axis.h / 2 else v

        x = into_edge_cell(float(x), grid.x)
        if self.is_regression:  # y is a real value; only x lives on the nodes
            sx = float(grid.x.nodes[grid.x.snap([x])[0]])  # ValueError names an off-grid point
            return [round(sx, 6), round(float(y), 3)]
        ix, iy = grid.snap([[x, into_edge_cell(float(y), grid.y)]])
        return [round(float(grid.x.nodes[ix[0]]), 6), round(float(grid.y.nodes[iy[0]]), 6)]

    def add_point(self, x: float, y: float) -> bool:
        """Add a data point at the node nearest to (x, y); off-grid points are ignored with a message."""
        if len(self.data) >= MAX_POINTS:
            self.message = f"At most {MAX_POINTS} points per session; remove some before adding more."
            return False
        try:
            pt = self._snap_point(x, y)
        except ValueError as e:
            self.message = f"Ignored the click: {e}"
            return False
        self._push_undo()
        if self.message:
            self.message = ""
        self.data = self.data + [pt]
        return True

    def remove_point_near(self, x: float, y: float) -> bool:
        """Remove the data point nearest to (x, y) if it lies within about one grid cell of the click."""
        if not self.data:
            self.message = "There are no points to remove."
            return False
        pts = np.asarray(self.data, float)
        grid = self.grid
        sx = max(grid.hx, (grid.x.max - grid.x.min) / 20)
        span_y = (float(np.ptp(pts[:, 1])) or 1.0) if self.is_regression else grid.y.max - grid.y.min
        sy = max(grid.hy if not self.is_regression else 0.0, span_y / 20)
        d = ((pts[:, 0] - x) / sx) ** 2 + ((pts[:, 1] - y) / sy) ** 2
        k = int(np.argmin(d))
        if d[k] > 1.0:
            self.message = f"No point near ({x:.2f}, {y:.2f}) to remove."
            return False
        self._push_undo()
        self.message = ""
        self.data = self.data[:k] + self.data[k + 1:]
        return True

    def click(self, x: float, y: float) -> bool:
        """A click on the data canvas: add or remove according to :attr:`click_mode`."""
        return self.add_point(x, y) if self.click_mode == "add" else self.remove_point_near(x, y)

    def clear_points(self):
        if self.data:
            self._push_undo()
            self.data = []

    def undo(self) -> bool:
        if not self._undo:
            self.message = "Nothing to undo."
            return False
        self.data = self._undo.pop()
        self.message = ""
        return True

    def data_csv(self) -> str:
        buf = io.StringIO()
        buf.write("x,y\n")
        for x, y in self.data:
            buf.write(f"{x:g},{y:g}\n")
        return buf.getvalue()

    # ===================================================================== solver control
    @property
    def served(self) -> bool:
        return self._doc is not None and getattr(self._doc, "session_context", None) is not None

    def _on_model_change(self, event):
        """Switching between density and regression swaps the template menu and the data's y values.  A file's
        templates and regression truth belong to the model they were written for and are dropped."""
        if self._quiet:
            return
        regression = self.is_regression
        allowed = REGRESSION_TEMPLATES if regression else DENSITY_TEMPLATES
        kept = [k for k in self.templates if k in allowed]
        update = {}
        if self.file_templates and not all(self._fits_model(t, regression) for t in self.file_templates):
            update.update(file_templates=[], file_weights=[])
            self.message = "The templates of the loaded file belong to the other model; back to the menu."
        if regression and not kept and not (self.file_templates and "file_templates" not in update):
            kept = ["constant"]  # a regression mixture needs at least one template
        if kept != list(self.templates):
            update["templates"] = kept
        if update:
            self.param.update(**update)

    @staticmethod
    def _fits_model(spec: dict, regression: bool) -> bool:
        if spec["kind"] == "array":  # values on the x nodes (regression) or an nx × ny field (density)
            values = spec.get("values") or []
            return regression != bool(values and isinstance(values[0], list))
        return spec["kind"] in (REGRESSION_TEMPLATES if regression else DENSITY_TEMPLATES)

    def _on_problem_change(self, *events):
        if self._quiet:
            return
        if any(e.name != "data" for e in events):
            self.preset = ""
        if self.live:
            self.start_run(warm=True, play=True)

    def _warm_field(self, cfg):
        rec = self.record
        if rec is None or self._shown_key != _grid_key(cfg):
            return None
        model, field = MODELS[self.model]
        return np.array(getattr(rec, "h" if model == "regression" else field), copy=True)

    def close(self):
        """The browser session ended: stop the run, drop every array this session holds (fields, history, undo
        stack, sweep) and give the freed memory back to the system.  The run's generator is closed on its worker
        thread, after an iteration that thread may still be computing, and the memory released again there."""
        self._closed = True
        self.cancel()
        self._run = self._shown_run = None
        self._undo = []
        with param.parameterized.discard_events(self):
            self.record, self.history, self.result, self.sweep = None, [], None, None
        release_memory()

    def cancel(self):
        """Stop the current run (its generator is closed on its worker thread when served)."""
        self._drop_run()
        if self.running:
            self.running = False

    def _drop_run(self):
        run, self._run = self._run, None
        self._playing, self._steps = False, 0
        if run is not None:
            run.close(on_worker=self.served, release=self._closed)

    def start_run(self, warm: bool = True, play: bool = True) -> bool:
        """Start a new run of the solver from the current state (warm: from the field shown)."""
        try:
            cfg = api.validate_config(self.to_config())
        except ValueError as e:
            self.cancel()
            self.message = f"Cannot solve: {e}"
            return False
        init = self._warm_field(cfg) if (warm or self.init == KEEP_CURRENT) else None
        self._drop_run()
        try:
            gen = api.iterate(cfg, init=init)
        except ValueError as e:
            self.cancel()
            self.message = f"Cannot solve: {e}"
            return False
        self._run = _Run(gen, cfg, _grid_key(cfg), warm=init is not None)
        if self.message.startswith(("The solver failed", "Cannot solve")):
            self.message = ""
        if self.converged:
            self.converged = False
        if play:
            self.play()
        else:
            self.step()
        return True

    def reset(self, play: bool = False):
        """Restart from the configured initialisation (no warm start) and show iteration 0."""
        self.start_run(warm=False, play=play)

    def play(self):
        """Run (or resume) the current run, animated."""
        if self._run is None:
            self.start_run(warm=self.init == KEEP_CURRENT, play=True)
            return
        self._playing = True
        if not self.running:
            self.running = True
        if self.served:
            self._ensure_runner()
        else:
            while self._playing and self._advance_sync():
                pass

    def pause(self):
        """Stop after the current iteration; the run is kept and Run resumes it."""
        self._playing = False
        self._steps = 0
        self.running = False

    def step(self):
        """Advance the solver by one iteration (creating a run if there is none)."""
        if self._run is None:
            self.start_run(warm=self.init == KEEP_CURRENT, play=False)
            return
        self._playing = False
        if self.running:
            self.running = False
        if self.served:
            self._steps += 1
            self._ensure_runner()
        else:
            self._advance_sync()

    # --- records -> what the views watch --------------------------------------------------------------------
    @staticmethod
    def _entry(rec) -> dict:
        return {"iteration": int(rec.iteration), "energy": float(rec.energy),
                "train_error": float(rec.train_error),
                "test_error": None if rec.test_error is None else float(rec.test_error),
                "mixing": [float(a) for a in np.atleast_1d(rec.mixing)] if rec.mixing is not None else [],
                "step": None if rec.step is None else float(rec.step),
                "residual": None if getattr(rec, "residual", None) is None else float(rec.residual)}

    def _apply_frame(self, run, recs, finished=False, exact=None, error=None, flush=False):
        """Show the records of one frame (and the end of the run); records of a replaced run are dropped.
        ``flush`` updates the secondary views too (a single step, or the runner stopping on a pause)."""
        if run is not self._run:
            return
        if error is not None:
            self._run = None
            self._playing = False
            with param.parameterized.batch_call_watchers(self):
                self.running = False
                self.message = (str(error) if isinstance(error, RunBudgetExceeded) else
                                f"The solver failed ({type(error).__name__}: {error}); showing the last good "
                                f"solution.")
            return
        for rec in recs:
            if rec.iteration == 0:
                run.start = rec
        run.unshown += [self._entry(r) for r in recs]
        now = time.perf_counter()
        secondary = run.unshown and (finished or flush or not self.served
                                     or now - run.shown_at >= SECONDARY_FRAME_S)
        with param.parameterized.batch_call_watchers(self):
            if recs:
                self._shown_key, self._shown_run = run.key, run
                self.frame_serial += 1
                self.record = recs[-1]
            if secondary:
                entries, run.unshown, run.shown_at = run.unshown, [], now
                if run.fresh:
                    run.fresh = False
                    self.history = entries
                    self.run_id += 1
                    if self.result is not None:
                        self.result = None
                else:
                    self.history = self.history + entries
                e = entries[-1]
                self.status = (f"iteration {e['iteration']}  ·  energy {e['energy']:.4f}  ·  "
                               f"training error {e['train_error']:.4f}"
                               + ("" if e["test_error"] is None else f"  ·  test error {e['test_error']:.4f}"))
            if finished:
                self._run = None
                self._playing = False
                self.running = False
                self.converged = True
                last = run.last
                if last is not None:
                    self.status = (self.status.split("  ·  finished")[0] + "  ·  finished"
                                   + ("" if getattr(last, "converged", True) else " (max iterations)"))
                if isinstance(exact, Exception):
                    self.message = f"Exact regression quantities unavailable: {exact}"
                elif exact is not None:
                    self.result = exact

    @staticmethod
    def _exact(run):
        """Exact predictive mean and variance of a finished regression run (closed form, fast)."""
        if run.cfg["model"] != "regression":
            return None
        try:  # started at the run's last h, the fit only confirms the MAP and adds the exact quantities
            res = api.fit(run.cfg, init=None if run.last is None else np.asarray(run.last.h, float))
        except Exception as e:  # noqa: BLE001 - shown as a message, the MAP solution stays
            return e
        return {"exact": res.get("exact"), "h": res.get("h")}

    # --- synchronous path (tests, notebooks) ---------------------------------------------------------------
    def _advance_sync(self) -> bool:
        run = self._run
        if run is None:
            return False
        try:
            rec = _next_record(run.gen)
        except Exception as e:  # noqa: BLE001 - any solver failure keeps the last good solution
            self._apply_frame(run, [], error=e)
            return False
        if rec is not _Done:
            run.last = rec
        if rec is _Done:
            self._apply_frame(run, [], finished=True, exact=self._exact(run))
            return False
        self._apply_frame(run, [rec])
        return True

    def solve(self, max_records: int = 10_000):
        """Run the current problem to the end synchronously (tests and scripts)."""
        if self._run is None:
            self.start_run(warm=False, play=False)
        n = 0
        while self._run is not None and n < max_records and self._advance_sync():
            n += 1

    # --- served path ----------------------------------------------------------------------------------------
    def _push(self, fn, *args):
        """Run fn(*args) on the session's document with its lock held, all model changes in one message."""
        def apply():
            from panel.io.state import set_curdoc
            with set_curdoc(self._doc), one_message(self._doc):
                fn(*args)
        try:
            self._doc.add_next_tick_callback(apply)
        except Exception:  # noqa: BLE001 - the session is gone
            self.cancel()

    def ack_frame(self, serial: int):
        """The browser reports that it applied frame ``serial`` (see :data:`ACK_TIMEOUT_S`)."""
        self.frame_acked = serial

    def _browser_behind(self, since_push: float) -> bool:
        return self.frame_acked is not None and self.frame_acked < self.frame_serial and since_push < ACK_TIMEOUT_S

    def _ensure_runner(self):
        if self._runner is None or self._runner.done():
            self._runner = asyncio.ensure_future(self._runner_loop())

    async def _runner_loop(self):
        """Advance the newest run one iteration at a time in a worker thread and push coalesced frames."""
        pending, pending_run, last_push = [], None, 0.0
        while True:
            run = self._run
            if pending and pending_run is not run:  # the run was replaced: its unshown records are stale
                pending, pending_run = [], None
            if run is None or run.done or (not self._playing and self._steps <= 0):
                if run is not None and not run.done:  # paused: show everything computed so far
                    self._push(self._apply_frame, run, pending, False, None, None, True)
                return
            stepping = not self._playing
            if stepping:
                self._steps -= 1
            t0 = time.perf_counter()
            try:
                rec, spent = await asyncio.get_running_loop().run_in_executor(run.pool, _timed_next, run.gen)
                run.compute_s += spent
            except Exception as e:  # noqa: BLE001
                rec = e
            if run is not self._run:  # replaced while computing (and closed after it by _drop_run): drop the record
                continue
            if rec is not _Done and not isinstance(rec, Exception) and run.compute_s > RUN_COMPUTE_S:
                run.last = rec
                pending.append(rec)
                pending_run = run
                run.close(on_worker=True)
                rec = RunBudgetExceeded(
                    f"Stopped this run after {run.compute_s:.0f} s of computing (the server's limit per run is "
                    f"{RUN_COMPUTE_S:g} s); showing its last iteration. Use a coarser grid, fewer iterations or a "
                    f"simpler prior.")
            if isinstance(rec, Exception):
                run.done = True
                if isinstance(rec, RunBudgetExceeded):  # show what the run reached, then say why it stopped
                    self._push(self._apply_frame, run, pending, False, None, None, True)
                self._push(self._apply_frame, run, [], False, None, rec)
                return
            if rec is _Done:
                run.done = True
                exact = (await asyncio.get_running_loop().run_in_executor(run.pool, self._exact, run)
                         if run.cfg["model"] == "regression" else None)
                if run is not self._run:
                    continue
                self._push(self._apply_frame, run, pending if pending_run is run else [], True, exact)
                return
            run.last = rec
            pending.append(rec)
            pending_run = run
            now = time.perf_counter()
            # the first frame of a run goes out with iteration 1 (the start field alone is what is on screen
            # already after a warm start); later ones at most every MIN_FRAME_S
            due = not run.pushed or (now - last_push >= MIN_FRAME_S and not self._browser_behind(now - last_push))
            if stepping or (rec.iteration >= 1 and due):
                self._push(self._apply_frame, run, pending, False, None, None, stepping)
                pending, last_push, run.pushed = [], now, True
            if self._playing and rec.iteration >= 1:
                await asyncio.sleep(max(0.0, self.frame_ms / 1000 - (time.perf_counter() - t0)))
            else:
                await asyncio.sleep(0)

    # ===================================================================== beta sweep
    def sweep_config(self) -> dict:
        return api.validate_config(self.to_config())

    def run_sweep(self, beta_min: float = 0.1, beta_max: float = 10.0, n: int = 25):
        """Sweep beta up and down (bftcore.mixtures.sweep_document); in a worker thread when served."""
        try:
            cfg = self.sweep_config()
            beta_min, beta_max, n = validate_sweep(cfg, beta_min, beta_max, n)
        except ValueError as e:
            self.message = f"Cannot sweep: {e}"
            return
        if len(cfg.get("templates", [])) < 2:
            self.message = "A beta sweep needs a mixture: choose at least two templates."
            return

        def done(doc):
            self.sweeping = False
            if isinstance(doc, Exception):
                self.message = f"The sweep failed: {doc}"
            else:
                self.sweep = doc

        self.sweeping = True
        if self.served:
            async def work():
                try:
                    doc = await asyncio.get_running_loop().run_in_executor(
                        _HEAVY_POOL, _sweep_within_budget, cfg, beta_min, beta_max, n)
                except Exception as e:  # noqa: BLE001
                    doc = e
                self._push(done, doc)
            asyncio.ensure_future(work())
        else:
            try:
                doc = mixtures.sweep_document(cfg, beta_min, beta_max, n)
            except Exception as e:  # noqa: BLE001
                doc = e
            done(doc)
