"""The session of the dashboard: one :class:`BFTSession` per browser session, its parameters and the user's actions.

Everything a user can change lives here as a parameter; the views in ``app/views`` only watch it.  The user's
actions are methods: editing the data points (with undo), loading a preset or an uploaded configuration, and
running the solver (start, play, pause, step, reset, a beta sweep).  The session talks to the solver exclusively
through ``bftcore.api`` and ``bftcore.foundations.config`` (one implementation of each formula: the CLI, the tests and
the dashboard run the same code).  Its parameters map to the JSON configuration document of CONVENTIONS.md §4 through
:mod:`app.configuration` (:meth:`BFTSession.to_config` / :meth:`BFTSession.load_config`), and its runs are played by
its :class:`app.runner.FramePump`, which sets the outputs the views watch (``record``, ``history``, ``status``, ...).

Every input is untrusted (issue 11): a share link (``app.views.share.read_url``) and an upload
(:meth:`BFTSession.load_config`) pass the gate of ``bftcore.foundations.config`` with the server's budget
``bftcore.foundations.limits.LIMITS``, an upload is also started on a trial (iteration 0) before it replaces anything,
and the parameters themselves refuse values that would break :meth:`BFTSession.to_config` (points, orders, weights, the
initialisation).  Nothing mutable is shared between sessions: each session builds its own ``BFTSession`` and its
own views.
"""
from __future__ import annotations

import copy
import io
import types

import numpy as np
import param

from bftcore import api
from bftcore.foundations.config import (
    DATA_TERM_PARAMETERS,
    GAUSSIAN_LOCAL,
    POTENTIAL_PRESETS,
    ROBUST_B,
    ROBUST_EPS,
    ROBUST_MU,
    ConfigError,
    kind_of,
    parse_document,
    validate_config,
    validate_sweep,
)
from bftcore.foundations.distributed import Cancelled
from bftcore.foundations.grid import Axis, Grid
from bftcore.foundations.limits import LIMITS, MAX_COORDINATE, MAX_MAGNITUDE, MIN_BETA, RunBudgetExceeded
from bftcore.foundations.templates import MODELS as TEMPLATE_MODELS
from bftcore.foundations.templates import describe
from bftcore.models import presets
from bftcore.outputs import figures
from bftcore.outputs.documents import record_document
from bftcore.studies import diagnosis, metastability
from bftcore.studies.learning import parse_sizes

from . import configuration
from .configuration import (
    CONFIG_PARAMS,
    CUSTOM_GRID,
    DATA_TERMS,
    GRID_SIZES,
    INITS,
    KEEP_CURRENT,
    LOCAL_DEFAULTS,
    MAX_POINTS,
    METHODS,
    MODELS,
    ORDERS,
    POTENTIALS,
    TEMPLATE_INIT,
    X_RANGE,
    Y_RANGE,
    fits_model,
    menu_kinds,
)
from .runner import RUN_COMPUTE_S, FramePump, grid_key, trial_start
from .transport import after_user_action, check_value, ruled
from .work import LONG, Background, Task

#: Wall-clock budget of one learning curve on the server (the budget of bftcore.foundations.limits for one run).
LEARNING_SECONDS = float(LIMITS.run_seconds or 120.0)
#: Where the dashboard's learning curves run (:mod:`bftcore.foundations.distributed`): ``"serial"``, a loop in the
#: task's own worker thread.  The CLI and the API default to Dask in process, but inside the server Dask's scheduler,
#: worker and client threads compete with the server's event loop that draws the curve as it fills: the Fig 21 curve
#: (800 fits) took 8.8 s from the button to "Done" in process against 5.6-6.0 s serial (a fresh install,
#: Chromium, 2026-11-23).  Progress, the live curve and cancellation work the same on every engine.
LEARNING_SCHEDULER = "serial"
#: What the learning curve's note says when it is cancelled by a change of the problem, and by the Cancel button.
CANCELLED_BY_CHANGE = "cancelled: the problem changed"
CANCELLED_BY_USER = "cancelled"
#: The states of the learning curve (``BFTSession.learning_state``).
LEARNING_STATES = ["", "waiting", "running", "complete", "cancelled", "failed", "refused"]


#: Bounds of the parameters that are coordinates (domain, data, template parameters): the gate's own range.  Every
#: other number has the gate's bound MAX_MAGNITUDE, so a session never holds a number the gate refuses for its size
#: (a link's gauss_mu=1e300 is refused by name even while no Gaussian template is in use).
COORDINATE = (-MAX_COORDINATE, MAX_COORDINATE)
#: Bounds of a parameter >= 0 (a prior strength, a weight p_j, a mass); > 0 with ``inclusive_bounds=POSITIVE``.
MAGNITUDE, POSITIVE = (0.0, MAX_MAGNITUDE), (False, True)
#: Depth of the undo stack.
UNDO_DEPTH = 100
DISPLAYS = ["P", "ln P", "true density", "empirical density"]
#: Every template kind of the menu (density's, then regression's), the objects of the ``templates`` parameter.
MENU_KINDS = list(dict.fromkeys(k for model in TEMPLATE_MODELS for k in menu_kinds(model)))


def preset_catalogue() -> dict:
    """Preset name -> (configuration document, explanation): every entry of bftcore.models.presets.PRESETS (the
    dashboard loads any valid document)."""
    return dict(presets.PRESETS)


#: Preset name -> :func:`_chosen_preset`'s answer, computed once per process (or by the server's warm-up).
_CHOSEN: dict[str, tuple[dict, dict | None]] = {}


def _chosen_preset(name: str) -> tuple[dict, dict | None]:
    """A preset's validated document with what it asks the evidence for chosen (:func:`bftcore.api
    .choose_hyperparameters`), and what was chosen: once per process, since a preset never changes."""
    got = _CHOSEN.get(name)
    if got is None:
        got = _CHOSEN.setdefault(name, api.choose_preset(name))
    return got


def presets_to_choose() -> list[str]:
    """The presets whose document asks the evidence to choose a hyperparameter (about 2.5 s each, on real data)."""
    return [name for name, (doc, _) in preset_catalogue().items() if doc.get("choose")]


def remember_chosen(name: str, chosen: tuple[dict, dict | None]) -> None:
    """Keep :func:`_chosen_preset`'s answer computed elsewhere (the server's warm-up process): the first answer
    stays (both are the same computation)."""
    _CHOSEN.setdefault(name, chosen)


def preset_document(name: str) -> tuple[dict, dict | None]:
    """:func:`_chosen_preset` of a preset, as a copy the caller may change."""
    return copy.deepcopy(_chosen_preset(name))


def _number_within(v, lo: float, hi: float) -> bool:
    """``v`` is a number (not a bool) in [lo, hi]; False for NaN, infinities and integers beyond the float range."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return lo <= float(v) <= hi
    except OverflowError:
        return False


def _points_rule(val) -> None:
    """Data points: [x, y] pairs of numbers within the gate's coordinates, at most :data:`MAX_POINTS` of them."""
    if len(val) > MAX_POINTS:
        raise ValueError(f"{len(val)} points; the dashboard takes at most {MAX_POINTS}")
    for k, p in enumerate(val):
        if not (isinstance(p, (list, tuple)) and len(p) == 2 and all(_number_within(v, *COORDINATE) for v in p)):
            raise ValueError(f"point {k} must be [x, y] with two finite numbers of at most {MAX_COORDINATE:g} "
                             f"in magnitude, got {str(p)[:40]}")


def _orders_rule(val) -> None:
    """Further prior orders {"l2" | "l4" | "l6": coefficient >= 0}."""
    for k, v in val.items():
        if k not in ORDERS or not _number_within(v, *MAGNITUDE):
            raise ValueError(f"further prior orders take {', '.join(ORDERS)} with numbers from 0 to "
                             f"{MAX_MAGNITUDE:g}, got {k!r}: {str(v)[:20]}")


def _weights_rule(val) -> None:
    """Prior weights p_j of a file's templates: numbers >= 0."""
    if not all(_number_within(v, *MAGNITUDE) for v in val):
        raise ValueError(f"template weights must be numbers from 0 to {MAX_MAGNITUDE:g}, got {str(val)[:40]}")


def _init_rule(val) -> None:
    """The initialisation menu, plus "template N" for any of a file's templates (N up to 16)."""
    if not (val in INITS or (isinstance(val, str) and TEMPLATE_INIT.fullmatch(val))):
        raise ValueError(f"the initialisation must be one of {', '.join(INITS[:4])}, '{KEEP_CURRENT}' or "
                         f"'template N', got {str(val)[:40]!r}")


_Points = ruled(param.List, _points_rule)
_Orders = ruled(param.Dict, _orders_rule)


def _local_rule(val) -> None:
    """A regression's local prior as the document has it, {"local": {...}, "cuts": [...]} or {} (none); the gate
    checks its values when the document is made."""
    if val and (set(val) != {"local", "cuts"} or not isinstance(val["local"], dict)
                or val["local"].get("type") not in LOCAL_DEFAULTS or not isinstance(val["cuts"], list)):
        raise ValueError(f"a local prior is {{'local': {{'type': 'switch' | 'hyperfield', ...}}, 'cuts': [...]}} or "
                         f"empty, got {str(val)[:60]}")


_Local = ruled(param.Dict, _local_rule)


def _robust_rule(val) -> None:
    """A robust prior as the document has it, {"potential": {"name": ...}, "data_term": {"name": ...}} (either may
    be left out) or {} (none); the gate checks its values when the document is made."""
    if val and (not set(val) <= {"potential", "data_term"}
                or not all(isinstance(v, dict) and isinstance(v.get("name"), str) for v in val.values())
                or val.get("potential", {"name": "quadratic"})["name"] not in POTENTIALS[1:]
                or val.get("data_term", {"name": "gaussian"})["name"] not in DATA_TERMS):
        raise ValueError(f"a robust prior is {{'potential': {{'name': 'cup' | ...}}, 'data_term': {{'name': "
                         f"'insensitive' | ...}}}} or empty, got {str(val)[:60]}")


_Robust = ruled(param.Dict, _robust_rule)
_Weights = ruled(param.List, _weights_rule)
_Init = ruled(param.Selector, _init_rule, first=True)


def _evidence_job(cfg: dict, values, field) -> tuple[dict, dict | None]:
    """The evidence path and the posterior summary at the current lambda (on a worker thread)."""
    path = api.evidence_document(cfg, "lambda", values)
    try:
        post = api.posterior_summary(cfg, field)
    except ValueError:
        post = None  # e.g. a density prior mixture: the path has already said why, the band is left out
    return path, post


def _figure_png(cfg: dict, record, exact, size: tuple[int, int], screen: dict | None = None) -> bytes:
    """PNG of the fit figure of ``record`` (a regression's exact posterior is computed when the run has not ended:
    closed form); with ``screen`` ({"traces", "title", "alarms"}), the whole presenter screen around it
    (:func:`bftcore.outputs.figures.presenter_png`)."""
    kind = kind_of(cfg)
    if kind.has_exact and exact is None:
        exact = kind.exact(cfg)
    doc = record_document(cfg, record, exact)
    if screen is None:
        return figures.fit_png(cfg, doc, size)
    return figures.presenter_png(cfg, doc, screen["traces"], screen["title"], screen["alarms"], size)


#: How the message names a hyperparameter chosen by the evidence (as its control does).
_GREEK = {"lambda": "λ", "beta": "β"}


class BFTSession(param.Parameterized):
    """All state of one dashboard session: data, hyperparameters, solver progress and messages."""

    # --- model and prior -------------------------------------------------------------------------------------
    model: param.Selector = param.Selector(default="density, prior on L", objects=list(MODELS),
                                           doc="Model and prior field.")
    lam = param.Number(1.0, bounds=MAGNITUDE, inclusive_bounds=POSITIVE, softbounds=(0.01, 5.0),
                       label="λ (prior strength)")
    lam_x = param.Number(1.0, bounds=MAGNITUDE, softbounds=(0.0, 5.0), label="λ_x")
    lam_y = param.Number(1.0, bounds=MAGNITUDE, softbounds=(0.0, 5.0), label="λ_y")
    # the prior's l0 (prior.l0 of the document), not the relaxation mass solver_mass2 (solver.mass2); no doc=,
    # which Panel would show as a tooltip.  Links may still say mass2= (app.views.share.read_url)
    l0 = param.Number(0.0, bounds=MAGNITUDE, softbounds=(0.0, 2.0), label="mass m² (l0)")
    order: param.Selector = param.Selector(default="l2", objects=ORDERS, label="prior order")
    order_coef = param.Number(0.025, bounds=MAGNITUDE, softbounds=(0.0, 2.0),
                              label="coefficient of the order")
    extra_orders = _Orders({}, doc="Coefficients of further prior orders {'l4': c, ...} that a loaded file "
                                      "sets besides the order of the slider; kept in the prior, shown read-only.")
    local_prior = _Local({}, doc="A local prior (prior.local and prior.cuts of the document: a regression's, "
                                 "bftcore.models.local_regression, or a density's, bftcore.models.local_density), "
                                 "or {} for none.")
    robust_prior = _Robust({}, doc="A robust prior: the prior potential psi (prior.potential of the document) and, "
                                   "for a regression, the data term (data_term), bftcore.models.robust; {} for none.")
    # --- templates and mixture -------------------------------------------------------------------------------
    templates = param.ListSelector(default=[], objects=MENU_KINDS,
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
    method: param.Selector = param.Selector(default="newton", objects=METHODS, label="solver")
    solver_mass2 = param.Number(0.01, bounds=MAGNITUDE, softbounds=(1e-3, 2.0), label="relaxation m²")
    init = _Init(default="kernel", objects=INITS, check_on_set=False, label="initialisation")
    init_mass2 = param.Number(0.1, bounds=MAGNITUDE, inclusive_bounds=POSITIVE, softbounds=(1e-3, 10.0),
                              label="kernel init m_C²")
    min_iter = param.Integer(4, bounds=(0, 100_000), label="min iterations")
    max_iter = param.Integer(50, bounds=(0, 100_000), softbounds=(1, 1000), label="max iterations")
    tol = param.Number(1e-8, bounds=MAGNITUDE, label="tolerance (max field change)")
    grid_size: param.Selector = param.Selector(default="10×15 (paper)", objects=list(GRID_SIZES) + [CUSTOM_GRID],
                               label="grid nx×ny")
    x_min = param.Number(X_RANGE[0], bounds=COORDINATE)
    x_max = param.Number(X_RANGE[1], bounds=COORDINATE)
    nx = param.Integer(10, bounds=(1, 1024))
    y_min = param.Number(Y_RANGE[0], bounds=COORDINATE)
    y_max = param.Number(Y_RANGE[1], bounds=COORDINATE)
    ny = param.Integer(15, bounds=(1, 1024))
    boundary_x: param.Selector = param.Selector(default="periodic", objects=["periodic", "neumann", "free"],
                                                label="x boundary")
    boundary_y: param.Selector = param.Selector(default="periodic", objects=["periodic", "neumann", "free"],
                                                label="y boundary")
    truth: param.Selector = param.Selector(default="paper", objects=["paper", "none"], label="true density")
    regression_truth = param.ClassSelector(default=None, class_=(dict, list), allow_None=True,
                                           doc="Regression 'truth' of a loaded file (a template object or values "
                                               "on the x nodes), kept as it is.")
    data = _Points(default=[[3.0, 3.0], [7.0, 12.0]], item_type=list, doc="Data points [x, y].")
    # --- display and animation -------------------------------------------------------------------------------
    display: param.Selector = param.Selector(default="P", objects=DISPLAYS, label="heatmap shows")
    click_mode: param.Selector = param.Selector(default="add", objects=["add", "remove"], label="a click on the canvas")
    frame_ms = param.Integer(60, bounds=(0, 1000), label="animation: ms per iteration")
    live = param.Boolean(True, label="re-solve on every change")
    layout: param.Selector = param.Selector(default="auto", objects=configuration.LAYOUTS, label="layout",
                                            doc="The screen layout (app.configuration.LAYOUTS); in the link.")
    theme: param.Selector = param.Selector(default="light", objects=configuration.THEMES, label="theme",
                                           doc="Light, or dark high contrast; in the link.")
    font_size = param.Integer(configuration.DEFAULT_FONT, bounds=configuration.FONT_SIZES, label="font size (px)",
                              doc="Size of the plots' and the page's text; in the link.")
    labels = param.Dict({}, doc="The axes' names in the user's words and units (the document's labels: a CSV "
                        "header's), {} for plain x and y.")
    preset = param.String("", regex=r"^[\w .-]{0,64}$", doc="Name of the last preset loaded ('' when edited by hand).")
    # --- outputs (read by the views) -------------------------------------------------------------------------
    record = param.Parameter(None, doc="Latest solver record on screen (a bftcore.foundations.records.Record, "
                                       "with its arrays).")
    history = param.List([], doc="One bftcore.foundations.records.Record per iteration of the current run shown so "
                                 "far, without its arrays (L, P, h, field are None).")
    run_id = param.Integer(0, doc="Incremented when the first frame of a new run is shown (the traces restart).")
    running = param.Boolean(False, doc="True while the solver animation plays.")
    converged = param.Boolean(False)
    result = param.Dict(None, allow_None=True, doc="Exact regression quantities of the finished run.")
    sweep = param.Dict(None, allow_None=True, doc="Last beta sweep document (CONVENTIONS §4).")
    sweeping = param.Boolean(False)
    sweep_progress = param.String("", doc="Progress of the running beta sweep in words ('' when none runs).")
    evidence = param.Dict(None, allow_None=True, doc="The last evidence path over lambda of the current problem "
                          "(bftcore.api.evidence_document), or {'error': reason}.")
    posterior = param.Dict(None, allow_None=True, doc="Posterior uncertainty at the current lambda "
                           "(bftcore.api.posterior_summary): the band of h(x), or draws of h in regression.")
    evidence_busy = param.Boolean(False, doc="An evidence path is being computed.")
    overfitting = param.Dict(None, allow_None=True, doc="The overfitting diagnosis of the converged solution on "
                             "screen: {'scan': bftcore.studies.diagnosis.lambda_scan's document, 'verdict': "
                             "bftcore.studies.diagnosis.diagnose's, or None}; None while none is computed for "
                             "the current problem (issue 28).")
    metastable = param.Dict(None, allow_None=True, doc="The metastability check of the solution on screen (a "
                            "mixture): {'energy': its energy, 'beta': its beta, 'restarts': [summaries of "
                            "bftcore.studies.metastability.restarts, without fields], 'verdict': "
                            "bftcore.studies.metastability.verdict's, or None}; None while none is computed for "
                            "the current problem (issue 28).")
    branches = param.Dict(None, allow_None=True, doc="The branch diagram of the current mixture "
                          "(bftcore.studies.metastability.branches: a_j against beta through the beta it was "
                          "computed at, from each template and cold); partial while it is computed, None for a "
                          "problem without a mixture.")
    learning = param.Dict(None, allow_None=True, doc="The learning curve on screen "
                          "(bftcore.api.learning_curve_document; partial while it runs), or None.")
    learning_request = param.Dict(None, allow_None=True, doc="What the learning curve on screen or running "
                                  "computes: {'lambda': the problem's lambda, 'sizes': [n, ...], 'resamples': R, "
                                  "'evidence': bool}.")
    learning_state: param.Selector = param.Selector(
        default="", objects=LEARNING_STATES, doc="'' (none yet), 'waiting' (for a free worker of the server), "
        "'running', 'complete', 'cancelled', 'failed' (the work ended with learning_error) or 'refused' (not "
        "started: learning_error says why).")
    learning_busy = param.Boolean(False, doc="A learning-curve task exists (until its worker thread has ended, "
                                             "cancelled or not).")
    learning_progress = param.Tuple((0, 0), length=2, doc="Data sets fitted, and in all, of the curve on screen.")
    learning_error = param.String("", doc="Why the last learning curve failed or was refused (outside text).")
    learning_cancel_reason = param.String("", doc="Why the last learning curve was cancelled (CANCELLED_BY_USER or "
                                                  "CANCELLED_BY_CHANGE).")
    learning_stale = param.Boolean(False, doc="The problem changed since the finished curve on screen was computed.")
    edited = param.Boolean(False, doc="The problem was changed by the user since the page opened or a preset was "
                                      "loaded (the presets view says 'Edited by hand' only then).")
    origin = param.Dict({}, doc="Where the problem on screen comes from, for the words under the preset menu "
                        "(app.views.presets): {'preset': name} or {'file': the uploaded file's name, outside text} or "
                        "{} (the starting problem); with 'edited': True once changed by hand since, and "
                        "'evidence_lambda': lambda while 'Choose λ by evidence' set it last.")
    message = param.String("", doc="Last message to the user (errors, refused input); cleared by the next change "
                                   "of the problem.")
    status = param.String("")
    link_too_long = param.Integer(0, bounds=(0, None), doc="Length in characters of the link the state would need, "
                                  "while that is over what a link may hold (app.views.share.share_query), else 0: "
                                  "the share panel then offers the configuration file instead.")

    def __init__(self, doc=None, **params):
        super().__init__(**params)
        self.pump = FramePump(self, doc)  # plays the runs: doc is the Bokeh document when served, None: synchronous
        self.work = Background(self.pump)  # everything else computed in the background (app.work)
        self._learning_task: Task | None = None
        self._undo = []
        self._quiet = False          # suppress auto re-solve while a batch of parameters is applied
        self._keep_message = False   # a message set within the current change survives it (_on_model_change)
        self.param.watch(self._on_grid_size, ["grid_size"])
        self.param.watch(self._on_model_change, ["model"])
        self.param.watch(self._on_problem_change, list(CONFIG_PARAMS))
        self.param.watch(self._learning_problem_changed, list(CONFIG_PARAMS))
        # the overfitting diagnosis belongs to the converged solution of the problem on screen: dropped at any change
        # (a preset's batch included), computed again once the new run has converged
        self.param.watch(self._drop_overfitting, list(CONFIG_PARAMS))
        # so does the metastability check; the branch diagram survives a change of beta only (the dot moves on it)
        self.param.watch(self._drop_metastable, list(CONFIG_PARAMS))
        self.param.watch(self._drop_branches, [n for n in CONFIG_PARAMS if n != "beta"])
        self.param.watch(self._converged_check, ["converged"])
        self._restart_fields: dict[str, np.ndarray] = {}

    # ===================================================================== configuration document
    @property
    def grid(self) -> Grid:
        return Grid(Axis(float(self.x_min), float(self.x_max), int(self.nx), self.boundary_x),
                    Axis(float(self.y_min), float(self.y_max), int(self.ny), self.boundary_y))

    @property
    def kind(self):
        """The problem kind of the current parameters (:class:`bftcore.foundations.config.ProblemKind`): the views
        draw what its ``drawn_as`` says, the data follow its ``y_on_grid``."""
        return configuration.kind_of_values(self)

    def _on_grid_size(self, event):
        """A menu choice sets the paper domain at that resolution (one restart for all six numbers)."""
        if event.new in GRID_SIZES:
            nx, ny = GRID_SIZES[event.new]
            self.param.update(x_min=X_RANGE[0], x_max=X_RANGE[1], nx=nx, y_min=Y_RANGE[0], y_max=Y_RANGE[1],
                              ny=ny)

    def template_kinds(self) -> list[str]:
        """Active menu template kinds of the current model, in the fixed order of the configuration."""
        return configuration.template_kinds(self)

    def template_specs(self) -> tuple[list[dict], list[float]]:
        """The templates and prior weights p_j of the configuration: the file's, or the menu's (normalised)."""
        return configuration.template_specs(self)

    def template_labels(self) -> list[str]:
        model = MODELS[self.model][0]
        return [describe(t, model) for t in self.template_specs()[0]]

    def to_config(self) -> dict:
        """The JSON configuration document (CONVENTIONS §4) of the current state."""
        return configuration.to_config(self)

    def export_config(self) -> dict:
        """The document to download (:func:`app.configuration.export_config`): with the initialisation "keep
        current", the start field of the warm-started run on screen is written into it."""
        return configuration.export_config(self, self.pump.warm_start())

    def params_from_config(self, doc: dict) -> dict:
        """Parameter values for a validated document, each checked by its parameter: a value the parameters
        refuse is refused (ValueError naming the control), never clipped."""
        out = configuration.params_from_config(doc)
        for name, value in out.items():
            p = self.param[name]
            try:
                check_value(p, value)
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
            chosen = None
            if doc.get("choose"):  # a document (a preset on real data, an upload) that asks for its hyperparameters
                doc, chosen = (preset_document(preset) if preset in presets.PRESETS  # by the evidence, before
                               else api.choose_hyperparameters(doc))               # the run
            values = self.params_from_config(doc)
            trial_start(doc)
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
            self.param.update(**values, preset=preset, edited=False, origin={"preset": preset} if preset else {})
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
        if chosen is not None:
            note += " Chosen by the evidence: " + ", ".join(f"{_GREEK.get(k, k)} = {v:.4g}"
                                                            for k, v in chosen["chosen"].items()) + "."
        self.message = (f"Loaded preset '{preset}'." if preset else "Loaded the configuration.") + note
        self.reset(play=self.live)
        return True

    def load_preset(self, name: str) -> bool:
        catalogue = preset_catalogue()
        if name not in catalogue:
            self.message = f"Unknown preset {name!r}."
            return False
        return self.load_config(catalogue[name][0], preset=name)

    # ===================================================================== local prior (app.views.controls)
    def local_type(self) -> str:
        """"off", "switch" or "hyperfield": the local prior of the problem ("off" also for cuts alone, a switch of
        one alternative)."""
        local = (self.local_prior or {}).get("local")
        if not local or (local["type"] == "switch" and len(local["stiffness"]) == 1):
            return "off"
        return local["type"]

    def set_local_type(self, local_type: str) -> None:
        """Switch the local prior on with its defaults (:data:`app.configuration.LOCAL_DEFAULTS`), to another type,
        or off; the cuts stay.  What the problem cannot take (a density on a periodic grid, several templates...) is
        refused with the gate's words and changes nothing."""
        if local_type == self.local_type():
            return
        cuts = list((self.local_prior or {}).get("cuts", []))
        local: dict
        if local_type == "off":
            local = {"local": copy.deepcopy(dict(GAUSSIAN_LOCAL)), "cuts": cuts} if cuts else {}
        else:
            local = {"local": copy.deepcopy(LOCAL_DEFAULTS[local_type]), "cuts": cuts}
        self._set_local(local)

    def _refused(self, quiet: bool = False, **change) -> bool:
        """True, with the gate's reason in :attr:`message` (unless ``quiet``), when the document with ``change``
        (parameter values) is refused: a local or a robust prior the problem cannot take (a density's periodic axis,
        field P, several templates...) is refused before it is set, and the state stays as it was."""
        values = types.SimpleNamespace(**{**{n: getattr(self, n) for n in CONFIG_PARAMS}, **change})
        try:
            validate_config(configuration.to_config(values))
        except (ConfigError, ValueError) as e:
            if quiet:
                return True
            text = " ".join(str(e).split()).rstrip(".")
            self._keep_message = True
            self.message = f"Refused: {text[:400]}. Nothing was changed."
            return True
        return False

    def _set_local(self, local: dict) -> None:
        """The local prior; a robust prior goes off with a message (each has its own solver: EM, IRLS)."""
        if local and self._refused(local_prior=local, robust_prior={}):
            return
        if local and self.robust_prior:
            self._keep_message = True
            self.message = "The robust prior is off: a local prior and a robust prior each have their own solver."
            self.param.update(robust_prior={}, local_prior=local)
        else:
            self.local_prior = local

    def set_local_value(self, key: str, value: float) -> None:
        """One hyperparameter of the local prior: ``"pi_soft"`` (the last alternative's pi_k of a switch of two, the
        first gets the rest) or a hyperfield's ``"theta0"``, ``"gamma_theta"``, ``"mu_theta"``."""
        local = copy.deepcopy((self.local_prior or {}).get("local"))
        if not local:
            return
        if key == "pi_soft" and local["type"] == "switch" and len(local["pi"]) == 2:
            local["pi"] = [1.0 - float(value), float(value)]
        elif key in ("theta0", "gamma_theta", "mu_theta") and local["type"] == "hyperfield":
            local[key] = float(value)
        else:
            return
        if local != self.local_prior["local"]:
            self.local_prior = {**self.local_prior, "local": local}

    def set_cuts(self, cuts) -> None:
        """Cut the chain at these x positions (eqs. (519)-(522)); [] removes every cut.  A plain regression gets a
        switch of one alternative (its own Gaussian prior) to carry them."""
        cuts = sorted(float(c) for c in cuts)
        local = (self.local_prior or {}).get("local") or GAUSSIAN_LOCAL
        if not cuts and self.local_type() == "off":
            self._set_local({})
        else:
            self._set_local({"local": copy.deepcopy(local), "cuts": cuts})

    # ===================================================================== robust prior (app.views.robust)
    def potential_name(self) -> str:
        """"off" (no robust prior) or the name of the prior potential psi ("quadratic" when a robust data term
        alone is on)."""
        return (self.robust_prior or {}).get("potential", {}).get("name", "quadratic") if self.robust_prior else "off"

    def data_term_name(self) -> str:
        """The data term of a robust regression ("gaussian" when none is set)."""
        return (self.robust_prior or {}).get("data_term", {}).get("name", "gaussian")

    def set_potential(self, name: str) -> None:
        """The prior potential psi of Fig. 12 (Sect. 6.5): "off", "quadratic", "cup", "cusp" or "inverted_cup", with
        the document's defaults (a = +-1 relative to the Gaussian prior's curvature, gamma of Fig. 12) and the b
        already set; a regression's data term stays.  A local prior is switched off (each has its own solver)."""
        if name not in POTENTIALS:
            self.message = f"Unknown prior potential {str(name)[:40]!r}; choose one of {', '.join(POTENTIALS)}."
            return
        rb = copy.deepcopy(self.robust_prior or {})
        if name == "off":
            rb.pop("potential", None)
            if rb.get("data_term", {}).get("name", "gaussian") == "gaussian" or self.kind.y_on_grid:
                rb = {}
            else:  # a robust data term alone: the quadratic potential is the Gaussian prior
                rb["potential"] = {"name": "quadratic", "s0": 0.0}
        else:
            old = rb.get("potential", {})
            s0 = float(old.get("s0", 0.0))
            if name == "quadratic":
                rb["potential"] = {"name": "quadratic", "s0": s0}
            else:
                preset = POTENTIAL_PRESETS[name]
                rb["potential"] = {"name": name, "a": -1.0 if preset["a"] < 0 else 1.0,
                                   "b": float(old.get("b", ROBUST_B)), "gamma": float(preset["gamma"]), "s0": s0}
            if not self.kind.y_on_grid:
                rb.setdefault("data_term", {"name": "gaussian"})
        self._set_robust(rb)

    def set_data_term(self, name: str) -> None:
        """The data term of a robust regression (Fig. 5, Sect. 3.7.4): "gaussian", "mixture2", "mixture11" or
        "insensitive", with the document's defaults (mu, eps one noise width).  A density's data term is its counts:
        refused with a message."""
        if self.kind.y_on_grid:
            self.message = "A robust data term is for the regression model; a density's data term is its counts."
            return
        if name not in DATA_TERMS:
            self.message = f"Unknown data term {str(name)[:40]!r}; choose one of {', '.join(DATA_TERMS)}."
            return
        rb = copy.deepcopy(self.robust_prior or {})
        term: dict = {"name": name}
        if "mu" in DATA_TERM_PARAMETERS[name]:
            term["mu"] = float(rb.get("data_term", {}).get("mu", ROBUST_MU))
        if "eps" in DATA_TERM_PARAMETERS[name]:
            term["eps"] = float(rb.get("data_term", {}).get("eps", ROBUST_EPS))
        rb["data_term"] = term
        rb.setdefault("potential", {"name": "quadratic", "s0": 0.0})
        if name == "gaussian" and rb["potential"]["name"] == "quadratic":
            rb = {}  # the Gaussian prior and data term: plain regression, by its own solver
        self._set_robust(rb)

    def set_robust_value(self, key: str, value: float) -> None:
        """One number of the robust prior: the potential's ``"b"`` (the edge threshold, in noise widths per node
        difference) or the data term's ``"mu"`` / ``"eps"`` (in noise widths)."""
        rb = copy.deepcopy(self.robust_prior or {})
        if key == "b" and rb.get("potential", {}).get("name", "quadratic") != "quadratic":
            rb["potential"]["b"] = float(value)
        elif key in ("mu", "eps") and key in rb.get("data_term", {}):
            rb["data_term"][key] = float(value)
        else:
            return
        self._set_robust(rb)

    def _set_robust(self, rb: dict) -> None:
        if rb == (self.robust_prior or {}):
            return
        if rb and self._refused(robust_prior=rb, local_prior={}):
            return
        if rb and self.local_prior:
            self._keep_message = True
            self.message = ("The local prior is off: a robust prior and a local prior each have their own solver "
                            "(IRLS and EM).")
            self.param.update(local_prior={}, robust_prior=rb)
            return
        self.robust_prior = rb

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
        if not self.kind.y_on_grid:  # y is a real value; only x lives on the nodes
            sx = float(grid.x.nodes[grid.x.snap([x])[0]])  # ValueError names an off-grid point
            return [round(sx, 6), round(float(y), 3)]
        ix, iy = grid.snap([[x, into_edge_cell(float(y), grid.y)]])
        return [round(float(grid.x.nodes[ix[0]]), 6), round(float(grid.y.nodes[iy[0]]), 6)]

    def add_point(self, x: float, y: float) -> bool:
        """Add a data point at the node nearest to (x, y); off-grid points are ignored with a message."""
        if len(self.data) >= MAX_POINTS:
            self.message = f"At most {MAX_POINTS} points per session; remove some before adding more."
            return False
        pt = self._placed(x, y, "click")
        if pt is None:
            return False
        self._push_undo()
        if self.message:
            self.message = ""
        self.data = self.data + [pt]
        return True

    def _placed(self, x: float, y: float, what: str) -> list[float] | None:
        """The node a click or a drag (``what``) at (x, y) places a point on, or None with the reason in
        :attr:`message`: a place off the grid, or beyond the coordinates' bound (a click far out on a zoomed-out
        regression plot)."""
        if not (_number_within(x, *COORDINATE) and _number_within(y, *COORDINATE)):
            self.message = (f"Ignored the {what}: a point must stay within coordinates of magnitude "
                            f"{MAX_COORDINATE:g}.")
            return None
        try:
            return self._snap_point(x, y)
        except ValueError as e:
            self.message = f"Ignored the {what}: {e}"
            return None

    def move_point(self, index: int, x: float, y: float) -> bool:
        """Move data point ``index`` to the node nearest to (x, y) (a drag on the canvas); the old place is kept for
        undo.  An index that is not a point, or a place off the grid or beyond the coordinates' bound, is refused
        with a message and the data stay as they were."""
        if not (isinstance(index, (int, np.integer)) and 0 <= index < len(self.data)):
            self.message = f"Ignored the drag: there is no point {str(index)[:20]}."
            return False
        pt = self._placed(x, y, "drag")
        if pt is None or pt == self.data[index]:
            return False
        self._push_undo()
        if self.message:
            self.message = ""
        self.data = [*self.data[:index], pt, *self.data[index + 1:]]
        return True

    def remove_point_near(self, x: float, y: float) -> bool:
        """Remove the data point nearest to (x, y) if it lies within about one grid cell of the click."""
        if not self.data:
            self.message = "There are no points to remove."
            return False
        pts = np.asarray(self.data, float)
        grid = self.grid
        sx = max(grid.hx, (grid.x.max - grid.x.min) / 20)
        on_grid = self.kind.y_on_grid
        span_y = grid.y.max - grid.y.min if on_grid else (float(np.ptp(pts[:, 1])) or 1.0)
        sy = max(grid.hy if on_grid else 0.0, span_y / 20)
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
    def _on_model_change(self, event):
        """Switching between density and regression swaps the template menu and the data's y values.  A file's
        templates and regression truth belong to the model they were written for and are dropped."""
        if self._quiet:
            return
        kind = self.kind
        allowed = menu_kinds(kind.model)
        kept = [k for k in self.templates if k in allowed]
        update = {}
        note = ""
        if self.file_templates and not all(fits_model(t, kind) for t in self.file_templates):
            update.update(file_templates=[], file_weights=[])
            note = "The templates of the loaded file belong to the other model; back to the menu."
        if not kept and not (self.file_templates and "file_templates" not in update):
            kept = list(kind.default_templates)  # a regression mixture needs at least one template
        if kept != list(self.templates):
            update["templates"] = kept
        # a local or a robust prior goes when the other model's document refuses it and takes the problem without it
        # (a density on a periodic grid), and says so; a document refused for another reason keeps it (the run's
        # message names that reason)
        for name, what in (("local_prior", "local prior"), ("robust_prior", "robust prior")):
            if getattr(self, name) and self._refused(**update, quiet=True) and \
                    not self._refused(**{**update, name: {}}, quiet=True):
                update[name] = {}
                note = (note + " " if note else "") + f"The {what} does not fit the {kind.model}: it is off."
        if update:
            self.param.update(**update)
        if note:  # said after the update, which takes the previous message down; kept through this change
            self.message, self._keep_message = note, True

    #: Changing one of these restarts the run from the configured initialisation (not warm from the field on
    #: screen), at once when ``live``.  Decision (issue 13): a new solver or start field must show what it does;
    #: a warm start from a converged field would show nothing until Reset and Run.
    COLD_RESTART = ("method", "init", "init_mass2", "solver_mass2")

    def _on_problem_change(self, *events):
        if self._quiet:
            return
        if self._keep_message:
            self._keep_message = False
        elif self.message:  # a message says what the previous action did; the next action takes it down
            self.message = ""
        if any(e.name != "data" for e in events):
            self.preset = ""
        if not self.edited:
            self.edited = True
        if not self.origin.get("edited") or "evidence_lambda" in self.origin:
            self.origin = {**{k: v for k, v in self.origin.items() if k != "evidence_lambda"}, "edited": True}
        if self.live:
            self.start_run(warm=not any(e.name in self.COLD_RESTART for e in events), play=True)

    def _warm_field(self, cfg):
        rec = self.record
        if rec is None or self.pump.shown_key != grid_key(cfg):
            return None
        return np.array(rec.field, copy=True)  # the solver's own field: L, P or h

    def close(self):
        """The browser session ended: stop the run, drop every array this session holds (fields, history, undo
        stack, sweep) and give the freed memory back to the system.  The run's generator is closed on its worker
        thread, after an iteration that thread may still be computing, and the memory released again there.

        Called when the page's connection is lost (a closed tab: app.main) and again when Bokeh discards the
        session 15-30 s later; the second call does nothing."""
        if self.pump.closed:
            return
        self.pump.close()
        self.work.close()
        self._undo = []
        with param.parameterized.discard_events(self):
            self.record, self.history, self.result, self.sweep = None, [], None, None
        self.pump.report_released()

    def cancel(self):
        """Stop the current run (its generator is closed on its worker thread when served)."""
        self.pump.cancel()

    def start_run(self, warm: bool = True, play: bool = True) -> bool:
        """Start a new run of the solver from the current state (warm: from the field shown)."""
        try:
            cfg = api.validate_config(self.to_config())
        except ValueError as e:
            self.cancel()
            self.message = f"Cannot solve: {e}"
            return False
        init = self._warm_field(cfg) if (warm or self.init == KEEP_CURRENT) else None
        if not self.pump.start(cfg, init):
            return False
        if self.message.startswith(("The solver failed", "Cannot solve")):
            self.message = ""
        if self.converged:
            self.converged = False
        if play:
            self.play()
        else:
            self.step()
        return True

    def first_frame(self) -> bool:
        """Start the run of the page being built and show its first frame now, without playing it
        (:meth:`app.runner.FramePump.first_frame`): the first heatmap travels in the page's first document.
        :meth:`play` (on the page's load) plays it on.  False when nothing was shown (the run, if any, then starts
        from iteration 0 on play)."""
        try:
            cfg = api.validate_config(self.to_config())
        except ValueError:
            return False  # play says why (start_run)
        return self.pump.start(cfg) and self.pump.first_frame()

    def reset(self, play: bool = False):
        """Restart from the configured initialisation (no warm start) and show iteration 0."""
        self.start_run(warm=False, play=play)

    def play(self):
        """Run (or resume) the current run, animated."""
        if self.pump.run is None:
            self.start_run(warm=self.init == KEEP_CURRENT, play=True)
            return
        self.pump.play()

    def pause(self):
        """Stop after the current iteration; the run is kept and Run resumes it."""
        self.pump.pause()

    def step(self):
        """Advance the solver by one iteration (creating a run if there is none)."""
        if self.pump.run is None:
            self.start_run(warm=self.init == KEEP_CURRENT, play=False)
            return
        self.pump.step()

    def solve(self, max_records: int = 10_000):
        """Run the current problem to the end synchronously (tests and scripts)."""
        if self.pump.run is None:
            self.start_run(warm=False, play=False)
        self.pump.solve(max_records)

    # ===================================================================== figure export
    def screen(self) -> dict:
        """What the presenter screen shows besides the fit, for its PNG: the run's traces, the lambda curve, the
        title and the alarms' words."""
        hist = self.history
        traces = {"iteration": [int(r.iteration) for r in hist], "energy": [r.energy for r in hist],
                  "train_error": [r.train_error for r in hist], "test_error": [r.test_error for r in hist],
                  "scan": (self.overfitting or {}).get("scan")}
        alarms = [v["message"] for v in ((self.overfitting or {}).get("verdict"),
                                         (self.metastable or {}).get("verdict")) if v]
        return {"traces": traces, "title": self.screen_title(), "alarms": alarms}

    def screen_title(self) -> str:
        """The title of the screen: the problem's name (its preset, else "your problem") and its hyperparameters."""
        name = presets.TITLES.get(self.preset, self.preset) if self.preset else "your problem"
        beta = f", β = {self.beta:g}" if len(self.template_kinds()) + len(self.file_templates) >= 2 else ""
        return f"bftcore · {name} · λ = {self.lam:g}{beta} · {len(self.data)} points"

    async def figure_png(self, size: tuple[int, int] = figures.PROJECTOR_SIZE) -> io.BytesIO:
        """The presenter screen as PNG (the *PNG (1920×1080)* button): the fit's figure, the same declaration as
        the CLI's ``--png`` (:func:`bftcore.outputs.figures.fit_figure`), with the title, the alarms, the traces
        and the lambda curve around it (:func:`bftcore.outputs.figures.presenter_png`), rendered on the heavy worker
        thread when served.  A failure is said on the message line and raised (the download then does not
        start)."""
        rec = self.record
        try:
            if rec is None:
                raise ValueError("nothing to export yet: the fit has not drawn its first iteration")
            cfg = api.validate_config(self.to_config())
            exact = (self.result or {}).get("exact")
            return io.BytesIO(await self.work.compute(_figure_png, cfg, rec, exact, size, self.screen(),
                                                      budget_s=RUN_COMPUTE_S))
        except Exception as e:
            self.message = f"The PNG export failed: {e}"
            raise


    # ===================================================================== beta sweep
    def sweep_config(self) -> dict:
        return api.validate_config(self.to_config())

    def compute_evidence(self):
        """The log evidence along lambda and the posterior uncertainty at the current lambda, in a worker thread
        when served (one job at a time; the newest request waits); the result lands in ``evidence`` and
        ``posterior``."""
        try:
            cfg = api.validate_config(self.to_config())
        except ValueError as e:
            self.evidence, self.posterior = {"error": f"Cannot compute the evidence: {e}"}, None
            return
        rec = self.record
        field = None
        if cfg.kind.y_on_grid and rec is not None and self.pump.shown_key == grid_key(cfg):
            field = np.array(rec.L, copy=True)  # the Laplace evidence starts from the field L on screen
        self.evidence_busy = True
        # the path's own range (bftcore.models.evidence.default_values: from a prior weaker than the data on every mode
        # to one stronger on every mode): 30 warm-started fits, about 0.3 s on the paper grid.  A request made
        # while a path is computed waits for it (the newest only).
        self.work.start("evidence", lambda _task: _evidence_job(cfg, None, field),
                        lambda _task, result: self._evidence_done(result), budget_s=RUN_COMPUTE_S)
        if not self.pump.served:  # a notebook or a test: the path is there when the call returns
            self.work.wait("evidence")

    def _evidence_done(self, result):
        self.evidence_busy = False
        if isinstance(result, Exception):
            self.evidence, self.posterior = {"error": f"Cannot compute the evidence: {result}"}, None
            return
        self.evidence, self.posterior = result

    def _drop(self, name: str) -> None:
        """Set the result ``name`` (a diagnosis, the branches) to None just after the message that answers a user's
        change (its first frame): what it hides lays the page out again, and in that message it kept the browser
        from the new heatmap for 100-150 ms (issue 28); at once outside a user's action."""
        def now():
            if getattr(self, name) is not None:
                setattr(self, name, None)
        if getattr(self, name) is not None and not after_user_action(self.pump.doc, now):
            now()

    def _drop_overfitting(self, *_):
        self._drop("overfitting")

    def _converged_check(self, event):
        # served sessions only: a notebook or a test asks with check_overfitting() and check_metastability() (a
        # synchronous scan after every solve would cost the headless tests 0.1-0.2 s a solve)
        if event.new and self.pump.served:
            self.check_overfitting()
            self.check_metastability()

    def check_overfitting(self):
        """The overfitting diagnosis of the current problem (:mod:`bftcore.studies.diagnosis`: held-out error at
        this lambda against the best over a scan), on the heavy lane when served, the newest request only; the
        result lands in ``overfitting``.  Nothing for a problem it does not apply to (a prior on P, fewer than five
        data)."""
        try:
            cfg = api.validate_config(self.to_config())
        except ValueError:
            return
        if not diagnosis.applies(cfg):
            self._drop_overfitting()
            return
        def partial(doc):  # the curve fills in as the scan computes it (no verdict until it has ended)
            if self._still(cfg):
                self.overfitting = {"scan": doc, "verdict": None, "partial": True}

        def work(task):
            return diagnosis.lambda_scan(cfg, cancel=task.cancelled.is_set,
                                         progress=lambda doc: self.work.report(task, partial, doc))
        self.work.start("overfitting", work, lambda _task, result: self._overfitting_done(cfg, result),
                        budget_s=RUN_COMPUTE_S)
        if not self.pump.served:
            self.work.wait("overfitting")

    def _overfitting_done(self, cfg, result):
        if isinstance(result, BaseException) or not isinstance(result, dict):
            return  # cancelled, over its budget, or failed: no diagnosis (the alarm stays down)
        if self._still(cfg):  # else the problem changed while the scan ran: its diagnosis is about another one
            self.overfitting = {"scan": result, "verdict": diagnosis.diagnose(result)}

    def _still(self, cfg: dict) -> bool:
        """Whether ``cfg`` is still the problem on screen (a background result about it may be shown)."""
        try:
            return api.validate_config(self.to_config()) == cfg
        except ValueError:
            return False

    # ===================================================================== metastability (issue 28)
    def _drop_metastable(self, *_):
        self._restart_fields = {}
        self._drop("metastable")

    def _drop_branches(self, *_):
        self._drop("branches")
        self.work.cancel("branches")

    def check_metastability(self):
        """Restart the current mixture from each template and from cold at its beta
        (:func:`bftcore.studies.metastability.restarts`) and compare with the solution on screen: the result lands
        in ``metastable``, with the alarm's verdict when a lower solution exists; and, when the problem (beta
        aside) has no branch diagram yet, or beta left the diagram's range, the branches are computed too
        (:meth:`compute_branches`).  On the heavy lane when served, the newest request only."""
        try:
            cfg = api.validate_config(self.to_config())
        except ValueError:
            return
        if not metastability.applies(cfg):
            self._drop_metastable()
            if self.branches is not None:
                self.branches = None
            return
        rec = self.record
        if rec is None or self.pump.shown_key != grid_key(cfg):
            return
        energy, mixing = float(rec.energy), None if rec.mixing is None else [float(a) for a in rec.mixing]
        ended = bool(getattr(rec, "converged", True))
        self.work.start("metastability", lambda task: metastability.restarts(cfg, cancel=task.cancelled.is_set),
                        lambda _task, result: self._metastable_done(cfg, energy, mixing, ended, result),
                        budget_s=RUN_COMPUTE_S)
        if not self.pump.served:
            self.work.wait("metastability")
        if self._branches_stale(cfg):
            self.compute_branches()

    def _metastable_done(self, cfg, energy, mixing, ended, result):
        if isinstance(result, BaseException) or not isinstance(result, list) or not self._still(cfg):
            return
        self._restart_fields = {r["start"]: r.pop("field") for r in result}
        self.metastable = {"energy": energy, "beta": float(cfg.get("beta", 1.0)), "restarts": result,
                           "verdict": metastability.verdict(energy, mixing, result, ended)}

    @staticmethod
    def _without_beta(cfg: dict) -> dict:
        return {k: v for k, v in cfg.items() if k != "beta"}

    def _branches_stale(self, cfg: dict) -> bool:
        br = self.branches
        if br is None or br.get("problem") != self._without_beta(cfg):
            return True
        betas = br.get("betas") or [0.0]
        return not (min(betas) <= float(cfg.get("beta", 1.0)) <= max(betas))

    def compute_branches(self):
        """The branch diagram of the current mixture (:func:`bftcore.studies.metastability.branches`), filled in
        ``branches`` point by point as it is computed (on the heavy lane when served)."""
        try:
            cfg = api.validate_config(self.to_config())
        except ValueError:
            return
        if not metastability.applies(cfg):
            return
        betas = metastability.branch_betas(float(cfg.get("beta", 1.0)))
        labels = [label for _, label in metastability.starts(cfg)]
        partial = {"problem": self._without_beta(cfg), "betas": betas.tolist(), "beta": float(cfg.get("beta", 1.0)),
                   "complete": False,
                   "branches": [{"label": lab, "beta": [], "mixing": [], "energy": []} for lab in labels]}
        self.branches = copy.deepcopy(partial)

        def show(doc):
            if self.branches is not None and self.branches.get("problem") == doc["problem"]:
                self.branches = doc

        def work(task):
            def on_point(i, point):
                br = partial["branches"][i]
                for key in ("beta", "mixing", "energy"):
                    br[key].append(point[key])
                self.work.report(task, show, copy.deepcopy(partial))
            metastability.branches(cfg, betas, cancel=task.cancelled.is_set, on_point=on_point)
            return partial

        def done(_task, result):
            if isinstance(result, dict):
                for br in result["branches"]:  # in ascending beta, as the plot's lines are drawn
                    order = np.argsort(br["beta"])
                    for key in ("beta", "mixing", "energy"):
                        br[key] = [br[key][k] for k in order]
                result["complete"] = True
                show(result)

        self.work.start("branches", work, done, budget_s=RUN_COMPUTE_S)
        if not self.pump.served:
            self.work.wait("branches")

    def jump_to_lower(self) -> bool:
        """Put the lower solution of the metastability alarm on screen: a run warm-started from its field (so the
        traces show the descent, and the alarm's check runs again at its end)."""
        verdict = (self.metastable or {}).get("verdict")
        field = self._restart_fields.get(verdict["start"]) if verdict else None
        if verdict is None or field is None:
            self.message = "No lower solution to jump to: wait for the metastability check."
            return False
        try:
            cfg = api.validate_config(self.to_config())
        except ValueError as e:
            self.message = f"Cannot solve: {e}"
            return False
        if not self.pump.start(cfg, np.array(field, copy=True)):
            return False
        self.message = f"Jumped to the solution from {verdict['label']}."
        if self.converged:
            self.converged = False
        self.metastable = None
        self.play()
        return True

    def choose_lambda_by_evidence(self):
        """Set lambda to the maximum of the evidence path on screen (the slider moves; the problem is solved)."""
        ev = self.evidence or {}
        if "best" not in ev:
            self.message = ev.get("error") or "No evidence path yet: open the Evidence tab and wait for the curve."
            return
        origin, lam = dict(self.origin), float(ev["best"]["lambda"])
        self.lam = lam
        self.origin = {**origin, "evidence_lambda": lam}  # the change of lambda is not an edit by hand

    def run_sweep(self, beta_min: float = 0.1, beta_max: float = 10.0, n: int = 25):
        """Sweep beta up and down (bftcore.api.sweep_document); in a worker thread when served."""
        try:
            cfg = self.sweep_config()
            beta_min, beta_max, n = validate_sweep(cfg, beta_min, beta_max, n)
        except ValueError as e:
            self.message = f"Cannot sweep: {e}"
            return
        if len(cfg.get("templates", [])) < 2:
            self.message = "A beta sweep needs a mixture: choose at least two templates."
            return
        total = 2 * int(n)  # followed upwards and downwards

        def show(done_solves, beta):
            self.sweep_progress = f"{min(done_solves, total)} of about {total} solves · β = {beta:.3g}"

        def work(task):
            return api.sweep_document(cfg, beta_min, beta_max, n, spacing="log",
                                      progress=lambda done_solves, beta: self.work.report(task, show, done_solves,
                                                                                          beta))

        def done(_task, doc):
            self.sweeping = False
            self.sweep_progress = ""
            if isinstance(doc, Exception):
                self.message = f"The sweep failed: {doc}"
            else:
                self.sweep = doc

        if self.work.running("sweep"):
            self.message = "A β sweep is running: wait for it to finish."
            return
        self.sweep_progress = f"0 of about {total} solves"
        self.sweeping = True
        self.work.start("sweep", work, done, budget_s=RUN_COMPUTE_S, if_busy="refuse")
        if not self.pump.served:  # a notebook or a test: the sweep is there when the call returns
            self.work.wait("sweep")

    # ===================================================================== learning curve
    def start_learning(self, n_from: int, n_to: int, n_sizes: int, resamples: int = 20,
                       evidence: bool = False) -> bool:
        """Start the learning curve of the current problem (:func:`bftcore.api.learning_curve_document`, by real
        resampling) on the server's learning lane (:data:`app.work.LONG`), within :data:`LEARNING_SECONDS`; its
        partial documents land in ``learning`` while it runs.  False when one runs already (nothing changes), or
        when the request is refused (``learning_state`` 'refused', ``learning_error`` says why)."""
        with self.work.lock:
            if self.learning_busy or self.work.closed:
                return False
            try:
                cfg = api.validate_config(self.to_config())
                if n_from > n_to:
                    raise ValueError(f"n from ({n_from}) is larger than n to ({n_to}); swap them")
                sizes = parse_sizes(f"{n_from}:{n_to}:{n_sizes}", "the sizes n")
            except ValueError as e:
                self.param.update(learning_error=str(e), learning_state="refused")
                return False
            request = {"lambda": float(cfg["prior"]["lambda"]), "sizes": sizes, "resamples": int(resamples),
                       "evidence": bool(evidence)}
            self.param.update(learning=None, learning_request=request, learning_busy=True, learning_error="",
                              learning_cancel_reason="", learning_stale=False,
                              learning_progress=(0, len(sizes) * int(resamples)), learning_state="running")

            def work(task):
                self.work.call(task, self._learning_running, task)  # after a wait for a free worker
                return api.learning_curve_document(
                    cfg, sizes, resamples=request["resamples"], evidence=request["evidence"],
                    scheduler=LEARNING_SCHEDULER, cancel=task.cancelled.is_set,
                    progress=lambda done, total: self.work.report(task, self._learning_progressed, task, done,
                                                                  total, final=done >= total),
                    update=lambda doc: self._learning_update(task, doc))

            self._learning_task = Task("learning")  # its calls are recognised from the start (see _learning_end)
            if self.work.start("learning", work, self._learning_end, lane=LONG, budget_s=LEARNING_SECONDS,
                               if_busy="refuse", on_wait=self._learning_waiting, task=self._learning_task) is None:
                self._learning_task = None  # over the session's tasks: say so instead of waiting for nothing
                self.param.update(learning_busy=False, learning_state="refused",
                                  learning_error="this session has too much work running; wait for it to finish")
                return False
            return True

    def cancel_learning(self, reason: str = CANCELLED_BY_USER) -> bool:
        """Cancel the running learning curve (bftcore stops within about 0.1 s): its curves are cleared, and
        ``learning_cancel_reason`` says why.  False when none runs."""
        with self.work.lock:
            task = self.work.cancel("learning")
            if task is None:
                return False
            self.param.update(learning=None, learning_cancel_reason=reason, learning_state="cancelled")
            return True

    def _learning_problem_changed(self, *_):
        """A change of the problem (a click, a slider, a preset, an upload) cancels the running learning curve;
        a finished one stays, marked as belonging to the problem before the change."""
        with self.work.lock:
            if self.cancel_learning(CANCELLED_BY_CHANGE):
                return
            if not self.learning_busy and self.learning is not None and not self.learning_stale:
                self.learning_stale = True

    def _learning_update(self, task: Task, doc: dict):
        # always sent; a partial document carries the progress too, so the throttle's clock restarts with it
        self.work.report(task, self._learning_partial, task, doc, final=True)

    def _learning_waiting(self, task: Task):
        if task is self._learning_task and self.learning_state == "running":
            self.learning_state = "waiting"

    def _learning_running(self, task: Task):
        if task is self._learning_task and self.learning_state == "waiting":
            self.learning_state = "running"

    def _learning_progressed(self, task: Task, done: int, total: int):
        if task is self._learning_task:
            self.learning_progress = (int(done), int(total))

    def _learning_partial(self, task: Task, doc: dict):
        if task is self._learning_task and not task.cancelled.is_set():
            done, total = self.learning_progress
            self.param.update(learning=doc, learning_progress=(int(doc.get("finished", done)),
                                                               int(doc.get("tasks", total))))

    def _learning_end(self, task: Task, result):
        if task is not self._learning_task:
            return
        self._learning_task = None
        if task.outcome == "cancelled" or isinstance(result, Cancelled):
            self.param.update(learning_busy=False, learning_state="cancelled")
            return
        if isinstance(result, RunBudgetExceeded):
            error = (f"stopped after {LEARNING_SECONDS:g} s, the server's time budget for a learning curve; use "
                     f"fewer resamples or sizes, or a coarser grid")
        elif isinstance(result, BaseException) or not isinstance(result, dict):
            error = str(result) or type(result).__name__
        else:
            tasks = int(result.get("tasks", self.learning_progress[1]))
            self.param.update(learning=result, learning_progress=(tasks, tasks), learning_busy=False,
                              learning_state="complete")
            return
        # what was drawn so far stays (a run stopped by the time budget shows its part)
        self.param.update(learning_error=error, learning_busy=False, learning_state="failed")
