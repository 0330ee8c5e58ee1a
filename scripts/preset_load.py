"""Preset load time in a real browser: from choosing a preset in the menu to the new problem on screen.

    python scripts/preset_load.py [--loads 5] [--presets metastable_mixture,fig17,...] [--viewport 1280x720]
                                  [--url http://127.0.0.1:PORT/app] [--trace trace.json]

"On screen" means: the page's data points are the preset's (the points source holds as many points as the preset
has), the heatmap (or, for a regression preset, the regression curve) has changed since the choice, and the browser
has painted a frame after that (two animation frames, so the paint itself is inside the measurement).  The time is
taken in the page (performance.now()) from just before the <select> is changed; a main thread blocked by the
update delays the poll and the paint, so the block is counted.  Between two loads the page goes back to another
preset and waits for it to settle.  Prints a table of the median (min, max) per preset and the longest main-thread
task seen during the loads (PerformanceObserver "longtask").  Without --url it starts `panel serve app`.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from playwright.sync_api import sync_playwright

from app.harness import launch, panel_server, viewport, wait_for_app
from bftcore.models import presets

DEFAULT_PRESETS = ["metastable_mixture", "fig17", "fig27", "two_trends", "fig7"]

#: Installs the long-task observer and returns nothing.
JS_LONGTASKS = """() => { window.__bftLong = []; try { new PerformanceObserver((l) => { for (const e of l.getEntries())
  window.__bftLong.push(e.duration); }).observe({entryTypes: ["longtask"]}); } catch (e) {} return true; }"""

#: Signature of what the page shows: the number of data points, a weighted sum of the heatmap and of the regression
#: curve(s) (whichever exist).
JS_SIGNATURE = """() => { const out = {n: -1, img: null, curve: null};
  const sig = (f) => { let w = 0; for (let k = 0; k < f.length; k++) w += (+f[k] || 0) * ((k % 7) + 1); return w; };
  for (const d of Bokeh.documents) {
    const p = d.get_model_by_name('bft-points-source'); if (p) out.n = p.data.x.length;
    const m = d.get_model_by_name('bft-image-source');
    if (m) { const a = m.data.image[0]; out.img = sig((a.flat && !ArrayBuffer.isView(a)) ? a.flat(Infinity) : a); }
    for (const name of ['bft-curve-source', 'bft-regression-source']) { const c = d.get_model_by_name(name);
      if (c && c.data.h) { out.curve = (out.curve || 0) + sig(c.data.h) + c.data.h.length; } }
  } return out; }"""

#: Resolves with the time (performance.now()) of the first paint after the page shows ``n`` points and a heatmap or
#: curve different from ``before``; polled every 5 ms (a blocked main thread delays the poll: that is counted).
JS_WAIT_NEW = f"""([n, before, limit]) => new Promise((resolve, reject) => {{ const t0 = performance.now();
  const tick = () => {{ const s = ({JS_SIGNATURE})();
    if (s.n === n && (s.img !== before.img || s.curve !== before.curve)) {{
      requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now()))); return; }}
    if (performance.now() - t0 > limit) {{ reject('not on screen after ' + limit + ' ms'); return; }}
    setTimeout(tick, 5); }}; tick(); }})"""


def n_points(name: str) -> int:
    data = presets.PRESETS[name][0].get("data", [])
    return len(data.get("points", []) if isinstance(data, dict) else data)


def choose(page, name: str):
    page.locator(f"select:has(option[value='{name}'])").select_option(name)


def measure(url: str, names: list[str], loads: int, size: dict, trace: str | None = None) -> dict:
    out = {name: [] for name in names}
    longest = {name: [] for name in names}
    with sync_playwright() as p:
        browser = launch(p)
        ctx = browser.new_context(viewport=size)
        page = ctx.new_page()
        page.goto(url)
        wait_for_app(page)
        time.sleep(1.5)
        page.evaluate(JS_LONGTASKS)
        if trace:
            ctx.tracing.start(screenshots=False, snapshots=False)
        for k in range(loads):
            for name in names:
                other = "fig14" if name != "fig14" else "fig15"
                choose(page, other)
                time.sleep(1.5)
                before = page.evaluate(JS_SIGNATURE)
                page.evaluate("() => { window.__bftLong = []; }")
                t0 = page.evaluate("() => performance.now()")
                choose(page, name)
                try:
                    t1 = page.evaluate(JS_WAIT_NEW, [n_points(name), before, 20000])
                    out[name].append(t1 - t0)
                except Exception as e:  # noqa: BLE001 - reported, not hidden
                    print(f"{name} load {k + 1}: {e}", file=sys.stderr)
                    out[name].append(float("nan"))
                longest[name].append(max(page.evaluate("() => window.__bftLong"), default=0.0))
        if trace:
            ctx.tracing.stop(path=trace)
        browser.close()
    return {"times": out, "longtask": longest}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--presets", default=",".join(DEFAULT_PRESETS))
    ap.add_argument("--viewport", default="1280x720")
    ap.add_argument("--url")
    ap.add_argument("--trace", help="write a Playwright trace of the loads to this file")
    a = ap.parse_args()
    names = [n for n in a.presets.split(",") if n]
    unknown = [n for n in names if n not in presets.PRESETS]
    if unknown:
        ap.error(f"unknown presets: {', '.join(unknown)}")
    if a.url:
        res = measure(a.url, names, a.loads, viewport(a.viewport), a.trace)
    else:
        with panel_server() as (url, _):
            res = measure(url, names, a.loads, viewport(a.viewport), a.trace)
    print(f"{'preset':<20} {'loads':>5} {'median_ms':>10} {'min_ms':>8} {'max_ms':>8} {'longest_task_ms':>16}")
    for name in names:
        v = [t for t in res["times"][name] if t == t]
        lt = res["longtask"][name]
        if v:
            print(f"{name:<20} {len(v):>5} {statistics.median(v):>10.0f} {min(v):>8.0f} {max(v):>8.0f} "
                  f"{statistics.median(lt):>16.0f}")
        else:
            print(f"{name:<20} {0:>5} {'-':>10} {'-':>8} {'-':>8} {'-':>16}")
    print("(median of the loads; longest_task_ms: median over the loads of the longest main-thread task; "
          "target: median < 500 ms)")


if __name__ == "__main__":
    main()
