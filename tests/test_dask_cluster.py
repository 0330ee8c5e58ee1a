"""The sweeps on a real Dask cluster started by the project's own script (deploy/dask-cluster.sh: a scheduler and
two worker processes), reached by address from the CLI: the same document as the serial run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.harness import free_port
from bftcore import api
from bftcore.learning import parse_sizes
from bftcore.presets import figure_config

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deploy" / "dask-cluster.sh"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    port = free_port()
    run_dir = tmp_path_factory.mktemp("dask")
    env = {**os.environ, "PYTHON": sys.executable}
    args = ["bash", str(SCRIPT), "--port", str(port), "--run-dir", str(run_dir)]
    start = subprocess.run(args + ["--workers", "2"], env=env, capture_output=True, text=True, timeout=120)
    assert start.returncode == 0, start.stderr + (run_dir / "worker.log").read_text(errors="replace")[-2000:]
    yield f"tcp://127.0.0.1:{port}", args, env
    subprocess.run(args + ["--stop"], env=env, capture_output=True, timeout=60)


def strip(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("elapsed_s", "scheduler")}


def test_the_script_reports_two_workers(cluster):
    address, args, env = cluster
    out = subprocess.run(args + ["--status"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and f"{address}: 2 workers" in out.stdout


def test_learning_curve_by_address_equals_serial(cluster, tmp_path):
    address, _, _ = cluster
    path = tmp_path / "fig21.json"
    path.write_text(json.dumps(figure_config("fig21")))
    out = subprocess.run([sys.executable, "-m", "bftcore", "learning-curve", str(path), "--n", "5:60:3",
                          "--resamples", "4", "--lambda", "0.25:1:2", "--scheduler", address, "--json"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    remote = json.loads(out.stdout)
    assert remote["scheduler"] == address
    local = api.learning_curve_document(figure_config("fig21"), parse_sizes("5:60:3"), 4, lambdas=[0.25, 1.0],
                                        scheduler="serial")
    assert json.dumps(strip(remote), sort_keys=True) == json.dumps(strip(json.loads(json.dumps(local))),
                                                                   sort_keys=True)


def test_basins_by_address_equal_serial(cluster):
    address, _, _ = cluster
    cfg = figure_config("fig28")
    assert strip(api.basins_document(cfg, scheduler=address)) == strip(api.basins_document(cfg))


def test_the_script_refuses_bad_options(tmp_path):
    for bad in (["--workers", "0"], ["--port", "80"], ["--frobnicate"]):
        out = subprocess.run(["bash", str(SCRIPT), *bad, "--run-dir", str(tmp_path)], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 2 and "dask-cluster.sh:" in out.stderr
