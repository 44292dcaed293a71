"""The text of p-table files, and the check of their column i, for the readers of count and
magnitude p-tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from protab.errors import PTableError


def read_file_text(path: Any) -> str:
    """The text of a p-table file (UTF-8, a BOM allowed); PTableError naming the file when
    it is missing, a folder, unreadable or not UTF-8."""
    p = Path(path)
    try:
        return p.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise PTableError(f"p-table file {str(p)!r} does not exist") from None
    except IsADirectoryError:
        raise PTableError(f"p-table file {str(p)!r} is a folder, not a file") from None
    except PermissionError:
        raise PTableError(f"p-table file {str(p)!r} cannot be read (permission denied)") from None
    except UnicodeDecodeError as exc:
        raise PTableError(
            f"p-table file {str(p)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}); p-table "
            "files are CSV text as R ptable, tau-ARGUS and protab write them"
        ) from None
    except OSError as exc:
        raise PTableError(f"p-table file {str(p)!r} cannot be read ({exc.strerror or exc})") from None


def refuse_fractional_i(df: pl.DataFrame, name: str, holds: str) -> None:
    """PTableError naming the file, column 'i', the first data row (counted from 1) and its
    value when a p-table file's i are not whole numbers; ``holds`` says what i should be.
    R ptable and tau-ARGUS write whole i in both kinds of file, so a fractional i tells
    neither kind: it is a mistake in the file, not a sign that it is the other kind."""
    if "i" not in df.columns:
        return
    text = df["i"].cast(pl.String).str.strip_chars()
    num = text.cast(pl.Float64, strict=False).to_numpy()
    given = text.is_not_null().to_numpy() & (text.str.len_bytes() > 0).fill_null(False).to_numpy()
    with np.errstate(invalid="ignore"):
        bad = given & ~(np.isfinite(num) & (num == np.round(num)))
    rows = np.flatnonzero(bad)
    if rows.size:
        more = f" (and {rows.size - 1} more row(s))" if rows.size > 1 else ""
        raise PTableError(
            f"p-table file {name!r}: column 'i' must hold whole numbers ({holds}); data row "
            f"{int(rows[0]) + 1} has {text[int(rows[0])]!r}{more}. Fix those rows"
        )
