"""How far a value travels from an interface to the solver (issue 26's two measures), read off the running code.

* **lambda's path**: the files of the project whose functions are handed lambda, from the moment the dashboard's
  slider sets ``BFTSession.lam`` until the minimiser (:func:`bftcore.foundations.solvers.iterate`) starts.  "Handed"
  is strict: a function counts when one of its arguments is the value itself, a parameter event carrying it, a
  document whose ``prior.lambda`` is it, or any object of the project holding it (the session, a problem, a prior)
  up to three attributes deep.  A function that only looks the document up (the kind of a problem) counts too.
* **call paths**: for each way a user reaches the solver (the CLI's ``fit``, the estimator's ``fit``, the
  dashboard's run, evidence path, beta sweep and learning curve), the modules of the project on the call stack
  when the minimiser starts, interface included.  Work the dashboard sends to a worker thread is measured on that
  thread, from the function the thread was given.

Both are measured with ``sys.setprofile`` (and ``threading.setprofile``) on an unserved session: the same functions
a served session calls, without a browser.  ``tests/test_call_paths.py`` holds the results to the issue's limits.

    python scripts/call_paths.py
"""
from __future__ import annotations

import contextlib
import pathlib
import sys
import threading
from collections.abc import Mapping

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROJECT = (str(ROOT / "bftcore") + "/", str(ROOT / "app") + "/")
SOLVER = str(ROOT / "bftcore" / "foundations" / "solvers.py")
#: Regression's closed form (RegressionModel.exact): the estimator's solver for a regression.
CLOSED_FORM = str(ROOT / "bftcore" / "models" / "regression.py")


def _is_project(filename: str) -> bool:
    return filename.startswith(PROJECT)


def _short(filename: str) -> str:
    return str(pathlib.Path(filename).relative_to(ROOT))


def _starts(frame) -> bool:
    """Whether ``frame`` is the minimiser starting (not an earlier run's generator resumed or closed)."""
    code = frame.f_code
    return code.co_filename == SOLVER and code.co_name == "iterate" and frame.f_lineno == code.co_firstlineno


def _solves(frame) -> bool:
    """Whether ``frame`` is a solver starting: the minimiser, or regression's closed form."""
    code = frame.f_code
    return _starts(frame) or (code.co_filename == CLOSED_FORM and code.co_qualname == "RegressionModel.exact")


def _carries(obj, value: float, depth: int = 3, seen=None) -> bool:
    """Whether ``obj`` is lambda's ``value`` or holds it (see the module's text)."""
    if isinstance(obj, bool):
        return False
    if isinstance(obj, (int, float)):
        return obj == value
    if depth <= 0:
        return False
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, Mapping):
        prior = obj.get("prior")
        if isinstance(prior, Mapping) and prior.get("lambda") == value:
            return True
        return any(_carries(v, value, depth - 1, seen) for k, v in obj.items() if k in ("lambda", "lam", "new"))
    if isinstance(obj, (list, tuple)):
        return any(_carries(v, value, depth - 1, seen) for v in obj[:8])
    kind = type(obj)
    if getattr(kind, "__module__", "").startswith(("bftcore", "app")) or hasattr(obj, "new"):
        names = getattr(obj, "__dict__", None) or {}
        if hasattr(obj, "new"):  # a param event
            return _carries(getattr(obj, "new"), value, depth - 1, seen)
        if "lam" in dir(kind) or "lam" in names:
            with contextlib.suppress(Exception):
                if getattr(obj, "lam") == value:
                    return True
        return any(_carries(v, value, depth - 1, seen) for v in list(names.values())[:40])
    return False


def lambda_path(value: float = 0.8371) -> list[str]:
    """The files lambda is handed to, in order of the first hand-over, from the slider to the minimiser."""
    from app.session import BFTSession

    session = BFTSession(live=True)
    session.start_run(warm=False, play=False)
    files: list[str] = []
    done = threading.Event()

    def profile(frame, event, arg):
        if event != "call" or done.is_set():
            return
        filename = frame.f_code.co_filename
        if _starts(frame):
            done.set()
            return
        if not _is_project(filename):
            return
        code = frame.f_code
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        args = [frame.f_locals.get(n) for n in names]
        if any(_carries(a, value) for a in args) and filename not in files:
            files.append(filename)

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        session.lam = value       # the slider's release: live, so the session starts the run
        session.pump.step()       # unserved: the first iteration is computed here
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    if not done.is_set():
        raise RuntimeError("the minimiser never started")
    return [_short(f) for f in files]


def _stack_modules(frame) -> list[str]:
    out: list[str] = []
    while frame is not None:
        f = frame.f_code.co_filename
        if _is_project(f) and f not in out:
            out.append(f)
        frame = frame.f_back
    return [_short(f) for f in reversed(out)]


def solver_path(action) -> list[str]:
    """The project's modules on the longest call stack on which a solver starts while ``action()`` runs (the
    minimiser, or regression's closed form: the estimator's regressor solves in closed form)."""
    longest: list[str] = []
    lock = threading.Lock()

    def profile(frame, event, arg):
        nonlocal longest
        if event == "call" and _solves(frame):
            mods = _stack_modules(frame)
            with lock:
                if len(mods) > len(longest):
                    longest = mods

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return longest


def actions() -> dict:
    """The ways a user reaches the solver, each a function that does it once (small problems)."""
    import json
    import tempfile

    import numpy as np

    from app.session import BFTSession
    from bftcore.__main__ import main as cli
    from bftcore.estimator import BFTDensity, BFTRegressor
    from bftcore.models import presets

    def cli_fit(doc):
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / "c.json"
            path.write_text(json.dumps(doc))
            with open(pathlib.Path(tmp) / "out", "w") as out, contextlib.redirect_stdout(out):
                cli(["fit", str(path)])

    rng = np.random.default_rng(0)
    x, y = rng.uniform(1, 10, 30), rng.normal(8, 2, 30)

    def session_run():
        s = BFTSession(live=False)
        s.start_run(warm=False, play=False)
        s.pump.step()

    def session_evidence():
        s = BFTSession(live=False)
        s.compute_evidence()

    def session_sweep():
        s = BFTSession(live=False)
        s.load_preset("fig23")
        s.run_sweep(0.5, 2.0, 3)
        assert s.sweep is not None, s.message

    def session_learning():
        s = BFTSession(live=False)
        assert s.start_learning(5, 10, 2, 2)
        s.work.wait("learning", 600)

    return {"CLI fit (density)": lambda: cli_fit(presets.figure_config("fig14")),
            "CLI fit (regression)": lambda: cli_fit(presets.regression_presets()["two_trends"]),
            "estimator fit (density)": lambda: BFTDensity().fit(x, y),
            "estimator fit (regression)": lambda: BFTRegressor(n=50).fit(x, y),
            "dashboard run": session_run,
            "dashboard evidence path": session_evidence,
            "dashboard beta sweep": session_sweep,
            "dashboard learning curve": session_learning}


def measured(name: str) -> list[str]:
    """:func:`solver_path` of one action, in a fresh process: the worker threads the dashboard keeps between tasks
    must start under the profiler to be seen."""
    import json
    import subprocess

    out = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True, check=True,
                         cwd=ROOT, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    import json

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--one"]:
        print(json.dumps(solver_path(actions()[argv[1]])))
        return
    files = lambda_path()
    print(f"lambda from the slider to the minimiser: {len(files)} files")
    for f in files:
        print(f"  {f}")
    print()
    print(f"{'interface':<30} {'modules':>7}  path")
    for name in actions():
        mods = measured(name)
        print(f"{name:<30} {len(mods):>7}  {' > '.join(pathlib.Path(m).stem for m in mods)}")


if __name__ == "__main__":
    main()
