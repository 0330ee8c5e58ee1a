"""Data tables: your own data as CSV or a whitespace table, and a grid fitted to them.

A table has one column (y values: a one-dimensional density) or two (x, y: a conditional density, or a regression).
Separators: commas, semicolons, tabs or runs of spaces, the same on every line.  A first line that is not numbers is
a header.  A two-column header that names ``x`` and ``y`` (either order, any case, quotes allowed) is read by those
names (``y,x`` swaps them back); two names that are neither x nor y are read by position, first x then y, and
become the axes' labels (``eruptions,waiting``: x is the eruption's duration, y the waiting time), as does a
one-column table's header; a header that names only one of x and y (``time,x``) is refused with its names.  The labels
travel in the document's ``labels`` key to the figures, the CLI and the dashboard.  Blank lines and lines starting with
``#`` are skipped.  Every other line must hold the same number of finite numbers (1 or 2); the first line that does not
is named in the error.  The size is checked before anything is parsed (:mod:`bftcore.foundations.limits`: bytes of a
document, points of a data set).

A table without a configuration, or with one that has no grid, gets ``"grid": {"fit": true}``: each axis spans the
data's range padded by 10 % of that range on both sides (0.5 when all values are equal), with the axis's own ``n``
and ``boundary`` if the document gives them, else 200 nodes for y of a 1-D density and x of a regression, and
30 x 40 nodes for a conditional density, Neumann in x and free in y (the rule's home:
:func:`bftcore.foundations.config._fitted_grid`).
"""
from __future__ import annotations

import csv
import math
import os
import re

import numpy as np

from .config import LABEL_MAX_CHARS, ConfigError, _fmt_int, decode_text, read_bytes
from .limits import Limits, active

_SEPARATORS = re.compile(r"\s*[,;\t]\s*|\s+")
_STRONG = re.compile(r"\s*[,;\t]\s*")


def parse_table(raw, where: str = "the data table", limits: Limits | None = None) -> np.ndarray:
    """Text or bytes of a table -> an ``(n, k)`` float array, k = 1 or 2; :class:`ConfigError` saying what was
    wrong (size, encoding, a line that is not numbers, a column count that changes, NaN or infinity)."""
    return parse_labelled_table(raw, where, limits)[0]


def parse_labelled_table(raw, where: str = "the data table",
                         limits: Limits | None = None) -> tuple[np.ndarray, dict]:
    """:func:`parse_table`, and the axes' labels its header gives (``{}`` without a header, or with the header
    ``x,y``): ``{"x": ..., "y": ...}`` for a two-column table, ``{"y": ...}`` for one column."""
    limits = limits or active()
    raw = decode_text(raw, where, limits, "CSV", "table").removeprefix("\ufeff")  # a BOM of text, as of bytes
    rows: list[list[float]] = []
    width = None
    header: tuple[int, list[str]] | None = None
    for number, line in enumerate(raw.splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        cells = [c for c in _SEPARATORS.split(text) if c != ""]
        try:
            values = [float(c) for c in cells]
        except ValueError:
            if not rows and header is None:  # a header line: names may hold spaces where a comma separates
                header = (number, [c for c in _STRONG.split(text) if c != ""] if _STRONG.search(text) else cells)
                if len(header[1]) > 1 and not _STRONG.search(text) and _one_column(raw, number):
                    header = (number, [text])  # one column's name with spaces: "income ($)"
                continue
            bad = next(c for c in cells if not _is_number(c))
            raise ConfigError(f"{where}, line {number}: {bad[:40]!r} is not a number; a table holds numbers only "
                              f"(one column y, or two columns x y), after at most one header line") from None
        if width is None:
            width = len(values)
            if width not in (1, 2):
                raise ConfigError(f"{where}, line {number}: {width} columns; a data table has one column (y values) "
                                  f"or two (x, y)")
        elif len(values) != width:
            raise ConfigError(f"{where}, line {number}: {len(values)} columns where the first data line had "
                              f"{width}; every line needs the same columns")
        if not all(math.isfinite(v) for v in values):
            raise ConfigError(f"{where}, line {number}: NaN or infinity; every value must be a finite number")
        rows.append(values)
        if limits.max_points is not None and len(rows) > limits.max_points:
            raise ConfigError(f"{where} has more than {_fmt_int(limits.max_points)} data lines, the limit of a data "
                              f"set; use fewer points")
    if not rows:
        raise ConfigError(f"{where} has no data lines; give one column of y values or two columns x, y")
    table = np.asarray(rows, dtype=float)
    if header is None:
        return table, {}
    order, labels = _column_order(header[1], table.shape[1], f"{where}, line {header[0]}")
    return table[:, order], labels


def _column_order(names: list[str], width: int, where: str) -> tuple[list[int], dict]:
    """The columns of the data in the order (x, y), and the labels, read from the header's names: a two-column
    header that names x and y is read by those names, in either order (a header ``y,x`` read by position would
    swap the axes without a word); other names are read by position and kept as the axes' labels (cut to
    :data:`bftcore.foundations.config.LABEL_MAX_CHARS`, as plain text)."""
    shown = ", ".join(repr(n[:40]) for n in names[:5]) + (", ..." if len(names) > 5 else "")
    if len(names) != width:
        raise ConfigError(f"{where}: the header names {len(names)} column(s) ({shown}) and the data lines have "
                          f"{width}; give one name per column")
    clean = [" ".join("".join(c for c in n.strip().strip("\"'") if c.isprintable()).split())[:LABEL_MAX_CHARS]
             for n in names]
    if width == 1:
        return [0], ({"y": clean[0]} if clean[0] else {})
    keys = [n.lower() for n in clean]
    if sorted(keys) == ["x", "y"]:
        return [keys.index("x"), keys.index("y")], {}
    if {"x", "y"} & set(keys):  # "time,x": read by position, the column named x would be y; said, not guessed
        raise ConfigError(f"{where}: the header names the columns {shown}; name them x and y (in either order), or "
                          f"give two names that are neither x nor y to read them as x, y by position, with the "
                          f"names as the axes' labels")
    return [0, 1], {axis: text for axis, text in zip(("x", "y"), clean) if text}


def _one_column(raw: str, header_line: int) -> bool:
    """Whether the table's first data line after the header holds one value (the header names one column)."""
    for line in raw.splitlines()[header_line:]:
        text = line.strip()
        if text and not text.startswith("#"):
            return len([c for c in _SEPARATORS.split(text) if c != ""]) == 1
    return False


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_table(path, limits: Limits | None = None) -> np.ndarray:
    """:func:`parse_table` of a file; errors name the file."""
    return read_labelled_table(path, limits)[0]


def read_labelled_table(path, limits: Limits | None = None) -> tuple[np.ndarray, dict]:
    """:func:`parse_labelled_table` of a file; errors name the file."""
    limits = limits or active()
    raw = read_bytes(path, limits, "data", "a CSV or whitespace table", "table")
    return parse_labelled_table(raw, os.fspath(path), limits)


def data_document(table: np.ndarray, config: dict | None = None, labels: dict | None = None) -> dict:
    """A configuration for a table: ``config`` (a raw document, or None for the defaults) with the table as its
    ``data`` (plain y values for one column, [x, y] pairs for two); its grid fitted to the data
    (``"grid": {"fit": true}``, the rule of :func:`bftcore.foundations.config.validate_config`) when it has no grid.  A
    document that gives a grid keeps it, and a point outside it is refused by the gate as usual."""
    doc = dict(config or {})
    t = np.asarray(table, dtype=float)
    if doc.get("model", "density") == "regression" and t.shape[1] != 2:
        raise ConfigError(f"a regression needs a table of two columns (x, y), got {t.shape[1]}")
    if doc.get("data"):
        raise ConfigError("the configuration has data of its own and a data table was given too; keep one of them "
                          "(drop the configuration's \"data\")")
    if doc.get("grid") is None:
        doc["grid"] = {"fit": True}
    doc["data"] = t[:, 0].tolist() if t.shape[1] == 1 else t.tolist()
    if labels and not doc.get("labels"):  # the configuration's own labels win over the table's header
        doc["labels"] = dict(labels)
    return doc


def by_evidence(doc: dict, unset_only: bool = True) -> dict:
    """A table's document with ``choose`` asking the evidence for what has the data's units, so that a table in
    any units fits as well as in the paper's: lambda (a density with field L and at most one template, or a
    regression) and a regression's beta (its noise precision, in 1/y^2).  ``unset_only`` (the CLI's ``fit``): only
    what the configuration leaves unset, and a configuration that says what to choose is kept.  Otherwise (the
    dashboard's upload, whose λ on screen belongs to the previous data) they are chosen whatever was set."""
    if "choose" in doc and unset_only:
        return doc
    prior = doc.get("prior") or {}
    regression = doc.get("model", "density") == "regression"
    choose = {}
    if (not unset_only or "lambda" not in prior) and (regression or (prior.get("field", "L") == "L"
                                                                      and len(doc.get("templates") or []) <= 1)):
        choose["lambda"] = "evidence"
    if regression and (not unset_only or "beta" not in doc):
        choose["beta"] = "evidence"
    return {**doc, "choose": choose} if choose else doc


def parse_named_table(raw, where: str = "the table", limits: Limits | None = None) -> tuple[list[str], list[list[str]]]:
    """Text or bytes of a table with a header of column names and any number of columns (d-dimensional inputs and a
    target, for :mod:`bftcore.models.replica_tables`) -> the names and the columns, each a list of its cells as
    text (numbers or category labels: which is which is the caller's business).

    The first line that is not blank or a ``#`` comment is the header.  The separator is the header's: a comma, a
    semicolon or a tab if it holds one (cells may then be quoted, ``"a, b"``), else runs of spaces.  Every data line
    must have as many cells as the header; an empty cell is refused (a missing value: impute or drop the row).  The
    size is checked before anything is parsed, the rows and columns while they are read
    (:attr:`~bftcore.foundations.limits.Limits.max_table_rows`, ``max_table_columns``), each with a ConfigError
    saying which limit and what to do."""
    limits = limits or active()
    text = decode_text(raw, where, limits, "CSV", "table").removeprefix("\ufeff")
    lines = [(k, line) for k, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise ConfigError(f"{where} is empty; give a header line of column names and one line per data row")
    first = lines[0][1]
    sep = next((s for s in (",", ";", "\t") if s in first), None)

    def cells(line: str) -> list[str]:
        if sep is None:
            return line.split()
        return [c.strip() for c in next(csv.reader([line], delimiter=sep))]
    names = [n.strip().strip("\"'") for n in cells(first)]
    if limits.max_table_columns is not None and len(names) > limits.max_table_columns:
        raise ConfigError(f"{where} has {len(names)} columns, over the limit of {limits.max_table_columns} for a "
                          f"table of inputs; keep the columns you use")
    if len(names) < 2 or any(not n for n in names):
        raise ConfigError(f"{where}, line {lines[0][0]}: the header must name every column (at least two: inputs "
                          f"and a target), got {', '.join(repr(n[:40]) for n in names[:6])}")
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ConfigError(f"{where}, line {lines[0][0]}: the header names {', '.join(map(repr, twice))} more than "
                          f"once; give every column its own name")
    if all(_is_number(n) for n in names):
        raise ConfigError(f"{where}, line {lines[0][0]}: the first line holds numbers, not column names; add a "
                          f"header line naming the columns")
    columns: list[list[str]] = [[] for _ in names]
    for count, (number, line) in enumerate(lines[1:], start=1):
        if limits.max_table_rows is not None and count > limits.max_table_rows:
            raise ConfigError(f"{where} has more than {_fmt_int(limits.max_table_rows)} data rows, the limit of a "
                              f"table of inputs (its kernel matrix is N x N); use a subset of the rows")
        row = cells(line)
        if len(row) != len(names):
            raise ConfigError(f"{where}, line {number}: {len(row)} cells where the header names {len(names)} "
                              f"columns; every line needs one cell per column")
        for j, cell in enumerate(row):
            if not cell:
                raise ConfigError(f"{where}, line {number}: the cell of column {names[j]!r} is empty (a missing "
                                  f"value); impute it or drop the row")
            columns[j].append(cell)
    if not columns[0]:
        raise ConfigError(f"{where} has a header and no data lines; add one line per data row")
    return names, columns
