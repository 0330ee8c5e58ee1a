"""Data tables: your own data as CSV or a whitespace table, and a grid fitted to them.

A table has one column (y values: a one-dimensional density) or two (x, y: a conditional density, or a regression).
Separators: commas, semicolons, tabs or runs of spaces, the same on every line.  A first line that is not numbers is
a header: with two columns it must name them ``x`` and ``y`` (either order, any case, quotes allowed), and the
columns are read by those names (``y,x`` swaps them back); a header that names anything else is refused with the
names it has.  A one-column table's header may name its column anything.  Blank lines and lines starting with ``#``
are skipped.  Every other line must hold the same number of finite numbers (1 or 2); the first line that does not is
named in the error.  The size is checked before anything is parsed (:mod:`bftcore.foundations.limits`: bytes of a
document, points of a data set).

A table without a configuration, or with one that has no grid, gets ``"grid": {"fit": true}``: each axis spans the
data's range padded by 10 % of that range on both sides (0.5 when all values are equal), with the axis's own ``n``
and ``boundary`` if the document gives them, else 200 Neumann nodes for y of a 1-D density and x of a regression,
and 30 x 40 Neumann nodes for a conditional density (the rule's home: :func:`bftcore.foundations.config._fitted_grid`).
"""
from __future__ import annotations

import math
import os
import re

import numpy as np

from .config import ConfigError, _fmt_int, decode_text, read_bytes
from .limits import Limits, active

_SEPARATORS = re.compile(r"\s*[,;\t]\s*|\s+")


def parse_table(raw, where: str = "the data table", limits: Limits | None = None) -> np.ndarray:
    """Text or bytes of a table -> an ``(n, k)`` float array, k = 1 or 2; :class:`ConfigError` saying what was
    wrong (size, encoding, a line that is not numbers, a column count that changes, NaN or infinity)."""
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
            if not rows and header is None:  # a header line
                header = (number, cells)
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
    return table if header is None else table[:, _column_order(header[1], table.shape[1], f"{where}, line "
                                                                                          f"{header[0]}")]


def _column_order(names: list[str], width: int, where: str) -> list[int]:
    """The columns of the data in the order (x, y), read from the header's names: a two-column header must name
    x and y, in either order (a header ``y,x`` read by position would swap the axes without a word); a one-column
    table's header may say anything (its column is the y values)."""
    shown = ", ".join(repr(n[:40]) for n in names[:5]) + (", ..." if len(names) > 5 else "")
    if len(names) != width:
        raise ConfigError(f"{where}: the header names {len(names)} column(s) ({shown}) and the data lines have "
                          f"{width}; give one name per column")
    if width == 1:
        return [0]
    keys = [n.strip().strip("\"'").strip().lower() for n in names]
    if sorted(keys) != ["x", "y"]:
        raise ConfigError(f"{where}: the header names the columns {shown}; name them x and y (in either order) so "
                          f"that each is read as what it is, or drop the header to read them as x, y by position")
    return [keys.index("x"), keys.index("y")]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_table(path, limits: Limits | None = None) -> np.ndarray:
    """:func:`parse_table` of a file; errors name the file."""
    limits = limits or active()
    raw = read_bytes(path, limits, "data", "a CSV or whitespace table", "table")
    return parse_table(raw, os.fspath(path), limits)


def data_document(table: np.ndarray, config: dict | None = None) -> dict:
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
    return doc
