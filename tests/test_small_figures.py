"""The small figures of [000] chapters 2-5 (bftcore.studies.small_figures): Fig 3's mutual information against its
closed-form properties and an independent Monte Carlo, Figs 6, 9, 10's maxima against closed forms, the documents'
schema, the drawers, and ``python -m bftcore reproduce NAME|--list`` for them."""
import io
import json
import math
import re
import struct
import subprocess
import sys

import numpy as np
import pytest

from bftcore.__main__ import REPRODUCIBLE, main
from bftcore.outputs import figures
from bftcore.studies import small_figures as sf


@pytest.fixture(scope="module")
def fig3():
    return sf.fig3_document()


@pytest.fixture(scope="module")
def heatmaps():
    return {name: sf.SMALL_FIGURES[name].compute() for name in ("fig6", "fig9", "fig10")}


def panel(doc, **match):
    return next(p for p in doc["panels"] if all(p.get(k) == v for k, v in match.items()))


# ------------------------------------------------------------------------------------------------ Fig 3
def test_factorial_prior_keeps_mutual_information_zero(fig3):
    """(37): a factorial prior stays factorial under local data, so M = 0 at every step (rounding only)."""
    fact = fig3["panels"][2]
    assert fact["prior"] == pytest.approx(list(np.outer([0.7, 0.3], [0.4, 0.6]).ravel()))
    assert max(fact["M"]) < 1e-11
    post = np.array(fact["posterior"])  # and the posterior factorises: p(+,+) p(-,-) = p(+,-) p(-,+)
    assert np.allclose(post[:, 0] * post[:, 3], post[:, 1] * post[:, 2], atol=1e-15)


def test_correlated_prior_mutual_information_decays_to_the_true_state(fig3):
    """The digest's numbers, with x = x_b where rng.random() >= 1/2 (default_rng(1)), then the noise."""
    corr = fig3["panels"][0]
    assert corr["M"][0] > 0.1                       # the prior's M: the signs at x_a and x_b are correlated
    assert corr["M"][2] < 1e-3
    assert corr["posterior"][50][0] > 0.99          # state 0 is the true h = (+1, +1)
    for p in fig3["panels"]:
        assert min(p["M"]) >= 0.0
        assert np.allclose(np.sum(p["posterior"], axis=1), 1.0, atol=1e-12)


def test_unlucky_order_lets_a_wrong_state_lead_first(fig3):
    lucky, unlucky = fig3["panels"][0], fig3["panels"][1]
    assert sorted(map(tuple, lucky["data"])) == sorted(map(tuple, unlucky["data"]))   # the same data, reordered
    y = [d[1] for d in unlucky["data"]]
    assert y == sorted(y)
    post = np.array(unlucky["posterior"])
    assert np.all(post[1:11, 3] > 0.8)              # (-1, -1), favoured by the prior's correlation, leads
    assert post[50, 0] > 0.99
    assert post[50] == pytest.approx(np.array(lucky["posterior"][50]), abs=1e-12)  # order does not matter at the end


def test_quadrature_converged_and_agrees_with_monte_carlo(fig3):
    corr = fig3["panels"][0]
    for w in (corr["prior"], corr["posterior"][1], corr["posterior"][3]):
        assert sf.mutual_information(w) == pytest.approx(sf.mutual_information(w, nodes=961), abs=1e-13)
    for w in (corr["prior"], corr["posterior"][1]):
        mc, se = sf.mutual_information_mc(w, samples=200_000, seed=3)
        assert abs(mc - sf.mutual_information(w)) < 4 * se


def test_mutual_information_of_perfectly_correlated_signs_tends_to_ln2():
    """Two equally likely states (+,+), (-,-): M -> ln 2 as sigma -> 0 (y_a determines y_b's sign), and M of a pure
    state is 0."""
    w = [0.5, 0.0, 0.0, 0.5]
    assert sf.mutual_information(w, sigma=0.05, nodes=2001) == pytest.approx(math.log(2), abs=1e-6)
    assert sf.mutual_information([1.0, 0.0, 0.0, 0.0]) < 1e-15


# ------------------------------------------------------------------------------------------------ Figs 6, 9, 10
def test_fig6_maxima_run_off_the_grid_on_the_closed_form_profile(heatmaps):
    doc = heatmaps["fig6"]
    uni, comp = panel(doc, hyperprior="uniform"), panel(doc, hyperprior="compensating")
    (mu,), (mc,) = uni["maxima"], comp["maxima"]
    assert mu["edge"] == "upper" and mu["gamma"] == uni["gamma"][-1] == pytest.approx(1e3)
    assert mc["edge"] == "lower" and mc["gamma"] == comp["gamma"][0] == pytest.approx(1e-3)
    for m in (mu, mc):                              # h*(gamma) = gamma / (1 + gamma) at the edge
        assert m["h"] == pytest.approx(m["gamma"] / (1 + m["gamma"]), abs=1e-8)
    gamma, h = np.array(uni["gamma"]), np.array(uni["h"])
    for p in (uni, comp):                           # the grid's argmax over h follows the profile, every gamma
        best = h[np.argmax(np.array(p["log_p"]), axis=0)]
        assert np.all(np.abs(best - gamma / (1 + gamma)) <= (h[1] - h[0]) / 2 + 1e-12)
    profile = 0.5 * np.log(gamma) - 0.5 * gamma / (1 + gamma)   # uniform: increasing, so the maximum is gamma -> inf
    assert np.all(np.diff(profile) > 0)
    gap = profile - np.array(uni["log_p"]).max(axis=0)   # a node within dh/2 of h*: below by <= (1+gamma) dh^2/8
    assert np.all(gap >= -1e-12) and np.all(gap <= (1 + gamma) * (h[1] - h[0]) ** 2 / 8 + 1e-12)


def test_fig10_maximum_matches_the_one_component_asymptote(heatmaps):
    """Far from 0 one template dominates: p ~ beta exp(-beta ((h - y_D)^2 + (h - 1)^2) / 2), maximal at
    h* = (1 + y_D)/2, beta* = 4/(1 - y_D)^2; the other component is e^-24 smaller at y_D = 0.5."""
    m = panel(heatmaps["fig10"], y_D=0.5)["maxima"]
    assert len(m) == 1 and "edge" not in m[0]
    assert m[0]["h"] == pytest.approx(0.75, abs=1e-6)
    assert m[0]["beta"] == pytest.approx(16.0, rel=1e-6)
    m3 = panel(heatmaps["fig10"], y_D=0.3)["maxima"][0]
    assert m3["h"] == pytest.approx(0.65, abs=1e-4) and m3["beta"] == pytest.approx(4 / 0.49, rel=1e-3)


def test_beta_at_the_maximum_grows_with_y_d(heatmaps):
    betas = [panel(heatmaps["fig9"], y_D=0.0, hyperprior="uniform")["maxima"][0]["beta"],
             panel(heatmaps["fig9"], y_D=0.1, hyperprior="uniform")["maxima"][0]["beta"],
             panel(heatmaps["fig10"], y_D=0.3)["maxima"][0]["beta"],
             panel(heatmaps["fig10"], y_D=0.5)["maxima"][0]["beta"]]
    assert np.all(np.diff(betas) > 0), betas


def test_fig9_symmetric_maxima_at_y_d_zero_and_compensating_at_beta_zero(heatmaps):
    doc = heatmaps["fig9"]
    sym = panel(doc, y_D=0.0, hyperprior="uniform")["maxima"]
    assert len(sym) == 2                             # not the saddle at h = 0, beta = 2 between them
    assert sym[0]["h"] == pytest.approx(-sym[1]["h"], abs=1e-6) and abs(sym[0]["h"]) > 0.4
    assert sym[0]["beta"] == pytest.approx(sym[1]["beta"], rel=1e-6)
    for y_d in (0.0, 0.1):
        (m,) = panel(doc, y_D=y_d, hyperprior="compensating")["maxima"]
        assert m["edge"] == "lower" and m["beta"] == pytest.approx(1e-3)
        # p(beta) ∝ 1/beta: log p <= ln 2, reached as beta -> 0; at small beta h* -> y_D / 2
        assert m["log_p"] < math.log(2) and m["log_p"] == pytest.approx(math.log(2), abs=1e-3)
        assert m["h"] == pytest.approx(y_d / 2, abs=1e-3)


def test_the_stated_compensating_hyperprior_would_not_put_the_maximum_at_beta_zero():
    """Fig 9's text says p(beta) ∝ 1/sqrt(beta), its formula (and "the maximum is at beta = 0") need 1/beta: with
    1/sqrt(beta) one sqrt(beta) stays and the maximum is inside the grid."""
    h, beta = np.linspace(-1.5, 1.5, 121), np.geomspace(1e-3, 1e3, 121)
    stated = sf.grid_maxima(lambda a, b: sf.mixture_log_p(a, b, 0.1, "compensating") + 0.5 * np.log(b), h, beta)
    assert stated[0]["edge"] is None and 0.5 < stated[0]["s"] < 2


def test_heatmap_documents_schema(heatmaps):
    for name, doc in heatmaps.items():
        assert doc["figure"] == name
        key = "gamma" if name == "fig6" else "beta"
        for p in doc["panels"]:
            assert {"hyperprior", "h", key, "log_p", "maxima", "y_D"} <= set(p)
            z = np.array(p["log_p"])
            assert z.shape == (len(p["h"]), len(p[key])) and np.all(np.isfinite(z))
            assert p[key][0] == pytest.approx(1e-3) and p[key][-1] == pytest.approx(1e3)
            assert p["maxima"]
            for m in p["maxima"]:
                assert set(m) <= {"h", key, "log_p", "edge"} and m.get("edge", "upper") in ("upper", "lower")
                assert all(math.isfinite(m[k]) for k in ("h", key, "log_p"))
                assert p["h"][0] < m["h"] < p["h"][-1]          # the h range holds every maximum
                assert m["log_p"] >= z.max() - 1e-12 or m.get("edge")   # refined, at least the grid's best
        json.dumps(doc, allow_nan=False)


def test_fig3_document_schema(fig3):
    assert fig3["figure"] == "fig3" and len(fig3["panels"]) == 3
    for p in fig3["panels"]:
        assert {"prior", "sigma", "M", "posterior"} <= set(p)
        assert len(p["prior"]) == 4 and p["sigma"] == 1.0
        assert len(p["M"]) == 51 and len(p["posterior"]) == 51 and all(len(w) == 4 for w in p["posterior"])
        assert np.all(np.isfinite(p["M"])) and np.all(np.isfinite(p["posterior"]))
    json.dumps(fig3, allow_nan=False)


# ------------------------------------------------------------------------------------------------ drawing
def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_curves_drawer_draws_a_toy_document():
    """The generic drawer of Figs 5 and 12 to come: panels of named x/y curves (a curve may be labelled "x")."""
    doc = {"figure": "toy", "panels": [
        {"title": "squares", "xlabel": "e", "ylabel": "E(e)",
         "curves": [{"label": "x", "x": [0, 1, 2], "y": [0, 1, 4]}, {"label": "x^2", "x": [0, 1, 2], "y": [0, 1, 8]}]},
        {"curves": [{"label": "one", "x": [0.0, 1.0], "y": [1.0, 1.0]}]}]}
    data = figures.small_figure_png("curves", doc)
    assert png_size(data) == (1200, 450)
    from PIL import Image
    img = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    for colour in figures.PALETTE[:2]:                          # both curves of the first panel are drawn
        rgb = [int(colour[k:k + 2], 16) for k in (1, 3, 5)]
        assert (img == rgb).all(axis=2).sum() > 200, colour


# ------------------------------------------------------------------------------------------------ the CLI
def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "bftcore", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_cli_json_and_png(tmp_path, fig3):
    out = cli("reproduce", "fig3", "--json", "--png", tmp_path / "fig3.png", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
    assert doc == json.loads(json.dumps(fig3))
    data = (tmp_path / "fig3.png").read_bytes()
    assert png_size(data) == (1200, 1140) and len(data) > 20_000


def test_cli_list_names_everything_and_an_unknown_name_lists_them(capsys):
    assert main(["reproduce", "--list"]) == 0
    listed = capsys.readouterr().out
    names = [line.split()[0] for line in listed.splitlines()]
    assert names == REPRODUCIBLE
    assert set(sf.SMALL_FIGURES) <= set(names) and {"fig7", "fig14", "fig28", "old_faithful"} <= set(names)
    # the name column is as wide as the longest name (image_completion)
    assert re.search(r"^fig10 +000 \(Lemm, BFT\) Fig 10: ", listed, re.M)
    assert main(["reproduce", "--list", "--json"]) == 0
    assert [f["name"] for f in json.loads(capsys.readouterr().out)["figures"]] == REPRODUCIBLE
    assert main(["reproduce", "fig99"]) == 2
    err = capsys.readouterr().err
    assert "unknown figure 'fig99'" in err and "fig10" in err and "fig14" in err


def test_cli_heatmap_png_and_summary(tmp_path, capsys):
    assert main(["reproduce", "fig10", "--png", str(tmp_path / "fig10.png")]) == 0   # in process: no start-up
    assert "y_D = 0.5: maximum h = 0.75, beta = 16" in capsys.readouterr().out
    assert png_size((tmp_path / "fig10.png").read_bytes()) == (1200, 520)


def test_cli_png_of_a_fit_preset_and_none_for_the_sweep(tmp_path, capsys):
    """--png of reproduce draws a fit preset's figure too (the fit's own declaration); fig7 has none and says so."""
    assert main(["reproduce", "fig14", "--png", str(tmp_path / "fig14.png")]) == 0
    assert "energy" in capsys.readouterr().out
    assert png_size((tmp_path / "fig14.png").read_bytes()) == figures.FIGURE_SIZE
    assert main(["reproduce", "fig7", "--png", str(tmp_path / "fig7.png")]) == 2
    assert "fig7 is a sweep document and has no figure" in capsys.readouterr().err
    assert not (tmp_path / "fig7.png").exists()


@pytest.mark.parametrize("name, panels, curves", [("fig5", 3, 1), ("fig12", 3, 2)])
def test_fig5_and_fig12_are_reproducible_curve_figures(name, panels, curves, tmp_path):
    """Figs 5 and 12 (the robust error functions, the potentials and their derivatives) through the CLI: the JSON
    holds each panel's curves, and ψ′ is the derivative of ψ (a finite difference of the printed curves)."""
    out = subprocess.run([sys.executable, "-m", "bftcore", "reproduce", name, "--json", "--png",
                          str(tmp_path / "f.png")], capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    assert doc["figure"] == name and len(doc["panels"]) == panels
    assert all(len(p["curves"]) == curves for p in doc["panels"])
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if name == "fig12":
        for p in doc["panels"]:
            s, psi, dpsi = (np.array(c["y"] if k else c["x"]) for k, c in
                            ((0, p["curves"][0]), (1, p["curves"][0]), (1, p["curves"][1])))
            mid = np.abs(s) > 5  # away from the cusp
            fd = np.gradient(psi, s)
            assert np.allclose(fd[mid][1:-1], dpsi[mid][1:-1], atol=0.02 * np.max(np.abs(dpsi)))
