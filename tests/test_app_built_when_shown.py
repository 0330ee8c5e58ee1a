"""Views a page builds only when its problem first shows them (app/views/common.py's BuiltWhenShown: the BYY tile, a
mixture's branch diagram, a local prior's strip; the template thumbnails of app/views/prior.py, the evidence card of
app/main.py): the default page carries none of their models, and each appears, drawn from the session's state, once
it is needed."""
import runpy

import panel as pn
import pytest
from bokeh.document import Document
from panel.io.state import set_curdoc
from test_app_document import MAIN, page

from app.session import BFTSession
from app.views.byy import BYYView
from app.views.common import BuiltWhenShown
from app.views.metastability import BranchDiagram
from app.views.prior import PriorView
from bftcore.studies.byy_demo import samples


def counted_place(session, view, shown, watch):
    """A :class:`BuiltWhenShown` place for ``view(session=session)`` and the list of the views it has made."""
    made: list = []

    def make():
        made.append(view(session=session))
        return made[-1]
    return BuiltWhenShown(session, make, shown, watch), made


def names_of(doc) -> set:
    return {m.name for m in doc.models if m.name}


def test_the_default_page_holds_no_thumbnail_byy_tile_branch_diagram_local_strip_or_evidence_plot():
    doc = page()
    names = names_of(doc)
    pn.state.curdoc = None
    assert "bft-mixing-bars" in names and "bft-canvas" in names  # the page is there
    assert not any(n.startswith("bft-thumb-") for n in names)
    assert not {"bft-byy-density", "bft-byy-weights-plot", "bft-byy-curve"} & names
    assert not {"bft-branch-plot", "bft-branches", "bft-branch-dot"} & names
    assert not {"bft-local-strip", "bft-local-theta"} & names
    assert not any("choose-lambda" in " ".join(getattr(m, "css_classes", []) or []) for m in doc.models)


def test_thumbnails_are_built_for_the_templates_a_problem_has_and_stay_hidden_after():
    s = BFTSession(live=False)
    view = PriorView(session=s)
    assert s.template_labels() == [] and view.thumb_panes == []
    assert len(view.thumbnails().objects) == 1  # the spacer that keeps the row's height
    assert s.load_preset("fig27")
    k = len(s.template_labels())
    assert k == 2 and len(view.thumb_panes) == k and view.thumbnails().objects == view.thumb_panes
    assert all(p.visible for p in view.thumb_panes)
    # each drawn from its own template's data
    assert [pipe.data["title"] for pipe in view.thumb_data] == [d["title"] for d in view._thumb_data()[:k]]
    assert s.load_preset("fig14")
    assert s.template_labels() == [] and len(view.thumb_panes) == k and not any(p.visible for p in view.thumb_panes)


def test_a_view_built_when_shown_waits_for_its_problem_and_then_follows_it():
    s = BFTSession(live=False)
    place, made = counted_place(s, BYYView, lambda session: session.kind.name == "density_1d",
                                ["model", "nx", "method"])
    s.param.update(ny=20)  # not a watched parameter, and not a 1-D density either
    assert made == [] and place.view is None
    y = (samples(7) + 8.0).round(2)
    s.param.update(nx=1, data=[[5.0, float(v)] for v in y])
    assert len(made) == 1 and place.view is made[0] and place.place.objects == [made[0].layout]
    assert made[0].layout.visible and made[0].fit is not None  # drawn from the session's state when built
    s.param.update(nx=10)
    s.param.update(nx=1)
    assert len(made) == 1 and made[0].layout.visible  # built once; it hides and shows itself after


def test_the_evidence_card_gets_its_contents_when_first_opened():
    doc = Document()
    with set_curdoc(doc):
        layout = runpy.run_path(str(MAIN), run_name="bft_page")["build"]()
        doc.add_root(layout.get_root(doc))  # builds the side, where the card is
        cards = [c for c in layout.select(pn.Card) if "bft-evidence-card" in c.css_classes]
        assert len(cards) == 1
        card = cards[0]
        assert card.collapsed and [type(o) for o in card.objects] == [pn.Spacer]
        card.collapsed = False
        assert len(card.objects) == 1 and type(card.objects[0]) is not pn.Spacer
        assert any("bft-choose-lambda" in (w.css_classes or []) for w in card.select(pn.widgets.Button))
    pn.state.curdoc = None


def test_the_branch_diagram_is_built_with_the_first_branches_and_draws_them():
    s = BFTSession(live=False)
    # app.main's place for it
    place, made = counted_place(s, BranchDiagram, lambda session: session.branches is not None, ["branches"])
    assert made == [] and s.branches is None
    doc = {"problem": {}, "betas": [0.5, 1.0, 2.0], "beta": 1.0, "complete": True,
           "branches": [{"label": "t1", "beta": [0.5, 1.0, 2.0], "mixing": [[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]],
                         "energy": [1.0, 1.0, 1.0]}]}
    s.branches = doc
    assert len(made) == 1 and place.view is made[0]
    view = made[0]
    assert view.lines.data["ys"] == [[0.9, 0.8, 0.7]] and view.plot.visible and view.figure.visible
    assert view.figure.x_range.start == pytest.approx(0.5 / 1.15)
    s.branches = None  # another problem: hidden, not built again
    assert len(made) == 1 and not view.plot.visible
