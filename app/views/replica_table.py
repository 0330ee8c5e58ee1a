"""Replica learning curves of your own table of d-dimensional inputs (seed 002, Figs 1-2), in the learning-curve tab.

A CSV table with a header (uploaded, or the shipped Boston housing) is GP-regressed on the kernel
``exp(-sum_i (x_i - x'_i)^2 / (l^2 v_i))``: the replica theory and the bootstrap simulation of
:func:`bftcore.models.replica_tables.replica_rows` (the CLI's ``python -m bftcore replica``, one implementation), the
posterior variance and the mean square error against m, for the whole table and, optionally, its halves (in the
table's order or at random) and the theory of random subsets without replacement (Fig 2: their mean as a dotted line,
their range over the repeats as a band).  The inputs are normalised as the CLI's ``--inputs`` (onto [0, 1] by
default, docs/replica.md).

Untrusted input, refused at the door: the page's upload refuses an empty file or one over
:data:`TABLE_UPLOAD_BYTES` before it is sent (:class:`app.views.share.UploadInput`), the server checks the size again,
then the text (UTF-8), the rows (:data:`TABLE_ROWS`, below the CLI's limit: the kernel is dense N x N and the server
is shared) and the columns; the target and the categorical columns are checked when a run starts.  Every refusal is
said in the panel's note, as text.

How it runs: one task of the session's background work (:mod:`app.work`, key ``"replica-table"``) on the server's
learning lane, within the learning curve's time budget, with its progress (resamples simulated) and a Cancel button
(polled between resamples).  The state lives in this view, not in the session: the table is not the session's
problem (the canvas's data stay as they are), so a change of the problem does not cancel it.
"""
from __future__ import annotations

from importlib import resources

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, Legend, LegendItem

from bftcore.foundations.config import ConfigError
from bftcore.foundations.distributed import Cancelled
from bftcore.foundations.limits import RunBudgetExceeded, lifted
from bftcore.foundations.tables import parse_named_table
from bftcore.models.replica_tables import (
    BOSTON_SETTINGS,
    INPUTS,
    PARTS,
    SCALES,
    SPLITS,
    input_table,
    replica_rows,
    subset_rows,
)
from bftcore.studies.learning import parse_sizes

from ..session import LEARNING_SECONDS, BFTSession
from ..transport import user_action
from ..work import LONG, Task
from .common import SERIES, LiveText, make_figure, markdown_text
from .share import UploadInput

#: Largest table the dashboard takes, in bytes and rows (the CLI takes up to Limits.max_table_rows with --no-limits).
TABLE_UPLOAD_BYTES = 1024 * 1024
TABLE_ROWS = 1000
#: The key of the task in the session's background work.
KEY = "replica-table"
START_NOTE = ("Upload a CSV table with a header (or press **Boston housing**), choose the target column, then "
              "**Replica curve**.")


def _boston_bytes() -> bytes:
    return (resources.files("bftcore.data") / "boston.csv").read_bytes()


def _upload_refusal(name: str, size: int) -> str:
    """The note for a table the page refused before sending it: empty, over :data:`TABLE_UPLOAD_BYTES`, or
    unreadable (``size`` -1)."""
    what = name.strip()[:60] or "the file"
    if size == 0:
        return f"Refused {what}: the file is empty. Upload a CSV table with a header line of column names."
    if size > TABLE_UPLOAD_BYTES:
        return (f"Refused {what}: {size / 2 ** 20:.1f} MiB is over the limit of {TABLE_UPLOAD_BYTES // 2 ** 20} MiB "
                f"for a table of inputs (at most {TABLE_ROWS} rows are taken); use a subset of the rows.")
    return f"Refused {what}: the browser could not read the file. Try again, or save it as a UTF-8 CSV."


class ReplicaTableView(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)
    target: param.Selector = param.Selector(objects=[], label="target column")
    one_hot = param.ListSelector(default=[], objects=[], label="one-hot (categorical) columns")
    l2 = param.Number(BOSTON_SETTINGS.l2, bounds=(0, None), inclusive_bounds=(False, True), label="l²")
    noise = param.Number(BOSTON_SETTINGS.noise, bounds=(0, None), inclusive_bounds=(False, True), label="σ²")
    scales: param.Selector = param.Selector(objects=list(SCALES), default=BOSTON_SETTINGS.scales, label="scales v_i")
    m_from = param.Integer(10, bounds=(1, 100_000), label="m from")
    m_to = param.Integer(2000, bounds=(1, 100_000), label="m to")
    m_sizes = param.Integer(8, bounds=(2, 16), label="sizes")
    resamples = param.Integer(10, bounds=(2, 50), label="resamples")
    inputs: param.Selector = param.Selector(objects=list(INPUTS), default=BOSTON_SETTINGS.inputs,
                                            label="inputs normalised")
    halves = param.Boolean(True, label="halves")
    split: param.Selector = param.Selector(objects=list(SPLITS), default=SPLITS[0], label="halves cut")
    subset = param.Integer(0, bounds=(0, TABLE_ROWS), label="subset rows (0: none)")
    repeats = param.Integer(10, bounds=(1, 20), label="subsets")
    state: param.Selector = param.Selector(objects=["", "running", "complete", "cancelled", "failed", "refused"],
                                           default="")
    doc = param.Dict(None, allow_None=True, doc="The last complete replica_rows document, or None.")
    progress_count = param.Tuple((0, 0), length=2)

    def __init__(self, **params):
        super().__init__(**params)
        self.table_name = ""
        self.names: list[str] = []
        self.columns: list[list[str]] = []
        self.task: Task | None = None
        self.upload = UploadInput(accept=".csv,.tsv,.txt,.dat", max_bytes=TABLE_UPLOAD_BYTES, width=260, height=40,
                                  aria_label="Upload a table of inputs and a target (CSV with a header)",
                                  css_classes=["bft-replica-upload"])
        self.upload.param.watch(lambda e: self.load(self.upload.value, self.upload.filename or "the table"), "value")
        self.upload.param.watch(lambda e: self._refuse(_upload_refusal(*self.upload.refusal)), "refusal")
        self.boston = pn.widgets.Button(label="Boston housing", width=140, css_classes=["bft-replica-boston"])
        self.boston.on_click(user_action(lambda _: self.load(_boston_bytes(), "boston.csv")))
        self.run_button = pn.widgets.Button(label="Replica curve", color="primary", width=140, disabled=True,
                                            css_classes=["bft-replica-start"])
        self.run_button.on_click(user_action(lambda _: self.start()))
        self.cancel_button = pn.widgets.Button(label="Cancel", width=80, disabled=True,
                                               css_classes=["bft-replica-cancel"])
        self.cancel_button.on_click(user_action(lambda _: self.cancel()))
        self.progress = pn.indicators.Progress(value=0, max=1, width=220, height=20, margin=(14, 10, 0, 10),
                                               css_classes=["bft-replica-progress"], bar_color="primary")
        self.progress_text = LiveText("", width=260, margin=(12, 10, 0, 0), css_classes=["bft-replica-count"])
        self.note = pn.pane.Markdown(START_NOTE, css_classes=["bft-replica-note"], sizing_mode="stretch_width",
                                     margin=(0, 10), styles={"font-size": "15px"})
        self._build_figures()
        self.param.watch(self._on_progress, ["progress_count"])

    # ----------------------------------------------------------------------------------------------- figures
    def _build_figures(self):
        self.sources: dict[tuple[str, str], ColumnDataSource] = {}
        self.subset_sources: dict[str, ColumnDataSource] = {}
        self.figures = []
        for key, title, ylabel in (("variance", "Posterior variance against m", "[G(x, x)]ₓ (log)"),
                                   ("error", "Mean square error on the N rows against m", "ε (log)")):
            fig = make_figure(title, "m (rows drawn with replacement, log)", ylabel, x_axis_type="log",
                              y_axis_type="log", height=360)
            fig.name = f"bft-replica-{key}"
            items = []
            for k, part in enumerate(PARTS):
                slug = part.replace(" ", "-")
                theory = ColumnDataSource(dict(m=[], v=[]), name=f"bft-replica-{key}-theory-{slug}")
                sim = ColumnDataSource(dict(m=[], v=[]), name=f"bft-replica-{key}-simulation-{slug}")
                line = fig.line("m", "v", source=theory, color=SERIES[k], line_width=3,
                                line_dash="solid" if part == "all" else "dashdot")
                dots = fig.scatter("m", "v", source=sim, color=SERIES[k], size=8,
                                   marker="circle" if part == "all" else "x")
                self.sources[(key, f"theory {part}")] = theory
                self.sources[(key, f"simulation {part}")] = sim
                items += [LegendItem(label=f"theory, {part}", renderers=[line]),
                          LegendItem(label=f"simulation, {part}", renderers=[dots])]
            sub = ColumnDataSource(dict(m=[], v=[], lo=[], hi=[]), name=f"bft-replica-{key}-theory-subset")
            fig.varea("m", "lo", "hi", source=sub, color=SERIES[len(PARTS)], alpha=0.25)
            sub_line = fig.line("m", "v", source=sub, color=SERIES[len(PARTS)], line_width=3, line_dash="dotted")
            self.subset_sources[key] = sub
            items.append(LegendItem(label="theory, random subsets", renderers=[sub_line]))
            fig.add_layout(Legend(items=items, location="center", orientation="horizontal", ncols=3,
                                  label_text_font_size="12px", click_policy="hide", border_line_color=None),
                           "below")
            self.figures.append(fig)

    def _draw(self, doc: dict | None):
        for (key, what), src in self.sources.items():
            kind, part = what.split(" ", 1)
            rows = [] if doc is None else [r for r in doc["rows"] if r["part"] == part]
            values = [r[f"{kind}_{key}" if kind == "theory" else f"simulated_{key}"] for r in rows]
            src.data = dict(m=np.array([r["m"] for r in rows], dtype=float),
                            v=np.array([np.nan if v is None else v for v in values], dtype=float))
        for key, src in self.subset_sources.items():
            rows = [] if doc is None else [r for r in doc["rows"] if r["part"].startswith("random ")]
            src.data = {c: np.array([r[f"theory_{key}{end}"] for r in rows], dtype=float)
                        for c, end in (("v", ""), ("lo", "_min"), ("hi", "_max"))} | {
                "m": np.array([r["m"] for r in rows], dtype=float)}

    # ----------------------------------------------------------------------------------------------- actions
    def load(self, raw, name: str) -> bool:
        """A table's bytes (an upload, or the shipped Boston): parsed at the door (bytes, UTF-8, rows, columns) and
        offered for a run; the target defaults to Boston's ``medv`` if present, else the last column.  False (and
        the note says why) when refused; the previous table stays."""
        try:
            names, columns = parse_named_table(raw, name, lifted(max_table_rows=TABLE_ROWS,
                                                                  max_document_bytes=TABLE_UPLOAD_BYTES))
        except ConfigError as e:
            self._refuse(f"Refused: {e}")
            return False
        self.table_name, self.names, self.columns = name, names, columns
        target = BOSTON_SETTINGS.target if BOSTON_SETTINGS.target in names else names[-1]
        self.param.target.objects = list(names)
        self.param.one_hot.objects = list(names)
        self.param.update(target=target, one_hot=[], doc=None, state="")
        self._draw(None)
        self.run_button.disabled = False
        self._say(f"Loaded {len(columns[0])} rows and {len(names)} columns from {markdown_text(name)}; target "
                  f"{markdown_text(target)}.")
        return True

    def start(self) -> bool:
        """Run the replica theory and the simulation of the loaded table with the view's settings on the learning
        lane; False (and the note says why) when there is no table, a run is going, or the settings are refused."""
        s = self.session
        assert s is not None
        if not self.names or self.task is not None or s.work.closed:
            return False
        try:
            if self.m_from > self.m_to:
                raise ConfigError(f"m from ({self.m_from}) is larger than m to ({self.m_to}); swap them")
            table = input_table(self.names, self.columns, str(self.target), list(self.one_hot),
                                self.table_name, lifted(max_table_rows=TABLE_ROWS))
            sizes = parse_sizes(f"{self.m_from}:{self.m_to}:{self.m_sizes}", "the sizes m")
        except ConfigError as e:
            self._refuse(f"Refused: {e}")
            return False
        parts = 3 if self.halves else 1
        total = len(sizes) * int(self.resamples) * parts
        l2, noise, scales, halves, resamples = (float(self.l2), float(self.noise), str(self.scales),
                                                bool(self.halves), int(self.resamples))
        inputs, split, subset, repeats = str(self.inputs), str(self.split), int(self.subset), int(self.repeats)
        if subset and not 2 <= subset <= table.rows:
            self._refuse(f"Refused: a subset takes 2 to {table.rows} rows (the table's), got {subset}; 0 turns the "
                         f"subsets off")
            return False

        def work(task: Task):
            doc = replica_rows(table, l2, noise, sizes, scales=scales, halves=halves, resamples=resamples,
                               cancel=task.cancelled.is_set, limits=lifted(max_table_rows=TABLE_ROWS),
                               inputs=inputs, split=split,
                               progress=lambda d, t: s.work.report(task, self._progressed, task, d, t,
                                                                   final=d >= t))
            if subset:
                doc["rows"] += subset_rows(table, l2, noise, doc["sizes"], subset, repeats, scales=scales,
                                           seed=doc["seed"], cancel=task.cancelled.is_set, inputs=inputs)
            return doc
        # the state is set before the task starts: without a server its end may be applied before start returns
        self.task = Task(KEY)
        self.param.update(state="running", doc=None, progress_count=(0, total))
        self._draw(None)
        self._buttons()
        self._say(f"Computing: {len(sizes)} sizes m from {sizes[0]} to {sizes[-1]}, {self.resamples} resamples "
                  f"each, {parts} part(s) of {table.rows} rows…")
        if s.work.start(KEY, work, self._end, lane=LONG, budget_s=LEARNING_SECONDS, if_busy="refuse",
                        task=self.task) is None:
            self.task = None
            self._buttons()
            self._refuse("Refused: this session has too much work running; wait for it to finish.")
            return False
        return True

    def cancel(self) -> bool:
        """Cancel the running curve; False when none runs."""
        s = self.session
        assert s is not None
        if self.task is None or s.work.cancel(KEY) is None:
            return False
        self.state = "cancelled"
        self._say("Cancelled. Press **Replica curve** to start again.")
        return True

    def wait(self, timeout: float | None = None) -> bool:
        assert self.session is not None
        return self.session.work.wait(KEY, timeout)

    # ----------------------------------------------------------------------------------------------- the task
    def _progressed(self, task: Task, done: int, total: int):
        if task is self.task:
            self.progress_count = (int(done), int(total))

    def _end(self, task: Task, result):
        if task is not self.task:
            return
        self.task = None
        if task.outcome == "cancelled" or isinstance(result, Cancelled):
            self.state = "cancelled"
            self._say("Cancelled. Press **Replica curve** to start again.")
        elif isinstance(result, RunBudgetExceeded):
            self.state = "failed"
            self._say(f"Stopped after {LEARNING_SECONDS:g} s, the server's time budget; use fewer sizes, resamples "
                      f"or rows.")
        elif isinstance(result, BaseException) or not isinstance(result, dict):
            self.state = "failed"
            self._say(f"The replica curve could not be computed: {markdown_text(str(result)[:300])}.")
        else:
            self.param.update(doc=result, state="complete", progress_count=(self.progress_count[1],) * 2)
            self._draw(result)
            last = [r for r in result["rows"] if r["part"] == "all"][-1]
            self._say(f"Done: {markdown_text(result['target'])} on {len(result['inputs'])} inputs, N = "
                      f"{result['N']}; at m = {last['m']} the theory's posterior variance is "
                      f"{last['theory_variance']:.3g} (simulation {last['simulated_variance']:.3g}) and its error "
                      f"{last['theory_error']:.3g} ({last['simulated_error']:.3g}). Target standardised; the theory "
                      f"is an approximation.")
        self._buttons()

    # ----------------------------------------------------------------------------------------------- words
    def _refuse(self, text: str):
        if self.task is None:
            self.state = "refused"
        self._say(markdown_text(text))

    def _say(self, text: str):
        if self.note.object != text:
            self.note.object = text

    def _buttons(self):
        self.run_button.disabled = self.task is not None or not self.names
        self.cancel_button.disabled = self.task is None

    def _on_progress(self, *_):
        done, total = self.progress_count
        self.progress.max = max(1, int(total))
        self.progress.value = int(min(done, total))
        self.progress_text.set(f"{done} of {total} resamples" if total else "")

    def __panel__(self):
        kinds = {"target": {"type": pn.widgets.Select, "width": 140, "css_classes": ["bft-replica-target"]},
                 "l2": {"type": pn.widgets.FloatInput, "width": 90},
                 "noise": {"type": pn.widgets.FloatInput, "width": 90},
                 "scales": {"width": 100},
                 "m_from": {"type": pn.widgets.IntInput, "width": 80},
                 "m_to": {"type": pn.widgets.IntInput, "width": 80},
                 "m_sizes": {"type": pn.widgets.IntInput, "width": 70},
                 "resamples": {"type": pn.widgets.IntInput, "width": 80},
                 "inputs": {"width": 130},
                 "halves": {"width": 70, "margin": (30, 10, 0, 10)},
                 "split": {"width": 90},
                 "subset": {"type": pn.widgets.IntInput, "width": 150},
                 "repeats": {"type": pn.widgets.IntInput, "width": 80}}
        # two rows, so that the controls fit a laptop's width without a sideways scroll
        rows = (["target", "l2", "noise", "scales", "m_from", "m_to", "m_sizes", "resamples"],
                ["inputs", "halves", "split", "subset", "repeats"])
        widgets = pn.Column(*[pn.Param(self.param, parameters=names, widgets={n: kinds[n] for n in names},
                                       default_layout=pn.Row, show_name=False, sizing_mode="stretch_width")
                              for names in rows], sizing_mode="stretch_width")
        one_hot = pn.widgets.MultiChoice.from_param(self.param.one_hot, width=300, css_classes=["bft-replica-onehot"])
        head = pn.pane.Markdown("### Your table of d-dimensional inputs: replica theory and bootstrap (seed 002)",
                                margin=(10, 10, 0, 10))
        return pn.Column(head, pn.Row(self.upload, self.boston, self.run_button, self.cancel_button, one_hot),
                         widgets, pn.Row(self.progress, self.progress_text, height=36), self.note,
                         pn.Row(*[pn.pane.Bokeh(f, sizing_mode="stretch_width") for f in self.figures],
                                sizing_mode="stretch_width"), sizing_mode="stretch_width")
