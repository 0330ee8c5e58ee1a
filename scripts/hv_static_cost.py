"""What one update of each non-live plot of the dashboard costs the server, declared with HoloViews or drawn with
raw Bokeh (issue 26; the live heatmap's frame is ``scripts/hv_update_cost.py``).

The plots: the log evidence against lambda (app/views/evidence.py), the beta sweep (app/views/sweep.py), the
learning curve (app/views/learning.py), the prior's samples and template thumbnails (app/views/prior.py).  Each is
updated the way the dashboard updates it: a new evidence path, a new sweep, a partial learning-curve document (and
the clearing of a curve that a click cancels), four new prior samples, new template thumbnails; and, for the two
plots with a marker, the marker moved alone (a lambda or beta slider).  The data are real: the documents the session
computes for the paper's presets, perturbed from run to run so that every update sends new numbers.

"HoloViews" is the declaration the view uses (a ``DynamicMap`` over a ``Pipe`` stream, updated in place; for the
learning curve, which stays raw Bokeh, the same declaration style written here); "re-rendered" is the other way Panel
offers, a new element given to the pane (``pn.bind`` or ``param.depends`` returning an element), measured for the
evidence path; "raw Bokeh" is the ColumnDataSource way the views had before (the learning curve's is the view
itself).  Each time is the server's part of one update as a served page has it: the changes made under a document
hold, released, and serialised into one PATCH-DOC message (app.transport sends one message per user action or
frame); the median of ``--runs`` updates after three that warm caches, with the spread.

    python scripts/hv_static_cost.py [--runs 30]
"""
from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import holoviews as hv
import numpy as np
import panel as pn
from bokeh.document import Document
from bokeh.document.events import DocumentPatchedEvent
from bokeh.models import ColumnDataSource, LinearColorMapper, Span
from bokeh.plotting import figure
from bokeh.protocol import Protocol
from holoviews.streams import Pipe

from app.session import BFTSession
from app.views import evidence as ev_view
from app.views import prior as prior_view
from app.views import sweep as sweep_view
from app.views.common import HV_OVERLAY, PALETTE, SERIES, hv_look, hv_pane, legend_outside, make_figure
from app.views.learning import EVIDENCE_COLOUR, LearningView, _curve_data

PROTOCOL = Protocol()


# ------------------------------------------------------------------------------------------------ timing
class Page:
    """A document holding one plot, whose updates are timed as the server makes them (hold, release, one
    PATCH-DOC message)."""

    def __init__(self, *roots):
        self.doc = Document()
        for root in roots:
            self.doc.add_root(root.get_root(self.doc) if hasattr(root, "get_root") else root)
        self.events: list = []
        self.doc.callbacks.on_change_dispatch_to = None
        self.doc.on_change(self.events.append)

    def time(self, update) -> tuple[float, int]:
        """Seconds of one update and the number of model changes it sent."""
        self.events.clear()
        t0 = time.perf_counter()
        self.doc.hold("combine")
        update()
        self.doc.unhold()
        patched = [e for e in self.events if isinstance(e, DocumentPatchedEvent)]
        if patched:
            PROTOCOL.create("PATCH-DOC", patched)
        return time.perf_counter() - t0, len(patched)


def timed(page: Page, updates, runs: int, before=None) -> tuple[list[float], int]:
    """Times ``updates(k)`` for k = 0 .. runs + 2, the first three left out (they warm caches); ``before(k)``, when
    given, runs untimed before each."""
    times, changes = [], 0
    for k in range(runs + 3):
        if before is not None:
            before(k)
        t, n = page.time(partial(updates, k))
        if k >= 3:
            times.append(t)
            changes = n
    return times, changes


def jitter(values, k: int, scale: float = 1e-3):
    """``values`` moved a little (run ``k``): every update sends new numbers."""
    v = np.asarray(values, float)
    return v + scale * np.sin(np.arange(v.size) + k).reshape(v.shape)


# ------------------------------------------------------------------------------------------------ the data
def real_documents() -> dict:
    """The documents the session computes: an evidence path (default page), a beta sweep (fig27, 25 beta values),
    a learning curve (fig21, 8 sizes, 2 data sets each), prior samples (default page) and the thumbnails' data of
    fig27 (two templates) and of a six-template mixture."""
    s = BFTSession(live=False)
    s.compute_evidence()
    out = {"evidence": s.evidence, "lam": s.lam}
    s = BFTSession(live=False)
    assert s.load_preset("fig27")
    s.run_sweep(0.1, 10.0, 25)
    out["sweep"], out["beta"] = s.sweep, s.beta
    s = BFTSession(live=False)
    assert s.load_preset("fig21")
    view = LearningView(session=s)
    view.param.update(n_from=5, n_to=200, n_sizes=8, resamples=2)
    assert view.start() and view.wait(300), "the learning curve did not finish"
    out["learning"], out["learning_lambda"] = s.learning, s.learning_request["lambda"]
    return out


# ------------------------------------------------------------------------------------- evidence
def evidence_data(doc: dict, k: int):
    lam, logev = np.asarray(doc["lambda"], float), jitter(doc["log_evidence"], k)
    i = int(np.nanargmax(logev))
    return lam, logev, lam[i:i + 1], logev[i:i + 1]


def evidence_raw(doc: dict):
    """The raw Bokeh evidence plot the view had (figure, two sources, a Span)."""
    fig = make_figure("log evidence against λ", "λ (log scale)", "ln p(D | λ)", x_axis_type="log", height=330)
    path = ColumnDataSource(dict(lam=[], logev=[]))
    best = ColumnDataSource(dict(lam=[], logev=[]))
    fig.line("lam", "logev", source=path, color=SERIES[0], line_width=3, legend_label="log evidence")
    fig.scatter("lam", "logev", source=path, color=SERIES[0], size=5)
    fig.scatter("lam", "logev", source=best, color="black", size=12, marker="star", legend_label="maximum")
    span = Span(dimension="height", line_color="crimson", line_width=2, location=1.0)
    fig.add_layout(span)
    legend_outside(fig)
    page = Page(fig)

    def update(k):
        lam, logev, bl, be = evidence_data(doc, k)
        path.data = dict(lam=lam, logev=logev)
        best.data = dict(lam=bl, logev=be)

    def mark(k):
        span.location = 0.5 + 0.1 * k
    return page, update, mark


def evidence_hv(doc: dict):
    path, current = Pipe(data=evidence_data(doc, 0)), Pipe(data=1.0)
    page = Page(hv_pane(ev_view.evidence_plot(path, current)))
    return page, lambda k: path.send(evidence_data(doc, k)), lambda k: current.send(0.5 + 0.1 * k)


def evidence_rerendered(doc: dict):
    """The path given to the pane as a new element at each update (``pn.bind`` returning an element)."""
    opts = dict(title="log evidence against λ", logx=True, height=330, padding=0.05, hooks=[hv_look()], **HV_OVERLAY)

    def element(k):
        return (ev_view.path_element(evidence_data(doc, k)) * ev_view.current_element(1.0)).opts(
            {"Overlay": opts}, backend="bokeh")
    pane = hv_pane(element(0))
    page = Page(pane)

    def update(k):
        pane.object = element(k)
    return page, update


# ------------------------------------------------------------------------------------------- sweep
def sweep_raw(doc: dict):
    """The raw Bokeh sweep plot the view had (four sources, a Span)."""
    fig = make_figure("β sweep: a₁ against β", "β (log scale)", "a₁", x_axis_type="log", y_range=(-0.02, 1.02),
                      height=330)
    srcs = {key: ColumnDataSource(dict(beta=[], a=[])) for key in ("up", "down", "unstable", "bifurcations")}
    fig.line("beta", "a", source=srcs["up"], color=SERIES[0], line_width=3, legend_label="β increasing")
    fig.scatter("beta", "a", source=srcs["up"], color=SERIES[0], size=6)
    fig.line("beta", "a", source=srcs["down"], color=SERIES[1], line_width=3, line_dash="dashed",
             legend_label="β decreasing")
    fig.scatter("beta", "a", source=srcs["down"], color=SERIES[1], size=6, marker="triangle")
    fig.scatter("beta", "a", source=srcs["unstable"], color="grey", size=10, marker="x", legend_label="unstable")
    fig.scatter("beta", "a", source=srcs["bifurcations"], color="black", size=12, marker="inverted_triangle",
                legend_label="bifurcation")
    span = Span(dimension="height", line_color="crimson", line_width=2, location=1.0)
    fig.add_layout(span)
    legend_outside(fig)
    page = Page(fig)

    def update(k):
        for key, (beta, a) in sweep_data(doc, k).items():
            srcs[key].data = dict(beta=beta, a=a)

    def mark(k):
        span.location = 0.5 + 0.1 * k
    return page, update, mark


def sweep_data(doc: dict, k: int) -> dict:
    data = sweep_view.sweep_data(doc)
    return {key: (beta, jitter(a, k)) for key, (beta, a) in data.items()}


def sweep_hv(doc: dict):
    branches, current = Pipe(data=sweep_data(doc, 0)), Pipe(data=1.0)
    page = Page(hv_pane(sweep_view.sweep_plot(branches, current)))
    return page, lambda k: branches.send(sweep_data(doc, k)), lambda k: current.send(0.5 + 0.1 * k)


# ----------------------------------------------------------------------------------------- learning
def learning_document(doc: dict, k: int) -> dict:
    """The learning-curve document with its errors moved a little."""
    out = dict(doc)
    out["curves"] = []
    for c in doc["curves"]:
        c = dict(c)
        for key in ("test_error", "train_error"):
            err = dict(c[key])
            err["mean"] = [None if m is None else float(v) for m, v in
                           zip(err["mean"], jitter([np.nan if m is None else m for m in err["mean"]], k))]
            c[key] = err
        out["curves"].append(c)
    return out


def learning_raw(doc: dict, lam0: float):
    """The view itself (raw Bokeh): its two figures in a document, ``_draw`` of a partial document."""
    s = BFTSession(live=False)
    view = LearningView(session=s)
    page = Page(view.figure, view.lambda_figure)
    return page, lambda k: view._draw(learning_document(doc, k), lam0), lambda k: view._clear()


def learning_element(data) -> hv.Overlay:
    """The learning curve declared with HoloViews as the raw view draws it: per lambda the test and train bands,
    the test curve with its points and the dashed train curve; the stars of the lowest test error."""
    doc, lam0 = data
    n_dim, err = hv.Dimension("n", label="n (data points, log scale)"), hv.Dimension("e", label="error")
    layers = []
    curves = doc["curves"] if doc else []
    for j in range(len(ev_lambda_factors()) + 1):
        colour = SERIES[j] if j < len(ev_lambda_factors()) else EVIDENCE_COLOUR
        if j < len(curves):
            c = _curve_data(curves[j], len(doc["n"]))
            lam = curves[j]["lambda"]
            label = "evidence-chosen λ" if lam is None else f"λ = {lam:.3g}"
        else:
            c = {key: np.zeros(0) for key in ("n", "test", "test_lo", "test_hi", "train", "train_lo", "train_hi")}
            label = f"curve {j + 1}"
        layers += [hv.Area((c["n"], c["test_lo"], c["test_hi"]), n_dim, [err, "e2"]).opts(
                       backend="bokeh", color=colour, alpha=0.13, line_alpha=0),
                   hv.Area((c["n"], c["train_lo"], c["train_hi"]), n_dim, [err, "e2"]).opts(
                       backend="bokeh", color=colour, alpha=0.07, line_alpha=0),
                   hv.Curve((c["n"], c["test"]), n_dim, err, label=label).opts(
                       backend="bokeh", color=colour, line_width=3),
                   hv.Scatter((c["n"], c["test"]), n_dim, err, label=label).opts(
                       backend="bokeh", color=colour, size=7),
                   hv.Curve((c["n"], c["train"]), n_dim, err, label=label).opts(
                       backend="bokeh", color=colour, line_width=2.5, line_dash="dashed")]
    bn, be = [], []
    if doc:
        by_lambda = {c["lambda"]: c for c in curves if c["lambda"] is not None}
        for i, lam in enumerate(doc.get("best_lambda") or []):
            mean = (by_lambda.get(lam) or {}).get("test_error", {}).get("mean", [None] * len(doc["n"]))[i]
            if mean is not None:
                bn.append(float(doc["n"][i]))
                be.append(float(mean))
    layers.append(hv.Scatter((bn, be), n_dim, err, label="lowest test error at this n").opts(
        backend="bokeh", marker="star", size=20, color="#ffd700", line_color="#000000"))
    return hv.Overlay(layers).opts({"Overlay": dict(title="Learning curve: error against the number of data points n",
                                                    logx=True, height=420, hooks=[hv_look()],
                                                    **dict(HV_OVERLAY, legend_position="bottom"))},
                                   backend="bokeh")


def ev_lambda_factors():
    from bftcore.studies.learning import LAMBDA_FACTORS
    return LAMBDA_FACTORS


def learning_hv(doc: dict, lam0: float):
    pipe = Pipe(data=(doc, lam0))
    page = Page(hv_pane(hv.DynamicMap(learning_element, streams=[pipe], cache_size=1)))
    return page, lambda k: pipe.send((learning_document(doc, k), lam0)), lambda k: pipe.send((None, lam0))


# -------------------------------------------------------------------------------------------- prior
def prior_raw():
    """The raw Bokeh samples and thumbnails the view had: one small figure with an image (and a line) each."""
    def small(w, h):
        f = figure(width=w, height=h, toolbar_location=None, tools="", min_border=2)
        f.axis.visible = False
        f.grid.visible = False
        f.title.text_font_size = "11px"
        f.outline_line_color = None
        return f
    samples, thumbs = [], []
    for k in range(prior_view.N_SAMPLES):
        f = small(230, 210)
        src = ColumnDataSource(dict(image=[], x=[], y=[], dw=[], dh=[]))
        f.image(image="image", x="x", y="y", dw="dw", dh="dh", source=src,
                color_mapper=LinearColorMapper(palette=PALETTE))
        samples.append((f, src))
    for j in range(prior_view.MAX_THUMBS):
        f = small(76, 56)
        src, line = ColumnDataSource(dict(image=[], x=[], y=[], dw=[], dh=[])), ColumnDataSource(dict(x=[], y=[]))
        f.image(image="image", x="x", y="y", dw="dw", dh="dh", source=src,
                color_mapper=LinearColorMapper(palette=PALETTE))
        f.line("x", "y", source=line, color=SERIES[(3 + j) % 10], line_width=2)
        thumbs.append((f, src, line))
    return samples, thumbs


def prior_samples(session, samples_data, k):
    data = dict(samples_data)
    data["fields"] = [jitter(f, k) for f in samples_data["fields"]]
    return data


def prior_cost(runs: int) -> list:
    rows = []
    s = BFTSession(live=False)
    view = prior_view.PriorView(session=s)
    samples_data = view.sample_data.data
    samples = prior_raw()[0]
    left, b, r, t = samples_data["bounds"]

    def raw_samples(k):
        for (f, src), field, title in zip(samples, prior_samples(s, samples_data, k)["fields"],
                                          samples_data["titles"]):
            src.data = dict(image=[np.ascontiguousarray(field.T)], x=[left], y=[b], dw=[r - left], dh=[t - b])
            f.title.text = title
    raw = timed(Page(*[f for f, _ in samples]), raw_samples, runs)
    page = Page(view.samples_panel())
    hvt = timed(page, lambda k: view.sample_data.send(prior_samples(s, samples_data, k)), runs)
    rows.append(("prior: 4 new samples (λ moved)", raw, hvt))
    for preset, label in (("fig27", "2 densities"), ("two_trends", "2 regression lines")):
        s = BFTSession(live=False)
        assert s.load_preset(preset)
        view = prior_view.PriorView(session=s)
        data = [pipe.data for pipe in view.thumb_data]
        thumbs = prior_raw()[1]

        def thumb_data(k):
            return [dict(d, field=None if d["field"] is None else jitter(d["field"], k),
                         line=(d["line"][0], jitter(d["line"][1], k))) for d in data]

        def raw_thumbs(k):
            for (f, src, line), d in zip(thumbs, thumb_data(k)):
                f.visible = d["shown"]
                if not d["shown"]:
                    continue
                if d["field"] is not None:
                    bl, bb, br, bt = d["bounds"]
                    src.data = dict(image=[np.ascontiguousarray(d["field"].T)], x=[bl], y=[bb], dw=[br - bl],
                                    dh=[bt - bb])
                else:
                    line.data = dict(x=d["line"][0], y=d["line"][1])
                f.title.text = d["title"]

        def hv_thumbs(k):
            for pipe, d in zip(view.thumb_data, thumb_data(k)):
                if d["shown"]:
                    pipe.send(d)
        raw = timed(Page(*[f for f, _, _ in thumbs]), raw_thumbs, runs)
        hvt = timed(Page(view.thumbnails()), hv_thumbs, runs)
        rows.append((f"prior: thumbnails, {label} ({preset})", raw, hvt))
    return rows


def slice_element(data) -> hv.Overlay:
    """The column slice p(y|x0) under the cursor declared with HoloViews: learned (line and points) and true."""
    y, p, p_true = data
    return (hv.Curve((y, p), "y", "p", label="learned").opts(backend="bokeh", color=SERIES[1], line_width=3)
            * hv.Scatter((y, p), "y", "p").opts(backend="bokeh", color=SERIES[1], size=6)
            * hv.Curve((y, p_true), "y", "p", label="true").opts(backend="bokeh", color="black", line_dash="dashed",
                                                                 line_width=2)).opts(
        {"Overlay": dict(title="column slice p(y | x0)  (hover on the density)", height=200, hooks=[hv_look()],
                         **dict(HV_OVERLAY, legend_position="top_right"))}, backend="bokeh")


def slice_cost(runs: int):
    """The slice as the server would draw it with HoloViews (a frame of the run or a mouse move sends it a column of
    the paper grid's 15 y nodes); raw Bokeh draws it in the browser (CustomJS), with no server time at all."""
    y = np.linspace(1.0, 15.0, 15)
    p_true = np.exp(-0.5 * (y - 7.0) ** 2 / 4.0)
    pipe = Pipe(data=(y, p_true, p_true))
    page = Page(hv_pane(hv.DynamicMap(slice_element, streams=[pipe], cache_size=1)))
    return timed(page, lambda k: pipe.send((y, jitter(p_true, k, 0.05), p_true)), runs)


# ---------------------------------------------------------------------------------------------- the click
def click_updates() -> dict:
    """How many plot updates of the converted views a click makes: the four views on one session (the evidence
    card open, the sweep and a learning curve done), their plots drawn, each stream's sends counted while points
    are added."""
    from app.views.evidence import EvidenceView
    from app.views.sweep import SweepView
    s = BFTSession(live=False)
    assert s.load_preset("fig27")
    evidence, sweep, prior = EvidenceView(session=s), SweepView(session=s), prior_view.PriorView(session=s)
    Page(pn.Column(evidence, sweep, prior.thumbnails(), prior.samples_panel()))
    evidence.set_active(True)
    s.run_sweep(0.5, 2.0, 4)
    pipes = {"evidence path": evidence.path, "evidence marker": evidence.current, "sweep branches": sweep.branches,
             "sweep marker": sweep.current, "prior samples": prior.sample_data,
             **{f"thumbnail {j + 1}": pipe for j, pipe in enumerate(prior.thumb_data)}}
    counts = dict.fromkeys(pipes, 0)
    for name, pipe in pipes.items():
        send = pipe.send

        def counted(data, name=name, send=send):
            counts[name] += 1
            return send(data)
        pipe.send = counted
    s.running = True  # served, a click starts a run: the evidence follows at its convergence, not on the click
    for x, y in ((2.0, 4.0), (8.0, 11.0), (5.0, 7.0)):
        assert s.add_point(x, y)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    hv.renderer("bokeh")
    docs = real_documents()
    rows = []
    page, update, mark = evidence_raw(docs["evidence"])
    hpage, hupdate, hmark = evidence_hv(docs["evidence"])
    rows.append(("evidence: new path (30 λ)", timed(page, update, args.runs), timed(hpage, hupdate, args.runs)))
    rpage, rupdate = evidence_rerendered(docs["evidence"])
    rows.append(("evidence: new path, re-rendered", timed(page, update, args.runs), timed(rpage, rupdate, args.runs)))
    rows.append(("evidence: λ marker moved", timed(page, mark, args.runs), timed(hpage, hmark, args.runs)))
    page, update, mark = sweep_raw(docs["sweep"])
    hpage, hupdate, hmark = sweep_hv(docs["sweep"])
    rows.append(("sweep: new sweep (25 β)", timed(page, update, args.runs), timed(hpage, hupdate, args.runs)))
    rows.append(("sweep: β marker moved", timed(page, mark, args.runs), timed(hpage, hmark, args.runs)))
    page, update, clear = learning_raw(docs["learning"], docs["learning_lambda"])
    hpage, hupdate, hclear = learning_hv(docs["learning"], docs["learning_lambda"])
    rows.append(("learning: partial curve (5 λ x 8 n)", timed(page, update, args.runs),
                 timed(hpage, hupdate, args.runs)))
    # a click cancels a running curve: the curve drawn (untimed), then its clearing timed
    rows.append(("learning: curve cleared (a click)", timed(page, clear, args.runs, before=update),
                 timed(hpage, hclear, args.runs, before=hupdate)))
    rows += prior_cost(args.runs)

    print(f"server time of one update of a plot, median of {args.runs} updates (min-max), ms; changes = model "
          f"properties sent")
    print(f"{'update':<52}{'raw Bokeh':>20}{'changes':>9}{'HoloViews':>24}{'changes':>9}{'ratio':>7}")
    for name, (raw, nraw), (hvt, nhv) in rows:
        r = [statistics.median(raw) * 1e3, min(raw) * 1e3, max(raw) * 1e3]
        h = [statistics.median(hvt) * 1e3, min(hvt) * 1e3, max(hvt) * 1e3]
        print(f"{name:<52}{f'{r[0]:.2f} ({r[1]:.2f}-{r[2]:.2f})':>20}{nraw:>9}"
              f"{f'{h[0]:.1f} ({h[1]:.1f}-{h[2]:.1f})':>24}{nhv:>9}{h[0] / r[0]:>7.0f}")
    print("('re-rendered': the HoloViews path given to the pane as a new element instead of sent to its stream)")
    sl, nsl = slice_cost(args.runs)
    print(f"{'prior: column slice, per frame or mouse move':<52}{'0 (in the browser)':>20}{0:>9}"
          f"{f'{statistics.median(sl) * 1e3:.1f} ({min(sl) * 1e3:.1f}-{max(sl) * 1e3:.1f})':>24}{nsl:>9}")
    counts = click_updates()
    print("plot updates of the HoloViews views during 3 clicks (evidence card open, a sweep shown): "
          + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
