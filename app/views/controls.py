"""The control sidebar: model, prior, templates, solver, grid, run buttons, data editing.

Slider scales (issue 13).  A quantity that is a *scale* (the prior strengths lambda, lambda_x, lambda_y, the
coefficient of the prior order, the masses l0, relaxation m² and kernel m_C², the mixture temperature beta) has a
LOG slider (:func:`scale_slider`): its positions are every number of two significant digits, 90 per decade (1.0,
1.1, ..., 9.9 times a power of ten), so each decade has the same length, an arrow key moves to the next such number,
and every value of the presets (0.01, 0.025, 0.1, 0.3, 0.5, 1.2, ...) is a position, hit exactly.  A scale that may
be 0 (l0, the order coefficient, lambda_x, lambda_y, the relaxation mass) has 0 one position below the lowest
decade.  The other sliders are linear, and their value is rounded to the slider's step before it reaches the
session (:func:`linear_slider`), so a link says ``w_uniform=1.1``, never ``1.0999999999999999``.
"""
from __future__ import annotations

import math
from functools import partial

import panel as pn
import param
from bokeh.models import CustomJS, CustomJSTickFormatter

from bftcore.foundations.templates import KINDS, describe, kinds

from ..configuration import CUSTOM_GRID, robust_of
from ..session import MENU_KINDS, BFTSession
from ..transport import SHORTCUTS_JS, user_action, without_debounce
from .common import markdown_text
from .robust import RobustControls

#: Keyboard shortcuts of the page (key as KeyboardEvent.key, "Control+" before it with Ctrl) -> css class of the
#: control the key presses (app.transport.SHORTCUTS_JS; not while typing in a field or a menu).  "l" toggles the
#: presenter layout, when the page has a control of that class.
SHORTCUTS = {"r": "bft-run", "s": "bft-step", "p": "bft-pause", "u": "bft-undo", "Control+z": "bft-undo",
             "l": "bft-layout-toggle"}


def install_shortcuts(doc) -> None:
    """The keyboard shortcuts (:data:`SHORTCUTS`) on a served page, once it is ready."""
    if doc is not None:
        doc.js_on_event("document_ready", CustomJS(args=dict(keys=SHORTCUTS), code=SHORTCUTS_JS))


#: Sliders whose change starts a solve send their value on release only (value_throttled).
THROTTLED = dict(throttled=True)
#: Positions of a log slider per decade: the numbers 1.0, 1.1, ..., 9.9 (two significant digits).
PER_DECADE = 90
#: Decades (lowest, highest power of ten) of each log slider, and whether 0 is a position below the lowest.
SCALES = {"lam": (-3, 2, False), "lam_x": (-2, 2, True), "lam_y": (-2, 2, True), "l0": (-4, 1, True),
          "order_coef": (-4, 2, True), "solver_mass2": (-4, 1, True), "init_mass2": (-4, 2, False),
          "beta": (-3, 3, False)}


def scale_value(index: int, lo: int) -> float:
    """The value at a position of a log slider whose lowest decade is 10**lo (-1: zero)."""
    if index < 0:
        return 0.0
    decade, r = divmod(int(index), PER_DECADE)
    return float(f"{10 + r}e{lo + decade - 1}")  # exactly the two-digit number, in its shortest form


def scale_index(value: float, lo: int) -> int:
    """The position of a log slider nearest to ``value`` (-1 for 0).  A positive value below the lowest decade is
    shown at the lowest position, 10**lo; :func:`scale_slider` lowers its lowest decade first, so that a value in
    any units (a link's lam=1e-6, the evidence's lambda of data in thousandths) has its own position.  Values
    above the highest decade widen the slider."""
    if not value or value <= 0 or not math.isfinite(value):
        return -1
    e = math.floor(math.log10(value))
    m = round(value / 10.0 ** e * 10)  # 10 ... 100
    if m >= 100:
        e, m = e + 1, 10
    if m < 10:
        m = 10
    return max(0, (e - lo) * PER_DECADE + (m - 10))


def _scale_format(lo: int) -> CustomJSTickFormatter:
    return CustomJSTickFormatter(args=dict(lo=lo, per=PER_DECADE), code="""
const i = Math.round(tick); if (i < 0) return "0";
const d = Math.floor(i / per), r = i - d * per;
return String(Number(((10 + r) * Math.pow(10, lo + d - 1)).toPrecision(2)));""")


def _bind(widget, session, name, to_session, to_widget):
    """Two-way link of a widget to a session parameter: the released value (``value_throttled``) goes in through
    ``to_session``; the parameter comes back through ``to_widget``, widening the slider if needed."""
    def push(event):
        v = to_session(event.new)
        if getattr(session, name) != v:
            setattr(session, name, v)

    def pull(*_):
        pos = to_widget(getattr(session, name))
        if pos < widget.start:
            widget.start = pos
        if pos > widget.end:
            widget.end = pos
        if widget.value != pos:
            widget.value = pos

    # a user action: the first frame of the run the new value starts goes out in the same message, and at once
    # (issue 28)
    widget.param.watch(user_action(push), "value_throttled")
    without_debounce(widget, "value", "value_throttled")
    session.param.watch(pull, [name])
    pull()
    return widget


def scale_slider(session, name: str, width: int, label: str | None = None):
    """A log slider over the parameter ``name`` of :data:`SCALES` (see the module's text)."""
    lo, hi, zero = SCALES[name]
    p = session.param[name]
    w = pn.widgets.IntSlider(label=label or p.label, start=-1 if zero else 0, end=(hi - lo) * PER_DECADE, step=1,
                             value=0, width=width, format=_scale_format(lo), css_classes=[f"bft-scale-{name}"])
    low = [lo]  # the lowest decade, lowered to reach a smaller value (data in other units: lambda 1e-8)

    def to_widget(v: float) -> int:
        if v and v > 0 and math.isfinite(v) and v < 10.0 ** low[0]:
            shift = low[0] - math.floor(math.log10(v))
            low[0] -= shift
            w.param.update(end=w.end + shift * PER_DECADE, format=_scale_format(low[0]))
        return scale_index(v, low[0])

    return _bind(w, session, name, lambda i: scale_value(i, low[0]), to_widget)


def linear_slider(session, name: str, width: int, step: float = 0.01, **kw):
    """A linear slider over a session parameter (its soft bounds), the value rounded to ``step`` on its way in."""
    p = session.param[name]
    lo, hi = p.get_soft_bounds()
    digits = max(0, -math.floor(math.log10(step) + 1e-9))
    w = pn.widgets.FloatSlider(label=p.label, start=lo, end=hi, step=step, value=getattr(session, name),
                               width=width, **kw)
    return _bind(w, session, name, lambda v: float(round(v, digits)), lambda v: v)


def template_options(model: str) -> dict:
    """The template menu of a model ("density" or "regression"): label -> kind, from bftcore's registry."""
    return {KINDS[(model, k)].label: k for k in kinds(model, menu=True)}


#: The solver section's note, and what it says while a robust prior is on (the method menu is then disabled).
SOLVER_NOTE = "A new solver or start field restarts the run from that start at once."
IRLS_NOTE = ("**Solved by IRLS**, the robust prior's solver (*Robust prior* section); the menu's solver returns "
             "when the robust prior is off.")


class LocalControls:
    """The local prior of a regression (Sect. 6.4, 5.3.3, (519)-(522)): its type (off / binary switch / continuous
    hyperfield), pi_soft of a switch, gamma_theta of a hyperfield, and cuts; each edits the session's
    ``local_prior`` through the session's own methods, so that the document, the link and the file say the same.
    The labels' temperature is the mixture's beta slider (the document's beta, 1/sigma^2 of the noise too)."""

    TYPES = {"off": "off", "binary switch": "switch", "hyperfield": "hyperfield"}

    def __init__(self, session: BFTSession, width: int):
        s = self.session = session
        self.type = pn.widgets.RadioButtonGroup(label="local prior", options=list(self.TYPES), value="off",
                                                width=width, css_classes=["bft-local-type"])
        self.pi_soft = pn.widgets.FloatSlider(label="π_soft (prior probability of a soft edge)", start=0.001,
                                              end=0.999, step=0.001, value=0.05, width=width,
                                              css_classes=["bft-local-pi"])
        self.gamma = pn.widgets.FloatSlider(label="γ_θ (hyperprior strength)", start=0.01, end=5.0, step=0.01,
                                            value=1.0, width=width, css_classes=["bft-local-gamma"])
        self.cuts = pn.widgets.TextInput(label="cuts at x (comma-separated, between nodes)", width=width,
                                         css_classes=["bft-local-cuts"])
        self.note = pn.pane.Markdown("The labels' temperature is β (under *Templates and mixture*): 1/σ² of the "
                                     "noise too, as in [001].", width=width,
                                     styles={"font-size": "12px", "color": "#555"}, margin=(-6, 10, 0, 10))
        self._pulling = False
        self.type.param.watch(user_action(lambda e: self._push(s.set_local_type, self.TYPES[e.new])), "value")
        self.pi_soft.param.watch(user_action(lambda e: self._push(s.set_local_value, "pi_soft", e.new)),
                                 "value_throttled")
        self.gamma.param.watch(user_action(lambda e: self._push(s.set_local_value, "gamma_theta", e.new)),
                               "value_throttled")
        self.cuts.param.watch(user_action(self._on_cuts), "value")
        without_debounce(self.pi_soft, "value", "value_throttled")
        without_debounce(self.gamma, "value", "value_throttled")
        s.param.watch(self._pull, ["local_prior", "model"])
        self._pull()

    def _push(self, fn, *args):
        if not self._pulling:
            fn(*args)

    def _on_cuts(self, event):
        if self._pulling:
            return
        try:
            cuts = [float(t) for t in event.new.replace(";", ",").split(",") if t.strip()]
        except ValueError:
            self.session.message = f"Cuts must be x positions separated by commas, got {event.new[:40]!r}."
            return
        self.session.set_cuts(cuts)

    def _pull(self, *_):
        s = self.session
        local = (s.local_prior or {}).get("local") or {}
        self._pulling = True
        try:
            self.type.value = next(k for k, v in self.TYPES.items() if v == s.local_type())
            if local.get("type") == "switch" and len(local.get("pi", [])) == 2:
                self.pi_soft.value = min(max(float(local["pi"][1]), self.pi_soft.start), self.pi_soft.end)
            if local.get("type") == "hyperfield":
                self.gamma.value = min(max(float(local["gamma_theta"]), self.gamma.start), self.gamma.end)
            text = ", ".join(f"{c:g}" for c in (s.local_prior or {}).get("cuts", []))
            if self.cuts.value != text:
                self.cuts.value = text
        finally:
            self._pulling = False
        self.pi_soft.visible = local.get("type") == "switch" and len(local.get("pi", [])) == 2 and \
            s.local_type() != "off"
        self.gamma.visible = local.get("type") == "hyperfield"

    def panel(self) -> pn.Column:
        return pn.Column(self.type, self.pi_soft, self.gamma, self.cuts, self.note)


class Controls(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.session
        sp = s.param
        W = 280

        def slider(p, step=None, **kw):
            return linear_slider(s, p.name, W, step=step or 0.01, **kw)

        def log(p, **kw):
            return scale_slider(s, p.name, W, **kw)

        def action(fn):  # a button is the next action: the message of the previous one goes away
            @user_action
            def click(_):
                if s.message:
                    s.message = ""
                fn()
            return click

        self.run = pn.widgets.Button(label="▶ Run", color="success", width=74, css_classes=["bft-run"],
                                     description="Run the solver, animated (key R)")
        self.step = pn.widgets.Button(label="Step", width=66, css_classes=["bft-step"],
                                      description="One iteration of the solver (key S)")
        self.pause = pn.widgets.Button(label="❚❚ Pause", width=92, css_classes=["bft-pause"],
                                       description="Pause the animation (key P)")
        self.reset = pn.widgets.Button(label="Reset", width=72)
        self.run.on_click(action(s.play))
        self.step.on_click(action(s.step))
        self.pause.on_click(action(s.pause))
        self.reset.on_click(action(lambda: s.reset(play=False)))
        self.clear = pn.widgets.Button(label="Clear points", width=124)
        self.undo = pn.widgets.Button(label="Undo", width=76, css_classes=["bft-undo"],
                                      description="Undo the last change of the data (key U or Ctrl+Z)")
        install_shortcuts(pn.state.curdoc)
        self.clear.on_click(action(s.clear_points))
        self.undo.on_click(action(s.undo))
        self.widgets = {
            "model": pn.widgets.Select.from_param(sp.model, width=W),
            "click_mode": pn.widgets.RadioButtonGroup.from_param(sp.click_mode, width=W, color="primary",
                                                                 variant="outline"),
            "display": pn.widgets.RadioButtonGroup.from_param(sp.display, width=W, color="primary",
                                                              variant="outline"),
            "lam": log(sp.lam), "lam_x": log(sp.lam_x), "lam_y": log(sp.lam_y),
            "l0": log(sp.l0),
            "order": pn.widgets.RadioButtonGroup.from_param(sp.order, width=W),
            "order_coef": log(sp.order_coef),
            "templates": pn.widgets.CheckButtonGroup.from_param(
                sp.templates, options=template_options(s.kind.model), width=W,
                color="primary", variant="outline"),
            "w_uniform": slider(sp.w_uniform), "w_paper_t1": slider(sp.w_paper_t1),
            "w_paper_t2": slider(sp.w_paper_t2), "w_gaussian": slider(sp.w_gaussian),
            "gauss_mu": slider(sp.gauss_mu, step=0.1), "gauss_sigma": slider(sp.gauss_sigma, step=0.1),
            "w_constant": slider(sp.w_constant), "const_value": slider(sp.const_value, step=0.1),
            "w_linear": slider(sp.w_linear), "lin_slope": slider(sp.lin_slope, step=0.05),
            "lin_intercept": slider(sp.lin_intercept, step=0.1),
            "beta": log(sp.beta),
            "method": pn.widgets.RadioButtonGroup.from_param(sp.method, width=W),
            "solver_mass2": log(sp.solver_mass2),
            "init": pn.widgets.Select.from_param(sp.init, width=W),
            "init_mass2": log(sp.init_mass2),
            "max_iter": pn.widgets.IntSlider.from_param(sp.max_iter, width=W, **THROTTLED),
            "min_iter": pn.widgets.IntInput.from_param(sp.min_iter, width=W // 2 - 5),
            "tol": pn.widgets.FloatInput.from_param(sp.tol, width=W // 2 - 5, format="0e+0"),
            "grid_size": pn.widgets.Select.from_param(sp.grid_size, width=W),
            "boundary_x": pn.widgets.RadioButtonGroup.from_param(sp.boundary_x, width=W // 2 - 5),
            "boundary_y": pn.widgets.RadioButtonGroup.from_param(sp.boundary_y, width=W // 2 - 5),
            "truth": pn.widgets.RadioButtonGroup.from_param(sp.truth, width=W),
            "live": pn.widgets.Checkbox.from_param(sp.live),
        }
        self.solver_note = pn.pane.Markdown(
            SOLVER_NOTE, width=W,
            styles={"font-size": "12px", "color": "#555"}, margin=(-6, 10, 0, 10))
        # what a loaded file sets and the controls cannot show: read-only, kept in the configuration
        self.from_file = pn.pane.Markdown("", width=W, styles={"font-size": "12px"}, visible=False,
                                          name="from-file")
        self.use_menu = pn.widgets.Button(label="Use the menu instead", width=W, visible=False)
        self.use_menu.on_click(user_action(lambda _: s.use_menu_templates()))
        self.orders_note = pn.pane.Markdown("", width=W, styles={"font-size": "12px"}, visible=False,
                                            name="extra-orders")
        self.drop_orders = pn.widgets.Button(label="Keep only the slider's order", width=W, visible=False)
        self.drop_orders.on_click(user_action(lambda _: setattr(s, "extra_orders", {})))
        self.grid_text = pn.pane.Markdown("", width=W, styles={"font-size": "12px"}, visible=False)
        self.local = LocalControls(s, W)
        self.local_panel = self.local.panel()
        self.robust = RobustControls(s, W)
        self.robust_panel = self.robust.panel()
        s.param.watch(self._sync_visibility, ["model", "templates", "method", "init", "beta", "file_templates",
                                              "robust_prior",
                                              "file_weights", "extra_orders", "grid_size", "x_min", "x_max", "nx",
                                              "y_min", "y_max", "ny"])
        w = self.widgets["max_iter"]  # a loaded value beyond the slider's soft range widens it (the others: _bind)
        s.param.watch(partial(self._widen, w), ["max_iter"])
        self._widen(w)
        self._sync_visibility()

    @staticmethod
    def _widen(widget, *events):
        v = widget.value
        if v is None:
            return
        if v < widget.start:
            widget.start = v
        if v > widget.end:
            widget.end = v

    def _sync_visibility(self, *_):
        s, w = self.session, self.widgets
        kind = s.kind
        model = kind.model
        w["templates"].options = template_options(model)
        active = s.template_kinds()  # empty while a file's templates are in use
        for k in MENU_KINDS:
            w[f"w_{k}"].visible = k in active
        w["gauss_mu"].visible = w["gauss_sigma"].visible = "gaussian" in active
        w["const_value"].visible = "constant" in active
        w["lin_slope"].visible = w["lin_intercept"].visible = "linear" in active
        irls = robust_of(s, model) != {}
        w["method"].disabled = irls  # a robust prior is solved by IRLS: the menu keeps its choice for later
        self.solver_note.object = (IRLS_NOTE if irls else SOLVER_NOTE)
        w["solver_mass2"].visible = s.method == "massive" and not irls
        w["init_mass2"].visible = s.init == "kernel"
        w["display"].disabled = not kind.y_on_grid  # P or L of a density; regression draws h
        if s.file_templates:
            self.from_file.object = "**Templates from the file** (read-only, written back unchanged): " + "; ".join(
                f"t{j + 1} = {markdown_text(describe(t, model))}, p = {p:g}" for j, (t, p) in
                enumerate(zip(s.file_templates, s.file_weights)))
        self.from_file.visible = self.use_menu.visible = bool(s.file_templates)
        if s.extra_orders:
            self.orders_note.object = ("**Further prior orders from the file** (read-only, in the prior besides "
                                       "the slider's): " + ", ".join(f"{markdown_text(k)} = {v:g}" for k, v in
                                                                     sorted(s.extra_orders.items())))
        self.orders_note.visible = self.drop_orders.visible = bool(s.extra_orders)
        w["templates"].visible = not s.file_templates
        custom = s.grid_size == CUSTOM_GRID
        self.grid_text.visible = custom
        if custom:
            g = s.grid
            self.grid_text.object = (f"Grid of the file: x in [{g.x.min:g}, {g.x.max:g}] ({g.x.n} nodes), "
                                     f"y in [{g.y.min:g}, {g.y.max:g}] ({g.y.n} nodes). Choose a size above to go "
                                     f"back to the paper domain.")

    def __panel__(self):
        w = self.widgets
        h = lambda t: pn.pane.Markdown(f"**{t}**", margin=(8, 10, 0, 10))  # noqa: E731
        return pn.Column(
            # the buttons wrap onto a second line when the page's text is large (the font size control, app.main)
            pn.FlexBox(self.run, self.step, self.pause, self.reset, self.clear, self.undo, flex_wrap="wrap",
                       sizing_mode="stretch_width", max_width=310, margin=0, styles={"column-gap": "0px"}),
            w["live"],  # own line: beside the buttons its label was cut at 1280 px
            h("Canvas"), w["click_mode"], w["display"],
            self._accordion(
                ("Model and prior", pn.Column(w["model"], w["lam"], w["lam_x"], w["lam_y"], w["l0"],
                                              w["order"], w["order_coef"], self.orders_note, self.drop_orders)),
                ("Templates and mixture", pn.Column(self.from_file, self.use_menu, w["templates"], w["w_uniform"],
                                                    w["w_paper_t1"], w["w_paper_t2"], w["w_gaussian"], w["gauss_mu"],
                                                    w["gauss_sigma"], w["w_constant"], w["const_value"],
                                                    w["w_linear"], w["lin_slope"], w["lin_intercept"],
                                                    w["beta"])),
                ("Local prior: switch, hyperfield, cuts", self.local_panel),
                ("Robust prior: potential ψ, data term", self.robust_panel),
                ("Solver and grid", pn.Column(w["method"], w["solver_mass2"], w["init"], w["init_mass2"],
                                              self.solver_note,
                                              w["max_iter"], pn.Row(w["min_iter"], w["tol"]),
                                              w["grid_size"], self.grid_text,
                                              pn.Row(w["boundary_x"], w["boundary_y"]), w["truth"]))),
            width=310)

    #: The local and the robust prior's sections of the accordion (opened when a problem with one is loaded).
    LOCAL_SECTION = 2
    ROBUST_SECTION = 3

    def _accordion(self, *sections) -> pn.Accordion:
        acc = pn.Accordion(*sections, active=[0], toggle=False, width=300)
        s = self.session
        assert s is not None  # a view is built with its session

        def open_local(*_):
            if s.local_type() != "off" and self.LOCAL_SECTION not in acc.active:
                acc.active = [*acc.active, self.LOCAL_SECTION]
            if s.robust_prior and self.ROBUST_SECTION not in acc.active:
                acc.active = [*acc.active, self.ROBUST_SECTION]
        s.param.watch(open_local, ["local_prior", "robust_prior"])
        open_local()
        return acc
