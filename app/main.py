"""Entry point of `panel serve app`: builds one session's layout and marks it servable; nothing else.

`panel serve` executes this file as a script; ``app`` and ``bftcore`` are imported as the installed packages
(``pip install -e .`` from the repository), so the app serves from any working directory.
"""
import sys

# Panel's Location turns every all-digit value of a link into an int() when the page is built, before any code of
# ours sees the link; Python refuses more than 4 300 digits with an exception inside Panel, and the page never
# finished.  The request line is bounded by the HTTP server's header limit (64 KiB) and int() of 65 000 digits takes
# about 20 ms here, so the served app allows that many; app.views.share.read_url then refuses such a value by name.
if 0 < sys.get_int_max_str_digits() < 70_000:
    sys.set_int_max_str_digits(70_000)

import panel as pn  # noqa: E402

from app.configuration import MAX_POINTS  # noqa: E402
from app.session import BFTSession  # noqa: E402
from app.views.canvas import DataCanvas  # noqa: E402
from app.views.common import install_browser_patches  # noqa: E402
from app.views.controls import Controls  # noqa: E402
from app.views.mixing import MixingView  # noqa: E402
from app.views.presets import PresetsView  # noqa: E402
from app.views.regression import RegressionView  # noqa: E402
from app.views.share import SharePanel  # noqa: E402
from app.views.sweep import SweepView  # noqa: E402
from app.views.traces import TracesView  # noqa: E402

pn.extension("katex", notifications=False)

ABOUT = f"""
### Bayesian field theory, live
This dashboard solves J. C. Lemm's Bayesian field theory for the conditional density p(y|x) on a grid
(or for a regression function), with Gaussian process priors and mixtures of them, and shows every
iteration of the solver. Click the canvas to add data, move a slider, or pick a preset.

* **Canvas**: the learned density, data on top; the click mode switches between adding and removing points.
* **Traces**: energy, training and test error per iteration; overfitting and plateaus are marked.
* **Mixing**: the weight of each prior component (template) and its history.
* **β sweep**: follow the stationary mixing coefficient over the mixture temperature.

Each session is independent; at most {MAX_POINTS} points per session. The configuration you download is
the JSON document of the command line, so `python -m bftcore fit config.json` reproduces the run.
"""


def build():
    session = BFTSession(doc=pn.state.curdoc)
    canvas = DataCanvas(session=session)
    controls = Controls(session=session)
    presets = PresetsView(session=session)
    share = SharePanel(session=session)
    status = pn.pane.Str(session.param.status, styles={"font-size": "13px"}, margin=(12, 10, 0, 10),
                         name="status")
    count = pn.pane.Str(pn.bind(lambda d: f"{len(d)} points", session.param.data), margin=(12, 10, 0, 10),
                        styles={"font-size": "13px"}, width=90, sizing_mode="fixed")
    message = pn.pane.Alert(session.param.message, alert_type="warning", margin=(0, 10),
                            visible=pn.bind(bool, session.param.message), css_classes=["bft-message"])
    header = pn.Row(pn.pane.Markdown("## bftcore · Bayesian field theory", margin=(0, 10)), count, status)
    live = pn.Column(
        pn.Row(canvas, TracesView(session=session), sizing_mode="stretch_width"),
        pn.Row(RegressionView(session=session), MixingView(session=session), sizing_mode="stretch_width"),
        sizing_mode="stretch_width")
    tabs = pn.Tabs(("Live fit", live), ("β sweep", SweepView(session=session)),
                   ("About", pn.pane.Markdown(ABOUT, max_width=800)), dynamic=False, sizing_mode="stretch_width")
    sidebar = pn.Column(pn.pane.Markdown("**Presets**", margin=(0, 10)), presets, controls,
                        pn.pane.Markdown("**Share and export**", margin=(0, 10)), share,
                        width=320, sizing_mode="fixed", scroll=True, height=None)
    layout = pn.Column(header, message, pn.Row(sidebar, tabs, sizing_mode="stretch_width"),
                       sizing_mode="stretch_width")
    SharePanel.sync_url(session)
    install_browser_patches(pn.state.curdoc)
    pn.state.on_session_destroyed(lambda ctx: session.close())
    pn.state.onload(lambda: session.start_run(warm=False, play=True))
    return layout


build().servable(title="bftcore dashboard")
