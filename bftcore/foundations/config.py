"""The JSON configuration document of CONVENTIONS.md §4: parse, validate, fill defaults, round-trip.

``validate_config(doc)`` returns a new, complete document (every key present) or raises :class:`ConfigError`
naming the offending key and what to do.  The document is a public contract: keys are only ever added.

Defaults for omitted keys:

* ``model`` "density"; ``grid`` the paper mesh (x = 1..10, y = 1..15, both periodic); ``data`` [];
* ``prior``: field "L", lambda = lambda_x = lambda_y = 1; of l0, l2, l4, l6 the missing ones are 0, except that
  when none of them is given l2 = 1 (a plain -Delta prior);
* ``templates`` [] (the zero template); ``weights`` equal p_j = 1/m; ``beta`` 1 (the paper);
* ``solver``: method "newton", mass2 0.01, init "kernel", init_mass2 0.1, min_iter 4, max_iter 50, tol 1e-8;
* ``truth`` null (no test error).  Density: "paper" (eq. 708).  Regression (an extension): the true h(x) as a
  template object or a list of values on the x nodes; the test error is then the mean of (h - h_true)^2 / 2.

Extensions of the contract: density templates ``{"kind": "gaussian", "mu": m, "sigma": s}`` (a Gaussian in y,
the same at every x, raw at the nodes like the paper's) and ``{"kind": "array", "values": [[...]]}`` (an nx x ny
template in the representation of the field: log-density for field L, density for field P).
"""
from __future__ import annotations

import copy
import functools
import itertools
import json
import math
import numbers
import os
import stat
from collections.abc import Iterator, Mapping
from typing import Protocol

import numpy as np

from .grid import Axis, Grid, pairs_array
from .limits import (
    MAX_CONDITION,
    MAX_COORDINATE,
    MAX_MAGNITUDE,
    MAX_SCALED_MAGNITUDE,
    MAX_TEMPLATE_VALUE,
    MIN_BETA,
    Limits,
    active,
)
from .operators import FREE_AXIS_MAX_NODES, axis_symbol, highest_order
from .potentials import DATA_TERMS, POTENTIAL_PRESETS
from .records import FitResult, Record
from .solvers import METHODS
from .templates import KINDS as TEMPLATE_KINDS
from .templates import kinds as template_kinds
from .templates import template_field


class ConfigError(ValueError):
    """A configuration document is malformed or over the cost budget; the message names the key and the fix."""


TOP_KEYS = ("model", "grid", "data", "prior", "templates", "weights", "beta", "solver", "truth", "choose",
            "labels") + ("data_term",)  # robust regression (the block at the end of this module)
#: Longest name of an axis (key ``labels``): a column header, with its units, fits; a paragraph does not.
LABEL_MAX_CHARS = 80
#: The x axis of a one-dimensional density (a document whose grid gives y and no x): one node at x = 0.
ONE_D_X = {"min": 0.0, "max": 0.0, "n": 1, "boundary": "neumann"}
#: Hyperparameters a document may ask ``fit`` to choose (key ``choose``), per model, and the default range of
#: the evidence path over each: (min, max, number of log-spaced values).
CHOOSABLE = {"density": ("lambda",), "regression": ("lambda", "l0", "beta")}
#: Largest magnitude of lambda: a guard of the floating-point range only (lambda * K must stay far from overflow);
#: whether a lambda is too stiff or too weak is judged against the grid and the data (:func:`_check_conditioning`).
LAMBDA_MAGNITUDE = MAX_SCALED_MAGNITUDE
CHOOSE_DEFAULT_RANGE = {"lambda": (1e-3, 1e3, 30), "l0": (1e-4, 1e2, 30), "beta": (1e-3, 1e3, 30)}
#: (``potential``: robust regression, :mod:`bftcore.models.robust`; ``local``, ``cuts``: the local priors)
PRIOR_KEYS = ("field", "lambda", "lambda_x", "lambda_y", "l0", "l2", "l4", "l6", "local", "cuts", "potential")
#: The local priors of a regression's prior (key ``prior.local``, :func:`_local_prior`): their keys per type.
LOCAL_KEYS = {"switch": ("type", "stiffness", "pi"), "hyperfield": ("type", "theta0", "gamma_theta", "mu_theta")}
#: The local prior that cuts alone carry: a switch of one alternative, the document's own Gaussian prior.
GAUSSIAN_LOCAL = {"type": "switch", "stiffness": [1.0], "pi": [1.0]}
#: Most alternatives of a local switch (a guard of the document's size; the dashboard draws two).
MAX_LOCAL_ALTERNATIVES = 16
SOLVER_KEYS = ("method", "mass2", "init", "init_mass2", "min_iter", "max_iter", "tol")
AXIS_KEYS = ("min", "max", "n", "boundary")
INITS = ("uniform", "kernel", "empirical", "coarse")
#: Deepest nesting any document may have whatever the limits (a guard of the recursive checks, not a budget).
HARD_DEPTH = 200


def default_config(model: str = "density") -> dict:
    """A complete, valid document with every default filled in (the paper mesh, no data).

    A regression without data has two things no default supplies: a prior mean and a prior mass (K_X annihilates
    the constants, so without data nothing fixes h's level).  Its default document therefore carries one constant
    template at 0 and ``prior.l0 = 0.01`` (with ``l2 = 1`` said explicitly: a given l_k drops the implied l2 = 1);
    it fits h = 0 until data are added."""
    if model == "regression":
        return validate_config({"model": model, "templates": [{"kind": "constant", "value": 0.0}],
                                "prior": {"l0": 0.01, "l2": 1.0}})
    return validate_config({"model": model})


def _fmt_int(n: int) -> str:
    return f"{n:,}".replace(",", " ")


# ----------------------------------------------------------------------------------------------- parsing
def _parse_int(text: str):
    # beyond 2**53 an integer is not exact as a float anyway; beyond 1e308 it becomes inf, refused by the checks
    # with the key's name (Python's int() of a 400-digit string would only overflow later, in float())
    return float(text) if len(text.lstrip("-")) > 15 else int(text)


def decode_text(raw, where: str, limits: Limits, kind: str = "JSON", noun: str = "document") -> str:
    """Text or bytes of a ``kind`` file within the budget's bytes, as ``str``; :class:`ConfigError` for a size over
    the budget, bytes that are not UTF-8 (a BOM is dropped) or anything that is not text."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw)
        if limits.max_document_bytes is not None and len(raw) > limits.max_document_bytes:
            raise ConfigError(f"{where} has {_fmt_int(len(raw))} bytes, over the limit of "
                              f"{_fmt_int(limits.max_document_bytes)}; use a smaller {noun}")
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ConfigError(f"{where} is not UTF-8 text (byte {e.start}); save it as UTF-8 {kind}") from None
    if not isinstance(raw, str):
        raise ConfigError(f"{where} must be {kind} text, got {type(raw).__name__}")
    if limits.max_document_bytes is not None and len(raw) > limits.max_document_bytes:
        raise ConfigError(f"{where} has {_fmt_int(len(raw))} characters, over the limit of "
                          f"{_fmt_int(limits.max_document_bytes)}; use a smaller {noun}")
    return raw


def read_bytes(path, limits: Limits, name: str = "configuration", what: str = "a JSON configuration file",
               noun: str = "document") -> bytes:
    """The bytes of a file within the budget's bytes; :class:`ConfigError` naming the file otherwise."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ConfigError(f"no such {name} file: {path}")
    if os.path.isdir(path):
        raise ConfigError(f"{path} is a directory; give the path of {what}")
    try:
        _regular(path, os.stat(path).st_mode, what)  # before open(): open() of a FIFO waits for a writer forever
        # without blocking, and checked again on what was opened (the path may have changed in between)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            _regular(path, st.st_mode, what)
            if limits.max_document_bytes is not None and st.st_size > limits.max_document_bytes:
                raise ConfigError(f"{path} has {_fmt_int(st.st_size)} bytes, over the limit of "
                                  f"{_fmt_int(limits.max_document_bytes)}; use a smaller {noun}")
            return fh.read(limits.max_document_bytes + 1 if limits.max_document_bytes is not None else -1)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None


def _regular(path: str, mode: int, what: str) -> None:
    """Refuse anything but a regular file: a FIFO blocks, a device or a socket never ends."""
    if not stat.S_ISREG(mode):
        kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or
                stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "a directory" if stat.S_ISDIR(mode)
                else "not a regular file")
        raise ConfigError(f"{path} is {kind}, not a regular file; give the path of {what}")


def parse_document(raw, where: str = "the configuration", limits: Limits | None = None):
    """JSON text or bytes -> a Python object, or :class:`ConfigError` saying what was wrong (size, encoding,
    syntax, nesting, numbers beyond the float range, NaN/Infinity, which are not JSON)."""
    limits = limits or active()
    raw = decode_text(raw, where, limits, "JSON", "document")
    try:
        return json.loads(raw, parse_int=_parse_int)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except RecursionError:
        raise ConfigError(f"{where} is nested too deeply; a configuration needs at most 4 levels of brackets") \
            from None
    except ValueError as e:  # ConfigError from a hook, or Python's own limits on integer text
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"{where} holds a number that cannot be read: {e}") from None


def load_config(path, limits: Limits | None = None) -> Valid:
    """Read and validate a JSON configuration file; errors name the file and the problem."""
    limits = limits or active()
    return validate_config(read_document(path, limits), limits)


def read_document(path, limits: Limits | None = None):
    """Read and parse (not validate) a JSON configuration file; errors name the file and the problem."""
    limits = limits or active()
    return parse_document(read_bytes(path, limits), os.fspath(path), limits)


# ----------------------------------------------------------------------------------------------- plain values
#: Python's own number types (``type(v) in``: a bool, an int subclass, is not one of them here)
_PLAIN_NUMBERS = frozenset((float, int))
_LIST_TYPE = frozenset((list,))
_FLOAT_TYPE = frozenset((float,))
_PAIR = frozenset((2,))
#: JSON's own scalar types (immutable), which :func:`to_plain` and :func:`_copy_plain` return as they are
_PLAIN_SCALARS = frozenset((float, int, str, bool, type(None)))
_JSON_CONTAINERS = frozenset((list, dict))


def _plain_numbers(seq) -> bool:
    """Whether every item of ``seq`` is a Python float or int (nothing to convert, nothing nested).  The types are
    collected by ``map`` and ``set`` in C, not item by item in Python."""
    return set(map(type, seq)) <= _PLAIN_NUMBERS


def _plain_lists(seq) -> bool:
    """Whether every item of ``seq`` is a list of Python floats and ints (data points: one level, nothing else).
    For 200 [x, y] points: 14 us, against 44 us for the same check item by item in Python."""
    return set(map(type, seq)) <= _LIST_TYPE and _plain_numbers(itertools.chain.from_iterable(seq))


def to_plain(obj, where: str = "the configuration", depth: int = 0):
    """A copy of ``obj`` in plain JSON types: numpy scalars become Python numbers, numpy arrays and tuples lists.

    Anything else that is not JSON (sets, objects, bytes) is refused with a :class:`ConfigError`."""
    if type(obj) in _PLAIN_SCALARS:  # the common case first, before the abstract number checks below
        return obj
    if depth > HARD_DEPTH:
        raise ConfigError(f"{where} is nested too deeply; a configuration needs at most 4 levels of brackets")
    if type(obj) in _JSON_CONTAINERS:  # a plain list or dict: none of the conversions (and ABC checks) below
        pass
    elif obj is None or isinstance(obj, (str, bool)):
        return obj
    elif isinstance(obj, np.bool_):
        return bool(obj)
    elif isinstance(obj, numbers.Integral):
        return int(obj)
    elif isinstance(obj, numbers.Real):
        return float(obj)
    elif isinstance(obj, np.ndarray):
        if np.ma.isMaskedArray(obj) and np.ma.count_masked(obj):  # tolist() would turn masked values into null
            raise ConfigError(f"{where} holds a masked array with {_fmt_int(int(np.ma.count_masked(obj)))} masked "
                              f"value(s); bftcore does not guess what they were: drop or fill them first")
        if obj.dtype.kind == "c":
            raise ConfigError(f"{where} holds complex numbers; give real numbers")
        if obj.dtype.kind in "biuf":
            return obj.tolist()
        obj = obj.tolist()
    if isinstance(obj, (list, tuple)):
        # the common case at once: a list of plain numbers, or of lists of plain numbers (data points), has nothing
        # to convert (200 points took 0.45 ms through the general path, a seventh of a 16 x 16 fit)
        if depth + 2 <= HARD_DEPTH:
            if _plain_numbers(obj):
                return list(obj)
            if _plain_lists(obj):
                return list(map(list, obj))
        return [to_plain(v, where, depth + 1) for v in obj]
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise ConfigError(f"{where} has a key {k!r} that is not a string")
            out[k] = to_plain(v, where, depth + 1)
        return out
    raise ConfigError(f"{where} holds a {type(obj).__name__}, which is not JSON; use numbers, strings, lists "
                      f"and objects")


def length_of(obj) -> int | None:
    """How many items ``obj`` holds along its first axis, read from its shape or length without converting it
    (None for a scalar or an object that does not say); the count the doors check before any conversion."""
    shape = getattr(obj, "shape", None)
    if isinstance(shape, tuple):
        return int(shape[0]) if shape else None
    if isinstance(obj, (list, tuple)):
        return len(obj)
    return None


def _size_of(obj) -> int | None:
    """Numbers in an array-like ``obj``, from its shape (None without one)."""
    shape = getattr(obj, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(k, (int, np.integer)) for k in shape):
        return int(np.prod(shape, dtype=object))
    return None


def _count_before_conversion(doc, limits: Limits) -> None:
    """Refuse a document's data, array templates or truth over the budget from their lengths and shapes, before
    :func:`to_plain` turns numpy arrays into lists (10^6 points took 240 MB and seconds to convert, and were then
    refused by the count; issue 25)."""
    if not isinstance(doc, dict):
        return
    n = length_of(doc.get("data"))
    if n is not None:
        _within(n, limits.max_points, "a data set of {} points", "use fewer points")
    arrays = [("truth", doc.get("truth"))]
    templates = doc.get("templates")
    if isinstance(templates, (list, tuple)):
        arrays += [(f"templates[{k}].values", t.get("values")) for k, t in enumerate(templates[:1000])
                   if isinstance(t, dict)]
    for where, values in arrays:
        size = _size_of(values)
        if size is not None:
            _within(size, limits.max_nodes, where + " of {} values", "an array template or truth holds one value a "
                    "grid node; use a coarser grid")


def _float_pair_list(obj, copy: bool = True) -> tuple[list, np.ndarray] | None:
    """``obj`` read once when it is a non-empty list of ``[x, y]`` pairs of Python floats (what numpy arrays and JSON
    numbers with a point become): a fresh copy of its pairs (``obj`` itself if not ``copy``) and their ``(n, 2)``
    array; else None.  The gate's one walk over such data: the type checks are ``map`` and ``set`` in C, the array
    :func:`bftcore.foundations.grid.pairs_array`'s.  Finiteness and range are :func:`_float_pairs`' checks."""
    if type(obj) is not list or not obj or not set(map(type, obj)) <= _LIST_TYPE or set(map(len, obj)) != _PAIR \
            or set(map(type, itertools.chain.from_iterable(obj))) != _FLOAT_TYPE:
        return None
    pairs = list(map(list, obj)) if copy else obj
    return pairs, pairs_array(pairs)


def _float_pairs(data, plain_x: float | None, read: tuple[list, np.ndarray] | None = None
                 ) -> tuple[list, np.ndarray] | None:
    """The gate's fast path for data: when every point is a pair of Python floats (what numpy arrays become), or
    for a one-dimensional density (``plain_x``, the x of its one node) every point a float, and all of them finite
    and within :data:`MAX_COORDINATE`, the points as [x, y] lists and as an ``(n, 2)`` array, checked at once; else
    None, and the point-by-point checks say what is wrong where.  Ints, bools and strings take the slow path.
    ``data`` is the gate's own plain copy (:func:`to_plain`), so pairs are returned as they are, not copied again;
    ``read`` is :func:`_float_pair_list` of the caller's data when the gate read them that way (its copy is
    ``data``)."""
    if not isinstance(data, list) or not data:
        return None
    if plain_x is not None and set(map(type, data)) == _FLOAT_TYPE:
        arr = np.array(data)
        if np.all(np.isfinite(arr)) and float(np.max(np.abs(arr))) <= MAX_COORDINATE:
            return [[plain_x, v] for v in data], np.column_stack([np.full(arr.size, plain_x), arr])
        return None
    if read is None:
        read = _float_pair_list(data, copy=False)  # the gate's own copy already
        if read is None:
            return None
    arr = read[1]
    if np.isfinite(arr).all() and float(abs(arr).max()) <= MAX_COORDINATE:
        return read
    return None


def _data_point(p, k: int, plain_x: float | None, model: str) -> list:
    """Data point ``k`` checked on its own (the slow path of :func:`_float_pairs`): an [x, y] pair of finite
    numbers, or for a one-dimensional density (``plain_x``) a plain y value."""
    if plain_x is not None and not isinstance(p, (list, dict, str, bool)) and p is not None:
        p = [plain_x, p]  # a one-dimensional density's data may be the y values alone
    if not isinstance(p, list) or len(p) != 2:
        raise ConfigError(f"data[{k}] must be an [x, y] pair, got {_show(p)}"
                          + (" (a one-dimensional density, a grid without x, also takes plain y values)"
                             if model == "density" else ""))
    return [_num(p[0], f"data[{k}][0] (x)", mag=MAX_COORDINATE), _num(p[1], f"data[{k}][1] (y)", mag=MAX_COORDINATE)]


def _depth(obj, limit: int) -> None:
    """Refuse a document (plain, from :func:`to_plain`: its containers are exactly lists and dicts) nested more than
    ``limit`` levels deep.  A list of plain numbers (a data point), or a list of such lists (the data), ends a branch
    without being walked (their levels are still counted)."""
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if d > limit:
            raise ConfigError(f"the configuration is nested {d} levels deep, over the limit of {limit}; "
                              f"a configuration needs at most 4 levels of brackets")
        for v in (o.values() if isinstance(o, dict) else o):
            if type(v) is list:
                if not (d + 1 <= limit and _plain_numbers(v) or d + 2 <= limit and _plain_lists(v)):
                    stack.append((v, d + 1))
            elif isinstance(v, (list, dict)):
                stack.append((v, d + 1))


# ----------------------------------------------------------------------------------------------- field checks
def _keys(d, allowed, where):
    if not isinstance(d, dict):
        raise ConfigError(f"{where} must be a JSON object, got {_show(d)}")
    unknown = [k for k in d if k not in allowed]
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(map(repr, unknown[:5]))} in {where}; "
                          f"known keys are {', '.join(allowed)}")


def _show(v) -> str:
    """A short description of a value for a message (never a megabyte of it)."""
    text = repr(v)
    return text if len(text) <= 60 else f"{type(v).__name__} {text[:40]}..."


def _labels(v) -> dict:
    """The ``labels`` key: what the data's axes are, in the user's words and units, e.g. ``{"x": "eruption
    (min)", "y": "waiting (min)"}`` (a CSV's header gives them).  Each is plain text of at most
    :data:`LABEL_MAX_CHARS` printable characters; the figures, the CLI and the dashboard show it as text, never
    as markup."""
    _keys(v, ("x", "y"), "labels")
    out = {}
    for axis, text in v.items():
        if not isinstance(text, str):
            raise ConfigError(f"labels.{axis} must be a string (the axis's name and units), got {_show(text)}")
        text = " ".join(text.split())
        if len(text) > LABEL_MAX_CHARS:
            raise ConfigError(f"labels.{axis} has {len(text)} characters; name an axis in at most "
                              f"{LABEL_MAX_CHARS}")
        if not text.isprintable():
            raise ConfigError(f"labels.{axis} holds control characters; give plain text")
        if text:
            out[axis] = text
    return out


def _str(v, where, choices):
    if not isinstance(v, str) or v not in choices:
        raise ConfigError(f"{where} must be one of {', '.join(map(repr, choices))}, got {_show(v)}")
    return v


def _num(v, where, lo=None, hi=None, lo_open=False, integer=False, mag=MAX_MAGNITUDE):
    """A number of a document: finite, within float range and ``|v| <= mag``, and within [lo, hi]."""
    if type(v) not in _PLAIN_NUMBERS and (isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real)):
        raise ConfigError(f"{where} must be a number, got {_show(v)}")  # (a Python float or int needs no ABC check)
    try:
        f = float(v)
    except (OverflowError, ValueError, TypeError):
        raise ConfigError(f"{where} = {str(v)[:20]}... is beyond the floating-point range; "
                          f"give a number of at most {mag:g} in magnitude") from None
    if not math.isfinite(f):
        raise ConfigError(f"{where} must be a finite number, got {_show(v)}"
                          + (" (a number beyond the floating-point range)" if math.isinf(f) else ""))
    if integer and f != math.floor(f):
        raise ConfigError(f"{where} must be a whole number, got {_show(v)}")
    if lo is not None and (f < lo or (lo_open and f == lo)):
        raise ConfigError(f"{where} must be {'>' if lo_open else '>='} {lo:g}, got {f:g}")
    if hi is not None and f > hi:
        raise ConfigError(f"{where} must be <= {hi:g}, got {f:g}")
    if mag is not None and abs(f) > mag:
        raise ConfigError(f"{where} = {f:g} is an absurd magnitude; give a number of at most {mag:g} in magnitude")
    return int(f) if integer else f


def _array(values, shape, where, mag):
    """A list (of lists) of finite numbers of the given shape, as a float array."""
    def bad(what):
        return ConfigError(f"{where} must be {' x '.join(map(str, shape))} numbers ({what})")
    rows = values if len(shape) == 2 else [values]
    if not isinstance(values, list) or len(values) != shape[0]:
        raise bad(f"got {_show(values) if not isinstance(values, list) else f'{len(values)} entries'}")
    if len(shape) == 2 and not all(isinstance(r, list) and len(r) == shape[1] for r in rows):
        raise bad("a row has another length or is not a list")
    for r in rows:
        for v in r:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise bad(f"got {_show(v)}")
    try:
        a = np.array(values, dtype=float)
    except (OverflowError, ValueError, TypeError):
        raise bad("a number is beyond the floating-point range") from None
    if not np.all(np.isfinite(a)):
        raise bad("all finite")
    if np.max(np.abs(a), initial=0.0) > mag:
        raise ConfigError(f"{where} holds a value of magnitude {np.max(np.abs(a)):g}, over {mag:g}")
    return a


def _axis(d, where, default, limits: Limits):
    if d is None:
        d = {}
    if not isinstance(d, dict):
        raise ConfigError(f"{where} must be an object {{\"min\", \"max\", \"n\", \"boundary\"}}, got {_show(d)}")
    d = {**default, **d}
    _keys(d, AXIS_KEYS, where)
    cap = limits.max_axis_nodes if limits.max_axis_nodes is not None else 2 ** 31
    n = _num(d["n"], f"{where}.n", 1, integer=True)
    if n > cap:
        raise ConfigError(f"{where}.n = {_fmt_int(n)} nodes exceeds the limit of {_fmt_int(cap)} per axis; "
                          f"use a coarser grid")
    lo = _num(d["min"], f"{where}.min", mag=MAX_COORDINATE)
    hi = _num(d["max"], f"{where}.max", mag=MAX_COORDINATE)
    if n > 1 and not hi > lo:
        raise ConfigError(f"{where}: max ({hi:g}) must be larger than min ({lo:g})")
    if n > 1 and (hi - lo) / (n - 1) <= 1e-9 * max(abs(lo), abs(hi)):  # relative: any units
        raise ConfigError(f"{where}: the node spacing {(hi - lo) / (n - 1):g} is too small to resolve at "
                          f"coordinates of {max(abs(lo), abs(hi)):g}; widen the axis or use fewer nodes")
    boundary = _str(d["boundary"], f"{where}.boundary", ("periodic", "neumann", "free"))
    if boundary == "free" and n > FREE_AXIS_MAX_NODES:
        raise ConfigError(f"{where}: a free boundary takes at most {FREE_AXIS_MAX_NODES} nodes (its eigenbasis is a "
                          f"dense eigendecomposition), got {_fmt_int(n)}; use fewer nodes or a neumann boundary")
    return {"min": lo, "max": hi, "n": n, "boundary": boundary}


def _template(t, where, model):
    """Syntax of one template object (values are checked against the grid later)."""
    kinds = template_kinds(model)
    if not isinstance(t, dict) or "kind" not in t:
        raise ConfigError(f"{where} must be an object with a \"kind\" (one of {', '.join(kinds)}), got {_show(t)}")
    kind = t["kind"]
    if not isinstance(kind, str) or kind not in kinds:
        raise ConfigError(f"{where}.kind {_show(kind)} is not known for the {model} model; "
                          f"use one of {', '.join(kinds)}")
    need = TEMPLATE_KINDS[(model, kind)].keys
    _keys(t, ("kind",) + need, where)
    out = {"kind": kind}
    for k in need:
        if k not in t:
            raise ConfigError(f"{where} of kind {kind!r} needs the key {k!r}")
        if k == "values":
            out[k] = t[k]
        elif k == "sigma":
            out[k] = _num(t[k], f"{where}.sigma", 0, lo_open=True, mag=MAX_COORDINATE)
        else:
            out[k] = _num(t[k], f"{where}.{k}", mag=MAX_COORDINATE)
    return out


def _density_template_check(spec, where, grid: Grid, field: str):
    """Evaluate a density template on the grid: finite, a density for field P, bounded for field L."""
    if spec["kind"] == "array":
        spec = {"kind": "array", "values": _array(spec["values"], grid.shape, f"{where}.values of the array template",
                                                  mag=MAX_MAGNITUDE).tolist()}
    try:
        t = template_field(spec, grid, field)
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None
    uniform = 1.0 / (grid.y.n * grid.hy)
    if field == "L":
        dev = float(np.max(np.abs(t - math.log(uniform))))
        if dev > MAX_TEMPLATE_VALUE:
            raise ConfigError(f"{where} (a log-density for field L) strays {dev:g} from the uniform log-density, "
                              f"over {MAX_TEMPLATE_VALUE:g}; give a template of sensible log-density values")
    else:
        if np.min(t) < 0:
            raise ConfigError(f"{where} is negative somewhere (min {np.min(t):g}); a template for field P is a "
                              f"density: give values >= 0")
        rows = t.sum(axis=1) * grid.hy
        if not np.all(rows > 1e-300):
            k = int(np.argmin(rows))
            raise ConfigError(f"{where} is zero at every y of x = {grid.x.nodes[k]:g}; a template for field P is a "
                              f"density: give it positive values there (or move a Gaussian onto the grid)")
        if float(np.max(t)) > MAX_TEMPLATE_VALUE * uniform:
            raise ConfigError(f"{where} peaks at {np.max(t):g}, over {MAX_TEMPLATE_VALUE:g} times the uniform "
                              f"density; give a template of sensible density values")
    return spec


def _regression_template_check(spec, where, grid: Grid):
    nodes = grid.x.nodes
    if spec["kind"] == "array":
        v = _array(spec["values"], (grid.x.n,), f"{where}.values of the array template", mag=MAX_COORDINATE)
        return {"kind": "array", "values": v.tolist()}
    if spec["kind"] == "linear":
        v = spec["slope"] * nodes + spec["intercept"]
        if np.max(np.abs(v)) > MAX_COORDINATE:
            raise ConfigError(f"{where} reaches {np.max(np.abs(v)):g} on the grid, over {MAX_COORDINATE:g}")
    return spec


def _symbol_range(axis: Axis, coeffs: dict) -> tuple[float, float]:
    return _axis_symbol_range(axis, float(coeffs["l0"]), float(coeffs["l2"]), float(coeffs["l4"]),
                              float(coeffs["l6"]))


@functools.lru_cache(maxsize=256)
def _axis_symbol_range(axis: Axis, l0: float, l2: float, l4: float, l6: float) -> tuple[float, float]:
    """Smallest and largest eigenvalue of one axis's operator, kept per axis and coefficients: the gate asks for
    them three times per document (the masses' internal scale, the conditioning checks), 70 us of a 220 us check
    of the paper's mesh; a dashboard checks the same grid and prior at every click."""
    s = axis_symbol(axis, l0, l2, l4, l6)
    return float(np.min(s)), float(np.max(s))


def _operator_range(cfg: dict, grid: Grid, unit: bool = False) -> tuple[float, float]:
    """Smallest and largest eigenvalue of the prior operator K of a document (without lambda), on its grid or, with
    ``unit``, on the grid of the same nodes and boundaries spaced 1 apart (the grid's internal coordinates).

    In internal coordinates the axes' weights are units-free too: ``lambda_x hx^-2k`` relative to ``lambda_y
    hy^-2k`` (k the highest order), the weight each axis's term has in K.  Decision: lambda_x and lambda_y carry
    the units of their axes (a length scale pair sets them to ell_x^2k and ell_y^2k), so weighing the unit grid
    by them made the default masses, and the gate's check of them, depend on the units of y against x; on the
    paper's grid (spacing 1, lambda_x = lambda_y = 1) and in 1-D (lambda_y = 1) nothing changes."""
    pr = cfg["prior"]
    regression = cfg["model"] == "regression"
    return _operator_range_of(grid, regression, 1.0 if regression else pr["lambda_x"],
                              1.0 if regression else pr["lambda_y"], pr["l0"], pr["l2"], pr["l4"], pr["l6"], unit)


@functools.lru_cache(maxsize=256)
def _operator_range_of(grid: Grid, regression: bool, lambda_x: float, lambda_y: float, l0: float, l2: float,
                       l4: float, l6: float, unit: bool) -> tuple[float, float]:
    """:func:`_operator_range` of a grid and a prior's numbers, kept: the gate asks for it three times per document
    (the masses' internal scale and the conditioning checks; about a tenth of a 16 x 16 document's check), and a
    dashboard checks the same grid and prior at every click."""
    coeffs = {"l0": l0, "l2": l2, "l4": l4, "l6": l6}
    if regression:
        axes = [(grid.x, 1.0)]
    else:
        axes = [(grid.x, lambda_x), (grid.y, lambda_y)]
        if unit and lambda_y > 0:
            k = highest_order(coeffs)
            axes = [(grid.x, lambda_x * (grid.x.h / grid.y.h) ** (-2 * k) / lambda_y), (grid.y, 1.0)]
    kmin = kmax = 0.0
    for axis, weight in axes:
        if unit:
            axis = Axis(0.0, float(max(axis.n - 1, 1)), axis.n, axis.boundary)
        lo, hi = _symbol_range(axis, coeffs)
        kmin, kmax = kmin + weight * lo, kmax + weight * hi
    return kmin, kmax


def internal_scale(cfg: dict, grid: Grid) -> float:
    """How much larger K is in the document's units than in the grid's internal coordinates (nodes spaced 1): the
    factor by which a mass m^2 given for a grid of spacing 1 is multiplied on this grid (exactly for one prior
    order on one axis; 1 on a grid of spacing 1, such as the paper's).  The defaults of ``solver.mass2`` and
    ``solver.init_mass2`` of a density are the paper's values times this factor, so that they mean the same in any
    units."""
    _, kmax = _operator_range(cfg, grid)
    _, kunit = _operator_range(cfg, grid, unit=True)
    return kmax / kunit if kmax > 0 and kunit > 0 else 1.0


def cell_and_data(cfg: dict, grid: Grid) -> tuple[float, float]:
    """The volume element lambda's operator carries in the energy (``cell`` for a density, ``hx`` for regression)
    and the data's curvature per node: with the eigenvalues of K, what the units-free checks of lambda compare."""
    if cfg["model"] == "regression":
        return grid.x.h, max(len(cfg["data"]), 1) / grid.x.n
    return grid.cell, max(len(cfg["data"]), 1) / grid.size


def lambda_bounds(cfg: dict) -> tuple[float, float]:
    """The smallest and largest lambda the gate accepts for a validated document (its other hyperparameters as
    they are): the prior neither too weak nor too stiff against the data (:func:`_check_conditioning`).  An
    evidence path over the default range stays inside them."""
    grid = grid_from_config(cfg)
    cell, data = cell_and_data(cfg, grid)
    smax = cell * _operator_range(cfg, grid)[1]
    if not smax > 0:
        return 0.0, math.inf
    return data / MAX_CONDITION / smax * (1 + 1e-9), MAX_CONDITION * data / smax * (1 - 1e-9)


def _check_conditioning(cfg: dict, grid: Grid, lam_chosen: bool = False) -> None:
    """Refuse priors whose operators the solver cannot invert in floating point, judged in units-free form: every
    check compares the prior's operator as the energy has it (``lambda cell K`` for a density, ``lambda hx K`` for
    regression) with itself or with the data's curvature per node, so a problem rescaled to other units passes or
    fails the same.  ``lam_chosen``: lambda is set later by the evidence (the document's value is a placeholder),
    so only what holds for every lambda is checked."""
    so = cfg["solver"]
    kmin, kmax = _operator_range(cfg, grid)
    lam = cfg["prior"]["lambda"]
    if not kmax > 0:
        raise ConfigError("the prior is empty on this grid: K = 0 (a one-node axis has no derivatives, so only l0 "
                          "acts there, and an axis whose lambda is 0 adds nothing); set prior.l0 > 0 or give the "
                          "axis with lambda > 0 more nodes")
    regression = cfg["model"] == "regression"
    cell, data = cell_and_data(cfg, grid)
    if not lam_chosen:
        prior = lam * cell * kmax  # the prior's stiffest mode as the energy has it
        # over this, the prior outweighs the data by more than floating point resolves (and the Hessian's
        # condition number, at most 1 + prior / data, may pass 1e12)
        if prior > MAX_CONDITION * data:
            raise ConfigError(f"the prior is too stiff for this grid: lambda cell K reaches {prior / data:.3g} times "
                              f"the data's curvature per node, over {MAX_CONDITION:g}; lower lambda or the higher "
                              f"orders, use a coarser grid, or let the evidence choose lambda "
                              f"(choose: {{\"lambda\": \"evidence\"}})")
        if prior < data / MAX_CONDITION:
            raise ConfigError(f"the prior is too weak for this grid: lambda cell K is at most {prior / data:.3g} times "
                              f"the data's curvature per node, below 1/{MAX_CONDITION:g}, so the field is not "
                              f"determined where there are no data; raise lambda, or let the evidence choose it "
                              f"(choose: {{\"lambda\": \"evidence\"}})")
    scale = lam * grid.x.h if regression else 1.0  # massive relaxation inverts scale K + m^2 I

    def invertible(m2, name):
        lo, hi = scale * kmin + m2, scale * kmax + m2
        if not lo > 1e-12 * hi:
            raise ConfigError(f"{name} = {m2:g} is too small for this prior: the operator it regularises has "
                              f"eigenvalues from {lo:.3g} to {hi:.3g}, a ratio over 1e12; use {name} >= "
                              f"{max(1e-12 * scale * kmax - scale * kmin, 0.0) * 10:.3g}, or leave it out (its "
                              f"default follows the grid)")
    if regression and kmin > 0 and not lam_chosen:
        # A = K_T + lambda hx K_X ([001] (16)): its smallest eigenvalue is at least lambda hx min K_X, its largest at
        # most lambda hx max K_X plus the number of data (K_T counts the data per node)
        lo, hi = scale * kmin, scale * kmax + len(cfg["data"])
        if not lo > 1e-12 * hi:
            raise ConfigError(f"the regression prior cannot be inverted in floating point on this grid: lambda hx K "
                              f"has eigenvalues from {lo:.3g} to {scale * kmax:.3g}, a ratio over 1e12; raise "
                              f"prior.lambda or prior.l0, lower the higher orders, or use fewer, wider x nodes")
    if so["method"] == "massive" and not (regression and lam_chosen):
        invertible(so["mass2"], "solver.mass2")
    if not regression and so["init"] in ("kernel", "coarse"):  # "coarse" ends in a kernel start on its coarsest grid
        invertible(so["init_mass2"], "solver.init_mass2")


def _within(value: int, limit: int | None, what: str, fix: str) -> None:
    """Refuse ``value`` over ``limit`` (None: no limit); ``what`` holds one ``{}`` for the value."""
    if limit is not None and value > limit:
        raise ConfigError(f"{what.format(_fmt_int(value))} exceeds the limit of {_fmt_int(limit)}; {fix}")


def _list(doc: dict, key: str, what: str) -> list:
    """A list-valued key of the document ([] when absent or null)."""
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{key} must be a list of {what}, got {_show(value)}")
    return value


def _check_cost(cfg: dict, grid: Grid, limits: Limits) -> None:
    density = cfg["model"] == "density"
    nodes, m = (grid.size if density else grid.x.n), len(cfg["templates"])
    shape = f"a grid {grid.x.n} x {grid.y.n}" if density else f"a grid of {grid.x.n} x nodes"

    over = _within
    if density:
        over(nodes, limits.max_nodes, shape + " of {} nodes", "use a coarser grid")
        wide = cfg["prior"]["l4"] > 0 or cfg["prior"]["l6"] > 0
        if cfg["prior"]["field"] == "P" and wide and cfg["solver"]["method"] != "gradient":
            over(nodes, limits.max_nodes_p_wide,
                 f"field P with an l4/l6 prior by {cfg['solver']['method']} on " + shape + " of {} nodes",
                 "use a coarser grid, the l2 prior, field L or the gradient method")
    over(m, limits.max_templates, "a mixture of {} templates", "use fewer templates")
    over(nodes * m, limits.max_template_nodes, f"{m} templates on " + shape + " ({} template nodes)",
         "use fewer templates or a coarser grid")
    over(len(cfg["data"]), limits.max_points, "a data set of {} points", "use fewer points")
    over(cfg["solver"]["max_iter"], limits.max_iter, "solver.max_iter = {}", "lower max_iter")
    over(nodes * cfg["solver"]["max_iter"], limits.max_node_iterations,
         f"solver.max_iter = {cfg['solver']['max_iter']} on " + shape + " ({} node-iterations)",
         "lower max_iter or use a coarser grid")


#: Padding of an axis fitted to the data (``"grid": {"fit": true}``), a fraction of the data's range on each side.
FIT_PAD = 0.1


def _fitted_axis(values: list, given, where: str, n: int, boundary: str = "neumann") -> dict:
    if given is not None and not isinstance(given, dict):
        raise ConfigError(f"{where} must be an object, got {_show(given)}")
    given = dict(given or {})
    for key in ("min", "max"):
        if key in given:
            raise ConfigError(f"{where}.{key}: with grid.fit the axis spans the data, so give only n and boundary "
                              f"(or drop grid.fit and give min and max)")
    lo, hi = min(values), max(values)
    pad = FIT_PAD * (hi - lo) if hi > lo else 0.5
    return {"min": lo - pad, "max": hi + pad, "n": given.get("n", n), "boundary": given.get("boundary", boundary)}


def _fitted_grid(g: dict, data, model: str, limits: Limits) -> dict:
    """The grid of ``"grid": {"fit": true}``: each axis spans the data's values padded by :data:`FIT_PAD` of their
    range on both sides (0.5 when they are all equal), with the axis's own ``n`` and ``boundary`` if given, else
    200 nodes (y of a density whose data are plain y values, x of a regression) or 30 x 40 (a conditional density),
    Neumann in x and free in a density's y.  Why free: the null space of a prior of order k on ln p is then the
    polynomials of degree < k, as in DEFT, so l6 leaves every Gaussian in y unpenalised (the maximum-entropy
    density of a mean and a variance) where Neumann ends would flatten its tails; on Old Faithful's eruptions it is
    what brings the held-out likelihood up to DEFT's (docs/units.md).  The data's numbers are checked here first; the
    rest of the gate checks them again."""
    if g["fit"] is not True:
        raise ConfigError(f"grid.fit must be true (fit the grid to the data) or absent, got {_show(g['fit'])}")
    if not isinstance(data, list) or not data:
        raise ConfigError("grid.fit fits the grid to the data, and the document has none; add data or give the "
                          "grid's min and max")
    _within(len(data), limits.max_points, "a data set of {} points", "use fewer points")
    plain = model == "density" and all(not isinstance(p, (list, dict, str, bool)) and p is not None for p in data)
    xs, ys = [], []
    for k, p in enumerate(data):
        if plain:
            ys.append(_num(p, f"data[{k}] (y)", mag=MAX_COORDINATE))
            continue
        if not isinstance(p, list) or len(p) != 2:
            raise ConfigError(f"data[{k}] must be an [x, y] pair, got {_show(p)} (with grid.fit a one-dimensional "
                              f"density's data are all plain y values)")
        xs.append(_num(p[0], f"data[{k}][0] (x)", mag=MAX_COORDINATE))
        ys.append(_num(p[1], f"data[{k}][1] (y)", mag=MAX_COORDINATE))
    if model == "regression":
        return {"x": _fitted_axis(xs, g.get("x"), "grid.x", 200)}
    if plain:
        if g.get("x") is not None:
            raise ConfigError("grid.x: plain y values are a one-dimensional density, which has no x axis; give "
                              "[x, y] pairs for a conditional density")
        return {"y": _fitted_axis(ys, g.get("y"), "grid.y", 200, "free")}
    return {"x": _fitted_axis(xs, g.get("x"), "grid.x", 30), "y": _fitted_axis(ys, g.get("y"), "grid.y", 40, "free")}


def fitted_grid(data, model: str = "density", shape: tuple[int, int] | None = None) -> dict:
    """The explicit grid that ``"grid": {"fit": true}`` gives these data (:func:`_fitted_grid`, default limits),
    with ``shape`` (nx, ny) nodes if given: for an estimator that needs the grid's boxes before it writes the prior
    (a length scale)."""
    g: dict = {"fit": True}
    if shape is not None:
        g.update(x={"n": int(shape[0])}, y={"n": int(shape[1])})
    return _fitted_grid(g, data, model, active())


def _isotropic_ratio(x: dict, y: dict, prior: dict) -> float:
    """lambda_y / lambda_x of a conditional density on a grid fitted to the data (``grid.fit``) whose prior gives
    neither lambda_x nor lambda_y: the prior is isotropic in units of each axis's span, lambda_y / lambda_x =
    (span_y / span_x)^(2k) for the highest order k present (l2: k = 1, l4: 2, l6: 3); the larger of the two is 1
    (the overall lambda carries the strength).

    Why: lambda_y / lambda_x has the units of y^(2k) / x^(2k), so equal weights (the paper's, on its unit-spaced
    mesh) would make the fit depend on the units of x and y.  With this rule, data in other units (x -> a x + b,
    y -> c y + d) give the same problem in the new units for a prior of one order, exactly; with several orders
    the lower ones are weighted as the highest (a close, not an exact, match).  An explicit lambda_x or lambda_y
    is kept as given."""
    k = highest_order(prior)
    span_x, span_y = x["max"] - x["min"], y["max"] - y["min"]
    return float((span_y / span_x) ** (2 * k)) if span_x > 0 and span_y > 0 else 1.0


class ProblemKind(Protocol):
    """What every kind of problem answers: the dashboard's runner, the façade and the workflows ask a kind instead
    of comparing ``cfg["model"]`` with a string.  Every ``cfg`` is a validated document (:class:`Valid`).

    A kind is one module of :mod:`bftcore.models` defining a class with these attributes and methods (its problem,
    its energy, its solver's records, its result type), and one line of :mod:`bftcore.models.problems` that
    registers it (:func:`register`).  The registry is here, beside the gate, so that a valid document knows its kind
    (:attr:`Valid.kind`) without a trip to the layer above: the kinds are found by what they declare
    (:attr:`claims`), and none of their code runs to find them."""

    #: The kind's own name (unique).
    name: str
    #: The document's ``"model"`` (several kinds may share one; :attr:`claims` decides).
    model: str
    #: What else a document of this kind holds: dotted paths of the validated document and their values (the
    #: 1-D density: ``{"grid.x.n": 1, "prior.field": "L"}``); ``{}`` claims every document of the model.
    claims: dict[str, object]
    #: The fit's type (:meth:`solve` returns one).
    result_type: type[FitResult]
    #: How its result is drawn: ``"heatmap"`` (p(y|x) over the grid), ``"curve"`` (a function of x with a band),
    #: ``"density"`` (p(y) against y).
    drawn_as: str
    #: The hyperparameters an evidence path can follow.
    path_parameters: tuple[str, ...]
    #: Its solution has a closed-form part (:meth:`exact` returns a document, never None).
    has_exact: bool
    #: Its data's y values lie on the grid's y nodes (a density's counts), else they are real values and only x
    #: lives on the grid (regression).
    y_on_grid: bool
    #: The template menu's choice for a new problem of this kind (regression's mixture needs a template).
    default_templates: tuple[str, ...]

    def nodes(self, cfg: dict) -> int:
        """Unknowns of the field (the size of one solve)."""
        ...

    def is_sparse_heavy(self, cfg: dict) -> bool:
        """Its solves factorise large sparse matrices (the dashboard's runner gives them a smaller node budget)."""
        ...

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        """One record per iteration of the configured solver (iteration 0 is the start field)."""
        ...

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        """The configured solver run to the end."""
        ...

    def evidence_path(self, cfg: dict, param: str, values) -> dict:
        """The log evidence along ``param`` (``values``, or the kind's default range) and its maximum."""
        ...

    def posterior_summary(self, cfg: dict, field, n: int, level: float, rng: np.random.Generator) -> dict:
        """What is uncertain about the fit, for a picture (``field``: the MAP field if known, else None)."""
        ...

    def exact(self, cfg: dict) -> dict | None:
        """What is exact about the solution in closed form (regression's predictive mean and variance), or None."""
        ...


class MapOnlyKind:
    """The part of a :class:`ProblemKind` whose posterior is known only at its mode (a local prior, a non-Gaussian
    potential or data term): no evidence path, no closed form, and no posterior draws unless the kind has an honest
    reading of them (it then overrides :meth:`posterior_summary`).  Each refusal says why in the kind's own words,
    ``no_evidence`` and ``no_draws``, with what to do instead."""

    path_parameters: tuple[str, ...] = ()
    has_exact: bool = False
    #: Why the kind has no evidence, and what to do instead (the ConfigError of :meth:`evidence_path`).
    no_evidence: str = ""
    #: Why it has no posterior draws, and what to do instead (the ConfigError of :meth:`posterior_summary`).
    no_draws: str = ""

    def evidence_path(self, cfg: dict, param: str, values) -> dict:
        raise ConfigError(self.no_evidence)

    def posterior_summary(self, cfg: dict, field, n: int, level: float, rng: np.random.Generator) -> dict:
        raise ConfigError(self.no_draws)

    def exact(self, cfg: dict) -> dict | None:
        return None


#: The registered problem kinds by name, in the order of registration (:mod:`bftcore.models.problems` fills it).
KINDS: dict[str, ProblemKind] = {}


def register(kind: ProblemKind) -> ProblemKind:
    """Make ``kind`` a kind of the documents whose ``"model"`` is ``kind.model``; it is asked before the kinds
    registered earlier (a more specific kind is registered after the general one)."""
    KINDS[kind.name] = kind
    return kind


def _at(doc: Mapping, path: str):
    for key in path.split("."):
        if not isinstance(doc, Mapping) or key not in doc:
            return None
        doc = doc[key]
    return doc


def kind_of(cfg: Mapping) -> ProblemKind:
    """The kind of a validated document: the last registered kind of its ``"model"`` whose :attr:`claims` all
    hold (the gate has refused any other ``"model"``)."""
    for kind in reversed(KINDS.values()):
        if kind.model == cfg["model"] and all(_at(cfg, p) == v for p, v in kind.claims.items()):
            return kind
    raise KeyError(f"no problem kind solves a document of model {cfg['model']!r} (are the kinds registered? "
                   f"importing bftcore registers them)")


class Valid(dict):
    """A configuration document that passed the gate (:func:`validate_config`, its only maker besides
    :func:`vouched`).  The problems take it without checking it again (:func:`checked`); any other mapping, a
    copy made with ``{**cfg}`` or a document read back from JSON included, is an outside document and passes the
    gate again.  It is a plain ``dict`` otherwise: JSON, pickling and equality are a dict's; and it knows its
    problem kind (:attr:`kind`)."""

    __slots__ = ()

    @property
    def kind(self) -> ProblemKind:
        """The problem kind that solves this document (:func:`kind_of`)."""
        return kind_of(self)


def checked(doc, limits: Limits | None = None) -> Valid:
    """``doc`` itself when it passed the gate, else :func:`validate_config` of it: what a function that takes a
    document calls first, so a valid document is checked once however many layers it crosses."""
    return doc if isinstance(doc, Valid) else validate_config(doc, limits)


def vouched(doc: dict) -> Valid:
    """A document that its caller made from a valid one by a change the gate's checks cannot break (data drawn
    from the same grid's truth or resampled from its own points, a hyperparameter taken from a range the gate
    bounded), typed as valid without a second pass: the learning curve's thousands of fits."""
    return doc if isinstance(doc, Valid) else Valid(doc)


def validate_config(doc, limits: Limits | None = None) -> Valid:
    """Check a configuration document and return a complete copy with defaults; raise ConfigError otherwise.

    This is the one gate of every document (file, upload, share link, estimator): it checks the type, the
    finiteness and the range of every field, evaluates the templates on the grid, and refuses a problem over the
    cost budget ``limits`` (:mod:`bftcore.foundations.limits`) before anything large is allocated.  numpy scalars and
    arrays are accepted wherever numbers and lists are.  ``limits`` defaults to the budget in force
    (:func:`bftcore.foundations.limits.active`, normally :data:`bftcore.foundations.limits.LIMITS`)."""
    limits = limits or active()
    _count_before_conversion(doc, limits)
    depth = min(limits.max_depth or HARD_DEPTH, HARD_DEPTH)
    # data as [x, y] pairs of floats (three levels: the document, the list, a pair) are read once, copied and made
    # an array in one walk (:func:`_float_pair_list`); the rest of the document is copied and its nesting checked as
    # a whole.  200 points took four walks and 135 us of a 16 x 16 fit's 2.5 ms.
    read = _float_pair_list(doc.get("data")) if isinstance(doc, dict) and depth >= 3 else None
    if read is None:
        doc = to_plain(doc)
    else:
        doc = to_plain({k: v for k, v in doc.items() if k != "data"})
    if not isinstance(doc, dict):
        raise ConfigError(f"the configuration must be a JSON object, got {_show(doc)}")
    _depth(doc, depth)
    if read is not None:
        doc["data"] = read[0]
    _keys(doc, TOP_KEYS, "the configuration")
    model = _str(doc.get("model", "density"), "model", ("density", "regression"))
    g = doc.get("grid", {})
    if g is None:
        g = {}
    _keys(g, ("x", "y", "fit"), "grid")
    fitted = "fit" in g
    if fitted:
        g = _fitted_grid(g, doc.get("data"), model, limits)
    # a density grid with y and without x is one-dimensional: p(y) on one x node (a document without any grid
    # stays the paper mesh)
    one_d = model == "density" and isinstance(g, dict) and g.get("y") is not None and g.get("x") is None
    x = _axis(ONE_D_X if one_d else g.get("x"), "grid.x", {"min": 1, "max": 10, "n": 10, "boundary": "periodic"},
              limits)
    y = _axis(g.get("y"), "grid.y", {"min": 1, "max": 15, "n": 15, "boundary": "periodic"}, limits)
    grid = Grid(Axis(**x), Axis(**y))
    if model == "density" and x["boundary"] == "free" and x["n"] > 1:
        raise ConfigError("grid.x.boundary \"free\" is for the y axis of a density (and the x axis of a regression): "
                          "the solver's preconditioners transform the x axis of a density by FFT/DCT; use "
                          "\"neumann\" or \"periodic\" for x")
    if model == "density":  # before anything is evaluated on the grid
        _within(grid.size, limits.max_nodes, f"a grid {x['n']} x {y['n']} of {{}} nodes", "use a coarser grid")
    data = _list(doc, "data", "[x, y] pairs")
    _within(len(data), limits.max_points, "a data set of {} points", "use fewer points")
    plain_x = x["min"] if x["n"] == 1 and model == "density" else None
    fast = _float_pairs(data, plain_x, read)  # read, when not None, is data's own reading (data is read[0])
    pts = [_data_point(p, k, plain_x, model) for k, p in enumerate(data)] if fast is None else fast[0]
    try:
        grid.check_points(pts if fast is None else fast[1], x_only=model == "regression")
    except ValueError as e:
        raise ConfigError(str(e)) from None

    pr = doc.get("prior", {})
    if pr is None:
        pr = {}
    _keys(pr, PRIOR_KEYS, "prior")
    field = _str(pr.get("field", "L"), "prior.field", ("L", "P"))
    # lambda has units (length^(2k-1) for a prior of order k): no absolute bound; the conditioning checks judge it
    # against the grid and the data (_check_conditioning), in any units.  lambda_x and lambda_y carry the units of
    # their axes (a length scale pair sets them to ell_x^2k and ell_y^2k): the same
    lam = _num(pr.get("lambda", 1.0), "prior.lambda", 0, lo_open=True, mag=LAMBDA_MAGNITUDE)
    prior = {"field": field, "lambda": lam,
             "lambda_x": _num(pr.get("lambda_x", 1.0), "prior.lambda_x", 0, mag=LAMBDA_MAGNITUDE),
             "lambda_y": _num(pr.get("lambda_y", 1.0), "prior.lambda_y", 0, mag=LAMBDA_MAGNITUDE)}
    given = [k for k in ("l0", "l2", "l4", "l6") if k in pr]
    for order in ("l0", "l2", "l4", "l6"):
        prior[order] = _num(pr.get(order, 1.0 if (order == "l2" and not given) else 0.0), f"prior.{order}", 0)
    if fitted and model == "density" and x["n"] > 1 and "lambda_x" not in pr and "lambda_y" not in pr:
        ratio = _isotropic_ratio(x, y, prior)
        prior["lambda_x"], prior["lambda_y"] = (1.0, ratio) if ratio <= 1 else (1.0 / ratio, 1.0)
    if prior["lambda_x"] + prior["lambda_y"] == 0:
        raise ConfigError("prior: lambda_x and lambda_y are both 0, so K = 0 and the prior is empty; "
                          "set lambda_x > 0 or lambda_y > 0")
    if prior["l0"] + prior["l2"] + prior["l4"] + prior["l6"] == 0:
        raise ConfigError("prior: all of l0, l2, l4, l6 are 0, so K = 0 and the prior is empty; "
                          "set l2 > 0 (smoothness) or l0 > 0 (mass)")

    tpl = _list(doc, "templates", "template objects")
    _within(len(tpl), limits.max_templates, "a mixture of {} templates", "use fewer templates")
    templates = [_template(t, f"templates[{i}]", model) for i, t in enumerate(tpl)]
    if model == "regression" and not pts and prior["l0"] == 0:
        raise ConfigError("a regression without data needs a prior mass: K_X annihilates constants, so "
                          "K_T + lambda K_X is singular; add data or set prior.l0 > 0")
    if model == "regression" and not templates:
        raise ConfigError("a regression model needs at least one template in \"templates\" (the prior mean), "
                          "e.g. [{\"kind\": \"constant\", \"value\": 0}]")
    w = doc.get("weights", None)
    if w is None or w == []:
        weights = [1.0 / len(templates)] * len(templates) if templates else []
    else:
        if not isinstance(w, list) or len(w) != len(templates):
            raise ConfigError(f"weights must be a list with one p_j per template ({len(templates)}), got {_show(w)}")
        weights = [_num(v, f"weights[{i}]", 0) for i, v in enumerate(w)]
        if templates and sum(weights) <= 0:
            raise ConfigError("weights are all 0; give at least one template a positive weight p_j")
    if model == "regression":  # 1 / the noise variance: units of 1/y^2, so no absolute bound but the float range's
        beta = _num(doc.get("beta", 1.0), "beta", 0, lo_open=True, mag=LAMBDA_MAGNITUDE)
    else:  # the mixture's inverse temperature, a pure number
        beta = _num(doc.get("beta", 1.0), "beta", MIN_BETA)

    so = doc.get("solver", {})
    if so is None:
        so = {}
    _keys(so, SOLVER_KEYS, "solver")
    method = _str(so.get("method", "newton"), "solver.method", METHODS + (IRLS,))
    init = so.get("init", "kernel")
    if not isinstance(init, str) or not (init in INITS or init.startswith("template:")):
        raise ConfigError(f"solver.init must be one of {', '.join(INITS)} or \"template:<index>\", got {_show(init)}")
    if init.startswith("template:"):
        idx = init.split(":", 1)[1]
        if not (idx.isascii() and idx.isdigit()) or len(idx) > 6 or int(idx) >= len(templates):
            raise ConfigError(f"solver.init {_show(init)} names no template; there are {len(templates)} "
                              f"(indices 0..{len(templates) - 1})")
        init = f"template:{int(idx)}"
    # a density's masses default to the paper's values in the grid's internal coordinates (nodes spaced 1), so they
    # mean the same in any units; on a grid of spacing 1 (the paper's) they are the paper's 0.01 and 0.1
    rho = internal_scale({"model": model, "prior": prior}, grid) if model == "density" else 1.0
    solver = {"method": method,
              "mass2": _num(so.get("mass2", 0.01 * rho), "solver.mass2", 0, mag=LAMBDA_MAGNITUDE),
              "init": init,
              "init_mass2": _num(so.get("init_mass2", 0.1 * rho), "solver.init_mass2", 0, lo_open=True,
                                 mag=LAMBDA_MAGNITUDE),
              "min_iter": _num(so.get("min_iter", 4), "solver.min_iter", 0, integer=True),
              "max_iter": _num(so.get("max_iter", 50), "solver.max_iter", 0, integer=True),
              "tol": _num(so.get("tol", 1e-8), "solver.tol", 0)}
    if "min_iter" not in so:  # the default 4 gives way to a smaller max_iter that the document sets
        solver["min_iter"] = min(solver["min_iter"], solver["max_iter"])
    if solver["min_iter"] > solver["max_iter"]:
        raise ConfigError(f"solver.min_iter ({solver['min_iter']}) is larger than solver.max_iter "
                          f"({solver['max_iter']}); make min_iter <= max_iter")
    if method == "massive" and solver["mass2"] <= 0:
        raise ConfigError("solver.mass2 must be > 0 for massive relaxation (A = K + m^2 I is singular otherwise)")
    truth = doc.get("truth", None)
    if model == "density":
        if truth is not None and truth != "paper":
            raise ConfigError(f"truth must be \"paper\" or omitted, got {_show(truth)}")
    elif truth == "paper":
        raise ConfigError("truth \"paper\" is the density (708); for regression give the true h(x) as a template "
                          "object (constant, linear, array) or a list of values on the x nodes")
    elif isinstance(truth, dict):
        truth = _regression_template_check(_template(truth, "truth", model), "truth", grid)
    elif isinstance(truth, list):
        truth = _array(truth, (grid.x.n,), "truth (one value per x node)", mag=MAX_COORDINATE).tolist()
    elif truth is not None:
        raise ConfigError(f"truth for regression must be a template object or a list of values, got {_show(truth)}")
    if "local" in pr or "cuts" in pr:
        if model == "density":
            prior.update(_local_density_prior(pr, Axis(**x), Axis(**y), templates, prior, doc.get("choose")))
        else:
            prior.update(_local_prior(pr, Axis(**x), pts, templates, prior, doc.get("choose")))
    out = {"model": model, "grid": {"x": x, "y": y}, "data": pts, "prior": prior, "templates": templates,
           "weights": weights, "beta": beta, "solver": solver, "truth": truth}
    choose = _choose(doc.get("choose"), model, field, len(templates), x["n"] * (y["n"] if model == "density" else 1),
                     limits)
    if choose:
        out["choose"] = choose
    labels = _labels(doc["labels"]) if doc.get("labels") is not None else {}
    if labels:
        out["labels"] = labels
    _robust(doc, out)  # robust regression's keys (the block at the end of this module)
    if out.get("solver", {}).get("method") == IRLS and (out["prior"].get("local") or out["prior"].get("cuts")):
        raise ConfigError("prior.local or prior.cuts (a local prior) and a robust prior (prior.potential, "
                          "data_term or solver.method irls) cannot be combined: each has its own solver; remove one")
    _check_cost(out, grid, limits)  # before any template is evaluated on the grid
    _check_conditioning(out, grid, lam_chosen="lambda" in choose)
    if model == "density":
        out["templates"] = [_density_template_check(t, f"templates[{i}]", grid, field)
                            for i, t in enumerate(templates)]
    else:
        out["templates"] = [_regression_template_check(t, f"templates[{i}]", grid) for i, t in enumerate(templates)]
    if solver["init"] == "coarse":
        _coarse_start_check(out)
    # pairs that came by the fast path (out["data"] is fast[0]) are the gate's own copy (to_plain's or
    # _float_pair_list's), shared with nothing: the rest of the document is copied
    return Valid(copy_document(out, keep_data=fast is not None))


def _coarse_start_check(out: dict) -> None:
    """``solver.init: "coarse"`` (the multilevel start, :func:`bftcore.models.density.coarse_start`) solves the same
    document on a coarser grid: only the conditional density's plain kind has it, and only with templates that are
    functions of the coordinates (an array is given on this grid's nodes)."""
    name = kind_of(out).name
    if name != "density":
        raise ConfigError(f"solver.init \"coarse\" (a multilevel start) is for the conditional density p(y|x) "
                          f"with a Gaussian prior, not for this document (its kind is {name}); use \"kernel\"")
    if any(t.get("kind") == "array" for t in out["templates"]):
        raise ConfigError("solver.init \"coarse\" solves the document on a coarser grid first, and an array template "
                          "is given on this grid's nodes only; use \"kernel\", or give the template as a function "
                          "(gaussian, linear, ...)")


def _local_spec(pr: dict) -> dict:
    """``prior.local`` checked (its keys per type, :data:`LOCAL_KEYS`), or the Gaussian local prior that cuts alone
    carry; shared by the regression's and the density's local priors."""
    spec = pr.get("local", GAUSSIAN_LOCAL)
    if not isinstance(spec, dict):
        raise ConfigError(f"prior.local must be an object such as {{\"type\": \"switch\", \"stiffness\": [1, "
                          f"0.001], \"pi\": [0.95, 0.05]}}, got {_show(spec)}")
    kind = _str(spec.get("type"), "prior.local.type", tuple(LOCAL_KEYS))
    _keys(spec, LOCAL_KEYS[kind], f"prior.local (type {kind!r})")
    if kind == "switch":
        for key in ("stiffness", "pi"):
            if not isinstance(spec.get(key), list) or not spec[key]:
                raise ConfigError(f"prior.local.{key} must be a non-empty list of numbers (one per alternative), "
                                  f"got {_show(spec.get(key))}")
        _within(len(spec["stiffness"]), MAX_LOCAL_ALTERNATIVES, "a local switch of {} alternatives",
                "use fewer alternatives")
        r = [_num(v, f"prior.local.stiffness[{i}]", 0, lo_open=True, mag=LAMBDA_MAGNITUDE)
             for i, v in enumerate(spec["stiffness"])]
        p = [_num(v, f"prior.local.pi[{i}]", 0, 1, lo_open=True) for i, v in enumerate(spec["pi"])]
        if len(p) != len(r):
            raise ConfigError(f"prior.local.pi must give one probability per alternative of prior.local.stiffness "
                              f"({len(r)}), got {len(p)}")
        if abs(sum(p) - 1.0) > 1e-9:
            raise ConfigError(f"prior.local.pi must sum to 1 (a probability per edge), got sum {sum(p):.12g}; "
                              f"divide the values by their sum")
        local: dict = {"type": "switch", "stiffness": r, "pi": p}
    else:
        local = {"type": "hyperfield",
                 "theta0": _num(spec.get("theta0", 0.0), "prior.local.theta0", mag=LAMBDA_MAGNITUDE),
                 "gamma_theta": _num(spec.get("gamma_theta", 1.0), "prior.local.gamma_theta", 0, lo_open=True,
                                     mag=LAMBDA_MAGNITUDE),
                 "mu_theta": _num(spec.get("mu_theta", 1.0), "prior.local.mu_theta", 0, lo_open=True,
                                  mag=LAMBDA_MAGNITUDE)}
    return local


def _local_orders_and_choose(prior: dict, choose) -> None:
    """What every local prior refuses: other orders than l2 (it makes the first-difference prior local) and
    ``choose`` (no evidence for it)."""
    if prior["l0"] != 0 or prior["l4"] != 0 or prior["l6"] != 0 or prior["l2"] <= 0:
        raise ConfigError("prior.local/cuts make the first-difference prior (l2) local; set l0, l4 and l6 to 0 and "
                          "l2 > 0")
    if choose:
        raise ConfigError("choose: the evidence of a local prior is not implemented; remove \"choose\" or "
                          "prior.local/cuts")


def _local_prior(pr: dict, axis: Axis, pts: list, templates: list, prior: dict, choose) -> dict:
    """The keys ``prior.local`` and ``prior.cuts`` of a regression: local prior mixtures, a log-stiffness hyperfield
    and cuts on the chain of x nodes (:mod:`bftcore.models.local_priors`), as ``{"local": {...}, "cuts": [...]}``.

    ``{"type": "switch", "stiffness": [r_1, ...], "pi": [pi_1, ...]}``: filter switching, eqs. (582)-(588); edge
    alternative k has the stiffness r_k times the document's Gaussian one (its lambda, l2 and beta), so r_k is a
    pure number; pi_k is the per-edge hyperprior (sums to 1).  ``{"type": "hyperfield", "theta0": t, "gamma_theta":
    g, "mu_theta": m}``: a log-stiffness per edge, eqs. (454)-(457), whose reference e^theta0 is again relative to
    the document's Gaussian stiffness (theta0 = 0: that stiffness); gamma_theta, mu_theta are pure numbers.
    ``cuts``: x positions where the chain is cut, eqs. (519)-(522).  ``cuts`` alone is a switch with one
    alternative (r = 1): the Gaussian prior of the document with the cut edges removed.  The document's beta keeps
    its meaning (1/sigma^2, and the temperature of the labels as in [001])."""
    if axis.boundary == "periodic":
        raise ConfigError("prior.local/cuts act on the edges of an open chain of x nodes, but grid.x.boundary is "
                          "\"periodic\"; set grid.x.boundary to \"neumann\" or \"free\"")
    if len(templates) != 1:
        raise ConfigError(f"prior.local/cuts take one template (the prior mean the local prior is about), got "
                          f"{len(templates)}; a global mixture of templates and a local prior together is not "
                          f"supported: keep one template")
    _local_orders_and_choose(prior, choose)
    local = _local_spec(pr)
    cuts = _cut_list(pr, axis, "chain")
    keep = np.ones(max(axis.n - 1, 0), dtype=bool)
    keep[[int(np.floor((c - axis.min) / axis.h)) for c in cuts]] = False
    block = np.concatenate([[0], np.cumsum(~keep)])
    counts = np.bincount(axis.snap(np.array([q[0] for q in pts], dtype=float)), minlength=axis.n) if pts else \
        np.zeros(axis.n)
    for b in range(int(block[-1]) + 1):
        if counts[block == b].sum() == 0:
            nodes = axis.nodes[block == b]
            raise ConfigError(f"prior.cuts: the block x in [{nodes[0]:g}, {nodes[-1]:g}] between cuts has no data, so "
                              f"its level is undetermined (eq. (522)); add data there or remove a cut")
    return {"local": local, "cuts": cuts}


#: How a cut's refusal names the places, on a regression's chain of x nodes and on a density's grid.
_CUT_WORDS = {"chain": {"node": "a node", "step": "edge", "count": "a chain has one edge fewer than nodes",
                        "last": "node"},
              "grid": {"node": "an x node", "step": "x step", "count": "a grid has one x step fewer than x nodes",
                       "last": "x node"}}


def _cut_list(pr: dict, axis: Axis, on: str = "grid") -> list:
    """``prior.cuts`` checked: sorted x positions strictly between two x nodes, one per step (``on``: "chain" for a
    regression, "grid" for a density: the words of the refusals)."""
    w = _CUT_WORDS[on]
    cuts_in = pr.get("cuts", [])
    if cuts_in is None:
        cuts_in = []
    if not isinstance(cuts_in, list):
        raise ConfigError(f"prior.cuts must be a list of x positions, got {_show(cuts_in)}")
    _within(len(cuts_in), max(axis.n - 1, 0), "{} cuts", f"{w['count']}; use fewer cuts")
    cuts = sorted(_num(c, f"prior.cuts[{i}]", mag=MAX_COORDINATE) for i, c in enumerate(cuts_in))
    used: set[int] = set()
    for c in cuts:
        if not axis.min < c < axis.max:
            raise ConfigError(f"prior.cuts: a cut at x = {c:g} is outside the grid's interior ({axis.min:g}, "
                              f"{axis.max:g}); put cuts strictly between the first and last {w['last']}")
        s = (c - axis.min) / axis.h
        if abs(s - round(s)) < 1e-9:
            raise ConfigError(f"prior.cuts: a cut at x = {c:g} falls on {w['node']}; put it between two nodes (e.g. "
                              f"x = {axis.min + (round(s) + 0.5) * axis.h:g})")
        if int(np.floor(s)) in used:
            raise ConfigError(f"prior.cuts: two cuts cross the same {w['step']} near x = {c:g}; keep one")
        used.add(int(np.floor(s)))
    return cuts


def _local_density_prior(pr: dict, x: Axis, y: Axis, templates: list, prior: dict, choose) -> dict:
    """The keys ``prior.local`` and ``prior.cuts`` of a density (:mod:`bftcore.models.local_density`): the same
    keys as a regression's (:func:`_local_prior`) on the edges of the (x, y) grid, for field L only.  The stiffness
    r_k and e^theta0 are relative to the document's Gaussian prior (lambda l2, with lambda_x, lambda_y), pure
    numbers; the document's beta is the temperature of the labels (one alternative is the document's Gaussian prior
    for any beta); the one template, if any, is the prior mean of every alternative.  A cut at x = c removes the
    x-edges across it.  A block without data is allowed: the normalisation per x fixes its level."""
    if prior["field"] != "L":
        raise ConfigError("prior.local/cuts on a density act on the edges of L = ln P; set prior.field to \"L\" (a "
                          "prior on P with a local prior is not implemented)")
    if x.boundary == "periodic" or y.boundary == "periodic":
        raise ConfigError("prior.local/cuts act on the edges of an open grid, but grid.x or grid.y has boundary "
                          "\"periodic\"; set both boundaries to \"neumann\" or \"free\"")
    if len(templates) > 1:
        raise ConfigError(f"prior.local/cuts on a density take at most one template (the prior mean the local prior "
                          f"is about), got {len(templates)}; keep one or none")
    _local_orders_and_choose(prior, choose)
    return {"local": _local_spec(pr), "cuts": _cut_list(pr, x)}


def copy_document(doc: dict, keep_data: bool = False) -> dict:
    """A deep copy of a document whose ``data`` are a list of [x, y] pairs (or plain numbers): every pair copied
    as a list, the rest by :func:`_copy_plain`; a :class:`Valid` document stays one.  ``copy.deepcopy`` of 3000 pairs
    took 15 ms, a tenth of a 1-D evidence fit; this takes 0.3 ms.  ``keep_data``: the data list is put in the copy
    as it is (the gate's, whose pairs are its own fresh copy)."""
    data = doc.get("data")
    rest = {k: _copy_plain(v) for k, v in doc.items() if k != "data"}
    if keep_data and "data" in doc:
        rest["data"] = data
    elif isinstance(data, list):
        rest["data"] = list(map(list, data)) if set(map(type, data)) <= _LIST_TYPE else \
            [list(p) if type(p) is list else _copy_plain(p) for p in data]
    elif "data" in doc:
        rest["data"] = _copy_plain(data)
    out = {k: rest[k] for k in doc}  # the document's key order
    return Valid(out) if isinstance(doc, Valid) else out


def _copy_plain(obj):
    """A deep copy of a JSON value (dicts, lists, immutable scalars) built by recursion, without the memo
    :func:`copy.deepcopy` keeps (which a JSON value, a tree, does not need): a valid 16 x 16 document's copy took
    a tenth of the gate's time that way.  Anything else is copied by :func:`copy.deepcopy`."""
    t = type(obj)
    if t in _PLAIN_SCALARS:
        return obj
    if t is dict:
        return {k: _copy_plain(v) for k, v in obj.items()}
    if t is list:
        return [v if type(v) in _PLAIN_SCALARS else _copy_plain(v) for v in obj]
    return copy.deepcopy(obj)


def _choose(c, model: str, field: str, n_templates: int, nodes: int, limits: Limits) -> dict:
    """The ``choose`` key: hyperparameters that ``fit`` sets by maximising the evidence before it fits.

    ``{"lambda": "evidence"}`` or ``{"lambda": {"by": "evidence", "min": 0.01, "max": 100, "n": 30}}``; returned
    in the second form, with the defaults of :data:`CHOOSE_DEFAULT_RANGE` for what is missing, except where both
    ``min`` and ``max`` are missing for lambda or for a regression's hyperparameter: their range comes from the grid
    and the data (``"min": null, "max": null``).  Density:
    lambda, field L, at most one template (the Laplace evidence, :mod:`bftcore.models.evidence`); regression:
    lambda, l0, beta (exact)."""
    if c is None or c == {}:
        return {}
    if not isinstance(c, dict):
        raise ConfigError(f"choose must be an object such as {{\"lambda\": \"evidence\"}}, got {_show(c)}")
    allowed = CHOOSABLE[model]
    _keys(c, allowed, f"choose (for the {model} model)")
    if model == "density" and field != "L":
        raise ConfigError("choose: the evidence of a density is computed for field L only (the Laplace "
                          "approximation has no meaning where P >= 0 is active); use prior.field \"L\"")
    if model == "density" and n_templates > 1:
        raise ConfigError("choose: the evidence of a prior mixture (several templates) is not implemented for "
                          "densities; keep at most one template, or set lambda by hand")
    out = {}
    for name, spec in c.items():
        lo, hi, n = CHOOSE_DEFAULT_RANGE[name]
        if spec == "evidence":
            spec = {}
        elif not isinstance(spec, dict):
            raise ConfigError(f"choose.{name} must be \"evidence\" or an object {{\"by\": \"evidence\", \"min\", "
                              f"\"max\", \"n\"}}, got {_show(spec)}")
        _keys(spec, ("by", "min", "max", "n"), f"choose.{name}")
        _str(spec.get("by", "evidence"), f"choose.{name}.by", ("evidence",))
        n = _num(spec.get("n", n), f"choose.{name}.n", 2, integer=True)
        check_evidence_path(n, nodes, limits, f"choose.{name}")
        if "min" not in spec and "max" not in spec and (model == "regression" or name == "lambda"):
            # from the grid and the data (the evidence's own range), extended past an edge maximum: lambda, and
            # regression's beta and l0, have units, so no fixed pair of numbers fits every data set
            out[name] = {"by": "evidence", "min": None, "max": None, "n": n}
            continue
        lo = _num(spec.get("min", lo), f"choose.{name}.min", 0, lo_open=True, mag=LAMBDA_MAGNITUDE)
        hi = _num(spec.get("max", hi), f"choose.{name}.max", 0, lo_open=True, mag=LAMBDA_MAGNITUDE)
        if not lo < hi:
            raise ConfigError(f"choose.{name}: min ({lo:g}) must be smaller than max ({hi:g})")
        out[name] = {"by": "evidence", "min": lo, "max": hi, "n": n}
    return out


def check_evidence_path(n: int, nodes: int, limits: Limits | None = None, where: str = "the evidence path") -> None:
    """Refuse an evidence path over more values, or more node-fits, than the budget allows."""
    limits = limits or active()
    if limits.max_evidence_points is not None and n > limits.max_evidence_points:
        raise ConfigError(f"{where}: {_fmt_int(n)} values exceed the limit of {_fmt_int(limits.max_evidence_points)}; "
                          f"use fewer values")
    if limits.max_evidence_work is not None and n * nodes > limits.max_evidence_work:
        raise ConfigError(f"{where}: {n} values on {_fmt_int(nodes)} nodes ({_fmt_int(n * nodes)} node-fits) exceed "
                          f"the limit of {_fmt_int(limits.max_evidence_work)}; use fewer values or a coarser grid")


def check_resampling(fits: int, nodes: int, largest: int, limits: Limits | None = None) -> None:
    """Refuse a learning curve or bootstrap of more fits, node-fits or data points than the budget allows."""
    limits = limits or active()
    _within(largest, limits.max_points, "a resampled data set of {} points", "use smaller sizes n")
    if limits.max_resample_fits is not None and fits > limits.max_resample_fits:
        raise ConfigError(f"{_fmt_int(fits)} fits (sizes x resamples x lambda values) exceed the limit of "
                          f"{_fmt_int(limits.max_resample_fits)}; use fewer sizes, resamples or lambda values")
    if limits.max_resample_work is not None and fits * nodes > limits.max_resample_work:
        raise ConfigError(f"{_fmt_int(fits)} fits on {_fmt_int(nodes)} nodes ({_fmt_int(fits * nodes)} node-fits) "
                          f"exceed the limit of {_fmt_int(limits.max_resample_work)}; use fewer resamples, sizes or "
                          f"lambda values, or a coarser grid (or --no-limits on your own machine)")


def check_output(values: int, what: str, fix: str, limits: Limits | None = None) -> None:
    """Refuse a result of more than the budget's :attr:`~bftcore.foundations.limits.Limits.max_output_values` numbers
    before it is built: ``what`` names the result (a ``{}`` for its number of values), ``fix`` says what to do."""
    limits = limits or active()
    cap = limits.max_output_values
    if cap is not None and values > cap:
        size = values * 8
        v, unit = (size / 2**30, "GiB") if size >= 2**30 else (size / 2**20, "MiB")
        shown = f"{_fmt_int(round(v)) if v >= 100 else f'{v:.3g}'} {unit}"
        raise ConfigError(f"{what.format(_fmt_int(values))} ({shown} of float64), over the limit of "
                          f"{_fmt_int(cap)} numbers of one result; {fix}")


def check_samples(n, nodes: int, what: str = "posterior samples", limits: Limits | None = None) -> int:
    """The number of posterior draws ``n`` as an int: a whole number >= 0, and ``n`` draws of ``nodes`` values
    within the budget's :attr:`~bftcore.foundations.limits.Limits.max_sample_values` (refused before anything is
    drawn)."""
    limits = limits or active()
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ConfigError(f"the number of {what} must be a whole number >= 0, got {n!r}")
    n = int(n)
    if limits.max_sample_values is not None and n * nodes > limits.max_sample_values:
        size = n * nodes * 8
        v, unit = (size / 2**30, "GiB") if size >= 2**30 else (size / 2**20, "MiB")
        shown = f"{_fmt_int(round(v)) if v >= 100 else f'{v:.3g}'} {unit}"
        raise ConfigError(f"{_fmt_int(n)} {what} of {_fmt_int(nodes)} values each ({_fmt_int(n * nodes)} numbers, "
                          f"{shown}) exceed the limit of "
                          f"{_fmt_int(limits.max_sample_values)} numbers; draw fewer at a time (batches of at most "
                          f"{_fmt_int(max(1, limits.max_sample_values // max(nodes, 1)))}) or use a coarser grid")
    return n


def validate_sweep(cfg: dict, beta_min, beta_max, n, limits: Limits | None = None) -> tuple[float, float, int]:
    """Check a beta sweep of a validated configuration: 0 < beta_min < beta_max, 2 <= n within the budget."""
    limits = limits or active()
    lo = _num(beta_min, "the sweep's smallest beta", MIN_BETA)
    hi = _num(beta_max, "the sweep's largest beta", MIN_BETA)
    n = _num(n, "the sweep's number of beta values", 2, integer=True)
    if not lo < hi:
        raise ConfigError(f"a sweep needs MIN < MAX, got {lo:g} and {hi:g}")
    if limits.max_sweep_points is not None and n > limits.max_sweep_points:
        raise ConfigError(f"a sweep of {_fmt_int(n)} beta values exceeds the limit of "
                          f"{_fmt_int(limits.max_sweep_points)}; use fewer values")
    nodes = cfg["grid"]["x"]["n"] * (cfg["grid"]["y"]["n"] if cfg["model"] == "density" else 1)
    if limits.max_sweep_work is not None and n * nodes > limits.max_sweep_work:
        raise ConfigError(f"a sweep of {n} beta values on {_fmt_int(nodes)} nodes ({_fmt_int(n * nodes)} "
                          f"node-fits) exceeds the limit of {_fmt_int(limits.max_sweep_work)}; use fewer values or "
                          f"a coarser grid")
    return lo, hi, n


def grid_from_config(cfg: dict) -> Grid:
    g = cfg["grid"]
    return Grid(Axis(**g["x"]), Axis(**g["y"]))


# --------------------------------------------------------------------------------------------------------------
# robust regression: a non-quadratic prior potential (Sect. 6.5, Fig. 12) and a robust data term (Sect. 3.7.4,
# Fig. 5) in a "model": "regression" document, solved by IRLS (bftcore.models.robust)
# --------------------------------------------------------------------------------------------------------------
#: ``solver.method`` of a robust regression document: iteratively reweighted least squares, the only solver of the
#: robust terms (:func:`bftcore.models.robust.solve`); the robust kind claims the documents that carry it.
IRLS = "irls"
#: Keys of ``prior.potential`` and of ``data_term`` (their meaning and units: :func:`_robust`).
POTENTIAL_KEYS = ("name", "a", "b", "gamma", "s0")
DATA_TERM_KEYS = ("name", "mu", "eps")
#: The parameters each data term takes in a document (sigma is not one: it is the document's noise, beta^-1/2).
DATA_TERM_PARAMETERS = {name: tuple(p for p in params if p != "sigma") for name, params in DATA_TERMS.items()}
#: Defaults of a robust document: b in units of the noise per node difference, the height a relative to the
#: quadratic's curvature (positive for the cups, negative for the inverted cup), the presets' gamma, mu and eps one
#: noise width; solver.max_iter when the document gives none (IRLS on a cup takes hundreds of steps: 304 for the
#: step demo with an insensitive data term).
ROBUST_B = 2.0
ROBUST_MU = 1.0
ROBUST_EPS = 1.0
ROBUST_MAX_ITER = 500


def _robust_potential(p) -> dict:
    """``prior.potential`` in document units (:func:`_robust`)."""
    if p is None:
        p = {}
    _keys(p, POTENTIAL_KEYS, "prior.potential")
    name = _str(p.get("name", "quadratic"), "prior.potential.name", tuple(POTENTIAL_PRESETS))
    s0 = _num(p.get("s0", 0.0), "prior.potential.s0")
    if name == "quadratic":
        extra = [k for k in ("a", "b", "gamma") if k in p]
        if extra:
            raise ConfigError(f"prior.potential: the quadratic potential takes s0 only, not {', '.join(extra)}; "
                              f"remove them or name a Fig. 12 potential (cup, cusp, inverted_cup)")
        return {"name": name, "s0": s0}
    sign = -1.0 if POTENTIAL_PRESETS[name]["a"] < 0 else 1.0
    a = _num(p.get("a", sign), "prior.potential.a")
    if not a * sign > 0:
        raise ConfigError(f"prior.potential.a of the {name} potential must be "
                          f"{'< 0 (its psi is <= 0)' if sign < 0 else '> 0 (its psi is >= 0)'}, got {a:g}; "
                          f"{'use the cup for a > 0' if sign < 0 else 'use inverted_cup for a < 0'}")
    b = _num(p.get("b", ROBUST_B), "prior.potential.b", 0, lo_open=True)
    gamma = _num(p.get("gamma", POTENTIAL_PRESETS[name]["gamma"]), "prior.potential.gamma", 0, lo_open=True)
    return {"name": name, "a": a, "b": b, "gamma": gamma, "s0": s0}


def _robust_data_term(d) -> dict:
    """``data_term`` in document units (:func:`_robust`)."""
    if d is None:
        d = {}
    if isinstance(d, dict) and "sigma" in d:
        raise ConfigError("data_term.sigma: the noise sigma of every data term is the document's beta = 1/sigma^2 "
                          "(y units); set beta instead")
    _keys(d, DATA_TERM_KEYS, "data_term")
    name = _str(d.get("name", "gaussian"), "data_term.name", tuple(DATA_TERMS))
    takes = DATA_TERM_PARAMETERS[name]
    extra = [k for k in ("mu", "eps") if k in d and k not in takes]
    if extra:
        raise ConfigError(f"data_term: the {name} data term takes {', '.join(takes) or 'no parameter'}, not "
                          f"{', '.join(extra)}; remove them")
    out: dict = {"name": name}
    if "mu" in takes:
        out["mu"] = _num(d.get("mu", ROBUST_MU), "data_term.mu", 0)
    if "eps" in takes:
        out["eps"] = _num(d.get("eps", ROBUST_EPS), "data_term.eps", 0)
    return out


def _robust(doc: dict, out: dict) -> None:
    """The keys of a robust regression document, checked and completed in ``out`` (the gate's output so far).

    A regression document is robust when it has ``prior.potential``, ``data_term`` or ``solver.method: "irls"``::

        "prior": {"lambda": 0.01, "l2": 1, "potential": {"name": "cup", "a": 1, "b": 2, "gamma": 2, "s0": 0}},
        "data_term": {"name": "insensitive", "eps": 1},
        "beta": 100, "solver": {"method": "irls", "max_iter": 500}

    The energy (a negative log posterior, in nats) is ``sum_data rho(h(x_d) - y_d) + beta lambda hx sum_e psi(omega_e)``
    with ``omega = W (h - t)``, ``W^T W = K_X`` (:mod:`bftcore.models.robust`); with the quadratic potential and the
    Gaussian data term it is beta times regression's E_h, and the fit is plain regression's.

    Units (every parameter here is a pure number, so the same numbers mean the same in any units of x and y):

    * sigma = beta^-1/2 (y units) is the noise of every data term; ``mu`` (mixtures: means +-mu sigma, or k mu sigma
      for k = -5..5) and ``eps`` (the insensitive tube's half-width eps sigma) are in units of sigma, default 1.
    * ``b`` and ``s0`` are in units of ``S = sigma sqrt(l_k) / hx^k`` (k the highest order of the prior present,
      hx the x spacing): the unit of omega in which a k-th difference of neighbouring nodes of one noise width is 1.
      So with the l2 prior a difference of ``b sigma`` between neighbouring nodes sits where psi is half its height:
      smaller differences are smoothed as by the Gaussian prior, larger ones are edges.  Default b = 2, s0 = 0.
    * ``a`` is the height in units of ``S^2 b^2 / 2``, the quadratic potential's value at b: psi(inf) = a b^2 S^2 / 2,
      so that for gamma = 2 psi''(s0) = a, and a = 1 (the default; -1 for the inverted cup) is the quadratic prior
      near s0: lambda keeps its meaning of plain regression.  The cups take a > 0, the inverted cup a < 0.
    * ``gamma`` is a pure number (default the Fig. 12 preset's: 2 cup and inverted cup, 0.7 cusp).
    * lambda and beta are regression's (units x^(2k-1) and 1/y^2): under x -> alpha x, y -> c y lambda goes to
      alpha^(2k-1) lambda and beta to beta / c^2, as for a plain regression.

    Refused: a solver other than IRLS; several templates (a mixture of priors: the robust solver has one prior mean);
    ``choose`` (the evidence is defined for Gaussian priors and data only).

    **A density** (``"model": "density"``, issue 29: Sect. 6.5 on the 2-D grid, :mod:`bftcore.models.robust`'s
    :class:`~bftcore.models.robust.PotentialLogDensityEnergy`) takes ``prior.potential`` (or ``solver.method:
    "irls"`` alone: the quadratic potential) on the log-density, ``prior.field`` "L", on a 2-D grid (grid.x.n > 1).
    The energy is ``-sum_data L + lambda cell sum_e psi(omega_e)``, ``omega = G (L - t)``, ``G^T G = K`` (the
    density's operator with lambda_x and lambda_y), cell = hx hy; with the quadratic potential it is the Gaussian
    density's E_L and the fit is plain :mod:`bftcore.models.density`'s.  Units: L = ln P is a pure number (up to the
    shift -ln c under y -> c y, which the differences do not see), and the unit of omega is

        S = max over the axes of sqrt(lambda_axis l_k) / h_axis^k   (k the highest order present, h the spacing;
                                                                     an axis of one node or weight 0 left out),

    the omega of a k-th difference of ln P of 1 between neighbouring nodes along the stiffer axis (both axes alike
    when lambda_x / hx^2k = lambda_y / hy^2k).  So ``b`` is the jump in ln P between neighbouring nodes at which psi
    is half its height (b = 2: a factor e^2 in p), and ``s0`` is in the same unit; ``a`` is in units of
    ``S^2 b^2 / 2`` (a = 1 is the Gaussian prior near s0: lambda keeps its meaning) and gamma is a pure number, as
    for regression.  Under x -> a x + b, y -> c y + d, a document whose Gaussian fit follows (its lambda, lambda_x,
    lambda_y rescaled as the gate's fitted grid does, lambda cell lambda_axis / h_axis^2k unchanged) has S scaled as
    omega, so the same b, s0, a and gamma give the same fit, with ln p shifted by -ln c.  Refused for a density: a
    ``data_term`` (a density's data term is its counts, -sum_data L), ``prior.field`` "P", a one-node x axis,
    several templates and ``choose``."""
    pr, so = doc.get("prior") or {}, doc.get("solver") or {}
    robust = (isinstance(pr, dict) and "potential" in pr) or doc.get("data_term") is not None or (
        out["solver"]["method"] == IRLS)
    if not robust:
        return
    if out["model"] == "density":
        _robust_density(doc, out)
        return
    if out["model"] != "regression":
        raise ConfigError("prior.potential, data_term and solver.method \"irls\" are robust regression's (model "
                          "\"regression\"); a density document has a Gaussian prior and the data's counts")
    if isinstance(so, dict) and "method" in so and out["solver"]["method"] != IRLS:
        raise ConfigError(f"solver.method {out['solver']['method']!r}: a regression with a prior potential or a data "
                          f"term is solved by IRLS; set solver.method to \"irls\" or leave it out")
    if len(out["templates"]) != 1:
        raise ConfigError(f"a robust regression takes one template (the prior mean t), got {len(out['templates'])}: "
                          f"mixtures of several templates are solved for the Gaussian prior and data term only; keep "
                          f"one template")
    if out.get("choose"):
        raise ConfigError("choose: the evidence is not defined for a non-Gaussian prior potential or data term "
                          "(no closed form, and a Laplace approximation at a cup's edges is no approximation); "
                          "remove choose and set prior.lambda and beta by hand (a data table's fit asks the evidence "
                          "for the ones its configuration leaves out)")
    out["prior"]["potential"] = _robust_potential(pr.get("potential") if isinstance(pr, dict) else None)
    out["data_term"] = _robust_data_term(doc.get("data_term"))
    out["solver"]["method"] = IRLS
    if not (isinstance(so, dict) and "max_iter" in so):
        out["solver"]["max_iter"] = ROBUST_MAX_ITER


def _robust_density(doc: dict, out: dict) -> None:
    """The robust keys of a density document (:func:`_robust`, its density paragraph), checked and completed."""
    pr, so = doc.get("prior") or {}, doc.get("solver") or {}
    if doc.get("data_term") is not None:
        raise ConfigError("data_term: a density's data term is its counts (-sum_data L, the likelihood of the data "
                          "given p); robust data terms are regression's (model \"regression\"); remove data_term")
    if out["prior"]["field"] != "L":
        raise ConfigError("prior.potential on a density acts on the log-density L = ln P (its differences are "
                          "pure numbers); a prior on P has a Gaussian prior only: set prior.field to \"L\" or remove "
                          "prior.potential")
    if out["grid"]["x"]["n"] == 1:
        raise ConfigError("prior.potential on a density is solved on a 2-D grid (grid.x.n > 1: p(y|x)); a 1-D density "
                          "p(y) has a Gaussian prior only: give grid.x or remove prior.potential")
    if isinstance(so, dict) and "method" in so and out["solver"]["method"] != IRLS:
        raise ConfigError(f"solver.method {out['solver']['method']!r}: a density with a prior potential is solved by "
                          f"IRLS; set solver.method to \"irls\" or leave it out")
    if len(out["templates"]) > 1:
        raise ConfigError(f"a density with a prior potential takes at most one template (the prior mean t of L), got "
                          f"{len(out['templates'])}: mixtures of several templates are solved for the Gaussian prior "
                          f"only; keep one template")
    if out.get("choose"):
        raise ConfigError("choose: the evidence is not defined for a non-Gaussian prior potential (no closed form, "
                          "and a Laplace approximation at a cup's edges is no approximation); remove choose and set "
                          "prior.lambda by hand")
    out["prior"]["potential"] = _robust_potential(pr.get("potential") if isinstance(pr, dict) else None)
    out["solver"]["method"] = IRLS
    if not (isinstance(so, dict) and "max_iter" in so):
        out["solver"]["max_iter"] = ROBUST_MAX_ITER
