"""protab reaches Spark only through pyspark's public session API (``spark.sql``, ``spark.conf``,
``spark.catalog``, ``spark.version``), never through the JVM behind a classic session
(``_jsparkSession``, ``_jvm``, ``_jsc``, ``sparkContext``): a Spark Connect session has none of
them (docs/spark.md, "Through Spark Connect"). Read as text from every module of src/protab,
comments and docstrings included, so that no path can hold one; the last test shows the pattern
catches each of them."""

from __future__ import annotations

import re
from pathlib import Path

import protab

SRC = Path(protab.__file__).parent
#: the JVM handles of a classic pyspark session and its frames
JVM = re.compile(r"\b(_jsparkSession|_jvm|_jsc|_jdf|_jconf|sparkContext|SparkContext)\b")


def _hits(text: str) -> list[tuple[int, str]]:
    return [(i, m.group(1)) for i, line in enumerate(text.splitlines(), 1) for m in JVM.finditer(line)]


def test_no_module_of_protab_uses_the_jvm_of_a_spark_session():
    found = [f"{path.relative_to(SRC.parent)}:{line}: {name}"
             for path in sorted(SRC.rglob("*.py")) for line, name in _hits(path.read_text())]
    assert not found, "JVM handles (none exist over Spark Connect): " + ", ".join(found)


def test_the_pattern_finds_each_handle():
    text = "\n".join(["spark._jsparkSession.sessionState()", "s.sparkContext.master", "sc._jvm.x", "sc._jsc.sc()",
                      "df._jdf", "spark.conf._jconf"])
    assert [name for _, name in _hits(text)] == ["_jsparkSession", "sparkContext", "_jvm", "_jsc", "_jdf", "_jconf"]
    assert _hits("spark.conf.get('spark.master'); spark.version; spark_context_free = 1") == []
