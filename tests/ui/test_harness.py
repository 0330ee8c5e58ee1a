"""The test harness's own server (app.harness.panel_server): what every real-browser test stands on."""
import tempfile
import urllib.request

import pytest

from app.harness import panel_server

pytestmark = pytest.mark.ui


def test_a_server_starts_beside_a_stray_module_named_like_the_standard_librarys(tmp_path, monkeypatch):
    """``python -m panel serve`` puts its working directory first on the path, so a scratch ``grp.py`` in the shared
    temporary directory shadowed the standard library's (tarfile imports it) and no server of a CI run started.  The
    harness runs each server from an empty directory of its own: with such a file in the temporary directory the
    server still answers."""
    (tmp_path / "grp.py").write_text("raise SystemExit('a stray grp.py was imported instead of the standard one')\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the temporary directory the harness sees
    with panel_server() as (url, log_path):
        with urllib.request.urlopen(url.replace("/app", "/liveness"), timeout=10) as answer:
            assert answer.status == 200
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []  # its own directory removed afterwards
