"""The dashboard's page as a Bokeh document, without a browser: it passes Bokeh's own validation.

A served session skips Bokeh's validation of each new document (app/app_hooks.py: about 0.1 s of every page's
server time, issue 28), because the page's models are the same for every session: validated here instead, with the
parts the page draws after loading (``later()`` in app/main.py: built at once outside a server)."""
import runpy
from pathlib import Path

import panel as pn
from bokeh.core.validation.check import check_integrity
from bokeh.document import Document
from bokeh.models import Plot
from panel.io.state import set_curdoc

MAIN = Path(__file__).resolve().parents[1] / "app" / "main.py"


def page() -> Document:
    """The page a session gets (app/main.py's ``build``; outside a server, ``servable`` adds nothing to the
    document, so its layout is added here)."""
    doc = Document()
    with set_curdoc(doc):
        build = runpy.run_path(str(MAIN), run_name="bft_page")["build"]
        doc.add_root(build().get_root(doc))
    return doc


def test_the_whole_page_passes_bokehs_validation():
    doc = page()
    models = list(doc.models)
    names = {m.name for m in models}
    # the whole page: the heatmap, and the live plots beside it that a served page draws after loading
    assert {"bft-canvas", "bft-energy", "bft-errors", "bft-mixing-bars"} <= names
    assert sum(isinstance(m, Plot) for m in models) >= 8
    issues = check_integrity(models)
    assert issues.error == [] and issues.warning == [], (issues.error, issues.warning)
    pn.state.curdoc = None
