"""Atomic outputs: single files written under a temporary name and renamed; batches of files
(the tables of one request) swapped into their folder all at once.

A batch is built in a sibling folder ``.<out>.protab-partial-<id>`` (existing files of ``out``
hard-linked in, new files written), renamed to ``.<out>.protab-ready-<id>`` when complete, and
then exchanged with ``out`` in one ``renameat2(RENAME_EXCHANGE)`` call (Linux); where the file
system cannot exchange, ``out`` is moved aside and the ready folder renamed onto it. A process
killed at any instant leaves ``out`` as it was or complete; :func:`recover` (run at the start of
every batch) finishes an interrupted swap or removes what an interrupted run left. Both run while
holding ``out``'s lock (:mod:`protab._locks`), so they never touch a folder a live run is building.

CSV files are written spreadsheet-safe (:func:`spreadsheet_safe`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab._locks import output_lock
from protab.errors import InputError, ProtabError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, mode: int | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it, rename it onto ``path`` and
    fsync the folder (so that a crash leaves the old file or the whole new one, never a part).
    The file gets ``mode`` (e.g. 0o600 for secrets) or the usual mode of new files. protab's one
    way of writing a file: outputs, p-tables, published databases, token files."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # mkstemp makes 0600; outputs get the usual mode
    try:
        yield Path(tmp)
        if os.path.isfile(tmp):  # a writer may have made a folder or nothing (DuckDB files: its own)
            _fsync_file(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write a text file (UTF-8, newlines as given) atomically."""
    target = Path(path)
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
    return target


def write_frame(frame: pl.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a polars frame as CSV or Parquet (by suffix), atomically and deterministically."""
    target = Path(path)
    suffix = target.suffix.lower()
    with atomic_path(target) as tmp:
        if suffix == ".csv":
            spreadsheet_safe(frame).write_csv(tmp)
        elif suffix in (".parquet", ".pq"):
            # no statistics of wall-clock or writer version that would differ between runs
            frame.write_parquet(tmp, compression="zstd", statistics=False)
        else:
            raise ValueError(f"cannot write {target.name}: use a .csv or .parquet file name")
    return target


def read_toml(path: str | os.PathLike[str], error: type[ProtabError] = ProtabError) -> dict[str, Any]:
    """A TOML request file as a dict; ``error`` naming the file if it cannot be read."""
    p = Path(path)
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"the request file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise error(f"the request file {str(path)!r} is a folder, not a TOML file") from None
    except UnicodeDecodeError as exc:
        raise error(f"the request file {str(path)!r} is not UTF-8 text (byte {exc.start})") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise error(f"cannot read the request file {str(path)!r}: {exc}") from None


# -- batches ------------------------------------------------------------------------------------
_PARTIAL, _READY, _OLD = "protab-partial", "protab-ready", "protab-old"
#: Longest file name most file systems take (bytes); a batch's names are checked against it.
NAME_MAX = 255


_TAG = 12  # hex digits of a batch's id


def _siblings(out: Path, kind: str) -> list[Path]:
    """The batch folders of ``kind`` beside ``out``: exactly ``.<out>.<kind>-<hex id>`` (so that a
    folder whose own name ends like one is never taken for another's)."""
    prefix = f".{out.name}.{kind}-"
    hexdigits = set("0123456789abcdef")

    def ours(name: str) -> bool:
        tag = name[len(prefix):]
        return name.startswith(prefix) and 0 < len(tag) <= _TAG and set(tag) <= hexdigits

    try:
        return sorted(p for p in out.parent.iterdir() if ours(p.name))
    except FileNotFoundError:
        return []


def recover(out: str | os.PathLike[str]) -> None:
    """Finish or undo what an interrupted batch left beside ``out`` (see the module docstring),
    holding ``out``'s lock: a folder that a live run is building is that run's (its lock is
    held), and this refuses with the run's name instead of touching it."""
    out = Path(os.path.realpath(out))
    if not out.parent.is_dir():
        return
    with output_lock((out, "the output folder")):
        _recover(out)


def _recover(out: Path) -> None:
    ready = _siblings(out, _READY)
    if not out.exists() and ready:
        # killed between moving the old folder aside and renaming the new one: finish the swap
        os.rename(ready[-1], out)
        ready = ready[:-1]
    for p in _siblings(out, _PARTIAL) + ready + _siblings(out, _OLD):
        if p.is_symlink():
            p.unlink()
        else:
            shutil.rmtree(p, ignore_errors=True)
    if out.is_dir():  # single files whose rename never came
        for p in out.iterdir():
            if p.name.startswith(".") and p.name.endswith(".tmp") and p.is_file():
                p.unlink(missing_ok=True)


def check_output_folder(out: str | os.PathLike[str], names: list[str]) -> Path:
    """Refuse an output folder or file names that cannot be written, before any work is done."""
    raw = os.fspath(out)
    if "\x00" in raw:
        raise ProtabError(f"the output folder {raw!r} contains a NUL character")
    # "a/b/.." is "a", and a symlink is the folder it points to: the real folder is swapped
    folder = Path(os.path.realpath(raw))
    if len(os.fsencode(str(folder))) > 4000:
        raise ProtabError(f"the output folder path is too long ({len(str(folder))} characters)")
    if folder.exists() and not folder.is_dir():
        raise ProtabError(f"the output folder {raw!r} exists and is not a folder; choose another --out")
    cwd = Path.cwd().absolute()
    if folder == folder.parent or folder == cwd or folder in cwd.parents:
        raise ProtabError(
            f"the output folder {raw!r} is the working folder or above it; outputs are swapped in as a "
            "whole folder, so give them a folder of their own (e.g. --out protab_output)"
        )
    budget = NAME_MAX - len(os.fsencode(f".{folder.name}.{_PARTIAL}-")) - 32
    if budget < 8:
        raise ProtabError(f"the output folder name {folder.name!r} is too long")
    for n in names:
        if any(ord(ch) < 32 or ch == "\x7f" for ch in n) or n != n.strip():
            raise ProtabError(f"{n!r} cannot be an output file name: no control characters (newlines, tabs) "
                              "and no spaces at either end")
        if "/" in n or "\\" in n or n.startswith(".") or not n.strip():
            raise ProtabError(f"{n!r} cannot be an output file name (no path separators, NUL or leading dot)")
        if len(os.fsencode(n)) > NAME_MAX - 40:
            raise ProtabError(
                f"the output file name {n[:40]!r}… is {len(os.fsencode(n))} bytes long; file systems take "
                f"at most {NAME_MAX} (less the temporary suffix): choose a shorter table name"
            )
    probe = _existing_ancestor(folder)
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise ProtabError(f"cannot write the output folder {raw!r}: {str(probe)!r} is not writable")
    if not os.access(folder.parent if folder.parent.exists() else probe, os.W_OK | os.X_OK):
        raise ProtabError(f"cannot write beside the output folder {raw!r} (its parent folder is not writable)")
    _probe(probe, raw)
    return folder


def _existing_ancestor(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (where a new folder would be made)."""
    while not path.exists():
        path = path.parent
    return path


def _probe(folder: Path, raw: str) -> None:
    """Make and remove a folder in ``folder``: what root cannot write (/proc, /sys, a read-only
    mount) is found before any work is done, not after."""
    try:
        tmp = tempfile.mkdtemp(prefix=".protab-probe-", dir=folder)
    except OSError as exc:
        raise InputError(f"cannot write {raw!r}: {exc.strerror or exc} in {str(folder)!r}") from None
    os.rmdir(tmp)


def real_path(path: str | os.PathLike[str]) -> str:
    """The absolute path with ``~`` expanded and every symbolic link resolved (as DuckDB and
    the operating system read it): what two spellings of one file have in common."""
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def output_name(path: object, what: str = "output file") -> str:
    """``path`` as a string (a str or os.PathLike of str), or an InputError."""
    try:
        raw = os.fspath(path)  # type: ignore[call-overload]
    except TypeError:
        raw = None
    if not isinstance(raw, str):
        raise InputError(f"the {what} must be a path (str or pathlib.Path), not {type(path).__name__}")
    if "\x00" in raw:
        raise InputError(f"the {what} {raw!r} contains a NUL character")
    if not raw.strip():
        raise InputError(f"the {what} {raw!r} is empty; name a file")
    return raw


_WILDCARDS = "*?["


def protected_form(path: str) -> str:
    """A registered input path as outputs are compared with it: its real path, or for a glob
    the real path of its folder part (before the first wildcard) followed by the pattern."""
    raw = os.path.expanduser(path)
    marks = [raw.index(ch) for ch in _WILDCARDS if ch in raw]
    if not marks:
        return real_path(raw)
    base = os.path.dirname(raw[: min(marks)])
    return os.path.join(real_path(base or "."), raw[len(base):].lstrip(os.sep))


def replaces(target: str, protected: str) -> bool:
    """True when writing the real path ``target`` (a file, or a folder Spark fills) would
    replace or change ``protected`` (a :func:`protected_form`): the same path, a path inside it,
    a folder holding it, or a path its glob may match — any name matching the glob's last part
    anywhere below its folder part (DuckDB's ``**`` also matches no folder at all)."""
    import fnmatch

    def below(a: str, b: str) -> bool:
        return a.startswith(b.rstrip(os.sep) + os.sep)

    if not any(ch in protected for ch in _WILDCARDS):
        return target == protected or below(target, protected) or below(protected, target)
    marks = [protected.index(ch) for ch in _WILDCARDS if ch in protected]
    base = os.path.dirname(protected[: min(marks)])
    last = os.path.basename(protected)
    return (fnmatch.fnmatchcase(target, protected) or below(base, target) or target == base
            or (below(target, base) and fnmatch.fnmatchcase(os.path.basename(target), last)))


def database_files(database: str | os.PathLike[str]) -> list[str]:
    """The files of a DuckDB database that no output may replace: the file by its real path,
    and its write-ahead log by the real path and by the path as given (the log may not exist
    yet). Nothing for an in-memory database."""
    raw = os.fspath(database)
    if raw in ("", ":memory:") or raw.startswith(":memory:"):
        return []
    real = real_path(raw)
    return [real, real + ".wal", os.path.abspath(os.path.expanduser(raw)) + ".wal"]


def refuse_replacing(raw: str | os.PathLike[str], protected: Sequence[tuple[str, str]], what: str,
                     hint: str = "name another path") -> None:
    """InputError when writing the output ``raw`` (a file, or a folder swapped in whole) would
    replace or change a protected path: each a :func:`protected_form` with a label ("the
    microdata database"). Paths are compared as real paths (symbolic links resolved, ``~`` and
    ``..`` expanded), so no spelling of an input gets past."""
    name = os.fspath(raw)
    target = real_path(name)
    for pattern, label in protected:
        if replaces(target, pattern):
            raise InputError(f"{what} {name!r} would replace {label} (or a file in it, or the folder "
                             f"holding it); {hint}")


def check_output_file(path: str | os.PathLike[str]) -> Path:
    """Refuse a single output file that cannot be written (NUL, too long, a folder, no parent).
    The file is the real one: through a symbolic link the file it points to is written."""
    raw = output_name(path)
    target = Path(real_path(raw))
    if len(os.fsencode(target.name)) > NAME_MAX - 40 or len(os.fsencode(str(target))) > 4000:
        raise InputError(f"the output file name {raw[:60]!r}… is too long")
    if target.is_dir() or raw.endswith(os.sep):
        raise InputError(f"the output file {raw!r} is a folder; name a file")
    probe = _existing_ancestor(target.parent)
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {raw!r}: {str(probe)!r} is not a writable folder")
    _probe(probe, raw)
    return target


def write_batch(out: str | os.PathLike[str], files: Mapping[str, Callable[[Path], None]]) -> Path:
    """Write every file of ``files`` (name → writer of a path) into ``out`` all at once.

    Files of ``out`` not in the batch are kept. Either every file is replaced or none is, also
    if the process is killed (see the module docstring); the folder is created if needed.
    """
    folder = check_output_folder(out, list(files))
    folder.parent.mkdir(parents=True, exist_ok=True)
    with output_lock((folder, "the output folder")):
        return _write_batch(folder, files)


def _write_batch(folder: Path, files: Mapping[str, Callable[[Path], None]]) -> Path:
    def fill(partial: Path) -> None:
        if folder.is_dir():
            shutil.copytree(folder, partial, copy_function=_link_or_copy, symlinks=True)
        else:
            partial.mkdir()
        umask = os.umask(0)
        os.umask(umask)
        for name, writer in files.items():
            target = partial / name
            target.unlink(missing_ok=True)  # a hard link to the old file: never write through it
            writer(target)
            os.chmod(target, 0o666 & ~umask)

    return replace_folder(folder, fill)


def replace_folder(folder: Path, fill: Callable[[Path], None]) -> Path:
    """Replace ``folder`` by a new one that ``fill`` makes at the path it is given (see
    :func:`replacing_folder`)."""
    with replacing_folder(folder) as partial:
        fill(partial)
    return folder


@contextmanager
def replacing_folder(folder: Path) -> Iterator[Path]:
    """Yield a path (not existing yet) where the caller makes the new folder (e.g. Spark's
    writer); when the block ends without error it replaces ``folder``. The new folder is built
    beside ``folder`` as ``.<name>.protab-partial-<id>``, renamed ``…-ready-…`` when whole,
    then exchanged with ``folder`` in one call where Linux can, else ``folder`` is moved aside
    and the ready one renamed in. A process killed at any point leaves the old folder or the
    new one: :func:`recover` (run first, here and by every batch) finishes or undoes the rest.
    All of it holds ``folder``'s lock (another run into it refuses, naming this one)."""
    with output_lock((folder, "the output folder")):
        recover(folder)
        tag = uuid.uuid4().hex[:_TAG]
        partial = folder.parent / f".{folder.name}.{_PARTIAL}-{tag}"
        ready = folder.parent / f".{folder.name}.{_READY}-{tag}"
        old = folder.parent / f".{folder.name}.{_OLD}-{tag}"
        try:
            yield partial
            _fsync_dir(partial)
            os.rename(partial, ready)
            if not folder.exists():
                os.rename(ready, folder)
            elif not _exchange(ready, folder):
                os.rename(folder, old)
                os.rename(ready, folder)
            _fsync_dir(folder.parent)
        finally:
            for p in (partial, ready, old):
                if p.exists():
                    shutil.rmtree(p, ignore_errors=True)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):  # pragma: no cover
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def text_writer(text: str) -> Callable[[Path], None]:
    """A writer for :func:`write_batch`: ``text`` as a UTF-8 file, newlines as given."""

    def write(path: Path) -> None:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)

    return write


def frame_writer(frame: pl.DataFrame, fmt: str) -> Callable[[Path], None]:
    """A writer for :func:`write_batch`: ``frame`` as CSV (spreadsheet-safe) or Parquet,
    deterministically."""
    safe = spreadsheet_safe(frame) if fmt == "csv" else frame

    def write(path: Path) -> None:
        if fmt == "csv":
            safe.write_csv(path)
        elif fmt == "parquet":
            frame.write_parquet(path, compression="zstd", statistics=False)
        else:  # pragma: no cover - formats are checked with the request
            raise ValueError(f"unknown format {fmt!r}")

    return write


# -- spreadsheet-safe text -----------------------------------------------------------------------
#: a text cell a spreadsheet would read as a formula (OWASP, "CSV Injection")
FORMULA_START = r"^[=+\-@\t\r]"
#: a plain decimal number (``-5``, ``+3``, ``-0.5``, ``1e3``): a spreadsheet reads it as a number
PLAIN_NUMBER = r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"


def spreadsheet_safe(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` ready to be written as CSV that is safe to open in a spreadsheet: every text
    cell (and column name) that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
    return gets a leading single quote, as OWASP's advice on CSV injection says, unless it is a
    plain number (``-5`` stays ``-5``). Numeric columns are left as they are. One polars
    expression per text column: no loop over cells."""
    import polars as pl

    def neutral(e: pl.Expr) -> pl.Expr:
        risky = e.str.contains(FORMULA_START) & ~e.str.contains(PLAIN_NUMBER)
        return pl.when(risky).then(pl.lit("'") + e).otherwise(e)

    text = [c for c, t in frame.schema.items() if t == pl.String or t == pl.Categorical or isinstance(t, pl.Enum)]
    out = frame.with_columns(neutral(pl.col(c).cast(pl.String)).alias(c) for c in text) if text else frame
    names = pl.Series(out.columns, dtype=pl.String)
    safe = names.to_frame("c").select(neutral(pl.col("c")).alias("c"))["c"].to_list()
    return out.rename(dict(zip(out.columns, safe))) if safe != out.columns else out
