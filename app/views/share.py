"""Share and export: the state in the URL, the JSON configuration (download / upload), the data as CSV, and your own
data uploaded as a table (CSV or whitespace; :func:`load_upload`).

A setup whose link would be longer than the dashboard reads (:data:`MAX_QUERY_CHARS`) gets ``?too_long=N`` in the
address bar instead (:func:`share_query`) and travels as its JSON file.  Uploads are checked for size in the page
before they are sent (:class:`UploadInput`, :data:`MAX_UPLOAD_BYTES`).  Every message that quotes outside text (a
link's value, a file's name) goes to :attr:`BFTSession.message` as plain text; nothing here builds markup from it."""
from __future__ import annotations

import base64
import binascii
import copy
import io
import itertools
import json
import re
from urllib.parse import parse_qsl, urlencode

import panel as pn
import param
from panel.custom import JSComponent
from panel.io.state import set_curdoc

from bftcore.foundations.config import ConfigError, parse_document, validate_config
from bftcore.foundations.limits import LIMITS
from bftcore.foundations.tables import by_evidence, data_document, parse_labelled_table

from ..configuration import CONFIG_PARAMS, MAX_POINTS, URL_PARAMS
from ..session import BFTSession, preset_catalogue, preset_document
from ..transport import after_user_action, check_value, one_message, user_action
from .common import LiveText


def url_query(session: BFTSession) -> str:
    """The URL query (``?...``) describing the whole state of ``session``: every URL parameter that is set."""
    query = {}
    for name in URL_PARAMS:
        value = getattr(session, name)
        if value is None:
            continue
        v = session.param[name].serialize(value)
        query[name] = v if isinstance(v, str) else json.dumps(v)
    return "?" + urlencode(query)


#: Longest link query read, in characters as the address bar has it (percent-encoded): 2 000 points on the
#: 91 x 141 grid write about 41 000.  A longer setup travels as a configuration file (download, then upload).  It
#: is below the HTTP server's own limit: Tornado drops a request whose headers pass 64 KiB (the browser shows an
#: empty response, and no code of the app runs), so a link between the two gets a message saying why.
MAX_QUERY_CHARS = 56 * 1024


#: The only key of the link written in place of a setup too large for a link (:func:`share_query`); its value is
#: the length, in characters, of the link that setup would have needed.
TOO_LONG_KEY = "too_long"


def share_query(session: BFTSession) -> tuple[str, int]:
    """The query the address bar is given for the state of ``session``, and 0: :func:`url_query`; or, when that is
    longer than :data:`MAX_QUERY_CHARS` (array templates, many points on a large custom grid), ``?too_long=N`` and
    N, the length of the link the state would need.

    Decision: a link the dashboard could not read back is never written, and neither is a shortened one (a link
    without the data or the templates would open a setup that never existed, and the previous link a setup that is
    no longer on screen).  Whoever opens ``?too_long=N`` is told that the setup travels as a configuration file
    (:func:`read_url`), and the share panel offers that file (:class:`SharePanel`)."""
    query = url_query(session)
    if len(query) <= MAX_QUERY_CHARS:
        return query, 0
    return "?" + urlencode({TOO_LONG_KEY: len(query)}), len(query)


def too_long_note(chars: int) -> str:
    """What the share panel says while the state is too large for a link (``chars``: the link it would need)."""
    return (f"This setup is too large for a link ({chars:,} characters; a link holds at most {MAX_QUERY_CHARS:,}), "
            f"so the address bar does not hold it. Share it as a file: Download configuration (JSON) above, "
            f"then Upload it.")


def _too_long_link_message(text: str) -> str:
    """The message for a link written by :func:`share_query` in place of a setup too large for a link."""
    chars = int(text) if _INTEGER.fullmatch(text.strip()) and int(text) > 0 else None
    size = f" ({chars:,} characters)" if chars is not None else ""
    return (f"This link stands for a setup too large for a link{size}, so the defaults are shown. Ask for its "
            f"configuration file (Download configuration (JSON)), then Upload it here.")


def _short(v, n: int = 40) -> str:
    text = v if isinstance(v, str) else repr(v)
    return text if len(text) <= n else text[:n] + "..."


def _reason(e: Exception) -> str:
    """An exception's message on one line and without its final full stop (it goes inside parentheses)."""
    text = " ".join(str(e).split()).rstrip(".")
    return _short(text, 240) if text else type(e).__name__


def _kept(name: str, value) -> str:
    """How a message names the value a refused parameter keeps (the data by their number of points)."""
    return f"{len(value)} points" if name == "data" else _short(value, 24)


def _gate(session: BFTSession, values: dict) -> None:
    """Raise if the session with ``values`` set would not pass the gate of bftcore (a trial session, not shown)."""
    trial = BFTSession(live=False)
    trial.param.update(**{n: copy.deepcopy(getattr(session, n)) for n in URL_PARAMS})
    trial.param.update(**copy.deepcopy(values))
    validate_config(trial.to_config())


#: URL parameters the gate judges together when a link is refused in part: a link's grid is kept or refused as a
#: whole.  One by one, ``nx=1024&ny=1024`` became a 1024 x 15 grid (nx alone fits the node budget), and
#: ``x_min=20&x_max=30`` lost x_min (20 is past the x_max kept) for a domain the link never asked for.
LINK_GROUPS = (("grid_size", "x_min", "x_max", "nx", "y_min", "y_max", "ny"),)
#: Values a link's refusal leaves out are tried again in pairs when there are at most this many: some pass only
#: together (a new domain and the data inside it, templates and the initialisation naming one of them).  Each try
#: is a validation of about 5 ms; a link with more refused values than this is not worth the pairs.
PAIR_RETRY_UP_TO = 6


def _accept_part(session: BFTSession, values: dict) -> tuple[dict, list]:
    """The values of a link the gate accepts together, and the refused ones as (names, reason) pairs.

    The values are tried one at a time (a :data:`LINK_GROUPS` entry as one) in the order of :data:`URL_PARAMS`, each
    added to those accepted before it; then the refused ones are retried, alone and in pairs, until none passes.
    The reason given for a refused value is the gate's answer to it alone."""
    units = []
    for name in values:
        group = next((g for g in LINK_GROUPS if name in g), (name,))
        unit = tuple(n for n in group if n in values)
        if unit not in units:
            units.append(unit)
    accepted: dict = {}
    pending: list = []
    reasons: dict = {}

    def take(*combo) -> bool:
        trial = {n: values[n] for unit in combo for n in unit}
        try:
            _gate(session, {**accepted, **trial})
        except Exception as e:  # noqa: BLE001 - any refusal of the gate (or of a parameter) refuses the values
            if len(combo) == 1:
                reasons.setdefault(combo[0], _reason(e))
            return False
        accepted.update(trial)
        for unit in combo:
            if unit in pending:
                pending.remove(unit)
        return True

    for unit in units:
        if not take(unit):
            pending.append(unit)
    progress = 0 < len(pending) <= PAIR_RETRY_UP_TO
    while progress:
        progress = False
        for combo in [(u,) for u in pending] + list(itertools.combinations(pending, 2)):
            if all(u in pending for u in combo) and take(*combo):
                progress = True
    return accepted, [(unit, reasons[unit]) for unit in pending]


_INTEGER = re.compile(r"[+-]?\d{1,15}")


def parse_link(search: str) -> dict[str, str]:
    """The raw text of each parameter of a link's query (``?a=1&b=...``), nothing converted yet.  Panel's
    ``Location.query_params`` is not used: it converts digit strings with ``int()``, which raises on a value of
    more than 4 300 digits before any of our code runs, and falls back to ``ast.literal_eval``."""
    return dict(_link_pairs(search))


def _link_pairs(search: str) -> list[tuple[str, str]]:
    """The (name, raw text) pairs of a link's query in their order, a name given twice twice."""
    text = search[1:] if search.startswith("?") else search
    return parse_qsl(text, keep_blank_values=True, max_num_fields=4 * len(URL_PARAMS))


def _repeated(pairs: list[tuple[str, str]]) -> list[str]:
    """Notes on the URL parameters a link gives more than once: the last value is the one read (as
    :func:`parse_link` reads it), and the note says which it was."""
    given: dict[str, list[str]] = {}
    for name, text in pairs:
        if name in URL_PARAMS or name in LINK_ALIASES:
            given.setdefault(name, []).append(text)
    return [f"{name} is given {len(texts)} times; used the last, {name}={_short(texts[-1])}"
            for name, texts in given.items() if len(texts) > 1]


#: Old names of URL parameters that links still use, old -> current.  Links are a public contract: a link made
#: before a parameter was renamed keeps loading.  ``mass2`` was the prior's l0 until it became ``l0`` (the name
#: ``mass2`` is the relaxation mass, ``solver.mass2``, in the configuration document).
LINK_ALIASES = {"mass2": "l0"}


def _read_aliases(query: dict[str, str]) -> dict[str, str]:
    """The query with every old name of :data:`LINK_ALIASES` read as its current name (the current name wins when a
    link has both)."""
    out = {k: v for k, v in query.items() if k not in LINK_ALIASES}
    for old, new in LINK_ALIASES.items():
        if old in query and new not in out:
            out[new] = query[old]
    return out


def _from_text(p: param.Parameter, text: str):
    """A parameter's value from its text in a link (as :func:`url_query` writes it), or ValueError."""
    if isinstance(p, param.Boolean):
        if text.lower() not in ("true", "false"):
            raise ValueError("not true or false")
        return text.lower() == "true"
    if isinstance(p, param.Integer):
        if not _INTEGER.fullmatch(text.strip()):
            raise ValueError("not a whole number of at most 15 digits")
        return int(text)
    if isinstance(p, param.Number):
        try:
            return float(text)
        except ValueError:
            raise ValueError("not a number") from None
    if isinstance(p, (param.List, param.ListSelector, param.Dict, param.ClassSelector)):
        return parse_document(text, "the value", LIMITS)
    return text


def _same(a, b) -> bool:
    """Whether a link's value equals the state's (numbers, text, nested lists); anything not comparable is a
    change."""
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an array's elementwise answer, or no answer: a change
        return False


def _preset_values(session: BFTSession, name: str) -> dict | None:
    """The session's parameter values of the preset called ``name``, or None for no such preset (or one the
    dashboard cannot show: none today)."""
    catalogue = preset_catalogue()
    if not name or name not in catalogue:
        return None
    try:
        return session.params_from_config(preset_document(name)[0])  # as loading it: chosen by the evidence
    except Exception:  # noqa: BLE001 - a preset the dashboard cannot show is neither a link's base nor restored
        return None


def _restore_preset(session: BFTSession, name: str) -> None:
    """A link that names a preset (``preset=fig27``) and holds exactly that preset's problem opens as the preset: its
    name and explanation are shown, as loading the preset does.  Any other value in the link that differs from the
    preset makes the state "edited by hand" (no preset), which is what a link made after an edit says."""
    if session.preset == name:
        return
    values = _preset_values(session, name)
    if values is not None and all(_same(getattr(session, k), v) for k, v in values.items() if k in CONFIG_PARAMS):
        session.param.update(preset=name, edited=False)


def _preset_base(session: BFTSession, query: dict) -> dict:
    """The values of the preset a link names, for every problem parameter the link does not give itself: a short
    link such as ``?preset=fig21`` (written on the board) opens that preset, and ``?preset=fig21&lam=3`` opens it
    with λ = 3.  A link the dashboard writes gives every parameter, so there the preset only supplies its name.
    An unknown name gives nothing (the defaults are kept and the message names it)."""
    values = _preset_values(session, query.get("preset", "")) or {}
    return {k: v for k, v in values.items() if k in URL_PARAMS and not _same(v, getattr(session, k))}


def read_url(session: BFTSession, search: str) -> None:
    """Set the session from a link's query (``?...``, as :func:`url_query` writes it): the link is untrusted input.

    Each URL parameter present is read from its text (:func:`_from_text`; JSON through the gate's own parser) and
    checked by its parameter on its own; then the accepted values together must make a configuration that passes
    ``bftcore.foundations.config.validate_config`` with the server's budget.  If they do not, they are tried one by one
    in the order of :data:`URL_PARAMS` on trial sessions, and those the gate refuses are dropped (:func:`_accept_part`).
    Every value dropped is named in :attr:`BFTSession.message` with the reason and the value kept, and the session
    stays usable.  A link's ``data`` over :data:`MAX_POINTS` is refused whole (a silently truncated sample would
    mislead), and a query longer than :data:`MAX_QUERY_CHARS` is not read at all.

    A link's ``preset``, when it names a known preset, supplies every value the link does not give
    (:func:`_preset_base`: ``?preset=fig21`` opens that preset); the preset is restored (its name and explanation
    shown) when the link then holds exactly that preset's problem (:func:`_restore_preset`).  An unknown preset
    name is named in the message.

    Aliases (:data:`LINK_ALIASES`): ``mass2=`` is read as ``l0=``, the prior's l0 ("mass m² (l0)"), which links
    called ``mass2`` before the parameter was renamed; a link with both takes ``l0``.  Links written now say ``l0``
    (and ``solver_mass2`` for the relaxation mass, as before).

    A name given more than once (``?lam=0.5&lam=7``) is read with its last value, and the message says so.  The
    link the dashboard writes for a setup too large for a link (:func:`share_query`: ``?too_long=N``) shows the
    defaults with a message asking for the configuration file."""
    if len(search) > MAX_QUERY_CHARS:
        session.message = (f"This link is too long to load ({len(search):,} characters; the limit is "
                           f"{MAX_QUERY_CHARS:,}), so the defaults are shown. Share a large setup as a file: "
                           f"Download configuration (JSON), then Upload a configuration.")
        return
    try:
        pairs = _link_pairs(search)
    except ValueError as e:
        session.message = f"This link cannot be read ({_reason(e)}), so the defaults are shown."
        return
    query = _read_aliases(dict(pairs))
    if TOO_LONG_KEY in query and not any(name in query for name in URL_PARAMS):
        session.message = _too_long_link_message(query[TOO_LONG_KEY])
        return
    notes, values = _repeated(pairs), _preset_base(session, query)

    def refuse(names, why, held=None):
        # the value kept: the preset's where the link names one and only the link's own value is refused, else the
        # session's (``held``: the values still to be set)
        def keeps(n):
            return _kept(n, (held or {}).get(n, getattr(session, n)))
        ignored = ", ".join(f"{n}={_short(query[n])}" if n in query else f"{n} of preset {query['preset']}"
                            for n in names)
        kept = ", ".join(keeps(n) if len(names) == 1 else f"{n}={keeps(n)}" for n in names)
        notes.append(f"ignored {ignored} ({why}); kept {kept}")

    for name in URL_PARAMS:
        if name not in query:
            continue
        p = session.param[name]
        try:
            value = _from_text(p, query[name])
        except ValueError as e:
            refuse([name], f"{p.label or name}: {_reason(e)}", values)
            continue
        if name == "preset":
            # not a value to set: the preset's values are the base (_preset_base), and its name is shown only if
            # the state is then exactly that preset (_restore_preset)
            if value and value not in preset_catalogue():
                notes.append(f"ignored preset={_short(value)} (no such preset; the presets are "
                             f"{', '.join(preset_catalogue())})")
            continue
        try:
            if _same(value, values.get(name, getattr(session, name))):
                continue
        except Exception:  # noqa: BLE001 - not comparable: treat as a change
            pass
        try:
            check_value(p, value)
        except Exception as e:  # noqa: BLE001 - param's own refusal, with its reason and the control's name
            refuse([name], re.sub(r"^\w+ parameter '[\w.]+' ", f"{p.label or name} ", _reason(e)), values)
            continue
        values[name] = value
    try:
        _gate(session, values)
        accepted = values
    except Exception:  # noqa: BLE001 - find the values the gate refuses
        accepted, refused = _accept_part(session, values)
        for names, why in refused:
            refuse(names, why)
    if accepted:
        session.param.update(**accepted)
    _restore_preset(session, query.get("preset", ""))
    if session.edited and session.preset == "" and query.get("preset") in preset_catalogue():
        session.origin = {"preset": query["preset"], "edited": True}  # "Edited by hand from <the preset>"
    if notes:
        session.message = "From the link: " + "; ".join(notes) + "."


#: Endings of a file name that make an upload a data table (:func:`bftcore.foundations.tables.parse_table`); ``.json``
#: is a configuration.  A name with neither (or no name) is judged by its first character: a JSON configuration is an
#: object, ``{``, and a table never starts with one.
TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".dat")
#: What the upload's file dialog offers (the browser filters by these; anything else can still be dropped on it).
UPLOAD_ACCEPT = ",".join(TABLE_SUFFIXES + (".json", "application/json", "text/csv", "text/tab-separated-values",
                                           "text/plain"))
#: The keys of the session's document that a data table replaces: its data, the grid (fitted to the data instead),
#: the truth (it belongs to the previous problem's grid and data, not to the user's own data) and the axes' labels
#: (the table's header gives its own, or plain x and y).
TABLE_REPLACES = ("grid", "data", "truth", "labels")
#: How to write a table, said after a table is refused.
TABLE_HELP = ("A data table has one column of y values (a one-dimensional density) or two columns x, y, numbers "
              "only, separated by commas, tabs or spaces, after at most one header line")


def is_table(filename, raw) -> bool:
    """An upload is a data table (by its name's ending, else by its first character: see :data:`TABLE_SUFFIXES`)."""
    name = (filename or "").lower()
    if name.endswith(".json"):
        return False
    if name.endswith(TABLE_SUFFIXES):
        return True
    head = bytes(raw[:64]) if isinstance(raw, (bytes, bytearray, memoryview)) else str(raw)[:64].encode()
    return not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{")


def table_base(session: BFTSession) -> dict:
    """The document a data table goes into: the session's configuration (model, prior, templates, solver) without
    what the table replaces (:data:`TABLE_REPLACES`), so the grid is fitted to the data (``"grid": {"fit": true}``,
    :func:`bftcore.foundations.config._fitted_grid`)."""
    doc = session.to_config()
    for key in TABLE_REPLACES:
        doc.pop(key, None)
    for key in ("lambda_x", "lambda_y"):  # their ratio has the previous data's units: the gate sets it from the
        doc["prior"].pop(key, None)       # table's grid (bftcore.foundations.config._isotropic_ratio)
    return doc


def _axis_words(session: BFTSession) -> str:
    """The grid of the session in words, for the message after a table is loaded."""
    y = f"y from {session.y_min:.3g} to {session.y_max:.3g} on {session.ny} nodes"
    x = f"x from {session.x_min:.3g} to {session.x_max:.3g} on {session.nx} nodes"
    if not session.kind.y_on_grid:
        return x
    return y if session.nx == 1 else f"{x}, {y}"


def load_table(session: BFTSession, raw, name: str = "the table") -> bool:
    """Load a data table (text or bytes of an uploaded file) into the session, as :meth:`BFTSession.load_config`
    loads a configuration: parsed by :func:`bftcore.foundations.tables.parse_labelled_table` with the server's
    budget (its header names the axes), put into the session's own configuration with a grid fitted to the data
    (:func:`bftcore.foundations.tables.data_document`, :func:`table_base`) and lambda (and a regression's beta)
    chosen by the evidence (:func:`bftcore.foundations.tables.by_evidence`: the table's units are its own), then
    through the gate and the trial start of ``load_config``.  A table that is refused
    leaves the state exactly as it was, and :attr:`BFTSession.message` says what was wrong and how to write a
    table.  Returns True when loaded."""
    try:
        table, labels = parse_labelled_table(raw, where=name, limits=LIMITS)
        if len(table) > MAX_POINTS:
            raise ConfigError(f"{name} has {len(table):,} data lines; the dashboard takes at most {MAX_POINTS} "
                              f"points; use fewer points, or the command line for more: python -m bftcore fit {name}")
        # the data's own units: lambda (and a regression's beta) by the evidence, not the previous problem's
        doc = by_evidence(data_document(table, table_base(session), labels), unset_only=False)
    except (ConfigError, MemoryError) as e:
        reason = "it does not fit in the server's memory" if isinstance(e, MemoryError) else _reason(e)
        # the table's own messages begin with its name ("mine.csv, line 3: ..."): the message line is short
        said = f"Refused: {reason}" if reason.startswith(name) else f"Refused {name}: {reason}"
        # how to write a table, unless the reason says it already
        session.message = f"{said}. Nothing was changed." + ("" if "column" in reason else f" {TABLE_HELP}.")
        return False
    if not session.load_config(doc):
        session.message = session.message.replace("Refused the configuration:", f"Refused {name}:", 1)
        return False
    kind = ("a regression" if not session.kind.y_on_grid else
            "a 1-D density p(y)" if table.shape[1] == 1 else "a density p(y|x)")
    chosen = session.message.split(" Chosen by the evidence: ", 1)
    session.message = (f"Loaded {len(table)} points from {name} as {kind} on a grid fitted to them "
                       f"({_axis_words(session)}); model, prior and solver as before" +
                       (f"; chosen by the evidence: {chosen[1]}" if len(chosen) == 2 else "."))
    return True


#: Largest upload, bytes.  The browser refuses a larger file before sending anything (:class:`UploadInput`), with
#: a message; the server checks again.  Why 10 MiB: the file travels base64-encoded (4/3 of its size: 13.3 MiB) in
#: one websocket message, and Tornado closes the connection, without a word and with the session, on a message over
#: ``panel serve --websocket-max-message-size`` (20 MiB by default); a 17 MB file did that.  10 MiB leaves a third of
#: that limit free, and is below the gate's own 32 MiB per document
#: (``bftcore.foundations.limits.Limits.max_document_bytes``).
MAX_UPLOAD_BYTES = 10 * 1024 * 1024


def upload_refusal(name: str, size: int) -> str:
    """The message for an upload refused before it is read: empty (``size`` 0), over :data:`MAX_UPLOAD_BYTES`, or
    (``size`` -1) not readable by the browser or not sent as it should be."""
    what = _short(name, 60) if name.strip() else "the file"
    if size == 0:
        return (f"Refused {what}: the file is empty. Nothing was changed. Upload a JSON configuration or a data "
                f"table.")
    if size < 0 or size <= MAX_UPLOAD_BYTES:
        return f"Refused {what}: the browser could not read or send it. Nothing was changed. Try the upload again."
    return (f"Refused {what}: {size / 2**20:.1f} MiB is over the upload limit of {MAX_UPLOAD_BYTES / 2**20:g} MiB. "
            f"Nothing was changed. Use the command line for larger files: python -m bftcore fit FILE")


def load_upload(session: BFTSession, raw, filename=None) -> bool:
    """An uploaded file: a data table (:func:`is_table`, :func:`load_table`) or a JSON configuration
    (:meth:`BFTSession.load_config`).  True when loaded; otherwise the session is unchanged and says why.  (The
    page's upload refuses an empty file or one over :data:`MAX_UPLOAD_BYTES` before this: :class:`UploadInput`.)"""
    name = filename if isinstance(filename, str) and filename.strip() else ""
    if is_table(name, raw):
        loaded = load_table(session, raw, _short(name, 60) if name else "the table")
    else:
        loaded = session.load_config(raw)
    if loaded:  # the line under the preset menu: "Your data: <name>" (outside text, shown as text there)
        session.origin = {"file": _short(name, 60) if name else "an uploaded file"}
    return loaded


class UploadInput(JSComponent):
    """The file input of the share panel: it checks a file's size in the browser before anything is sent.

    Panel's ``FileInput`` (Bokeh's) sends any file whole, base64-encoded, in one websocket message, and a message
    over the server's limit closes the connection: the session was lost without a word.  Here the browser sends
    only the name and size of a file that is empty or over ``max_bytes`` (:data:`MAX_UPLOAD_BYTES`), and the
    server answers with a message (:func:`upload_refusal`); the content of any other file follows, and the server
    checks its size again (a page is not trusted).  The component shows no text of its own: the browser's file
    input, and the message line of the session.

    ``filename`` then ``value`` (bytes) are set for a file that arrives (``value`` triggers its watchers even when
    the same file comes twice), ``refusal`` (name, size; size -1 for a file that could not be read) for one that
    does not; none of them goes back to the browser."""

    accept = param.String(default="")
    max_bytes = param.Integer(default=MAX_UPLOAD_BYTES, bounds=(0, None))
    aria_label = param.String(default="Upload a JSON configuration or a data table")
    value = param.Parameter(default=None, precedence=-1, doc="Bytes of the last file received.")
    filename = param.String(default=None, allow_None=True, precedence=-1, doc="Name of the last file received.")
    refusal = param.Parameter(default=None, precedence=-1, doc="(name, size in bytes) of the last file refused for "
                                                              "its size.")

    # server-side only: never synchronised to the page (a file's bytes would go back to the browser)
    _rename = {"value": None, "filename": None, "refusal": None}

    _esm = """
    export function render({ model, el }) {
      const input = document.createElement("input");
      input.type = "file";
      input.accept = model.accept;
      input.setAttribute("aria-label", model.aria_label);
      input.addEventListener("change", () => {
        const file = input.files && input.files[0];
        if (!file) return;
        const meta = { name: file.name, size: file.size };
        if (file.size === 0 || file.size > model.max_bytes) {
          input.value = "";  // the refused file is not left in the input
          model.send_msg(meta);
          return;
        }
        const reader = new FileReader();
        reader.onload = () => {
          const url = String(reader.result);
          model.send_msg({ ...meta, data: url.slice(url.indexOf(",") + 1) });
        };
        reader.onerror = () => { input.value = ""; model.send_msg({ ...meta, unreadable: true }); };
        reader.readAsDataURL(file);
      });
      el.appendChild(input);
    }
    """

    def _handle_msg(self, msg) -> None:
        if not isinstance(msg, dict):
            return
        name: str = msg["name"] if isinstance(msg.get("name"), str) else ""
        size: int = msg["size"] if isinstance(msg.get("size"), int) else -1
        data = msg.get("data")
        if not isinstance(data, str):  # refused by the page: empty or too large, or the browser could not read it
            self.receive_refusal(name, size if size == 0 or size > self.max_bytes else -1)
            return
        # base64 is 4 characters for every 3 bytes: a text longer than that of max_bytes is refused undecoded
        if len(data) > 4 * (-(-self.max_bytes // 3)):
            self.receive_refusal(name, len(data) // 4 * 3)
            return
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            self.receive_refusal(name, -1)
            return
        if not 0 < len(raw) <= self.max_bytes:
            self.receive_refusal(name, len(raw))
            return
        self.receive(name, raw)

    def receive(self, name: str, raw: bytes) -> None:
        """A file has arrived (what the page's message does; tests call it directly)."""
        with param.parameterized.discard_events(self):
            self.param.update(filename=name, value=raw)
        self.param.trigger("value")

    def receive_refusal(self, name: str, size: int) -> None:
        """A file was refused (in the page, or here): empty (``size`` 0), too large, or unreadable (-1)."""
        with param.parameterized.discard_events(self):
            self.refusal = (name, size)
        self.param.trigger("refusal")


class SharePanel(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.session
        self.download = pn.widgets.FileDownload(callback=self._config_file, filename="bftcore-config.json",
                                                label="Download configuration (JSON)", color="primary",
                                                width=280)
        self.csv = pn.widgets.FileDownload(callback=lambda: io.StringIO(s.data_csv()), filename="bftcore-data.csv",
                                           label="Download data (CSV)", width=280)
        self.upload = UploadInput(accept=UPLOAD_ACCEPT, width=280, height=40, css_classes=["bft-upload"])
        self.upload.param.watch(self._on_upload, "value")
        self.upload.param.watch(self._on_refusal, "refusal")
        # said while the state is too large for a link (set by sync_url's writer; empty otherwise)
        # wrapped: a text pane's <pre> keeps its text on one line otherwise
        self.link_note = LiveText(width=290, styles={"white-space": "normal", "overflow": "visible",
                                                     "color": "#b35900"},
                                  stylesheets=["pre { white-space: pre-wrap; font-family: inherit; }"],
                                  css_classes=["bft-link-note"]).follow(
            s, "link_too_long", lambda n: too_long_note(n) if n else "")
        self.link_note.pane.visible = bool(s.link_too_long)  # no empty line while every link fits
        s.param.watch(lambda event: setattr(self.link_note.pane, "visible", bool(event.new)), "link_too_long")
        self.help = pn.pane.Markdown(
            "Upload a JSON configuration, or your own data as a table (.csv, .tsv, .txt, .dat): one column y "
            "(a one-dimensional density) or two columns x, y, one header line allowed. The grid is fitted to "
            "your data; model, prior and solver stay as they are. "
            "The address bar holds the current state: copy it to hand out this exact setup (a setup too large "
            "for a link, such as array templates, is shared as the JSON file instead). Files up to "
            f"{MAX_UPLOAD_BYTES // 2**20} MiB. "
            "The JSON file reproduces the run on the command line: `python -m bftcore fit bftcore-config.json`. "
            "Each plot's toolbar has a save button for a PNG.", width=290, styles={"font-size": "12px"})

    def _config_file(self):
        return io.StringIO(json.dumps(self.session.export_config(), indent=2))

    def _on_upload(self, event):
        if event.new is None:
            return
        # one message for everything a new problem changes, as a preset (app.views.presets)
        user_action(load_upload)(self.session, event.new, self.upload.filename)

    def _on_refusal(self, event):
        if event.new is None:
            return
        name, size = event.new

        def say():
            self.session.message = upload_refusal(name, size)
        user_action(say)()

    @staticmethod
    def sync_url(session: BFTSession):
        """Keep the whole state in the URL query (served sessions only).

        A link's query is read into the session once, when the page is built (:func:`read_url`, which refuses
        what the gate refuses and says so).  Writing back
        is done here, once per burst of changes, in a next-tick callback of the session's document (after a user
        action's message, :func:`app.transport.after_user_action`: the heatmap that answers a click does not wait
        for the link, which follows a few milliseconds later, well within one frame): the
        complete query of every URL parameter, not only the one that changed, so the address bar is a full
        description of the state; or, for a setup too large for a link, ``?too_long=N`` (:func:`share_query`),
        with :attr:`BFTSession.link_too_long` set for the share panel's note.  ``Location.sync`` is not used: it
        also writes the query on every change, in its own form, so each click changed the address twice and the
        browser echoed it back twice; and alone, a change made from a Select sometimes reached the address bar only
        with the next event."""
        loc, doc = pn.state.location, pn.state.curdoc
        if loc is None or doc is None:
            return
        read_url(session, loc.search or "")
        pending: list = []

        def write():
            pending.clear()
            search, too_long = share_query(session)
            if loc.search != search or session.link_too_long != too_long:
                with set_curdoc(doc), one_message(doc):
                    loc.search = search
                    session.link_too_long = too_long

        def schedule(*_):
            if not pending:
                pending.append(True)
                # inside a user action (a click): just after its message, with the point and its first frame
                if not after_user_action(doc, write):
                    doc.add_next_tick_callback(write)

        session.param.watch(schedule, list(URL_PARAMS))
        pn.state.onload(schedule)

    def __panel__(self):
        return pn.Column(self.download, self.csv, pn.pane.Markdown("**Upload a configuration or your data**",
                                                                   margin=(5, 10, 0, 10)),
                         self.upload, self.link_note, self.help, width=300)
