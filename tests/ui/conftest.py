"""Fixtures of the real-browser tests: one `panel serve app` per module and Debian's chromium via Playwright."""
import os

import pytest
from playwright import sync_api  # in the test extras: a broken install fails here instead of skipping the UI tests

from app.harness import CHROMIUM, launch, panel_server

if not os.path.exists(CHROMIUM):
    pytest.skip(f"no chromium at {CHROMIUM} (set BFT_CHROMIUM to another binary); UI tests skipped",
                allow_module_level=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "panel.log"
    with panel_server(log_path=str(log)) as (url, log_path):
        yield url, log_path


#: Playwright's deadline for one navigation or action (its default is 30 s). A failure deadline, not a measurement:
#: on a machine loaded by other jobs a page took longer than 30 s to open, and a test must wait, not fail.
ACTION_TIMEOUT_MS = 120_000


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = launch(p)
        new_context = b.new_context

        def patient_context(**kwargs):
            ctx = new_context(**kwargs)
            ctx.set_default_timeout(ACTION_TIMEOUT_MS)
            return ctx
        b.new_context = patient_context  # every context of the UI tests, those they open themselves included
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    """A fresh browser context at 1280×720 with the app loaded; console errors collected in page.errors."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    pg = ctx.new_page()
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.goto(server[0])
    from app.harness import wait_for_app
    wait_for_app(pg)
    yield pg
    ctx.close()
