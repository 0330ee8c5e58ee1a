"""The control sidebar: model, prior, templates, solver, grid, run buttons, data editing."""
from __future__ import annotations

import math
from functools import partial

import panel as pn
import param

from bftcore.templates import KINDS, describe, kinds

from ..configuration import CUSTOM_GRID
from ..session import MENU_KINDS, BFTSession

#: Sliders whose change starts a solve send their value on release only (value_throttled).
THROTTLED = dict(throttled=True)


def template_options(model: str) -> dict:
    """The template menu of a model ("density" or "regression"): label -> kind, from bftcore's registry."""
    return {KINDS[(model, k)].label: k for k in kinds(model, menu=True)}


class Controls(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.session
        sp = s.param
        W = 280

        def slider(p, step=None, **kw):
            return pn.widgets.FloatSlider.from_param(p, width=W, step=step or 0.01, **THROTTLED, **kw)

        self.run = pn.widgets.Button(name="▶ Run", button_type="success", width=62)
        self.step = pn.widgets.Button(name="Step", width=58)
        self.pause = pn.widgets.Button(name="❚❚ Pause", width=72)
        self.reset = pn.widgets.Button(name="Reset", width=62)
        self.run.on_click(lambda _: s.play())
        self.step.on_click(lambda _: s.step())
        self.pause.on_click(lambda _: s.pause())
        self.reset.on_click(lambda _: s.reset(play=False))
        self.clear = pn.widgets.Button(name="Clear points", width=110)
        self.undo = pn.widgets.Button(name="Undo", width=70)
        self.clear.on_click(lambda _: s.clear_points())
        self.undo.on_click(lambda _: s.undo())
        self.widgets = {
            "model": pn.widgets.Select.from_param(sp.model, width=W),
            "click_mode": pn.widgets.RadioButtonGroup.from_param(sp.click_mode, width=W, button_type="primary",
                                                                 button_style="outline"),
            "display": pn.widgets.RadioButtonGroup.from_param(sp.display, width=W, button_type="primary",
                                                              button_style="outline"),
            "lam": slider(sp.lam), "lam_x": slider(sp.lam_x), "lam_y": slider(sp.lam_y),
            "l0": slider(sp.l0),
            "order": pn.widgets.RadioButtonGroup.from_param(sp.order, width=W),
            "order_coef": slider(sp.order_coef, step=0.001, format="0.000"),
            "templates": pn.widgets.CheckButtonGroup.from_param(
                sp.templates, options=template_options("density"), width=W,
                button_type="primary", button_style="outline"),
            "w_uniform": slider(sp.w_uniform), "w_paper_t1": slider(sp.w_paper_t1),
            "w_paper_t2": slider(sp.w_paper_t2), "w_gaussian": slider(sp.w_gaussian),
            "gauss_mu": slider(sp.gauss_mu, step=0.1), "gauss_sigma": slider(sp.gauss_sigma, step=0.1),
            "w_constant": slider(sp.w_constant), "const_value": slider(sp.const_value, step=0.1),
            "w_linear": slider(sp.w_linear), "lin_slope": slider(sp.lin_slope, step=0.05),
            "lin_intercept": slider(sp.lin_intercept, step=0.1),
            "log10_beta": pn.widgets.FloatSlider(name="log₁₀ β (mixture temperature)", start=-3.0, end=3.0,
                                                 step=0.05, value=math.log10(s.beta), width=W),
            "method": pn.widgets.RadioButtonGroup.from_param(sp.method, width=W),
            "solver_mass2": slider(sp.solver_mass2, step=0.001, format="0.000"),
            "init": pn.widgets.Select.from_param(sp.init, width=W),
            "init_mass2": slider(sp.init_mass2, step=0.01),
            "max_iter": pn.widgets.IntSlider.from_param(sp.max_iter, width=W, **THROTTLED),
            "min_iter": pn.widgets.IntInput.from_param(sp.min_iter, width=W // 2 - 5),
            "tol": pn.widgets.FloatInput.from_param(sp.tol, width=W // 2 - 5, format="0e+0"),
            "grid_size": pn.widgets.Select.from_param(sp.grid_size, width=W),
            "boundary_x": pn.widgets.RadioButtonGroup.from_param(sp.boundary_x, width=W // 2 - 5),
            "boundary_y": pn.widgets.RadioButtonGroup.from_param(sp.boundary_y, width=W // 2 - 5),
            "truth": pn.widgets.RadioButtonGroup.from_param(sp.truth, width=W),
            "frame_ms": pn.widgets.IntSlider.from_param(sp.frame_ms, width=W, step=10),
            "live": pn.widgets.Checkbox.from_param(sp.live),
        }
        self.beta_text = pn.pane.Markdown("", margin=(-12, 10, 0, 10), styles={"font-size": "12px"})
        # what a loaded file sets and the controls cannot show: read-only, kept in the configuration
        self.from_file = pn.pane.Markdown("", width=W, styles={"font-size": "12px"}, visible=False,
                                          name="from-file")
        self.use_menu = pn.widgets.Button(name="Use the menu instead", width=W, visible=False)
        self.use_menu.on_click(lambda _: s.use_menu_templates())
        self.orders_note = pn.pane.Markdown("", width=W, styles={"font-size": "12px"}, visible=False,
                                            name="extra-orders")
        self.drop_orders = pn.widgets.Button(name="Keep only the slider's order", width=W, visible=False)
        self.drop_orders.on_click(lambda _: setattr(s, "extra_orders", {}))
        self.grid_text = pn.pane.Markdown("", width=W, styles={"font-size": "12px"}, visible=False)
        self.widgets["log10_beta"].param.watch(self._on_log_beta, "value_throttled")
        s.param.watch(self._sync_visibility, ["model", "templates", "method", "init", "beta", "file_templates",
                                              "file_weights", "extra_orders", "grid_size", "x_min", "x_max", "nx",
                                              "y_min", "y_max", "ny"])
        for name, w in self.widgets.items():  # a loaded value beyond a slider's soft range widens the slider
            if isinstance(w, (pn.widgets.FloatSlider, pn.widgets.IntSlider)) and name in s.param:
                s.param.watch(partial(self._widen, w), [name])
                self._widen(w)
        self._sync_visibility()

    def _on_log_beta(self, event):
        beta = 10.0 ** event.new
        if abs(math.log10(self.session.beta) - event.new) > 1e-9:
            self.session.beta = beta

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
        regression = s.is_regression
        model = "regression" if regression else "density"
        w["templates"].options = template_options(model)
        active = s.template_kinds()  # empty while a file's templates are in use
        for k in MENU_KINDS:
            w[f"w_{k}"].visible = k in active
        w["gauss_mu"].visible = w["gauss_sigma"].visible = "gaussian" in active
        w["const_value"].visible = "constant" in active
        w["lin_slope"].visible = w["lin_intercept"].visible = "linear" in active
        w["solver_mass2"].visible = s.method == "massive"
        w["init_mass2"].visible = s.init == "kernel"
        w["display"].disabled = regression
        lb = math.log10(s.beta)
        slider = w["log10_beta"]
        slider.start, slider.end = min(slider.start, lb), max(slider.end, lb)
        if abs(slider.value - lb) > 1e-9:
            slider.value = lb
        self.beta_text.object = f"β = {s.beta:.4g}"
        if s.file_templates:
            self.from_file.object = "**Templates from the file** (read-only, written back unchanged): " + "; ".join(
                f"t{j + 1} = {describe(t, model)}, p = {p:g}" for j, (t, p) in
                enumerate(zip(s.file_templates, s.file_weights)))
        self.from_file.visible = self.use_menu.visible = bool(s.file_templates)
        if s.extra_orders:
            self.orders_note.object = ("**Further prior orders from the file** (read-only, in the prior besides "
                                       "the slider's): " + ", ".join(f"{k} = {v:g}" for k, v in
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
            pn.Row(self.run, self.step, self.pause, self.reset),
            pn.Row(self.clear, self.undo), w["live"],  # own line: beside the buttons its label was cut at 1280 px
            h("Canvas"), w["click_mode"], w["display"],
            pn.Accordion(
                ("Model and prior", pn.Column(w["model"], w["lam"], w["lam_x"], w["lam_y"], w["l0"],
                                              w["order"], w["order_coef"], self.orders_note, self.drop_orders)),
                ("Templates and mixture", pn.Column(self.from_file, self.use_menu, w["templates"], w["w_uniform"],
                                                    w["w_paper_t1"], w["w_paper_t2"], w["w_gaussian"], w["gauss_mu"],
                                                    w["gauss_sigma"], w["w_constant"], w["const_value"],
                                                    w["w_linear"], w["lin_slope"], w["lin_intercept"],
                                                    w["log10_beta"], self.beta_text)),
                ("Solver and grid", pn.Column(w["method"], w["solver_mass2"], w["init"], w["init_mass2"],
                                              w["max_iter"], pn.Row(w["min_iter"], w["tol"]), w["frame_ms"],
                                              w["grid_size"], self.grid_text,
                                              pn.Row(w["boundary_x"], w["boundary_y"]), w["truth"])),
                active=[0], toggle=False, width=300),
            width=310)
