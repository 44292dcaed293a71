"""Custom groups saved under their name, per user, dataset and dimension (issue 28 item 2).

``POST /v1/groups`` ``{"dataset", "dim", "name", "groups": {group name: [codes]}}`` keeps an
analyst's recode of one dimension, checked as a table request's groups are (unknown codes,
empty or overlapping groups, names that are codes of any level of the dimension's
classification, ``Total`` or ``_T``: 400 naming the key; a dataset
or dimension outside the user's rights: 403); ``GET /v1/groups`` lists the user's own,
``GET|DELETE /v1/groups/{dataset}/{dim}/{name}`` shows or removes one (404 for another user's,
as for an unknown name). A table request uses them by name, ``"groups": {"age": "my-bands"}``:
:func:`resolve` puts the saved codes in its place before the request is checked, so that saved
groups take the path of inline ones (the rules, the differencing rule, the ledger). A
user keeps at most ``groups_per_user`` (409 beyond), in ``<state folder>/groups.json`` (read
afresh and replaced atomically under an exclusive ``flock`` at every change, as
:mod:`protab.serve.saved`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from protab.errors import show_values
from protab.serve.groups import check_group_set, classification_of
from protab.serve.query import DatasetRights, QueryForbidden, QueryRefused
from protab.serve.saved import SavedFull, SavedUnknown, UserStore, check_name
from protab.serve.table_request import dataset_of

KEYS = ("dataset", "dim", "name", "groups")
SHAPE = '{"dataset": ..., "dim": ..., "name": ..., "groups": {group name: [codes]}}'


def check_saved(body: Any, datasets: Mapping[str, Any], rights: Mapping[str, DatasetRights]
                ) -> tuple[str, str, str, dict[str, list[str]]]:
    """The body of ``POST /v1/groups`` for a user with ``rights``: (dataset, dim, name, groups)."""
    if not isinstance(body, dict):
        raise QueryRefused(f"the body must be a JSON object {SHAPE}")
    for key in body:
        if key not in KEYS:
            raise QueryRefused(f"unknown key {str(key)[:60]!r}: the body is {SHAPE}")
    for key in KEYS:
        if key not in body:
            raise QueryRefused(f"the key {key!r} is missing: the body is {SHAPE}")
    name, dim = body["dataset"], body["dim"]
    ds = dataset_of(name, datasets, rights, "dataset: ")
    if not isinstance(dim, str) or dim not in ds.conf.dims:
        ok = sorted(rights[name].dims & set(ds.conf.dims))
        raise QueryRefused(f"dim: unknown dimension {str(dim)[:60]!r} of dataset {name!r}; you may use: "
                           f"{show_values(ok, 20) if ok else 'none'}")
    check_name(body["name"], "a saved group's")
    cls = classification_of(ds.conf, dim)
    groups = check_group_set(body["groups"], dim, ds.codes[dim], "groups", cls.reserved, cls.variable)
    if dim not in rights[name].dims:  # said after every 400, as for table requests
        raise QueryForbidden(f"you may not use {dim!r} of dataset {name!r}")
    return name, dim, body["name"], groups


def _unknown(dataset: str, dim: str, name: str) -> str:
    return (f"you have no saved groups named {str(name)[:64]!r} of {str(dim)[:60]!r} in dataset "
            f"{str(dataset)[:60]!r}; GET /v1/groups lists yours")


class SavedGroups(UserStore):
    """The saved custom groups of every user, in ``folder/groups.json``: user → dataset → dimension
    → name → ``{"groups": ..., "saved": time}``."""

    file = "groups.json"
    what = "saved groups"

    def save(self, user: str, dataset: str, dim: str, name: str, groups: dict[str, list[str]]) -> dict[str, Any]:
        """Keep ``groups`` (checked: :func:`check_saved`) as ``user``'s ``name`` of ``dim``
        (replacing one of that name)."""
        with self._locked():
            mine = self._users.setdefault(user, {})
            count = sum(len(names) for dims in mine.values() for names in dims.values())
            kept = mine.setdefault(dataset, {}).setdefault(dim, {})
            if name not in kept and count >= self.per_user:
                raise SavedFull(f"you have {count} saved groups, the most the service keeps for one user; delete "
                                "some (DELETE /v1/groups/{dataset}/{dim}/{name}) before saving more")
            kept[name] = {"groups": groups, "saved": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
            self._save()
            return {"dataset": dataset, "dim": dim, "name": name, **kept[name]}

    def get(self, user: str, dataset: str, dim: str, name: str) -> dict[str, Any]:
        """``user``'s saved groups ``name`` of ``dim`` in ``dataset`` (404 when there are none)."""
        with self._locked():
            entry = self._users.get(user, {}).get(dataset, {}).get(dim, {}).get(name)
        if entry is None:
            raise SavedUnknown(_unknown(dataset, dim, name))
        return {"dataset": dataset, "dim": dim, "name": name, **entry}

    def listing(self, user: str) -> list[dict[str, Any]]:
        """``user``'s saved groups, by dataset, dimension and name."""
        with self._locked():
            mine = self._users.get(user, {})
            return [{"dataset": ds, "dim": d, "name": n, **e} for ds, dims in sorted(mine.items())
                    for d, names in sorted(dims.items()) for n, e in sorted(names.items())]

    def delete(self, user: str, dataset: str, dim: str, name: str) -> None:
        with self._locked():
            kept = self._users.get(user, {}).get(dataset, {}).get(dim, {})
            if name not in kept:
                raise SavedUnknown(_unknown(dataset, dim, name))
            del kept[name]
            self._save()


def resolve(body: Any, user: str, store: SavedGroups) -> Any:
    """A table request with its saved groups by name (``"groups": {dim: "name"}``) replaced by
    their codes; any other body as it is (the table-request check judges it). An unknown name
    (or another user's) is refused (400 naming the key)."""
    if not isinstance(body, dict) or not isinstance(body.get("groups"), dict) or len(body["groups"]) != 1:
        return body
    (dim, name), = body["groups"].items()
    if not isinstance(name, str) or not isinstance(body.get("dataset"), str):
        return body
    try:
        entry = store.get(user, body["dataset"], dim, name)
    except SavedUnknown as exc:
        raise QueryRefused(f"groups.{str(dim)[:60]}: {exc}") from None
    return {**body, "groups": {dim: entry["groups"]}}
