"""scripts/loadtest_ws.py, the browserless load client: its messages are what Bokeh decodes as the page's, and a
short run through the classroom deployment (1 worker behind nginx) answers every click.  No timed assertions."""
import importlib.util
import math
import os
import shutil
import sys
from pathlib import Path

import pytest
from bokeh.document import Document
from bokeh.events import DocumentReady, Tap
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure
from bokeh.protocol.messages.pull_doc_reply import pull_doc_reply

ROOT = Path(__file__).resolve().parents[1]
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)

_spec = importlib.util.spec_from_file_location("loadtest_ws", ROOT / "scripts" / "loadtest_ws.py")
lw = importlib.util.module_from_spec(_spec)
sys.modules["loadtest_ws"] = lw
_spec.loader.exec_module(lw)


def _doc():
    doc = Document()
    fig = figure(name="bft-canvas")
    taps, ready = [], []
    fig.on_event(Tap, lambda e: taps.append((e.x, e.y, e.sx, e.sy)))
    ack = ColumnDataSource(dict(), name="bft-frame-ack")
    doc.add_root(fig)
    doc.add_root(ack)
    doc.on_event(DocumentReady, lambda e: ready.append(e))
    return doc, fig, ack, taps, ready


def test_the_clients_messages_are_decoded_by_bokeh_as_the_pages():
    """The tap, document_ready and a frame acknowledgement, applied as the server applies a PATCH-DOC."""
    doc, fig, ack, taps, ready = _doc()
    doc.apply_json_patch({"events": [lw.tap_event(fig.id, 4.0, 7.0, 150.0, 200.0)]}, setter=None)
    assert taps == [(4.0, 7.0, 150.0, 200.0)]
    doc.apply_json_patch({"events": [lw.bokeh_event("document_ready", [])]}, setter=None)
    assert len(ready) == 1
    doc.apply_json_patch({"events": [lw.model_changed(ack.id, "tags", [3])]}, setter=None)
    assert ack.tags == [3]


def _as_sent(doc):
    """The document as the server's PULL-DOC-REPLY carries it."""
    return lw.json.loads(pull_doc_reply.create("req", doc).content_json)["doc"]


def test_model_ids_and_percentile():
    doc, fig, ack, _, _ = _doc()
    for name in ("bft-image-source", "bft-points-source"):
        doc.add_root(ColumnDataSource(dict(x=[]), name=name))
    ids = lw.model_ids(_as_sent(doc))
    assert ids["figure"] == fig.id and ids["ack"] == ack.id and "tap" in ids["subscribed_events"]
    with pytest.raises(RuntimeError, match="bft-canvas"):
        lw.model_ids(_as_sent(Document()))
    assert lw.percentile([1, 2, 3, 4], 0.5) == 2.5 and lw.percentile([5], 0.99) == 5
    assert math.isnan(lw.percentile([], 0.5))


@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (.ci/run installs Debian's package)")
def test_two_students_through_nginx_every_click_answered(tmp_path):
    with lw.Classroom(1) as room:
        r = lw.asyncio.run(lw.run_load(room.url, 2, duration=4.0, interval=1.2, seed=5, settle=1.0,
                                       run_dir=room.run_dir))
        # the command line on the same deployment, one student (its JSON output)
        code = lw.main(["--url", room.url, "--run-dir", str(room.run_dir), "--sessions", "1", "--duration", "2",
                        "--interval", "1", "--settle", "0.5", "--json", str(tmp_path / "run.json")])
        log_errors = lw.scan_logs(room.logs)
    assert r["loaded"] == 2 and not r["load_failures"] and not r["errors"], r["load_failures"] + r["errors"]
    assert r["clicks"] >= 4 and r["answered"] == r["clicks"] and r["unanswered"] == 0
    for c in r["clicks_detail"]:
        assert c["latency_ms"] is not None and 0 < c["latency_ms"] < math.inf
        assert 0 < c["first_change_ms"] <= c["latency_ms"]
    for key in ("median_ms", "p90_ms", "p99_ms", "max_ms"):
        assert 0 < r[key] < math.inf
    assert r["tap_subscribed"] and r["ws_same_worker"] and r["frame_acks"] > 0 and r["href_echoes"] > 0
    assert r["sessions_by_worker"] == {f"127.0.0.1:{room.port + 1}": 2}
    assert r["server_cpu_cores"] > 0 and r["client_cpu_cores"] > 0
    assert code == 0
    one = lw.json.loads((tmp_path / "run.json").read_text())
    assert one["workers"] == 1 and one["answered"] == one["clicks"] >= 1
    assert not log_errors, log_errors
