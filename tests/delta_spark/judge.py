"""Delta Spark, the reference implementation of Delta Lake, as the judge of tables bf wrote.

Usage: judge.py STATEMENTS.json
Runs each Spark SQL statement of the JSON list in order, in one local session with Delta Spark's
jars (io.delta:delta-spark_2.13 from Maven Central, through Spark's own Ivy), the session time zone
UTC, and prints one JSON list: for each statement {"rows": [[cell, ...], ...]} or {"error": "..."}.
A cell is a string, as the Spark corpus's `run_spark.cell` writes it.
"""

import json
import os
import sys

from pyspark.sql import SparkSession

# One cell as the Spark corpus writes it: its `cell`, shared.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "spark"))
from run_spark import cell  # noqa: E402

DELTA_SPARK = "io.delta:delta-spark_2.13:4.0.1"


def main():
    statements = json.load(open(sys.argv[1]))
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("bf-delta-spark-judge")
        .config("spark.jars.packages", DELTA_SPARK)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    answers = []
    for sql in statements:
        try:
            rows = spark.sql(sql).collect()
            answers.append({"rows": [[cell(v) for v in row] for row in rows]})
        except Exception as error:  # the statement's failure is the answer
            lines = [line for line in str(error).splitlines() if line.strip()]
            answers.append({"error": " ".join(lines[:3])[:500] or type(error).__name__})
    print(json.dumps(answers))
    spark.stop()


if __name__ == "__main__":
    main()
