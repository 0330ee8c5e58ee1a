"""The robust prior of a problem (Lemm Sects. 6.5 and 3.7.4, :mod:`bftcore.models.robust`): the prior potential psi
of Fig. 12 (Gaussian, cup, cusp, inverted cup) with an inset plotting psi and psi' in the document's units, its edge
threshold b, and a regression's data term of Fig. 5 (Gaussian, mixtures of 2 or 11 Gaussians, epsilon-insensitive).

Each control edits the session's ``robust_prior`` through the session's own methods, so the document, the link and
the file say the same.  The inset is drawn in the units the document gives b in (``S``, one noise width per node
difference for the l2 prior: :func:`bftcore.foundations.config._robust`), so it is the same picture in any units of
the data.  Choosing the inverted cup shows the warning of :data:`PATTERNS`, in the alarm colour on a density."""
from __future__ import annotations

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, Range1d

from bftcore.foundations.potentials import prior_potential

from ..session import BFTSession
from ..transport import user_action, without_debounce
from .common import make_figure

#: What a student reads when the inverted cup is chosen (issue 29): it rewards differences, so it sharpens and, on a
#: 2-D density, draws patterns.
PATTERNS = ("**The inverted cup rewards large differences** (its ψ falls from 0 to a < 0): it sharpens edges in a "
            "regression, but on a 2-D density it makes patterns — stripes and spots that no data ask for — not "
            "smoothing. Use the cup or the cusp to smooth while keeping edges.")
#: The warning's look on a density (the overfitting alarm's colours) and on a regression (a note).
WARNING_STYLES = {"density": {"background": "#fff3cd", "color": "#5c3c00", "border": "2px solid #b35900",
                              "padding": "4px 8px", "font-size": "13px"},
                  "regression": {"font-size": "12px", "color": "#5c3c00"}}
#: Half-width of the inset's s axis, in units of b.
INSET_SPAN = 4.0


def potential_curves(potential: dict | None, n: int = 241) -> dict:
    """``{"s", "psi", "dpsi"}`` of a document's ``prior.potential`` (None: the Gaussian s^2/2) in document units:
    s in units of S, psi in S^2 (the family's a is relative to b^2 / 2: :func:`bftcore.foundations.config._robust`)."""
    p = potential or {"name": "quadratic", "s0": 0.0}
    if p["name"] == "quadratic":
        psi = prior_potential("quadratic", s0=float(p.get("s0", 0.0)))
        span = 2.0 * INSET_SPAN
    else:
        b = float(p["b"])
        psi = prior_potential(p["name"], a=float(p["a"]) * b ** 2 / 2, b=b, gamma=float(p["gamma"]),
                              s0=float(p.get("s0", 0.0)))
        span = INSET_SPAN * b
    s = np.linspace(-span, span, n) + psi.s0
    return {"s": s, "psi": np.asarray(psi.value(s), float), "dpsi": np.asarray(psi.derivative(s), float)}


class RobustControls:
    """The potential (off / cup / cusp / inverted cup), b, the data term and its width, the psi inset and the
    inverted cup's warning.  Built once per page; :meth:`panel` is the accordion section."""

    POTENTIALS = {"Gaussian": "off", "cup": "cup", "cusp": "cusp", "inv. cup": "inverted_cup"}
    DATA_TERMS = {"Gaussian": "gaussian", "mixture of 2 Gaussians": "mixture2",
                  "mixture of 11 Gaussians": "mixture11", "ε-insensitive": "insensitive"}

    def __init__(self, session: BFTSession, width: int):
        s = self.session = session
        width -= 24  # inside the accordion's card, whose padding the sidebar does not leave room for
        self.potential = pn.widgets.RadioButtonGroup(options=list(self.POTENTIALS), value="Gaussian", width=width,
                                                     css_classes=["bft-robust-potential"])
        self.b = pn.widgets.FloatSlider(label="b: edge threshold (noise widths)", start=0.2,
                                        end=10.0, step=0.1, value=2.0, width=width, css_classes=["bft-robust-b"])
        self.data_term = pn.widgets.Select(label="data term ρ (Fig 5)", options=list(self.DATA_TERMS),
                                           value="Gaussian", width=width, css_classes=["bft-robust-data"])
        self.width = pn.widgets.FloatSlider(label="μ or ε (noise widths)", start=0.0, end=5.0, step=0.1,
                                            value=1.0, width=width, css_classes=["bft-robust-width"])
        fig = make_figure("ψ(s) and ψ′(s)", "s (units of b's S)", "", height=170, width=width, tools="",
                          x_range=Range1d(-8, 8), y_range=Range1d(-2, 2))
        fig.sizing_mode = "fixed"
        fig.toolbar_location = None
        self.curves = ColumnDataSource(dict(s=[], psi=[], dpsi=[]), name="bft-robust-inset")
        fig.line("s", "psi", source=self.curves, color="orange", line_width=3, legend_label="ψ")
        fig.line("s", "dpsi", source=self.curves, color="#1f77b4", line_width=2, line_dash="dashed",
                 legend_label="ψ′")
        fig.legend.location = "top_center"
        fig.legend.orientation = "horizontal"
        fig.legend.background_fill_alpha = 0.6
        self.inset = fig
        self.inset_pane = pn.pane.Bokeh(fig, width=width, height=170, margin=(0, 10),
                                        css_classes=["bft-robust-inset"])
        self.warning = pn.pane.Markdown(PATTERNS, width=width, visible=False, margin=(0, 10),
                                        css_classes=["bft-robust-warning"])
        self.note = pn.pane.Markdown(
            "Solved by IRLS (iteratively reweighted least squares) with a line search on the true energy, from the "
            "Gaussian fit. **Drag a data point** on the canvas (the outlier) and watch the fit.", width=width,
            styles={"font-size": "12px", "color": "#555"}, margin=(-6, 10, 0, 10))
        self._pulling = False
        self.potential.param.watch(user_action(lambda e: self._push(s.set_potential, self.POTENTIALS[e.new])),
                                   "value")
        self.data_term.param.watch(user_action(lambda e: self._push(s.set_data_term, self.DATA_TERMS[e.new])),
                                   "value")
        self.b.param.watch(user_action(lambda e: self._push(s.set_robust_value, "b", e.new)), "value_throttled")
        self.width.param.watch(user_action(self._on_width), "value_throttled")
        without_debounce(self.b, "value", "value_throttled")
        without_debounce(self.width, "value", "value_throttled")
        s.param.watch(self._pull, ["robust_prior", "model", "local_prior"])
        self._pull()

    def _push(self, fn, *args):
        if not self._pulling:
            fn(*args)

    def _on_width(self, event):
        term = (self.session.robust_prior or {}).get("data_term", {})
        key = "mu" if "mu" in term else "eps"
        self._push(self.session.set_robust_value, key, event.new)

    def _pull(self, *_):
        s = self.session
        rb = s.robust_prior or {}
        pot, term = rb.get("potential"), rb.get("data_term", {"name": "gaussian"})
        name = s.potential_name()
        density = s.kind.y_on_grid
        self._pulling = True
        try:
            self.potential.value = next((k for k, v in self.POTENTIALS.items() if v == name), "Gaussian")
            self.data_term.value = next(k for k, v in self.DATA_TERMS.items() if v == term["name"])
            if pot and pot["name"] != "quadratic":
                self.b.value = min(max(float(pot["b"]), self.b.start), self.b.end)
            width = term.get("mu", term.get("eps"))
            if width is not None:
                self.width.value = min(max(float(width), self.width.start), self.width.end)
        finally:
            self._pulling = False
        self.b.visible = bool(pot) and pot["name"] != "quadratic"
        self.data_term.disabled = density  # a density's data term is its counts
        self.width.visible = not density and term["name"] != "gaussian"
        if self.width.visible:
            self.width.label = "μ: means' spacing (noise widths)" if "mu" in term else \
                "ε: tube half-width (noise widths)"
        data = potential_curves(pot)
        self.curves.data = {k: v.tolist() for k, v in data.items()}
        top = float(np.max(np.abs(np.concatenate([data["psi"], data["dpsi"]])))) or 1.0
        self.inset.x_range.update(start=float(data["s"][0]), end=float(data["s"][-1]))
        self.inset.y_range.update(start=-1.1 * top, end=1.1 * top)  # in place: a new range is a new model
        self.warning.visible = name == "inverted_cup"
        self.warning.styles = WARNING_STYLES["density" if density else "regression"]

    def panel(self) -> pn.Column:
        return pn.Column(self.potential, self.b, self.inset_pane, self.warning, self.data_term, self.width,
                         self.note)


