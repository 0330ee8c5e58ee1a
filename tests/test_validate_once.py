"""Validate once (issue 26): the gate returns a typed document (bftcore.foundations.config.Valid) that the problems take
without a second pass, while any other mapping passes the gate again; no function of the package takes a ``validated=``
flag.  The passes are counted by the gate's first step, which every call of validate_config makes."""
import pathlib
import re

import numpy as np
import pytest

from app.session import BFTSession
from bftcore import api
from bftcore.foundations import config
from bftcore.foundations.config import Valid, checked, validate_config, vouched
from bftcore.models import presets, regression
from bftcore.studies import learning

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture
def passes(monkeypatch):
    """How many times the gate ran (validate_config's first step, looked up in bftcore.foundations.config at each
    call)."""
    count = [0]
    real = config._count_before_conversion

    def counted(doc, limits):
        count[0] += 1
        return real(doc, limits)
    monkeypatch.setattr(config, "_count_before_conversion", counted)
    return count


def test_the_gate_returns_a_valid_document_and_checked_takes_it_as_it_is(passes):
    cfg = validate_config(presets.figure_config("fig14"))
    assert isinstance(cfg, Valid) and passes[0] == 1
    assert checked(cfg) is cfg and passes[0] == 1
    again = checked(dict(cfg))           # a copy is an outside document: through the gate, to the same document
    assert passes[0] == 2 and isinstance(again, Valid) and again == cfg and again is not cfg
    with pytest.raises(config.ConfigError):
        checked({**cfg, "beta": -1.0})   # and the gate still refuses what it refuses


def test_a_fit_of_a_valid_document_passes_the_gate_no_more(passes):
    cfg = validate_config(presets.figure_config("fig14"))
    before = passes[0]
    api.run(cfg)
    gen = api.iterate(cfg)
    next(gen)
    gen.close()
    regression.solve(validate_config(regression.regression_presets()["two_trends"]))
    assert passes[0] == before + 1  # only the regression document's own validate_config above


def test_a_slider_change_of_the_dashboard_reaches_the_solver_through_one_pass_of_the_gate(passes):
    s = BFTSession(live=False)
    s.start_run(warm=False, play=False)
    before = passes[0]
    s.lam = 0.8                   # live=False: nothing solved yet
    assert s.start_run(warm=True, play=False)
    s.pump.step()                 # the run's first iteration: build the problem, solve one step
    assert passes[0] == before + 1


def test_the_learning_curves_derived_documents_are_vouched_for_not_checked_again(passes):
    cfg = validate_config(presets.figure_config("fig21"))
    derived = learning._with(cfg, [[3.0, 3.0]], lam=0.25)
    assert isinstance(derived, Valid) and derived["prior"]["lambda"] == 0.25 and cfg["prior"]["lambda"] == 0.5
    assert vouched(derived) is derived
    before = passes[0]
    api.learning_curve_document(cfg, [5, 10], resamples=2, scheduler="serial")
    assert passes[0] - before <= 2  # the document's own pass (and its copy's), not one per fit (40 fits)
    assert np.isfinite(cfg["prior"]["lambda"])


def test_no_function_of_the_package_or_the_dashboard_takes_a_validated_flag():
    pattern = re.compile(r"\bvalidated\s*[:=]")
    offenders = [str(p.relative_to(ROOT)) for folder in ("bftcore", "app") for p in (ROOT / folder).rglob("*.py")
                 if pattern.search(p.read_text())]
    assert offenders == []


@pytest.mark.parametrize("command", [["fit"], ["evidence", "--lambda", "0.1:10:5"]])
def test_the_cli_reads_a_document_through_one_pass_of_the_gate(passes, tmp_path, capsys, command):
    import json

    from bftcore.__main__ import main
    path = tmp_path / "fig14.json"
    path.write_text(json.dumps(presets.figure_config("fig14")))
    before = passes[0]
    assert main([command[0], str(path), *command[1:]]) == 0
    assert passes[0] == before + 1
    assert capsys.readouterr().out
