"""Issue 28: the presets are named by what they show and grouped by chapter, a guide reads a preset before loading
it, and the line under the preset menu stays true after every action (a preset, the evidence, an upload, an edit)."""
import pytest

from app.session import BFTSession, preset_catalogue
from app.views.presets import GUIDE_PREFIX, PresetsView, menu_groups, option_titles
from app.views.share import load_upload, read_url
from bftcore.models import presets


def test_every_preset_has_a_title_and_exactly_one_chapter():
    names = [n for group in presets.GROUPS.values() for n in group]
    assert sorted(names) == sorted(presets.PRESETS) and len(set(names)) == len(names)
    assert set(presets.TITLES) == set(presets.PRESETS)
    assert presets.TITLES["fig27"] == "Fig 27: overfitting with too small λ"
    # the menu's values are the names (links and tests select by them); the page shows the titles
    values = [v for group in menu_groups().values() for v in group.values()]
    assert sorted(values) == sorted(presets.PRESETS)
    assert option_titles()["fig27"] == option_titles()[GUIDE_PREFIX + "fig27"] == presets.TITLES["fig27"]


def test_the_guide_reads_a_preset_before_loading_it():
    s = BFTSession(live=False)
    view = PresetsView(session=s)
    view.guide_select.value = GUIDE_PREFIX + "metastable_mixture"
    assert presets.TITLES["metastable_mixture"] in view.guide_text.object
    assert preset_catalogue()["metastable_mixture"][1] in view.guide_text.object
    assert s.preset == "" and view.select.value == "(choose a preset)"  # read, not loaded
    view._load_guided()
    assert s.preset == "metastable_mixture" and view.select.value == "metastable_mixture"


def test_choosing_lambda_by_the_evidence_says_so_with_the_preset():
    s = BFTSession(live=False)
    view = PresetsView(session=s)
    assert s.load_preset("fig21")  # (the evidence of a prior mixture, as in Fig 27, is not implemented)
    s.solve()
    s.compute_evidence()
    best = s.evidence["best"]["lambda"]
    s.choose_lambda_by_evidence()
    text = view.explain.object
    assert text.startswith(f"*{presets.TITLES['fig21']}, with λ chosen by the evidence (λ = ")
    assert f"{best:.3g})" in text and "Edited by hand" not in text
    s.lam = 0.3  # by hand after that: no longer the evidence's choice
    assert view.explain.object.startswith(f"*Edited by hand from {presets.TITLES['fig21']}.")


def test_an_edit_after_a_preset_names_the_preset():
    s = BFTSession(live=False)
    view = PresetsView(session=s)
    assert s.load_preset("fig27")
    s.lam = 0.7
    assert view.explain.object.startswith("*Edited by hand from Fig 27: overfitting with too small λ.")
    assert s.load_preset("fig14")
    assert view.explain.object == preset_catalogue()["fig14"][1]


@pytest.mark.parametrize("name", ["<b>x</b>*y*.csv", "$$x$$ [a](javascript:1).csv"])
def test_an_upload_says_your_data_with_the_file_name_as_text(name):
    s = BFTSession(live=False)
    view = PresetsView(session=s)
    assert s.load_preset("fig27")
    assert load_upload(s, b"x,y\n1,2\n2,3\n3,5\n4,4\n5,6\n", name)
    text = view.explain.object
    assert text.startswith("*Your data: ") and "starting problem" not in text
    assert "<b>" not in text and "$$" not in text and "](" not in text


def test_a_link_edited_from_a_preset_says_so():
    s = BFTSession(live=False)
    view = PresetsView(session=s)
    read_url(s, "?preset=fig27&lam=0.3")
    assert s.preset == "" and view.explain.object.startswith("*Edited by hand from Fig 27: ")


def test_colour_bar_exponent_and_title():
    from app.views.canvas import colour_exponent, colour_title
    assert colour_exponent(0, 0.25) == 0 and colour_exponent(0, 1500) == 0
    assert colour_exponent(0, 1e-3) == -3 and colour_exponent(0, 8e-4) == -4 and colour_exponent(0, 2.5e6) == 6
    assert colour_exponent(-3e-5, 0) == -5 and colour_exponent(0, 0) == 0
    assert colour_title("P", -3) == "P ×10⁻³" and colour_title("ln P", 0) == "ln P"


def test_a_link_with_a_bad_layout_theme_or_font_size_is_refused_by_name_and_the_rest_kept():
    from app.session import BFTSession
    from app.views.share import read_url
    s = BFTSession()
    read_url(s, "?layout=sideways&theme=purple&font_size=1000&lam=0.5")
    assert (s.layout, s.theme, s.font_size, s.lam) == ("auto", "light", 16, 0.5)
    for words in ("ignored layout=sideways", "ignored theme=purple", "ignored font_size=1000"):
        assert words in s.message
    read_url(s, "?layout=workbench&theme=dark&font_size=20")
    assert (s.layout, s.theme, s.font_size) == ("workbench", "dark", 20)
