"""Session logic of issue 13 ("the lecture hall") that needs no browser: the early-stopping marker, the field buffer
of the history scrubber, log sliders hitting the presets' values, links carrying the preset, messages in words."""
from __future__ import annotations

import numpy as np
import pytest

from app.runner import FieldBuffer, failure_words, status_line
from app.session import BFTSession, preset_catalogue
from app.views.controls import SCALES, scale_index, scale_value
from app.views.share import read_url, url_query
from app.views.traces import overfitting_onset
from bftcore import api


def solved(preset=None, **values):
    s = BFTSession(live=False)
    if preset:
        assert s.load_preset(preset)
    s.param.update(**values)
    s.solve()
    return s


@pytest.mark.parametrize("preset", ["fig27", "overfitting"])
def test_the_marker_sits_at_the_test_errors_minimum_on_the_overfitting_presets(preset):
    s = solved(preset)
    onset = overfitting_onset(s.history)
    assert onset is not None
    tests = [r.test_error for r in s.history]
    k = int(np.argmin(tests))
    assert onset == (s.history[k].iteration, tests[k])


@pytest.mark.parametrize("preset", [None, "fig21", "fig23", "metastable_mixture"])
def test_no_marker_where_there_is_no_overfitting(preset):
    assert overfitting_onset(solved(preset).history) is None


def test_no_marker_on_a_three_template_run():
    s = solved("fig23", templates=["uniform", "paper_t1", "paper_t2"])
    assert overfitting_onset(s.history) is None


def test_the_scrubber_shows_the_field_of_iteration_k():
    s = solved()
    reference = list(api.iterate(s.to_config()))
    for k in (0, 1, len(s.history) // 2, len(s.history) - 1):
        assert s.pump.show_iteration(k)
        assert s.record.iteration == k
        np.testing.assert_allclose(s.record.P, reference[k].P, rtol=1e-6, atol=1e-7)
        assert s.record.energy == reference[k].energy


def test_the_scrubber_is_refused_while_a_run_plays():
    s = solved()
    s.running = True
    assert not s.pump.show_iteration(1)


def test_the_field_buffer_stays_within_its_budget_by_decimation():
    class Rec:
        def __init__(self, k):
            self.iteration, self.P, self.h = k, np.full((100, 100), float(k)), None
    buf = FieldBuffer(budget=10 * 100 * 100 * 4)  # ten float32 fields
    for k in range(200):
        buf.add(Rec(k))
        assert buf.nbytes <= buf.budget
    assert 0 in buf.fields and 199 in buf.fields and buf.stride > 1
    j, arr = buf.at(150)
    assert j <= 150 and arr.dtype == np.float32 and float(arr[0, 0]) == j


def test_log_sliders_hit_every_value_of_the_presets():
    names = [n for n in SCALES]
    for doc, _ in preset_catalogue().values():
        s = BFTSession(live=False)
        s.load_config(doc)
        for n in names:
            lo, hi, zero = SCALES[n]
            v = getattr(s, n)
            # lambda chosen by the evidence, and the masses and lambda_x / lambda_y the gate derives from a grid
            # fitted to real data, are not a preset's own values
            if (v == 0 and not zero) or (n == "lam" and "choose" in doc) or \
                    (n in ("solver_mass2", "init_mass2", "lam_x", "lam_y") and "fit" in doc.get("grid", {})):
                continue
            assert scale_value(scale_index(v, lo), lo) == v, (n, v)
    assert scale_value(scale_index(0.025, -4), -4) == 0.025 and repr(scale_value(scale_index(1.1, -3), -3)) == "1.1"


def test_a_log_slider_reaches_down_to_a_value_in_any_units():
    # the evidence's lambda of data in thousandths, or lambda_x of a fitted grid, lie decades below the slider's
    # default range: the slider lowers its lowest decade to give them their own position
    import param

    from app.views.controls import scale_slider
    s = BFTSession(live=False)
    w = scale_slider(s, "lam_x", 200)
    for v in (8.3e-8, 0.5, 2.4e-13):
        s.lam_x = v
        with param.edit_constant(w):  # as the browser does: the slider released where it shows the value
            w.value_throttled = w.value
        # the same value goes back
        assert s.lam_x == v, (v, w.value)


def test_a_link_with_a_preset_opens_the_preset():
    s = BFTSession(live=False)
    assert s.load_preset("fig27")
    other = BFTSession(live=False)
    read_url(other, url_query(s))
    assert other.preset == "fig27" and not other.edited and other.message == ""


def test_a_link_edited_after_a_preset_is_not_that_preset():
    s = BFTSession(live=False)
    assert s.load_preset("fig27")
    s.lam = 0.3
    assert s.preset == "" and s.edited
    other = BFTSession(live=False)
    read_url(other, url_query(s) + "&preset=fig27")
    assert other.preset == "" and other.lam == 0.3


@pytest.mark.parametrize("name", ["fig21", "metastable_mixture", "two_trends"])
def test_a_short_link_naming_a_preset_opens_that_preset(name):
    # the link a teacher writes on the board: ?preset=NAME alone gives the whole preset, as choosing it does
    loaded = BFTSession(live=False)
    assert loaded.load_preset(name)
    s = BFTSession(live=False)
    read_url(s, f"?preset={name}")
    assert s.preset == name and not s.edited and s.message == ""
    assert s.to_config() == loaded.to_config()


def test_a_short_link_with_a_preset_and_a_value_opens_the_preset_with_that_value():
    s = BFTSession(live=False)
    read_url(s, "?preset=metastable_mixture&lam=3")
    loaded = BFTSession(live=False)
    assert loaded.load_preset("metastable_mixture")
    assert s.lam == 3.0 and s.preset == "" and s.data == loaded.data and s.beta == loaded.beta != 1.0
    # a value of the link that is refused keeps the preset's, and the message says so
    s = BFTSession(live=False)
    read_url(s, "?preset=metastable_mixture&beta=abc")
    assert s.beta == loaded.beta and s.preset == "metastable_mixture"
    assert s.message == f"From the link: ignored beta=abc (β (mixture temperature): not a number); kept {loaded.beta}."


def test_a_link_naming_an_unknown_preset_says_so_and_keeps_the_defaults():
    s, default = BFTSession(live=False), BFTSession(live=False)
    read_url(s, "?preset=fig99")
    assert s.preset == "" and s.to_config() == default.to_config()
    assert "ignored preset=fig99 (no such preset; the presets are fig14" in s.message


def test_a_message_goes_away_with_the_next_change():
    s = BFTSession(live=False)
    s.message = "Refused something."
    s.lam = 0.5
    assert s.message == ""


def test_a_new_solver_restarts_from_the_configured_start():
    s = BFTSession()
    s.solve()
    s.method = "massive"
    assert s.history[0].iteration == 0
    assert not s.pump.shown_run.warm


def test_words_instead_of_exceptions():
    text = failure_words(np.linalg.LinAlgError("Singular matrix"))
    assert "LinAlgError" not in text and "singular" in text
    s = BFTSession(live=False)
    s.data = []
    s.solve()
    assert "nan" not in s.status and "training error — (no data points)" in status_line(s.history[-1])


def test_the_mixing_bars_follow_the_scrubber():
    """Issue 13: stepping through the a_j switch of a metastable run, the bars show the a_j of the iteration on
    screen, not the last one."""
    from app.views.mixing import MixingView
    s = BFTSession(live=False)
    assert s.load_preset("metastable_mixture")
    s.solve()
    view = MixingView(session=s)
    last = [float(a) for a in s.history[-1].mixing]
    assert view.bars.data["value"] == pytest.approx(last)
    early = next(r for r in s.history if abs(float(r.mixing[0]) - last[0]) > 0.5)  # before the switch
    assert s.pump.show_iteration(int(early.iteration))
    assert view.bars.data["value"] == pytest.approx([float(a) for a in early.mixing])
    assert s.pump.show_iteration(int(s.history[-1].iteration))
    assert view.bars.data["value"] == pytest.approx(last)


def test_the_presets_view_says_edited_by_hand_only_after_an_edit():
    from app.views.presets import PresetsView
    s = BFTSession(live=False)
    view = PresetsView(session=s)
    assert "Edited by hand" not in view.explain.object and "Pick a preset" in view.explain.object
    s.lam = 0.5
    assert "Edited by hand" in view.explain.object
    assert s.load_preset("fig27")
    assert view.explain.object == preset_catalogue()["fig27"][1]
    s.add_point(3.0, 3.0)  # points added to a preset keep its name and its explanation
    assert s.preset == "fig27" and view.explain.object == preset_catalogue()["fig27"][1]
    s.lam = 0.2
    assert s.preset == "" and "Edited by hand" in view.explain.object


def test_no_test_error_curve_or_legend_entry_without_a_test_error():
    """Issue 13 (regression mode showed an empty "test error" legend entry): shown only when the run has one."""
    from app.views.traces import TracesView
    s = BFTSession(live=False)
    assert s.load_preset("two_trends")
    s.solve()
    view = TracesView(session=s)
    entry = [i for i in view.bottom.legend[0].items if i.renderers[0] is view.test_renderers[0]][0]
    assert all(rec.test_error is None for rec in s.history)
    assert not entry.visible and not any(r.visible for r in view.test_renderers)
    assert s.load_preset("fig27")
    s.solve()
    assert entry.visible and all(r.visible for r in view.test_renderers)


def test_a_finished_regression_shows_the_exact_weights_beside_the_map_ones():
    """The exact posterior of a finished regression run (closed form, arrays) reaches the mixing bars as b_j next
    to the MAP a_j, and the regression view's exact band: nothing in the views takes an array for a truth value."""
    from app.views.mixing import MixingView
    from app.views.regression import RegressionView
    s = BFTSession(live=False)
    assert s.load_preset("two_trends")
    mixing, regression = MixingView(session=s), RegressionView(session=s)
    s.solve()
    b = s.result["exact"]["b"]
    k = len(b)
    assert list(mixing.bar_fig.x_range.factors) == [f"a{j + 1}" for j in range(k)] + [f"b{j + 1}" for j in range(k)]
    assert mixing.bar_fig.xaxis[0].major_label_orientation == "horizontal"   # short names, side by side
    assert mixing.bars.data["value"][k:] == pytest.approx([float(v) for v in b])
    assert len(regression.exact.data["h"]) == s.grid.x.n
