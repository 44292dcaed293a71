"""Reference numbers copied from the literature for the tests (tests never read ../shared)."""

import json
from pathlib import Path

import polars as pl

DATA = Path(__file__).parent / "data"

# ESSnet Handbook on SDC, frequency tables chapter: the p-table of docs/methods.md §1 and three
# records with keys 0.9, 0.3, 0.6 in one cell: key sum 1.8, cell key 0.8, count 3 → 4.
HANDBOOK = pl.DataFrame(
    {
        "i": [0, 1, 1, 2, 2, 3, 3, 3],
        "j": [0, 0, 2, 2, 3, 2, 3, 4],
        "p": [1.0, 0.5, 0.5, 0.8, 0.2, 0.3, 0.4, 0.3],
        "v": [0, -1, 1, 0, 1, -1, 0, 1],
        "lb": [0.0, 0.0, 0.5, 0.0, 0.8, 0.0, 0.3, 0.7],
        "ub": [1.0, 0.5, 1.0, 0.8, 1.0, 0.3, 0.7, 1.0],
    }
)
HANDBOOK_RECORDS = pl.DataFrame(
    {"id": ["A", "B", "C"], "sex": ["male", "male", "male"], "record_key": [0.9, 0.3, 0.6]}
)


# ESSnet Handbook on SDC: population counts by area and sex (tests/data/rounding_handbook.json)
ROUNDING_HANDBOOK = json.loads((DATA / "rounding_handbook.json").read_text())


def handbook_inner() -> pl.DataFrame:
    """The rounding handbook's Area × Sex inner cells (Male, Female) as a frame."""
    h = ROUNDING_HANDBOOK
    rows = [
        (area, sex, n)
        for area, vals in zip(h["rows"][:3], h["original"][:3])
        for sex, n in zip(h["columns"][:2], vals[:2])
    ]
    return pl.DataFrame(rows, schema=["area", "sex", "n"], orient="row")
