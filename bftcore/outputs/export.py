"""Writing the CLI's outputs: CSV tables (:mod:`bftcore.outputs.result_tables`) and PNG figures
(:mod:`bftcore.outputs.figures`) next to its JSON documents, each path checked before anything is opened.
"""
from __future__ import annotations

import os
import re
import stat

__all__ = ["write_outputs", "refuse_special_target"]

_CSV_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def refuse_special_target(path: str) -> None:
    """ValueError, before anything is opened, when an output ``path`` exists and is not a regular file: open() for
    writing of a named pipe waits for a reader forever, and a device or a directory is no place for a result."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise ValueError(f"cannot write {path}: {e.strerror or e}") from None
    if not stat.S_ISREG(mode):
        kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
        raise ValueError(f"{path} is {kind}, not a regular file; write the results to a file name")


def write_outputs(prefix, tables: dict[str, str] | str | None, png: bytes | None) -> list[str]:
    """Write ``<prefix>_<key>.csv`` per table (``<prefix>.csv`` for a single text) and ``<prefix>.png``; return the
    paths written.  ValueError (nothing written) when the directory of ``prefix`` does not exist."""
    prefix = os.fspath(prefix)
    directory, base = os.path.split(prefix)
    if not base:
        raise ValueError(f"output prefix {prefix!r} names a directory; give a file name prefix such as "
                         f"{os.path.join(prefix or '.', 'result')!r}")
    if directory and not os.path.isdir(directory):
        raise ValueError(f"output directory {directory!r} does not exist; create it first (mkdir -p {directory}) "
                         f"or choose another prefix")
    if tables is not None and not isinstance(tables, (str, dict)):
        raise ValueError(f"tables must be a CSV text or a dict of them, got {type(tables).__name__}")
    if isinstance(tables, dict):
        for key in tables:
            if not isinstance(key, str) or not _CSV_NAME.match(key):
                raise ValueError(f"table name {key!r} is not usable in a file name; use letters, digits, _ and -")
    if png is not None and not isinstance(png, (bytes, bytearray)):
        raise ValueError(f"png must be bytes, got {type(png).__name__}")
    jobs: list[tuple[str, str | bytes]] = []
    if isinstance(tables, str):
        jobs.append((prefix + ".csv", tables))
    elif isinstance(tables, dict):
        jobs.extend((f"{prefix}_{key}.csv", text) for key, text in tables.items())
    if png is not None:
        jobs.append((prefix + ".png", bytes(png)))
    for path, _ in jobs:
        refuse_special_target(path)
    written = []
    for path, content in jobs:
        if isinstance(content, str):
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(content)
        else:
            with open(path, "wb") as fh:
                fh.write(content)
        written.append(path)
    return written

