"""The session model of the dashboard: one :class:`BFTSession` per browser session.

Everything a user can change lives here as a parameter; the views in ``app/views`` only watch it.  The model
talks to the solver exclusively through ``bftcore.api`` and ``bftcore.config`` (one implementation of each
formula: the CLI, the tests and the dashboard run the same code), and it round-trips the JSON configuration
document of CONVENTIONS.md §4 with :meth:`BFTSession.to_config` / :meth:`BFTSession.load_config`.

How the solver runs without blocking the server
-----------------------------------------------
A run is a ``bftcore.api.iterate`` generator.  When the session is served, a run is an ``asyncio`` task on the
Bokeh event loop that advances the generator one iteration at a time *in a worker thread*
(``asyncio.to_thread``), then hands the record back to the session's document with
``doc.add_next_tick_callback`` (so the views update Bokeh models under the document lock), then sleeps for the
animation delay.  The event loop is never blocked by the solver, and each iteration becomes one visible frame.

Any change that alters the problem (a click, a slider, a preset, an upload) cancels the current run and starts a
new one warm-started from the field currently shown.  The old task notices after its current iteration that its
generator is no longer the session's, closes it and exits; records of a cancelled run are dropped.  A generator is
only ever advanced by one thread at a time and closed by whoever holds it.  Sliders that trigger solves send
``value_throttled`` (on release), so a drag costs one solve, not hundreds.

Without a server (tests, notebooks) the same methods step the generator synchronously.

Nothing mutable is shared between sessions: each session builds its own ``BFTSession`` and its own views.
"""
from __future__ import annotations

import asyncio
import copy
import io
import json
import math
import time
from functools import partial

import numpy as np
import param

from bftcore.grid import Axis, Grid

#: Largest number of data points a session accepts (clicks beyond it are refused with a message).
MAX_POINTS = 2000
#: Depth of the undo stack.
UNDO_DEPTH = 100

#: Grid resolutions offered, nx×ny on the paper domain x in [1, 10], y in [1, 15].
GRID_SIZES = {"10×15 (paper)": (10, 15), "19×29": (19, 29), "28×43": (28, 43),
              "46×71": (46, 71), "64×96": (64, 96), "91×141": (91, 141)}
X_RANGE = (1.0, 10.0)
Y_RANGE = (1.0, 15.0)

MODELS = {"density, prior on L": ("density", "L"), "density, prior on P": ("density", "P"),
          "regression": ("regression", None)}
DENSITY_TEMPLATES = ["uniform", "paper_t1", "paper_t2", "gaussian"]
REGRESSION_TEMPLATES = ["constant", "linear"]
TEMPLATE_LABELS = {"uniform": "uniform", "paper_t1": "paper t₁", "paper_t2": "paper t₂",
                   "gaussian": "Gaussian", "constant": "constant", "linear": "linear trend"}
INITS = ["uniform", "kernel", "empirical", "template 1", "template 2", "template 3", "template 4", "keep current"]
ORDERS = ["l2", "l4", "l6"]
METHODS = ["newton", "massive", "gradient"]
DISPLAYS = ["P", "ln P", "true density", "empirical density"]

#: Parameters that define the problem; changing one restarts the solver (warm).
CONFIG_PARAMS = ["model", "grid_size", "boundary_x", "boundary_y", "lam", "lam_x", "lam_y", "mass2", "order",
                 "order_coef", "templates", "w_uniform", "w_paper_t1", "w_paper_t2", "w_gaussian", "gauss_mu",
                 "gauss_sigma", "w_constant", "const_value", "w_linear", "lin_slope", "lin_intercept",
                 "log10_beta", "method", "solver_mass2", "init", "init_mass2", "max_iter", "truth", "data"]
#: Parameters kept in the URL so that a link reproduces the state.
URL_PARAMS = CONFIG_PARAMS + ["display", "frame_ms", "preset"]


def _api():
    from bftcore import api
    return api


DEMO_TEXT = {
    "overfitting": "Fifty data points and a weak prior (λ = 0.1) with two templates. Watch the traces: the energy "
                   "keeps falling while, after a few iterations, the test error turns and rises (red line). The "
                   "solution adapts to the accidental structure of this sample, which is overfitting; raise λ to "
                   "see it disappear.",
    "metastable_mixture": "Two templates compete for the same data (λ = 1.2, m² = 0.5), started at t₂. The mixing "
                          "coefficients stay nearly constant for many iterations before switching: the solver "
                          "sits near a saddle between two basins (plateaus are shaded). Try other starts and the "
                          "β sweep tab to see the competing solutions.",
}


def preset_catalogue() -> dict:
    """Preset name -> (configuration document, explanation); bftcore.presets.PRESETS when it exists, else the
    paper figures (bftcore.presets.figure_config) plus the two demonstrations built on them."""
    from bftcore import presets
    if hasattr(presets, "PRESETS"):
        probe, out = BFTSession(live=False), {}
        for name, (doc, text) in presets.PRESETS.items():
            try:  # keep the presets the dashboard's grid menu and domain can show
                probe._params_from_config(_api().validate_config(copy.deepcopy(doc)))
            except (ValueError, KeyError):
                continue
            out[name] = (doc, text)
        return out
    out = {name: (presets.figure_config(name), presets.FIGURE_NOTES.get(name, "")) for name in presets.FIGURES}
    out["overfitting"] = (presets.figure_config("fig27"), DEMO_TEXT["overfitting"])
    out["metastable_mixture"] = (presets.figure_config("fig28"), DEMO_TEXT["metastable_mixture"])
    return out


class _Done:
    """Marker for an exhausted generator."""


def _next_record(gen):
    try:
        return next(gen)
    except StopIteration:
        return _Done


class BFTSession(param.Parameterized):
    """All state of one dashboard session: data, hyperparameters, solver progress and messages."""

    # --- model and prior -------------------------------------------------------------------------------------
    model = param.Selector(default="density, prior on L", objects=list(MODELS), doc="Model and prior field.")
    lam = param.Number(1.0, bounds=(0.01, 20.0), softbounds=(0.01, 5.0), label="λ (prior strength)")
    lam_x = param.Number(1.0, bounds=(0.0, 10.0), softbounds=(0.0, 5.0), label="λ_x")
    lam_y = param.Number(1.0, bounds=(0.0, 10.0), softbounds=(0.0, 5.0), label="λ_y")
    mass2 = param.Number(0.0, bounds=(0.0, 10.0), softbounds=(0.0, 2.0), label="mass m² (l0)")
    order = param.Selector(default="l2", objects=ORDERS, label="prior order")
    order_coef = param.Number(0.025, bounds=(0.0, 10.0), softbounds=(0.0, 2.0), label="coefficient of the order")
    # --- templates and mixture -------------------------------------------------------------------------------
    templates = param.ListSelector(default=[], objects=DENSITY_TEMPLATES + REGRESSION_TEMPLATES,
                                   label="templates t_j")
    w_uniform = param.Number(1.0, bounds=(0.01, 10.0), label="p (uniform)")
    w_paper_t1 = param.Number(1.0, bounds=(0.01, 10.0), label="p (paper t₁)")
    w_paper_t2 = param.Number(1.0, bounds=(0.01, 10.0), label="p (paper t₂)")
    w_gaussian = param.Number(1.0, bounds=(0.01, 10.0), label="p (Gaussian)")
    gauss_mu = param.Number(8.0, bounds=Y_RANGE, label="Gaussian centre μ")
    gauss_sigma = param.Number(2.0, bounds=(0.3, 10.0), label="Gaussian width σ")
    w_constant = param.Number(1.0, bounds=(0.01, 10.0), label="p (constant)")
    const_value = param.Number(7.5, bounds=Y_RANGE, label="constant value")
    w_linear = param.Number(1.0, bounds=(0.01, 10.0), label="p (linear)")
    lin_slope = param.Number(0.5, bounds=(-3.0, 3.0), label="slope")
    lin_intercept = param.Number(5.0, bounds=(-20.0, 30.0), label="intercept")
    log10_beta = param.Number(0.0, bounds=(-3.0, 3.0), label="log₁₀ β (mixture temperature)")
    # --- solver and grid -------------------------------------------------------------------------------------
    method = param.Selector(default="newton", objects=METHODS, label="solver")
    solver_mass2 = param.Number(0.01, bounds=(1e-4, 10.0), softbounds=(1e-3, 2.0), label="relaxation m²")
    init = param.Selector(default="kernel", objects=INITS, label="initialisation")
    init_mass2 = param.Number(0.1, bounds=(1e-3, 10.0), label="kernel init m_C²")
    max_iter = param.Integer(50, bounds=(1, 1000), label="max iterations")
    grid_size = param.Selector(default="10×15 (paper)", objects=list(GRID_SIZES), label="grid nx×ny")
    boundary_x = param.Selector(default="periodic", objects=["periodic", "neumann"], label="x boundary")
    boundary_y = param.Selector(default="periodic", objects=["periodic", "neumann"], label="y boundary")
    truth = param.Selector(default="paper", objects=["paper", "none"], label="true density")
    data = param.List(default=[[3.0, 3.0], [7.0, 12.0]], item_type=list, doc="Data points [x, y].")
    # --- display and animation -------------------------------------------------------------------------------
    display = param.Selector(default="P", objects=DISPLAYS, label="heatmap shows")
    click_mode = param.Selector(default="add", objects=["add", "remove"], label="a click on the canvas")
    frame_ms = param.Integer(60, bounds=(0, 1000), label="animation: ms per iteration")
    live = param.Boolean(True, label="re-solve on every change")
    preset = param.String("", doc="Name of the last preset loaded ('' when edited by hand).")
    # --- outputs (read by the views) -------------------------------------------------------------------------
    record = param.Parameter(None, doc="Latest solver record of the current run (attributes of api.iterate).")
    history = param.List([], doc="One dict per iteration of the current run: iteration, energy, errors, mixing.")
    run_id = param.Integer(0, doc="Incremented when a new run starts (the traces restart).")
    running = param.Boolean(False, doc="True while the solver animation plays.")
    converged = param.Boolean(False)
    result = param.Dict(None, allow_None=True, doc="Result of api.fit for exact regression quantities.")
    sweep = param.Dict(None, allow_None=True, doc="Last beta sweep document (CONVENTIONS §4).")
    sweeping = param.Boolean(False)
    message = param.String("", doc="Last message to the user (errors, refused input).")
    status = param.String("")

    def __init__(self, doc=None, **params):
        super().__init__(**params)
        self._doc = doc              # Bokeh document when served; None runs everything synchronously
        self._token = 0              # bumped to cancel stale runs
        self._gen = None             # generator of the current run
        self._busy = set()           # ids of generators a worker thread is inside of right now
        self._field_key = None       # (model, grid) of the field in self.record
        self._undo = []
        self._quiet = False          # suppress auto re-solve while a batch of parameters is applied
        self.param.watch(self._on_problem_change, [p for p in CONFIG_PARAMS])
        self.param.watch(self._on_model_change, ["model"])

    # ===================================================================== configuration document
    @property
    def beta(self) -> float:
        return float(10.0 ** self.log10_beta)

    @property
    def grid(self) -> Grid:
        nx, ny = GRID_SIZES[self.grid_size]
        return Grid(Axis(X_RANGE[0], X_RANGE[1], nx, self.boundary_x), Axis(Y_RANGE[0], Y_RANGE[1], ny, self.boundary_y))

    @property
    def is_regression(self) -> bool:
        return MODELS[self.model][0] == "regression"

    def template_kinds(self) -> list[str]:
        """Active template kinds of the current model, in the fixed order of the configuration."""
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

    def to_config(self) -> dict:
        """The JSON configuration document (CONVENTIONS §4) of the current state."""
        model, field = MODELS[self.model]
        kinds = self.template_kinds()
        weights = [float(getattr(self, f"w_{k}")) for k in kinds]
        total = sum(weights)
        prior = {"lambda": self.lam, "lambda_x": self.lam_x, "lambda_y": self.lam_y, "l0": self.mass2,
                 "l2": 0.0, "l4": 0.0, "l6": 0.0}
        prior[self.order] = self.order_coef
        if field:
            prior = {"field": field, **prior}
        init = self.init
        if init.startswith("template"):
            init = f"template:{int(init.split()[1]) - 1}"
        elif init == "keep current":
            init = "kernel"  # a warm start is passed to the solver separately; files reproduce the kernel start
        nx, ny = GRID_SIZES[self.grid_size]
        doc = {
            "model": model,
            "grid": {"x": {"min": X_RANGE[0], "max": X_RANGE[1], "n": nx, "boundary": self.boundary_x},
                     "y": {"min": Y_RANGE[0], "max": Y_RANGE[1], "n": ny, "boundary": self.boundary_y}},
            "data": [[float(x), float(y)] for x, y in self.data],
            "prior": prior,
            "templates": [self._template_dict(k) for k in kinds],
            "weights": [w / total for w in weights] if kinds else [],
            "beta": self.beta,
            "solver": {"method": self.method, "mass2": self.solver_mass2, "init": init,
                       "init_mass2": self.init_mass2, "max_iter": int(self.max_iter)},
        }
        if self.truth == "paper" and model == "density":  # the paper truth (708) is a density
            doc["truth"] = "paper"
        return doc

    def _params_from_config(self, doc: dict) -> dict:
        """Parameter values for a validated document; raises ValueError for what the dashboard cannot show."""
        out = {}
        model = doc.get("model", "density")
        field = doc.get("prior", {}).get("field", "L")
        out["model"] = "regression" if model == "regression" else f"density, prior on {field}"
        g = doc["grid"]
        size = (int(g["x"]["n"]), int(g["y"]["n"]))
        names = {v: k for k, v in GRID_SIZES.items()}
        if size not in names:
            raise ValueError(f"grid {size[0]}×{size[1]} is not one the dashboard offers "
                             f"({', '.join(GRID_SIZES)}); run it with `python -m bftcore fit` instead")
        if (g["x"]["min"], g["x"]["max"], g["y"]["min"], g["y"]["max"]) != (*X_RANGE, *Y_RANGE):
            raise ValueError("the dashboard works on the paper domain x in [1, 10], y in [1, 15]; "
                             "this file has a different domain")
        out.update(grid_size=names[size], boundary_x=g["x"]["boundary"], boundary_y=g["y"]["boundary"])
        pr = doc["prior"]
        out.update(lam=pr["lambda"], lam_x=pr["lambda_x"], lam_y=pr["lambda_y"], mass2=pr.get("l0", 0.0))
        orders = [o for o in ORDERS if pr.get(o, 0.0)]
        if len(orders) > 1:
            raise ValueError(f"the dashboard shows one prior order at a time, this file sets {', '.join(orders)}")
        out["order"] = orders[0] if orders else "l2"
        out["order_coef"] = pr[orders[0]] if orders else 0.0
        kinds = []
        for t, w in zip(doc.get("templates", []), doc.get("weights", [])):
            kind = t["kind"]
            if kind not in TEMPLATE_LABELS or kind in kinds:
                raise ValueError(f"template {t} cannot be shown in the dashboard (at most one of each kind "
                                 f"{', '.join(TEMPLATE_LABELS)})")
            kinds.append(kind)
            out[f"w_{kind}"] = max(float(w), 0.01)
            if kind == "gaussian":
                out.update(gauss_mu=t["mu"], gauss_sigma=t["sigma"])
            elif kind == "constant":
                out["const_value"] = t["value"]
            elif kind == "linear":
                out.update(lin_slope=t["slope"], lin_intercept=t["intercept"])
        allowed = REGRESSION_TEMPLATES if model == "regression" else DENSITY_TEMPLATES
        if any(k not in allowed for k in kinds):
            raise ValueError(f"templates {kinds} do not belong to the {model} model")
        order_in_doc = [k for k in allowed if k in kinds]
        if order_in_doc != kinds:
            raise ValueError(f"the dashboard orders templates as {allowed}; reorder the templates in the file")
        out["templates"] = kinds
        out["log10_beta"] = math.log10(doc.get("beta", 1.0))
        s = doc["solver"]
        init = s.get("init", "kernel")
        if init.startswith("template:"):
            init = f"template {int(init.split(':')[1]) + 1}"
        out.update(method=s["method"], solver_mass2=s.get("mass2", 0.01), init=init,
                   init_mass2=s.get("init_mass2", 0.1), max_iter=int(s.get("max_iter", 50)))
        out["truth"] = "paper" if doc.get("truth") == "paper" else "none"
        out["data"] = [[float(x), float(y)] for x, y in doc.get("data", [])]
        if len(out["data"]) > MAX_POINTS:
            raise ValueError(f"{len(out['data'])} data points; the dashboard takes at most {MAX_POINTS}")
        for name, value in out.items():  # refuse values outside the sliders' ranges instead of clipping them
            p = self.param[name]
            try:
                p._validate(value)
            except Exception as e:
                raise ValueError(f"{p.label or name} = {value!r} is outside what the dashboard allows: {e}") from None
        return out

    def load_config(self, doc, *, preset: str = "") -> bool:
        """Load a configuration document (dict, JSON text or bytes).

        The document is validated by ``bftcore.api.validate_config``; a bad document is refused with a message
        in :attr:`message` and leaves the state exactly as it was.  Returns True when loaded.
        """
        try:
            if isinstance(doc, (bytes, bytearray)):
                doc = doc.decode("utf-8")
            if isinstance(doc, str):
                doc = json.loads(doc)
            if not isinstance(doc, dict):
                raise ValueError("a configuration must be a JSON object")
            doc = _api().validate_config(copy.deepcopy(doc))
            values = self._params_from_config(doc)
        except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
            reason = e.args[0] if isinstance(e, KeyError) and e.args else e
            self.message = f"Refused the configuration: {reason}. Nothing was changed."
            return False
        self._push_undo()
        self._quiet = True
        try:
            self.param.update(**values, preset=preset)
        finally:
            self._quiet = False
        self.message = f"Loaded preset '{preset}'." if preset else "Loaded the configuration."
        self.reset(play=self.live)
        return True

    def load_preset(self, name: str) -> bool:
        catalogue = preset_catalogue()
        if name not in catalogue:
            self.message = f"Unknown preset {name!r}."
            return False
        return self.load_config(catalogue[name][0], preset=name)

    # ===================================================================== data points
    def _push_undo(self):
        self._undo.append(copy.deepcopy(self.data))
        del self._undo[:-UNDO_DEPTH]

    def _snap_point(self, x: float, y: float) -> list[float]:
        grid = self.grid
        ix, iy = grid.snap([[x, y]])  # raises ValueError naming an off-grid point
        sx = float(grid.x.nodes[ix[0]])
        sy = round(float(y), 3) if self.is_regression else float(grid.y.nodes[iy[0]])
        return [round(sx, 6), round(sy, 6)]

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
        sx = max(grid.hx, (X_RANGE[1] - X_RANGE[0]) / 20)
        sy = max(grid.hy, (Y_RANGE[1] - Y_RANGE[0]) / 20)
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
        """Switching between density and regression swaps the template menu and the data's y values."""
        allowed = REGRESSION_TEMPLATES if self.is_regression else DENSITY_TEMPLATES
        kept = [k for k in self.templates if k in allowed]
        if self.is_regression and not kept:
            kept = ["constant"]  # a regression mixture needs at least one template
        if kept != list(self.templates):
            self.templates = kept

    def _on_problem_change(self, *events):
        if self._quiet:
            return
        if any(e.name != "data" for e in events):
            self.preset = ""
        if self.live:
            self.start_run(warm=True, play=True)

    def _field_key_now(self):
        return (MODELS[self.model], GRID_SIZES[self.grid_size])

    def _warm_field(self):
        rec = self.record
        if rec is None or self._field_key != self._field_key_now():
            return None
        model, field = MODELS[self.model]
        return np.array(getattr(rec, "h" if model == "regression" else field), copy=True)

    def cancel(self):
        """Stop the current run; its generator is closed by whoever holds it."""
        self._token += 1
        self.running = False
        gen, self._gen = self._gen, None
        if gen is not None and id(gen) not in self._busy:
            gen.close()

    def start_run(self, warm: bool = True, play: bool = True) -> bool:
        """Start a new run of the solver from the current state (warm: from the field shown)."""
        try:
            cfg = self.to_config()
            cfg = _api().validate_config(cfg)
        except ValueError as e:
            self.cancel()
            self.message = f"Cannot solve: {e}"
            return False
        init = self._warm_field() if (warm or self.init == "keep current") else None
        self.cancel()
        try:
            self._gen = _api().iterate(cfg, init=init)
        except ValueError as e:
            self.message = f"Cannot solve: {e}"
            return False
        self._gen_key = self._field_key_now()
        if self.message.startswith(("The solver failed", "Cannot solve")):
            self.message = ""
        self._run_t0 = time.perf_counter()
        with param.parameterized.batch_call_watchers(self):
            self.history = []
            self.converged = False
            self.result = None
            self.run_id += 1
        if play:
            self.play()
        else:
            self.step()
        return True

    def reset(self, play: bool = False):
        """Restart from the configured initialisation (no warm start) and show iteration 0."""
        self.start_run(warm=False, play=play)

    def play(self):
        """Run (or resume) the current generator with one frame per iteration."""
        if self._gen is None:
            self.start_run(warm=self.init == "keep current", play=True)
            return
        self._token += 1  # a second Run replaces the loop instead of adding one
        token = self._token
        self.running = True
        if self.served:
            asyncio.ensure_future(self._play_async(token))
        else:
            while self._token == token and self.running and self._advance_sync():
                pass

    def pause(self):
        self.running = False
        self._token += 1  # the play loop exits after its current iteration; the generator is kept

    def step(self):
        """Advance the solver by one iteration (creating a run if there is none)."""
        if self._gen is None:
            if not self.start_run(warm=self.init == "keep current", play=False):
                return
            return
        self.running = False
        self._token += 1
        if self.served:
            asyncio.ensure_future(self._step_async(self._token))
        else:
            self._advance_sync()

    # --- synchronous path (tests, notebooks) ---------------------------------------------------------------
    def _advance_sync(self) -> bool:
        gen = self._gen
        if gen is None:
            return False
        try:
            rec = _next_record(gen)
        except Exception as e:  # noqa: BLE001 - any solver failure keeps the last good solution
            self._fail(e, gen)
            return False
        if rec is _Done:
            self._finish(gen)
            return False
        self._apply_record(rec, gen)
        return True

    def solve(self, max_records: int = 10_000):
        """Run the current problem to the end synchronously (tests and scripts)."""
        if self._gen is None:
            self.start_run(warm=False, play=False)
        n = 0
        while self._gen is not None and n < max_records and self._advance_sync():
            n += 1

    # --- served path --------------------------------------------------------------------------------------
    def _on_doc(self, fn, *args):
        """Run fn(*args) on the session's document with its lock held (views then touch Bokeh models)."""
        if self.served:
            try:
                self._doc.add_next_tick_callback(partial(fn, *args))
            except Exception:  # the session is gone
                self._token += 1
        else:
            fn(*args)

    async def _advance_async(self, token):
        gen = self._gen
        while gen is not None and id(gen) in self._busy:  # an earlier Step is still computing
            await asyncio.sleep(0.005)
        if gen is None or gen is not self._gen:
            return False
        self._busy.add(id(gen))
        try:
            rec = await asyncio.to_thread(_next_record, gen)
        except Exception as e:  # noqa: BLE001
            self._on_doc(self._fail, e, gen)
            return False
        finally:
            self._busy.discard(id(gen))
        if gen is not self._gen:  # cancelled while we were computing: we hold the generator, close it
            gen.close()
            return False
        if rec is _Done:
            self._on_doc(self._finish, gen)
            return False
        self._on_doc(self._apply_record, rec, gen)
        return rec

    async def _step_async(self, token):
        await self._advance_async(token)

    async def _play_async(self, token):
        while self._token == token and self.running:
            t0 = time.perf_counter()
            rec = await self._advance_async(token)
            if not rec:
                return
            if rec.iteration == 0:  # the start field: show the first step at once, animate from there
                await asyncio.sleep(0)
                continue
            await asyncio.sleep(max(0.0, self.frame_ms / 1000 - (time.perf_counter() - t0)))

    # --- records --------------------------------------------------------------------------------------------
    def _apply_record(self, rec, gen):
        if gen is not self._gen:  # a record of a cancelled run
            return
        entry = {"iteration": int(rec.iteration), "energy": float(rec.energy),
                 "train_error": float(rec.train_error),
                 "test_error": None if rec.test_error is None else float(rec.test_error),
                 "mixing": [float(a) for a in np.atleast_1d(rec.mixing)] if rec.mixing is not None else [],
                 "step": None if rec.step is None else float(rec.step),
                 "residual": None if getattr(rec, "residual", None) is None else float(rec.residual)}
        self._field_key = self._gen_key
        with param.parameterized.batch_call_watchers(self):
            self.history = self.history + [entry]
            self.record = rec
            self.status = (f"iteration {entry['iteration']}  ·  energy {entry['energy']:.4f}  ·  "
                           f"training error {entry['train_error']:.4f}"
                           + ("" if entry["test_error"] is None else f"  ·  test error {entry['test_error']:.4f}"))

    def _finish(self, gen):
        if gen is not self._gen:
            return
        self._gen = None
        self.running = False
        self.converged = True
        if self.is_regression and self.record is not None:
            self._compute_exact()

    def _fail(self, exc, gen):
        if gen is not self._gen:
            return
        self.running = False
        self._gen = None
        self.message = f"The solver failed ({type(exc).__name__}: {exc}); showing the last good solution."

    def _compute_exact(self):
        """Exact predictive mean and variance of the regression mixture (fast: closed form)."""
        try:
            cfg = _api().validate_config(self.to_config())
            res = _api().fit(cfg, init=self._warm_field())
        except Exception as e:  # noqa: BLE001
            self.message = f"Exact regression quantities unavailable: {e}"
            return
        self.result = {"exact": res.get("exact"), "h": res.get("h")}

    # ===================================================================== beta sweep
    def sweep_config(self) -> dict:
        return _api().validate_config(self.to_config())

    def run_sweep(self, beta_min: float = 0.1, beta_max: float = 10.0, n: int = 25):
        """Sweep beta up and down (bftcore.mixtures.sweep_document); in a worker thread when served."""
        from bftcore import mixtures
        try:
            cfg = self.sweep_config()
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
                    doc = await asyncio.to_thread(mixtures.sweep_document, cfg, beta_min, beta_max, n)
                except Exception as e:  # noqa: BLE001
                    doc = e
                self._on_doc(done, doc)
            asyncio.ensure_future(work())
        else:
            try:
                doc = mixtures.sweep_document(cfg, beta_min, beta_max, n)
            except Exception as e:  # noqa: BLE001
                doc = e
            done(doc)
