"""What the Spark engine needs around Spark itself: pyspark and a Java runtime (clear errors
when missing), the Spark twins of protab's macros (sql/spark/protab.sql), and Arrow and type
names as Spark and DuckDB spell them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa

from protab.errors import InputError, ProtabError

#: Spark SQL of protab's macros (record key, row class): sql/spark/protab.sql in the source tree
SPARK_SQL = Path(__file__).resolve().parents[1] / "sql" / "spark" / "protab.sql"


def spark_sql_text() -> str:
    """The statements of sql/spark/protab.sql (shipped in the wheel or read from the source tree)."""
    for path in (SPARK_SQL, Path(__file__).resolve().parents[3] / "sql" / "spark" / "protab.sql"):
        if path.exists():
            return path.read_text()
    raise FileNotFoundError("sql/spark/protab.sql is missing from the protab installation")


def require_spark() -> Any:
    """Import pyspark, or an InputError that names what to install (pyspark and a Java runtime)."""
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputError(
            "the Spark engine needs pyspark 4 or later: pip install 'pyspark>=4.0' (or protab[dev]), "
            "and a Java runtime 17 or later"
        ) from None
    return SparkSession


def require_java() -> None:
    """InputError when no Java runtime is on PATH (nor under JAVA_HOME): Spark cannot start."""
    import os

    home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (home and (Path(home) / "bin" / "java").exists()):
        raise InputError(
            "the Spark engine needs a Java runtime (17 or later) and none was found on PATH or in "
            "JAVA_HOME; install one (e.g. apt-get install openjdk-17-jre-headless, or `make java`)"
        )


#: How long a Spark Connect server has to answer before ``--spark-remote`` gives up (seconds)
CONNECT_TIMEOUT = 5.0


def remote_session(url: str, what: str = "--spark-remote", timeout: float = CONNECT_TIMEOUT,
                   conf: dict[str, str] | None = None) -> Any:
    """A Spark Connect session of the server at ``url`` (``sc://host:port``), once its gRPC
    channel is ready: a server that does not answer within ``timeout`` seconds is an InputError
    naming ``what`` and the URL (pyspark's client would retry for minutes, then raise a gRPC error).
    ``conf`` (Spark settings) is set on the server's session one by one, not through the builder
    (which sets them silently: a refused one would be dropped without a word); a refusal (a static
    or core setting, a wrong value) is an InputError naming its key (:func:`spark_refusal`)."""
    require_spark()
    import importlib.util

    # looked for first: pyspark.sql.connect ends a script without them (its doctest guard)
    missing = [m for m in ("grpc", "grpc_status", "google.rpc", "zstandard") if not _found(importlib.util, m)]
    if missing:
        raise InputError(f"{what}: Spark Connect needs its client libraries (missing: {', '.join(missing)}): "
                         "pip install 'protab[spark-connect]' (grpcio, grpcio-status, googleapis-common-protos, "
                         "zstandard)")
    import grpc
    from pyspark.sql.connect.client import DefaultChannelBuilder

    try:
        channel = DefaultChannelBuilder(url).toChannel()
    except Exception as exc:  # pyspark's PySparkValueError: not sc://host:port
        raise InputError(f"{what}: {url!r} is not a Spark Connect URL (sc://host:port): "
                         f"{str(exc).splitlines()[0]}") from None
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        raise InputError(
            f"{what}: no Spark Connect server answers at {url!r} (waited {timeout:g} s); check that the server "
            "runs (sbin/start-connect-server.sh of Spark) and listens on that host and port "
            "(spark.connect.grpc.binding.address and .port, default 15002), and that no firewall is in the way"
        ) from None
    finally:
        channel.close()
    # the Connect client's own builder: pyspark's SparkSession.builder refuses a remote session
    # while a classic one runs in the process (SESSION_ALREADY_EXIST); the two do not share state
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(url).getOrCreate()
    for key, value in (conf or {}).items():
        try:
            session.conf.set(key, value)
        except Exception as exc:  # pyspark's AnalysisException, IllegalArgumentException, ...
            refusal = spark_refusal(exc, {key: value}, what)
            if refusal is None:
                raise
            if "CANNOT_MODIFY" in str(refusal):  # static and core settings are fixed when the server starts
                refusal = InputError(f"{refusal} (set it where the server starts: start-connect-server.sh "
                                     "--conf KEY=VALUE)")
            raise refusal from None
    return session


def spark_refusal(exc: BaseException, conf: dict[str, str], what: str) -> InputError | None:
    """Spark's refusal of one of the settings ``conf`` as an InputError naming its key and
    Spark's first line, every value of ``conf`` in it replaced by ``<value>`` (a setting may
    hold a secret: a token, a password; a value shorter than 6 characters only where it stands
    alone, so that "3" leaves SQLSTATE 46110 as it is); None when the line names none of the keys."""
    line = next((s.strip() for s in str(exc).splitlines() if s.strip()), type(exc).__name__)
    key = next((k for k in conf if f'"{k}"' in line or f"'{k}'" in line or k in line.split()), None)
    if key is None:
        return None
    for value in sorted({v for v in conf.values() if v}, key=len, reverse=True):
        alone = len(value) < 6
        line = re.sub(rf"(?<![\w.-]){re.escape(value)}(?![\w.-])" if alone else re.escape(value), "<value>", line)
    return InputError(f"{what}: Spark refused the setting {key}: {line}")


def _found(util: Any, module: str) -> bool:
    try:
        return util.find_spec(module) is not None
    except ImportError:  # its parent package is missing
        return False


#: HotSpot's HugeMethodLimit: it leaves longer methods (bytes of bytecode) to the interpreter
HUGE_METHOD_LIMIT = 8000


def local_defaults(spark: Any) -> dict[str, str]:
    """Settings for a local master (``local``, ``local[N]``, ``local[*]``), each set only when the
    user set no value of it: shuffle partitions = the cores Spark runs tasks on (Spark's
    default of 200 is meant for clusters; on a laptop every shuffle then runs 200 tiny tasks),
    adaptive query execution on (it coalesces small partitions) and whole-stage code
    generation given up for a part of a plan whose generated Java method would exceed 8,000
    bytes of bytecode (``spark.sql.codegen.hugeMethodLimit``, the value Spark's configuration
    guide suggests on HotSpot: HotSpot does not compile larger methods, so they run
    interpreted; the magnitude cell key method's chain of lookups made such methods,
    docs/spark.md). Returns what was set; a cluster master is left as it is (but
    :func:`recommended_settings`, which ``protab protect`` applies). Read through
    ``spark.conf`` and SQL only, so that a Spark Connect session is served alike."""
    return recommended_settings(spark) if local_master(spark) else {}


#: protab's settings for every master, safe on a cluster too (:func:`recommended_settings`)
_CLUSTER_SETTINGS = (("spark.sql.adaptive.enabled", "true"), ("spark.sql.codegen.hugeMethodLimit", str(HUGE_METHOD_LIMIT)))


def recommended_settings(spark: Any) -> dict[str, str]:
    """protab's settings of any master, each set only when unset (the user's, the builder's or
    spark-defaults.conf's value wins); returns what was set. On a local master those of
    :func:`local_defaults`. On a cluster adaptive execution and the huge-method limit only
    (executors run HotSpot as the driver does), not the shuffle partitions: the cores are not
    known when the session starts (executors register later, and come and go with dynamic
    allocation), and adaptive execution coalesces Spark's 200 to its advisory partition size
    (64 MB) by the data it sees, which no count of cores does."""
    given = spark.conf.getAll  # what the user (or spark-defaults, the builder) set
    chosen: dict[str, str] = {}
    if local_master(spark) and "spark.sql.shuffle.partitions" not in given:  # the cores counted only when needed
        chosen["spark.sql.shuffle.partitions"] = str(_task_slots(spark))
    for key, value in _CLUSTER_SETTINGS:
        if key not in given:
            chosen[key] = value
    for key, value in chosen.items():
        spark.conf.set(key, value)
    return chosen


def local_master(spark: Any) -> bool:
    """Whether the session's master (its server's, over Spark Connect) is a local one."""
    return str(spark.conf.get("spark.master", "")).startswith("local")


def _task_slots(spark: Any) -> int:
    """The partitions Spark splits a range into by default (its default parallelism: the cores
    of a local master), counted by a query: no JVM handle is needed."""
    rows = spark.sql("SELECT max(p) + 1 AS n FROM (SELECT spark_partition_id() AS p FROM range(1000))").collect()
    return max(1, int(rows[0][0] or 1))


def is_connect(spark: Any) -> bool:
    """A Spark Connect session (``pyspark.sql.connect.session.SparkSession``): a client of a
    server whose file system need not be this machine's."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def spark_arrow(data: pa.Table) -> pa.Table:
    """An Arrow table as Spark takes it: unsigned integers (which Spark has not) as the signed
    type that holds every value (uint8 → int16 … uint32 → int64, uint64 → decimal(20, 0))."""
    wider = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.decimal128(20, 0)}
    fields = [pa.field(f.name, wider.get(f.type, f.type), f.nullable) for f in data.schema]
    if all(f.type == g.type for f, g in zip(fields, data.schema)):
        return data
    return data.cast(pa.schema(fields))


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


#: Spark type names → the DuckDB type names protab's checks read (numeric, integer, float)
_SPARK_TYPES = {
    "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER", "bigint": "BIGINT",
    "float": "FLOAT", "double": "DOUBLE", "string": "VARCHAR", "boolean": "BOOLEAN",
    "date": "DATE", "timestamp": "TIMESTAMP WITH TIME ZONE", "timestamp_ntz": "TIMESTAMP", "binary": "BLOB",
}


def duckdb_type(spark_type: str) -> str:
    """The DuckDB name of a Spark column type (``decimal(p,s)`` → ``DECIMAL(p,s)``)."""
    t = spark_type.lower()
    if t.startswith("decimal"):
        return t.upper()
    if t.startswith(("varchar", "char")):
        return "VARCHAR"
    return _SPARK_TYPES.get(t, t.upper())


def spark_name(name: str) -> str:
    """A table name as Spark's catalog functions parse it: one quoted part (spaces, dots allowed)."""
    return "`" + name.replace("`", "``") + "`"


#: How the Spark engine keeps its temporary relations (:func:`checkpoint_mode`, docs/spark.md
#: "Temporary relations and executor loss")
CHECKPOINT_MODES = ("local", "replicated", "reliable")
#: The Spark setting whose folder a reliable checkpoint writes to
CHECKPOINT_DIR = "spark.checkpoint.dir"


def checkpoint_mode(spark: Any, checkpoint: str | None) -> str:
    """The checkpoint mode asked (one of :data:`CHECKPOINT_MODES`) or, for None, the default:
    "reliable" when ``spark.checkpoint.dir`` is set, else "local" on a local master and
    "replicated" on a cluster's. "reliable" without that setting is an InputError naming it.
    Read through ``spark.conf`` only (served alike over Spark Connect)."""
    if checkpoint is not None and checkpoint not in CHECKPOINT_MODES:
        raise InputError(f"Session.spark: checkpoint must be one of {', '.join(map(repr, CHECKPOINT_MODES))} "
                         f"(or None for the default), not {checkpoint!r}")
    folder = spark.conf.get(CHECKPOINT_DIR, None)
    if checkpoint == "reliable" and not folder:
        raise InputError(
            f"Session.spark: checkpoint='reliable' writes protab's temporary relations under the folder of the "
            f"Spark setting {CHECKPOINT_DIR}, which this SparkSession has not set; set it when the session is "
            f"built (SparkSession.builder.config({CHECKPOINT_DIR!r}, 'hdfs:///tmp/protab-checkpoints'), a "
            "folder every executor reaches) or choose checkpoint='replicated'"
        )
    if checkpoint is not None:
        return checkpoint
    if folder:
        return "reliable"
    return "local" if local_master(spark) else "replicated"


#: Where each checkpoint mode keeps a relation's rows (for the error of a lost one)
_KEPT = {"local": "in the memory of the executor that computed them", "replicated": "in two copies, on two executors",
         "reliable": f"as files under {CHECKPOINT_DIR}"}
#: What Spark says when a block of a local checkpoint is gone (its executor was lost)
_LOST_BLOCK = ("CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND", "Checkpoint block rdd_")


def lost_checkpoint(exc: BaseException, mode: str) -> ProtabError | None:
    """The protab error for a Spark error saying that a block of a checkpoint is gone (the
    executor holding it was lost), None for any other error. Spark's own message is not
    repeated (it may show the plan, and so bound values)."""
    text = str(exc)
    if not any(marker in text for marker in _LOST_BLOCK):
        return None
    return ProtabError(
        f"the Spark engine lost an executor that held protab's temporary relations (checkpoint={mode!r}: "
        f"kept {_KEPT.get(mode, mode)}), so the request cannot finish; run it again, and on a cluster set "
        f"{CHECKPOINT_DIR} to a folder every executor reaches (the default is then checkpoint='reliable', files "
        "that outlive an executor) or pass Session.spark(spark, checkpoint='replicated') (two copies "
        "on two executors) or checkpoint='reliable'"
    )
