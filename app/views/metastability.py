"""Metastability you can watch (issue 28): the alarm with its jump, and the branch diagram beside the heatmap.

The check and the branches are the session's (``session.metastable`` and ``session.branches``, computed on the heavy
lane once a run has ended: :meth:`app.session.BFTSession.check_metastability`); two views draw them, the alarm
(:class:`MetastabilityView`) and the diagram (:class:`BranchDiagram`, built once there are branches).  The diagram
is a₁ against β (log axis): the branch through the β it was computed at from each template and from cold, filling
in point by point; the current state is the black dot (β of the slider, a₁ of the iteration on screen), which moves
with every frame of a run and every move of the β slider, so that moving β past the end of a branch shows the
jump.  The alarm is the element with ``data-testid="metastability-alarm"``, on the page exactly while a lower
solution is known; its words come from bftcore and reach the page as text (escaped).
"""
from __future__ import annotations

import panel as pn
import param
from bokeh.models import ColumnDataSource, Range1d

from ..session import BFTSession
from ..transport import user_action
from .common import SERIES, alarm_html, hidden_until_drawn, legend_outside, make_figure, replace_data, show_drawn
from .common import set_changed as _set


def alarm_html_of(verdict: dict | None) -> str:
    """The alarm's markup for a verdict (:func:`app.views.common.alarm_html`), or '' when there is none."""
    return alarm_html("metastability-alarm", verdict)


def branch_lines(doc: dict | None) -> dict:
    """The diagram's lines of a branches document: one (β, a₁) polyline per start, with its label and colour."""
    out: dict = {"xs": [], "ys": [], "label": [], "color": []}
    for i, br in enumerate((doc or {}).get("branches", [])):
        pts = sorted((b, m[0]) for b, m in zip(br["beta"], br["mixing"]) if m)
        out["xs"].append([float(b) for b, _ in pts])
        out["ys"].append([float(a) for _, a in pts])
        out["label"].append(str(br["label"]))
        out["color"].append(SERIES[i % len(SERIES)])
    return out


class MetastabilityView(pn.viewable.Viewer):
    """The alarm and its "Jump there" button; the layout (app.main) puts them at the top of the live plots
    (:meth:`alarm_row`).  The branch diagram is :class:`BranchDiagram`, built once the session has branches."""

    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        self.alarm = pn.pane.HTML("", sizing_mode="stretch_width", margin=(2, 5), css_classes=["bft-meta-alarm"],
                                  visible=False)
        self.jump = pn.widgets.Button(label="Jump there", button_type="primary", width=120, visible=False,
                                      css_classes=["bft-jump"], margin=(2, 5),
                                      description="restart from the lower solution the alarm names")
        self.jump.on_click(user_action(lambda _e: self.session.jump_to_lower()))
        self.session.param.watch(self._alarm, ["metastable"])
        self._alarm()

    def _alarm(self, *_):
        verdict = (self.session.metastable or {}).get("verdict")
        text = alarm_html_of(verdict)
        if self.alarm.object != text:
            self.alarm.object = text
        self.alarm.visible = self.jump.visible = bool(text)

    def alarm_row(self):
        """The alarm and its button, which the layout (app.main) puts at the top of the live plots."""
        return pn.Row(self.alarm, self.jump, sizing_mode="stretch_width", margin=0)

    def __panel__(self):
        return self.alarm_row()


class BranchDiagram(pn.viewable.Viewer):
    """The branch diagram beside the heatmap: a₁ against β along each branch, the current state a dot.  Only a
    mixture's run has branches, so the layout builds it once the session first has them
    (:class:`app.views.common.BuiltWhenShown`: 46 models the other pages do not pay); hidden again for a problem
    without them."""

    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        self.lines = ColumnDataSource(branch_lines(None), name="bft-branches")
        self.dot = ColumnDataSource(dict(beta=[1.0], a=[0.5]), name="bft-branch-dot")
        f = make_figure("branches: a₁ vs β", "β (log scale)", "a₁", height=140,
                        x_axis_type="log", y_range=Range1d(-0.05, 1.05), x_range=Range1d(0.1, 10.0),
                        name="bft-branch-plot")
        f.yaxis.ticker.desired_num_ticks = 3
        f.multi_line("xs", "ys", source=self.lines, line_color="color", line_width=3, legend_field="label",
                     line_alpha=0.85)
        f.scatter("beta", "a", source=self.dot, size=13, color="black", line_color="white", line_width=2,
                  legend_label="now")
        legend_outside(f)
        self.figure = f
        self.plot = hidden_until_drawn(f, sizing_mode="stretch_width")
        self.session.param.watch(self._branches, ["branches"])
        self.session.param.watch(self._dot, ["record", "beta"])
        self._branches()

    def _branches(self, *_):
        doc = self.session.branches
        if doc is None:
            show_drawn(self.plot, False)
            return
        lines = branch_lines(doc)
        replace_data(self.lines, lines)
        betas = [float(b) for b in doc.get("betas", [])]
        if betas:
            _set(self.figure.x_range, start=min(betas) / 1.15, end=max(betas) * 1.15)
        done = "" if doc.get("complete") else " …"
        self.figure.title.text = f"branches: a₁ vs β{done}"
        self._dot()
        show_drawn(self.plot, True)

    def _dot(self, *_):
        rec = self.session.record
        mixing = None if rec is None else rec.mixing
        if mixing is None or len(mixing) == 0:
            return
        new = dict(beta=[float(self.session.beta)], a=[float(mixing[0])])
        replace_data(self.dot, new)

    def __panel__(self):
        return pn.Column(self.plot, sizing_mode="stretch_width", css_classes=["bft-metastability"])
