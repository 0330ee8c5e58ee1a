"""The BokehJS patches of the page (app.transport.BROWSER_PATCHES_JS) in a real browser: each one finds what it
replaces on the tested Bokeh and is installed.  The patches feature-detect, so a BokehJS that renamed a method would
run the page unpatched without a word: this test is the loud failure."""
import pytest

from app.harness import wait_until
from app.transport import BOKEH_TESTED

pytestmark = [pytest.mark.ui, pytest.mark.skipif(not BOKEH_TESTED, reason="an untested Bokeh: no patches")]

PATCHED = """() => { const need = (m) => { try { return Bokeh.require(m); } catch (e) { return null; } };
  const proto = (mod, cls) => { const m = need(mod); return m && m[cls] ? m[cls].prototype : null; };
  const own = (p) => !!p && Object.prototype.hasOwnProperty.call(p, "__bft_patched") && p.__bft_patched === true;
  return {
    stylesheet: own(proto("core/dom", "InlineStyleSheet")),
    legend: own(proto("models/annotations/legend", "LegendView")),
    layout: own(proto("models/layouts/layout_dom", "LayoutDOMView")),
    button: own(proto("models/widgets/abstract_button", "AbstractButtonView")),
    visuals: own(proto("core/visuals/visual", "VisualProperties")),
  }; }"""


def test_every_browser_patch_is_installed_on_the_tested_bokeh(page):
    patched = wait_until(lambda: (lambda p: p if all(p.values()) else None)(page.evaluate(PATCHED)), timeout=30)
    assert patched == {k: True for k in ("stylesheet", "legend", "layout", "button", "visuals")}
    assert not page.errors, page.errors
