"""The one Spark session the tests share: pyspark with Delta Spark, the reference implementation
of Delta Lake, as writer and judge of bf's tables, and Spark SQL's answers to the Spark corpus.

Usage: session.py   (started by the tests, tests/common/spark.rs; never by hand)
Reads one JSON request per line on stdin and answers each with one line on stdout,
`BF-SPARK {"id": ..., "answers": ...}` (Spark's own output never starts so):
- `{"id": n, "sql": [statement, ...]}`: each statement run in order; for each, {"columns": [name,
  ...], "rows": [[cell, ...], ...]} or {"error": "..."} (a cell as `run_spark.cell` writes it);
- `{"id": n, "corpus": {"cases": [...], "out": DIR, "formats": [...]}}`: `run_spark.corpus_answers`;
- `{"id": n, "create": {"location": DIR, "columns": [{"name", "type", "always": SQL or "identity",
  "by_default": "identity"}], "partitioned_by": [...], "cluster_by": [...], "properties": {...}}}`:
  a Delta table made by Delta Spark's `DeltaTableBuilder` (Delta 4.0's SQL cannot declare generated
  or identity columns: delta-io/delta#1100), answered with [] or [{"error": "..."}].
The session starts once (~15 s, and Delta Spark's jars from Maven Central through Spark's own Ivy
into `~/.ivy2.5.2` on a new machine); it ends, and its JVM with it, when stdin closes: when the
test process that started it exits, however it exits.
"""

import json
import os
import sys

from pyspark.sql import SparkSession

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_spark import cell, corpus_answers  # noqa: E402

DELTA_SPARK = "io.delta:delta-spark_2.13:4.0.1"


def session():
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("bf-tests")
        .config("spark.jars.packages", DELTA_SPARK)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.ansi.enabled", "true")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def statements(spark, sql):
    """Each statement's rows, or its error: a failure is an answer, the next statement still runs."""
    answers = []
    for statement in sql:
        try:
            frame = spark.sql(statement)
            rows = frame.collect()
            answers.append({"columns": frame.columns, "rows": [[cell(v) for v in row] for row in rows]})
        except Exception as error:
            lines = [line for line in str(error).splitlines() if line.strip()]
            answers.append({"error": " ".join(lines[:3])[:500] or type(error).__name__})
    return answers


def create(spark, spec):
    from delta.tables import DeltaTable, IdentityGenerator

    builder = DeltaTable.create(spark).location(spec["location"])
    for column in spec["columns"]:
        always = column.get("always")
        builder = builder.addColumn(
            column["name"],
            column["type"],
            generatedAlwaysAs=IdentityGenerator() if always == "identity" else always,
            generatedByDefaultAs=IdentityGenerator() if column.get("by_default") == "identity" else None,
        )
    if spec.get("partitioned_by"):
        builder = builder.partitionedBy(*spec["partitioned_by"])
    if spec.get("cluster_by"):
        builder = builder.clusterBy(*spec["cluster_by"])
    for key, value in spec.get("properties", {}).items():
        builder = builder.property(key, value)
    builder.execute()
    return []


def main():
    spark = session()
    for line in sys.stdin:
        request = json.loads(line)
        if "corpus" in request:
            corpus = request["corpus"]
            answers = corpus_answers(spark, corpus["cases"], corpus["out"], corpus["formats"])
        elif "create" in request:
            try:
                answers = create(spark, request["create"])
            except Exception as error:
                answers = [{"error": " ".join(str(error).splitlines()[:3])[:500]}]
        else:
            answers = statements(spark, request["sql"])
        print("BF-SPARK " + json.dumps({"id": request["id"], "answers": answers}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
