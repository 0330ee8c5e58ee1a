"""The sweeps on a real Dask cluster started by the project's own script (deploy/dask-cluster.sh: a scheduler and
two worker processes), reached by address from the CLI: the same document as the serial run; the same over TLS
(the script's --tls, and Dask's LocalCluster with the script's certificates); and what the script says about a
scheduler that leaves the loopback."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dask
import pytest

from app.harness import free_port
from bftcore import api
from bftcore.foundations.distributed import QUIET, run_tasks
from bftcore.models.presets import figure_config
from bftcore.studies.learning import parse_sizes

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
    # its workers run with Dask's background work slowed down, as the clusters bftcore starts itself
    keys = sorted(QUIET)
    assert run_tasks(dask.config.get, keys, address) == [QUIET[k] for k in keys]


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


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    """The script's --tls mode: certificates made by openssl in the run dir, a scheduler and one worker on tls://."""
    port = free_port()
    run_dir = tmp_path_factory.mktemp("dask-tls")
    env = {**os.environ, "PYTHON": sys.executable}
    args = ["bash", str(SCRIPT), "--port", str(port), "--run-dir", str(run_dir)]
    start = subprocess.run(args + ["--tls", "--workers", "1"], env=env, capture_output=True, text=True, timeout=120)
    assert start.returncode == 0, start.stderr + (run_dir / "worker.log").read_text(errors="replace")[-2000:]
    client_line = [line for line in start.stdout.splitlines() if line.startswith("clients: ")]
    assert len(client_line) == 1, start.stdout
    options = client_line[0].split()[1:]  # --scheduler ADDRESS --tls-ca-file F --tls-cert F --tls-key F
    assert options[:2] == ["--scheduler", f"tls://127.0.0.1:{port}"]
    yield options, run_dir / "tls", args, env
    subprocess.run(args + ["--stop"], env=env, capture_output=True, timeout=60)


def test_the_tls_cluster_reports_its_worker_and_keeps_its_key_private(tls_cluster):
    options, tls_dir, args, env = tls_cluster
    out = subprocess.run(args + ["--status"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and f"{options[1]}: 1 workers" in out.stdout, out.stderr
    assert (tls_dir / "key.pem").stat().st_mode & 0o077 == 0
    assert not (tls_dir / "ca.key").exists()  # the authority signs once; its key is not left behind


def test_learning_curve_over_tls_equals_serial(tls_cluster, tmp_path):
    options, _, _, _ = tls_cluster
    path = tmp_path / "fig21.json"
    path.write_text(json.dumps(figure_config("fig21")))
    out = subprocess.run([sys.executable, "-m", "bftcore", "learning-curve", str(path), "--n", "5:60:3",
                          "--resamples", "4", "--lambda", "0.25:1:2", *options, "--json"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    remote = json.loads(out.stdout)
    assert remote["scheduler"] == options[1]
    local = api.learning_curve_document(figure_config("fig21"), parse_sizes("5:60:3"), 4, lambdas=[0.25, 1.0],
                                        scheduler="serial")
    assert json.dumps(strip(remote), sort_keys=True) == json.dumps(strip(json.loads(json.dumps(local))),
                                                                   sort_keys=True)


def test_the_tls_cluster_refuses_a_plain_client_naming_itself(tls_cluster, tmp_path):
    options, _, _, _ = tls_cluster
    plain = options[1].replace("tls://", "tcp://")
    path = tmp_path / "fig28.json"
    path.write_text(json.dumps(figure_config("fig28")))
    out = subprocess.run([sys.executable, "-m", "bftcore", "basins", str(path), "--scheduler", plain],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 2 and out.stderr.startswith(f"error: the Dask scheduler at {plain} "), out.stderr


def test_basins_on_a_tls_local_cluster_equal_serial(tls_cluster):
    """Dask's own LocalCluster over tls://, with the script's certificates given to the API by using_tls."""
    from dask.distributed import LocalCluster
    from distributed.security import Security

    from bftcore.foundations.distributed import using_tls

    _, tls_dir, _, _ = tls_cluster
    ca, cert, key = (str(tls_dir / name) for name in ("ca.pem", "cert.pem", "key.pem"))
    roles = {f"tls_{role}_{part}": path for role in ("scheduler", "worker", "client")
             for part, path in (("cert", cert), ("key", key))}
    security = Security(tls_ca_file=ca, require_encryption=True, **roles)
    cfg = figure_config("fig28")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tls://", host="127.0.0.1",
                      security=security, dashboard_address="127.0.0.1:0") as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        with using_tls(ca, cert, key):
            remote = api.basins_document(cfg, scheduler=address)
    assert strip(remote) == strip(api.basins_document(cfg))


def _start_refused_after_the_host_check(tmp_path, *options):
    """The script's start with a live pid in its run dir (a sleep of ours): it prints what it says about the host,
    then refuses to start a second scheduler, so nothing listens anywhere."""
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        (tmp_path / "scheduler.pid").write_text(str(sleeper.pid))
        return subprocess.run(["bash", str(SCRIPT), "--run-dir", str(tmp_path), "--port", str(free_port()),
                               *options], env={**os.environ, "PYTHON": sys.executable}, capture_output=True,
                              text=True, timeout=60)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_script_warns_when_the_scheduler_leaves_the_loopback(tmp_path):
    out = _start_refused_after_the_host_check(tmp_path, "--host", "0.0.0.0")
    assert out.returncode == 2 and "running already" in out.stderr
    assert "warning: the scheduler listens on 0.0.0.0" in out.stderr
    assert "runs the code it is sent" in out.stderr and "trusted network only, or --tls" in out.stderr


@pytest.mark.parametrize("options", [[], ["--host", "127.0.0.1"], ["--host", "0.0.0.0", "--tls"]])
def test_no_warning_on_the_loopback_or_with_tls(tmp_path, options):
    out = _start_refused_after_the_host_check(tmp_path, *options)
    assert out.returncode == 2 and "running already" in out.stderr and "warning" not in out.stderr


def test_the_script_wants_all_three_tls_files_or_none(tmp_path):
    out = subprocess.run(["bash", str(SCRIPT), "--run-dir", str(tmp_path), "--tls-ca-file", __file__],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "all three of --tls-ca-file, --tls-cert and --tls-key" in out.stderr
