"""BLAS threads: importing bftcore changes nothing; its first run sets the process's BLAS to one thread (or to
BFTCORE_BLAS_THREADS), and leaves it so.  In a fresh interpreter, because the setting is process-wide."""
import json
import os
import subprocess
import sys

PROBE = """
import json
import numpy, scipy.linalg
from threadpoolctl import threadpool_info, threadpool_limits
threadpool_limits(OWN, user_api="blas")           # a program's own setting before bftcore
counts = lambda: sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
out = {"before": counts()}
from bftcore import api
from bftcore.models import presets
out["imported"] = counts()
api.fit(presets.figure_config("fig14"))
out["after_fit"] = counts()
api.fit(presets.figure_config("fig14"))
out["after_second_fit"] = counts()
print(json.dumps(out))
"""


def probe(value=None, own=2):
    env = {k: v for k, v in os.environ.items() if k not in ("BFTCORE_BLAS_THREADS", "OPENBLAS_NUM_THREADS",
                                                             "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    if value is not None:
        env["BFTCORE_BLAS_THREADS"] = value
    out = subprocess.run([sys.executable, "-c", PROBE.replace("OWN", str(own))], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_changes_nothing_and_a_run_sets_one_blas_thread():
    out = probe()
    assert out["before"] == out["imported"] == [2]
    assert out["after_fit"] == out["after_second_fit"] == [1]


def test_the_environment_variable_chooses_or_keeps_the_setting():
    assert probe("2", own=1)["after_fit"] == [2]
    assert probe("0", own=2)["after_fit"] == [2]   # 0: bftcore leaves the program's own setting alone
    assert probe(None, own=2)["after_fit"] == [1]


def test_an_evidence_path_as_the_first_call_sets_one_blas_thread():
    """fit's ``choose`` runs the evidence path before its own run: the path itself sets the threads (before, the
    first choose of a process ran on the program's threads, 4-10x slower on shared cores)."""
    code = PROBE.replace("OWN", "2").replace(
        'api.fit(presets.figure_config("fig14"))\nout["after_fit"] = counts()',
        'api.evidence_document(presets.figure_config("fig14"), "lambda", [0.01, 0.1, 1.0])\n'
        'out["after_fit"] = counts()')
    assert "evidence_document" in code
    env = {k: v for k, v in os.environ.items() if k not in ("BFTCORE_BLAS_THREADS", "OPENBLAS_NUM_THREADS",
                                                             "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["after_fit"] == [1]
