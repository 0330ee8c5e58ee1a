"""Peers that are not Dask schedulers, given to ``--scheduler``: real sockets on 127.0.0.1 that accept and stay
silent, send junk, announce a frame no one can allocate or one that never comes, or hang up.  Each run ends (the
subprocess's timeout is only a guard against the hang this file exists to catch) with exit status 2 and one line
that names the scheduler's address, never the grid or memory advice meant for a too-large problem.  So does a
real scheduler lost in the middle of a run, and an address bftcore does not reach (inproc://, ws://, ...)."""
from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import dask
import numpy as np
import pytest
from dask.distributed import LocalCluster

from bftcore.__main__ import main
from bftcore.foundations.distributed import SchedulerError, parse_scheduler, run_tasks, using_tls
from bftcore.models.presets import figure_config

ROOT = Path(__file__).resolve().parents[1]


class Peer:
    """A TCP server on 127.0.0.1 that answers every connection with ``greeting`` (then keeps it open), or closes it
    at once when ``hang_up``; it counts the connections it accepted."""

    def __init__(self, greeting: bytes = b"", hang_up: bool = False):
        self.greeting, self.hang_up, self.accepted = greeting, hang_up, 0
        self.open: list[socket.socket] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            if self.hang_up:
                conn.close()
                continue
            self.open.append(conn)
            if self.greeting:
                conn.sendall(self.greeting)

    def close(self):
        self.server.close()
        for conn in self.open:
            conn.close()


PEERS = {
    # accepts and never answers: Dask's handshake read has no timeout of its own
    "silent": {},
    # random bytes: their first 8 read as a frame length of about 10**18
    "junk": {"greeting": np.random.default_rng(25).bytes(4096)},
    # what an HTTP server answers to Dask's handshake: "HTTP/1.1" read as a length of 3.5 * 10**18
    "http": {"greeting": b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"},
    # a plausible length (2 GiB) and then nothing: address space reserved, the bytes never come
    "plausible length": {"greeting": struct.pack("<Q", 2**31)},
    # accepts and hangs up
    "hang up": {"hang_up": True},
}


@pytest.fixture(scope="module")
def config_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("peers") / "fig28.json"
    path.write_text(json.dumps(figure_config("fig28")))
    return path


@pytest.mark.parametrize("kind", list(PEERS))
def test_a_peer_that_is_no_scheduler_ends_with_a_message_naming_it(kind, config_path):
    peer = Peer(**PEERS[kind])
    try:
        out = subprocess.run([sys.executable, "-m", "bftcore", "basins", str(config_path), "--scheduler",
                              peer.address], capture_output=True, text=True, timeout=60, cwd=ROOT)
    finally:
        peer.close()
    assert peer.accepted >= 1  # the CLI did reach this peer
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: the Dask scheduler at {peer.address} "), out.stderr
    assert "grid" not in lines[0] and "out of memory" not in lines[0]


@pytest.mark.parametrize("address", ["inproc://x", "ws://127.0.0.1:8786", "ucx://127.0.0.1:8786",
                                     "udp://127.0.0.1:8786"])
def test_an_unsupported_scheme_is_refused_with_the_supported_ones(address):
    with pytest.raises(SchedulerError) as refused:
        parse_scheduler(address)
    assert str(refused.value).startswith(f"the Dask scheduler at {address} ")
    assert "tcp://" in str(refused.value) and "tls://" in str(refused.value)


@pytest.mark.parametrize("address, fault", [("tcp://127.0.0.1:99999", "port"), ("tcp://:8786", "host"),
                                            ("tcp://127.0.0.1:0", "port 0"),
                                            ("tcp://127.0.0.1:8786/status", "drop what follows")])
def test_a_malformed_address_is_refused_before_connecting(address, fault):
    with pytest.raises(SchedulerError, match=fault):
        parse_scheduler(address)


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tls://10.0.0.2:8786", "tcp://[::1]:8786",
                                     "tcp://scheduler.example"])
def test_a_well_formed_address_is_kept_as_given(address):
    assert parse_scheduler(address) == ("address", address)


def test_the_cli_refuses_inproc_in_one_line(config_path, capsys):
    assert main(["basins", str(config_path), "--scheduler", "inproc://x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the Dask scheduler at inproc://x ") and "tls://" in err and "\n" not in err


def test_tls_options_go_with_a_tls_address_only(config_path, tmp_path, capsys):
    pem = tmp_path / "ca.pem"
    pem.write_text("not read: the address is refused first")
    assert main(["basins", str(config_path), "--scheduler", "tcp://127.0.0.1:8786", "--tls-ca-file",
                 str(pem)]) == 2
    assert "go with a tls:// --scheduler" in capsys.readouterr().err
    assert main(["basins", str(config_path), "--scheduler", "tls://127.0.0.1:8786", "--tls-ca-file",
                 str(pem)]) == 2
    assert "all three of --tls-ca-file, --tls-cert and --tls-key" in capsys.readouterr().err


def test_a_tls_address_without_certificates_is_refused_naming_it(config_path, capsys):
    assert main(["basins", str(config_path), "--scheduler", "tls://127.0.0.1:8786"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the Dask scheduler at tls://127.0.0.1:8786 needs the cluster's certificates")


def test_missing_certificate_files_are_named(tmp_path):
    with pytest.raises(ValueError, match="the TLS key .*nowhere.pem is not a readable file"):
        with using_tls(__file__, __file__, str(tmp_path / "nowhere.pem")):
            pass


RELEASE = threading.Event()


def _first_then_wait(x: int) -> int:
    """Task 0 returns at once; the others wait until the test lets them go (the scheduler is gone by then)."""
    if x:
        RELEASE.wait(60)
    return x


def test_a_scheduler_lost_mid_run_is_named():
    """The scheduler closes after the first result, while the other tasks wait: the run ends naming it."""
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://", host="127.0.0.1",
                           dashboard_address="127.0.0.1:0")
    address = cluster.scheduler_address
    first = threading.Event()
    RELEASE.clear()

    def close_the_scheduler_after_the_first_result():
        first.wait(60)
        cluster.sync(cluster.scheduler.close)
        RELEASE.set()

    closer = threading.Thread(target=close_the_scheduler_after_the_first_result, daemon=True)
    closer.start()
    try:
        with pytest.raises(SchedulerError) as lost:
            run_tasks(_first_then_wait, list(range(8)), address, on_result=lambda i, r: first.set())
    finally:
        first.set()
        RELEASE.set()
        closer.join(60)
        with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):  # the orphaned worker's retries
            cluster.close()
    assert str(lost.value).startswith(f"the Dask scheduler at {address} lost the tasks")
