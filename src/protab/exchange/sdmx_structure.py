"""SDMX-ML 2.1 structure messages: the structure of a dataflow :mod:`protab.exchange.sdmx_csv`
writes, so that a reader can load the SDMX-CSV without a registry (docs/exchange.md).

One message per dataflow ``AGENCY:ID(VERSION)`` holds: the dataflow, its data structure
definition ``DSD_<ID>`` (one dimension per dimension column of the CSV, ``MEASURE`` among them
when a table has several values per cell; the primary measure ``OBS_VALUE``; the attributes
``OBS_STATUS`` and ``CONF_STATUS``, mandatory, attached to the observation), a code list per
dimension ``CL_<ID>_<DIM>`` with the codes the dataflow uses (``_T`` for the total), the code
lists ``CL_OBS_STATUS`` and ``CL_CONF_STATUS`` with the flags protab writes, and the concept
scheme ``CS_<ID>``. The code lists are the dataflow's own (its codes, not a whole
classification), so two dataflows never define one code list differently.

Names are international strings: a code's name is its label in each language of ``labels``
(``{dimension column: {language: {code: label}}}``, e.g. from a classification's ``labels``),
else the code itself (in English); ``_T`` is named by the labels of the root's code, else by the
root's name ("Total"). ``names`` gives a dimension's own name (``{column: {language: name}}``).

The message is built and written by the ``sdmx1`` library (import name ``sdmx``; the extra
``protab[sdmx]``), which also reads it back (``sdmx.read_sdmx``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from protab.errors import InputError, SpecError, show_values
from protab.exchange.labels import Labels, Names
from protab.exchange.observations import TOTAL, check_id, observations_and_totals, pick_columns
from protab.exchange.sdmx_csv import structure_id

MEDIA_TYPE = "application/vnd.sdmx.structure+xml;version=2.1"
#: a code of an SDMX code list (IDType of SDMX-ML 2.1: letters, digits, _ @ $ -)
CODE = re.compile(r"[A-Za-z0-9_@$\-]+")
#: the language of names protab makes up (codes without a label, the flags' code lists)
LANGUAGE = "en"
#: the flags protab writes and their names in the SDMX code lists CL_OBS_STATUS and CL_CONF_STATUS
OBS_STATUS = {"A": "Normal value", "Q": "Missing value; suppressed", "M": "Missing value; data cannot exist"}
CONF_STATUS = {"F": "Free", "C": "Confidential statistical information",
               "D": "Secondary confidentiality set by the sender, not for publication"}
_CONCEPTS = {"OBS_VALUE": "Observation value", "OBS_STATUS": "Observation status",
             "CONF_STATUS": "Confidentiality status", "MEASURE": "Measure"}



def sdmx_library() -> Any:
    """The ``sdmx`` module of sdmx1, or an InputError naming the extra to install."""
    try:
        import sdmx
        from sdmx.model import common  # noqa: F401  (the parts used below)
    except ImportError:
        raise InputError("an SDMX structure message needs the sdmx1 library: pip install 'protab[sdmx]'") from None
    return sdmx


def sdmx_structure(
    frame: Any, dataflow: str, *, agency: str = "PROTAB", version: str = "1.0",
    dims: Sequence[str] | None = None, measures: Sequence[str] | None = None, structural_zeros: Any = None,
    labels: Labels | None = None, names: Names | None = None,
    prepared: datetime | None = None,
) -> str:
    """The SDMX-ML 2.1 structure message (text) of the dataflow :func:`protab.exchange.sdmx_csv`
    writes for the same arguments; ``labels`` and ``names`` as in the module docstring."""
    from protab._frames import as_polars

    sdmx = sdmx_library()
    try:
        structure_id(dataflow, agency, version)
    except SpecError as exc:
        raise SpecError(f"table {dataflow!r}: {exc}") from None
    frame = as_polars(frame, f"table {dataflow!r}")
    dims, measures = pick_columns(frame, dims, measures, dataflow)
    obs, ids, measure_ids, totals = observations_and_totals(
        frame, dataflow, dims=dims, measures=measures, structural_zeros=structural_zeros)
    columns = dict(zip(ids, dims))
    codes = {i: obs[i].unique(maintain_order=True).to_list() for i in ids}  # a code list each: small
    for i in ids:  # written as they are (sdmx1 reads them back), but a registry validating the schema refuses them
        bad = [c for c in codes[i] if not CODE.fullmatch(c)]
        if bad:
            warnings.warn(f"table {dataflow!r}: dimension {columns[i]!r} has codes that are no SDMX code ids "
                          f"(letters, digits, '_', '@', '$', '-'): {show_values(bad)}; its structure message is "
                          "not valid SDMX-ML 2.1 for a registry that checks the schema: recode them (e.g. "
                          "'85+' as 'Y_GE85')", UserWarning, stacklevel=2)
    named = {i: _code_names(codes[i], (labels or {}).get(columns[i], {}), totals[i]) for i in ids}
    dim_names = {i: dict((names or {}).get(columns[i], {})) or {LANGUAGE: columns[i]} for i in ids}
    if len(measure_ids) > 1:
        ids = [*ids, "MEASURE"]
        named["MEASURE"] = {m: {LANGUAGE: col} for m, col in measure_ids.items()}
        dim_names["MEASURE"] = {LANGUAGE: _CONCEPTS["MEASURE"]}
    msg = _message(sdmx, dataflow, agency, version, ids, named, dim_names, prepared)
    return str(sdmx.to_xml(msg, pretty_print=True).decode("utf-8"))


def _code_names(codes: list[str], labels: Mapping[str, Mapping[str, str]], root: str) -> dict[str, dict[str, str]]:
    """Each code's names by language: its labels, the root's labels for ``_T``, else the code."""
    out = {}
    for code in codes:
        key = root if code == TOTAL else code
        by_lang = {lang: str(found[key]) for lang, found in labels.items() if key in found}
        out[code] = by_lang or {LANGUAGE: key}
    return out


def _message(sdmx: Any, dataflow: str, agency: str, version: str, ids: list[str],
             codes: dict[str, dict[str, dict[str, str]]], dim_names: dict[str, dict[str, str]],
             prepared: datetime | None) -> Any:
    """The StructureMessage: dataflow, DSD, code lists and concept scheme (objects of sdmx1)."""
    from sdmx import message
    from sdmx.model import common
    from sdmx.model import v21 as m

    owner = common.Agency(id=agency)
    own: dict[str, Any] = {"maintainer": owner, "version": version, "is_final": True, "is_external_reference": False}

    def text(names: Mapping[str, str]) -> Any:
        return common.InternationalString(dict(names))

    def code_list(cid: str, name: str, items: Mapping[str, Mapping[str, str]]) -> Any:
        cl = m.Codelist(id=check_id(cid, "SDMX code list id"), name=text({LANGUAGE: name}), **own)
        for code, code_name in items.items():
            cl.append(m.Code(id=code, name=text(code_name)))
        return cl

    lists = {i: code_list(f"CL_{dataflow}_{i}", dim_names[i].get(LANGUAGE, i), codes[i]) for i in ids}
    flags = {"OBS_STATUS": code_list("CL_OBS_STATUS", "Observation status", _named(OBS_STATUS)),
             "CONF_STATUS": code_list("CL_CONF_STATUS", "Confidentiality status", _named(CONF_STATUS))}
    scheme = m.ConceptScheme(id=f"CS_{dataflow}", name=text({LANGUAGE: f"Concepts of {dataflow}"}), **own)
    for cid, cname in [*((i, dim_names[i]) for i in ids),
                       *((c, {LANGUAGE: _CONCEPTS[c]}) for c in ("OBS_VALUE", "OBS_STATUS", "CONF_STATUS"))]:
        scheme.append(m.Concept(id=cid, name=text(cname)))
    dsd = m.DataStructureDefinition(id=f"DSD_{dataflow}", name=text({LANGUAGE: dataflow}), **own)
    dsd.dimensions.id, dsd.measures.id, dsd.attributes.id = "DimensionDescriptor", "MeasureDescriptor", "AttributeDescriptor"
    for k, i in enumerate(ids):
        dsd.dimensions.getdefault(i, concept_identity=scheme[i], order=k + 1,
                                  local_representation=common.Representation(enumerated=lists[i]))
    dsd.measures.getdefault("OBS_VALUE", concept_identity=scheme["OBS_VALUE"])
    for a, cl in flags.items():
        dsd.attributes.getdefault(a, concept_identity=scheme[a], related_to=m.PrimaryMeasureRelationship(),
                                  usage_status=common.UsageStatus.mandatory,
                                  local_representation=common.Representation(enumerated=cl))
    flow = m.DataflowDefinition(id=dataflow, name=text({LANGUAGE: dataflow}), structure=dsd, **own)
    when = (prepared or datetime.now(timezone.utc)).replace(microsecond=0)
    msg = message.StructureMessage(header=message.Header(id=f"STRUCTURE_{dataflow}", test=False, prepared=when,
                                                         sender=owner))
    for obj in [flow, *lists.values(), *flags.values(), scheme, dsd]:
        msg.add(obj)
    return msg


def _named(flags: Mapping[str, str]) -> dict[str, dict[str, str]]:
    return {code: {LANGUAGE: name} for code, name in flags.items()}


def sdmx_structure_writer(frame: Any, dataflow: str, **kw: Any) -> Callable[[Path], None]:
    """A writer for ``protab._io.write_batch``: the message is made first (errors before any file)."""
    from protab._io import text_writer

    return text_writer(sdmx_structure(frame, dataflow, **kw))


def write_sdmx_structure(frame: Any, path: str | Path, dataflow: str, **kw: Any) -> Path:
    """Write :func:`sdmx_structure` to ``path`` atomically (a temporary file renamed when complete)."""
    from protab._io import write_text

    return write_text(path, sdmx_structure(frame, dataflow, **kw))
