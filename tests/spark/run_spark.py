"""Spark's own answers to the Spark corpus (tests/spark/corpus.toml), from pyspark on this machine's
Java, in one local session with the session time zone UTC and ANSI mode on (Spark 4's default).

Usage: run_spark.py CASES.json OUT_DIR [FORMATS] (the tests ask the shared session,
tests/spark/session.py, for `corpus_answers`; this runs it alone, by hand)
FORMATS: a comma-separated list of parquet (the default), csv and json. For each, writes the
corpus's input tables under OUT_DIR/inputs/<format>/<name>/ (one file each, typed by Spark; CSV
with a header, JSON lines, each read back with its columns said, their DDL in
OUT_DIR/inputs/<format>/<name>.schema), runs every case's SQL over them (a case's answer keyed
`<format>/<case>`, Parquet's by the case alone), and prints one JSON object: {case: {"rows": [[cell, ...]]}
or {"error": "..."}}, each cell a canonical string (see `cell`).
"""

import datetime
import decimal
import json
import sys

from pyspark.sql import SparkSession
from pyspark.sql import types as T


def cell(value):
    """One value as the Rust side writes it too: NULL, numbers as Python prints them, dates and
    timestamps in ISO form without a zone, arrays and structs bracketed."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=None).isoformat(sep="T")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, (list, tuple)) and not hasattr(value, "asDict"):
        return "[" + ", ".join(cell(v) for v in value) + "]"
    if hasattr(value, "asDict"):
        return "{" + ", ".join(cell(v) for v in value) + "}"
    return str(value)


def inputs(spark):
    ts = lambda s: datetime.datetime.fromisoformat(s)
    d = lambda s: datetime.date.fromisoformat(s)
    dec = decimal.Decimal
    sessions = spark.createDataFrame(
        [
            (1, 10, ts("2026-03-01 08:15:30.125"), d("2026-03-01"), 1999, dec("19.99"), "DE", "a,b,c", 2.5, "first visit", "01/03/2026", 1772352930),
            (2, 10, ts("2026-03-01 23:59:59"), d("2026-03-01"), 500, dec("5.00"), "FR", "b", 0.1, None, "02/03/2026", 1772409599),
            (3, 11, ts("2026-03-02 00:00:00"), d("2026-03-02"), 1234567, dec("1234567.89"), "DE", "", -1.75, "  padded  ", "15/03/2026", 1772409600),
            (4, 12, ts("2026-03-07 12:00:00"), d("2026-03-07"), 7, dec("0.07"), "US", "c,a", 100.0, "hello world", "31/12/2025", 1772884800),
            (5, 12, ts("2026-03-08 06:30:00"), d("2026-03-08"), 0, dec("0.00"), None, None, None, "mixed CASE text", "29/02/2024", 1772951400),
            (6, 13, ts("2026-03-08 06:30:00"), d("2026-03-08"), 3, dec("123456.78"), "FR", "x,y", 3.0, "o'brien", "07/03/2026", 1772951400),
        ],
        T.StructType(
            [
                T.StructField("session_id", T.LongType()),
                T.StructField("user_id", T.IntegerType()),
                T.StructField("started_at", T.TimestampType()),
                T.StructField("day", T.DateType()),
                T.StructField("revenue_cents", T.LongType()),
                T.StructField("amount", T.DecimalType(18, 2)),
                T.StructField("country", T.StringType()),
                T.StructField("tags", T.StringType()),
                T.StructField("score", T.DoubleType()),
                T.StructField("note", T.StringType()),
                T.StructField("day_text", T.StringType()),
                T.StructField("epoch", T.LongType()),
            ]
        ),
    )
    return {"sessions": sessions}


def corpus_answers(spark, cases, out, formats):
    """Every case's answer in every format of `formats` (a list), its inputs written under `out`."""
    answers = {}
    # Parquet's timestamps as microseconds (not Spark's INT96), for this run only: the session may
    # be shared with other work (tests/spark/session.py).
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    try:
        for fmt in formats:
            for name, frame in inputs(spark).items():
                write_input(spark, frame, f"{out}/inputs/{fmt}/{name}", fmt, name)
            for case in cases:
                key = case["name"] if fmt == "parquet" else f"{fmt}/{case['name']}"
                try:
                    rows = spark.sql(case["sql"]).collect()
                    answers[key] = {"rows": [[cell(v) for v in row] for row in rows]}
                except Exception as error:  # Spark's refusal or run-time error, by its first line
                    answers[key] = {"error": str(error).splitlines()[0][:300]}
    finally:
        spark.conf.unset("spark.sql.parquet.outputTimestampType")
    return answers


def write_input(spark, frame, path, fmt, name):
    """Writes one input table at `path` in `fmt` and makes it the temp view `name`, read back."""
    writer = frame.coalesce(1).write.mode("overwrite")
    if fmt == "parquet":
        writer.parquet(path)
        spark.read.parquet(path).createOrReplaceTempView(name)
        return
    # Read back with the columns said, as a plan's `schema` says them (Spark's
    # `DataFrameReader.schema`): the same types on both sides, none inferred.
    ddl = ", ".join(f"{f.name} {f.dataType.simpleString().upper()}" for f in frame.schema.fields)
    reader = spark.read.schema(ddl)
    if fmt == "csv":
        writer.option("header", True).csv(path)
        reader.option("header", True).csv(path).createOrReplaceTempView(name)
    else:
        writer.json(path)
        reader.json(path).createOrReplaceTempView(name)
    with open(f"{path}.schema", "w") as schema:
        schema.write(ddl)


def main():
    cases = json.load(open(sys.argv[1]))
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("bf-spark-corpus")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.ansi.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    formats = (sys.argv[3] if len(sys.argv) > 3 else "parquet").split(",")
    print(json.dumps(corpus_answers(spark, cases, sys.argv[2], formats)))
    spark.stop()


if __name__ == "__main__":
    main()
