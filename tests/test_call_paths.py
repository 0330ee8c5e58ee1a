"""Issue 26's limits on how far a value travels, measured on the running code by ``scripts/call_paths.py``: lambda
goes from the dashboard's slider to the minimiser through at most 5 files, passing the gate once; no interface (CLI,
estimator, dashboard) reaches a solver through more than 6 modules of the project."""
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("call_paths", ROOT / "scripts" / "call_paths.py")
call_paths = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(call_paths)


def test_lambda_reaches_the_minimiser_through_at_most_five_files_one_of_them_the_gate():
    files = call_paths.lambda_path()
    assert files[0] == "app/session.py"              # the slider's parameter
    assert "bftcore/foundations/config.py" in files  # the gate (once: tests/test_validate_once.py counts the passes)
    assert files[-1] == "bftcore/models/density.py"  # the problem kind that builds the energy and runs the minimiser
    assert len(files) <= 5, files


def test_the_lambda_path_sees_a_file_that_is_handed_lambda():
    """The measure can fail: a function given the session, a document or the value itself is on the path."""
    assert call_paths._carries({"prior": {"lambda": 0.5}}, 0.5)
    assert not call_paths._carries({"prior": {"lambda": 0.25}}, 0.5)
    assert call_paths._carries([0.5], 0.5) and not call_paths._carries(True, 1.0)


@pytest.mark.parametrize("name", list(call_paths.actions()))
def test_no_interface_reaches_a_solver_through_more_than_six_modules(name):
    modules = call_paths.measured(name)
    assert modules, f"{name}: no solver was reached"  # the action did solve
    assert len(modules) <= 6, modules
