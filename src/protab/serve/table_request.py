"""The body of ``POST /v1/table`` checked against the catalogue and the user's rights, and
normalised (sorted filter values, level numbers): QueryRefused (400) for what the service does
not answer, QueryForbidden (403) for names outside the user's rights, said after every 400."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protab.errors import show_values
from protab.serve.code_labels import check_language
from protab.serve.groups import check_groups
from protab.serve.query import DatasetRights, QueryForbidden, QueryRefused

KEYS = ("dataset", "dims", "formula", "filters", "measure", "levels", "groups", "lang")
MAX_FILTER_VALUES = 1000
MAX_TABLE_DIMS = 12


def dataset_of(name: Any, datasets: Mapping[str, Any], rights: Mapping[str, Any], key: str = "") -> Any:
    """The dataset a request names (``key``: how the message names the field, e.g. "dataset: "):
    QueryRefused for an unknown one (listing the user's), QueryForbidden without rights to it."""
    if not isinstance(name, str) or name not in datasets:
        shown = show_values(sorted(rights), 20) if rights else "none"
        raise QueryRefused(f"{key}unknown dataset {str(name)[:60]!r}; datasets you may query: {shown}")
    if name not in rights:
        raise QueryForbidden(f"you have no rights to dataset {name!r}")
    return datasets[name]


def check_table_request(body: Any, datasets: Mapping[str, Any], rights: Mapping[str, DatasetRights]) -> dict[str, Any]:
    """The table request of ``body`` for a user with ``rights``, over the broker's ``datasets``:
    ``dataset``, ``dims``, ``formula``, ``filters`` (dimension: sorted codes), ``measure`` and
    ``levels`` (dimension: level number), ``groups`` (one dimension: group name → codes) and, when
    given, ``lang`` (a language of the service's labels: the answer gets label columns)."""
    if not isinstance(body, dict):
        raise QueryRefused("the request must be a JSON object with dataset and dims")
    unknown = [k for k in body if k not in KEYS]
    if unknown:
        raise QueryRefused(f"unknown key {str(unknown[0])[:60]!r} in the table request (keys: {', '.join(KEYS)})")
    name = body.get("dataset")
    ds = dataset_of(name, datasets, rights)
    assert isinstance(name, str)  # dataset_of refuses any other
    check = _Names(ds.conf, rights[name], name)
    dims = check.dims(body.get("dims"))
    formula = body.get("formula")
    if formula is not None and (not isinstance(formula, str) or len(formula) > 2000):
        raise QueryRefused("formula must be a string such as 'region*sex + agegroup'")
    filters = check.filters(body.get("filters") or {})
    measure = body.get("measure")
    if measure is not None:
        check.column(measure, "measure", "measure")
    levels = _levels(body.get("levels") or {}, dims, ds.conf.hierarchies)
    groups = check_groups(body.get("groups"), dims, filters, levels, ds.codes)  # custom groups (protab.serve.groups)
    if check.forbidden:
        raise QueryForbidden(f"you may not use {show_values(list(dict.fromkeys(check.forbidden)))} of dataset {name!r}")
    if measure is not None and ds.magnitude is None:
        raise QueryRefused(f"measures of dataset {name!r} are not available: the service protects its counts "
                           "only (no magnitude parameters are configured for it)")
    req = {"dataset": name, "dims": dims, "formula": formula, "filters": filters, "measure": measure,
           "levels": levels, "groups": groups}
    if body.get("lang") is not None:  # only when asked: the canonical form (and ETag) of other requests stays
        req["lang"] = check_language(body["lang"], [datasets[n].conf for n in rights if n in datasets])
    return req


class _Names:
    """The names of one request resolved against a dataset's configuration (``conf``) and the
    user's rights there; names outside the rights are kept in :attr:`forbidden`."""

    def __init__(self, conf: Any, rights: DatasetRights, name: str) -> None:
        self.conf, self.rights, self.name = conf, rights, name
        self.forbidden: list[str] = []

    def column(self, value: Any, kind: str, where: str) -> str:
        """A dimension (``kind`` "dim") or measure of the dataset."""
        known = self.conf.dims if kind == "dim" else self.conf.measures
        allowed = self.rights.dims if kind == "dim" else self.rights.measures
        if not isinstance(value, str) or value not in known:
            ok = sorted(allowed & set(known))
            raise QueryRefused(f"{where}: unknown {'dimension' if kind == 'dim' else 'measure'} "
                               f"{str(value)[:60]!r} of dataset {self.name!r}; you may use: "
                               f"{show_values(ok, 20) if ok else 'none'}")
        if value not in allowed:
            self.forbidden.append(value)
        return value

    def dims(self, raw: Any) -> list[str]:
        """``dims``: one to MAX_TABLE_DIMS distinct dimensions."""
        if not isinstance(raw, list) or not raw:
            raise QueryRefused("dims must be a non-empty list of dimension names")
        if len(raw) > MAX_TABLE_DIMS:
            raise QueryRefused(f"at most {MAX_TABLE_DIMS} dimensions per table")
        dims = [self.column(d, "dim", "dims") for d in raw]
        if len(set(dims)) < len(dims):
            raise QueryRefused("dims names a dimension twice")
        return dims

    def filters(self, raw: Any) -> dict[str, list[str]]:
        """``filters``: dimension → a code or a list of codes, as sorted distinct text."""
        if not isinstance(raw, dict):
            raise QueryRefused("filters must be an object: {dimension: code or [codes]}")
        filters = {}
        for d, v in sorted(raw.items()):
            self.column(d, "dim", "filters")
            values = v if isinstance(v, list) else [v]
            if not values or len(values) > MAX_FILTER_VALUES or any(
                isinstance(x, bool) or not isinstance(x, (str, int)) for x in values
            ):
                raise QueryRefused(f"filters.{d[:60]}: give a code or a list of 1 to {MAX_FILTER_VALUES} codes "
                                   "(strings or whole numbers)")
            filters[d] = sorted({str(x) for x in values})
        return filters


def _levels(raw: Any, dims: list[str], hierarchies: Mapping[str, Any]) -> dict[str, int]:
    """``levels``: dimension of the table → level name or number, as the level's number."""
    if not isinstance(raw, dict):
        raise QueryRefused("levels must be an object: {dimension: level name or number}")
    levels = {}
    for d, lv in sorted(raw.items()):
        if d not in dims:
            raise QueryRefused(f"levels: {str(d)[:60]!r} is not one of the table's dims")
        names = list(hierarchies.get(d, ()))
        if isinstance(lv, str) and lv in names:
            levels[d] = names.index(lv) + 1
        elif isinstance(lv, int) and not isinstance(lv, bool) and 1 <= lv <= len(names):
            levels[d] = lv
        else:
            raise QueryRefused(f"levels.{d}: not a level of {d!r} (levels: {', '.join(names) or 'none'})")
    return levels
