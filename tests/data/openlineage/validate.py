"""Validates OpenLineage events against the vendored official schemas, offline.

usage: validate.py EVENTS.jsonl SCHEMA_DIR_OR_FILE...

Every event must be a RunEvent of the core schema, and every facet in it (run, job, dataset,
input and output facets) must validate against the schema its `_schemaURL` names, which must be
one of the given schemas: a facet whose schema is not vendored is an error, not a pass. Formats
(uuid, date-time, uri) are checked. Prints one line per problem and exits 1 if there is any.
"""

import json
import pathlib
import sys

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


def load(paths):
    resources = []
    for given in paths:
        path = pathlib.Path(given)
        files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
        for file in files:
            schema = json.loads(file.read_text())
            if "$id" in schema:
                resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


def facets(event):
    """(where, facet) for every facet of the event."""
    for key, facet in event.get("run", {}).get("facets", {}).items():
        yield f"run.facets.{key}", facet
    for key, facet in event.get("job", {}).get("facets", {}).items():
        yield f"job.facets.{key}", facet
    for role in ("inputs", "outputs"):
        for i, dataset in enumerate(event.get(role, [])):
            for group in ("facets", "inputFacets", "outputFacets"):
                for key, facet in dataset.get(group, {}).items():
                    yield f"{role}[{i}].{group}.{key}", facet


def main():
    events_file, schemas = sys.argv[1], sys.argv[2:]
    registry = load(schemas)
    checker = FormatChecker()
    problems = []

    def check(instance, ref, where):
        validator = Draft202012Validator({"$ref": ref}, registry=registry, format_checker=checker)
        for error in validator.iter_errors(instance):
            path = "/".join(str(p) for p in error.absolute_path)
            problems.append(f"{where} {path}: {error.message}")

    lines = [l for l in pathlib.Path(events_file).read_text().splitlines() if l.strip()]
    for n, line in enumerate(lines, 1):
        event = json.loads(line)
        where = f"event {n} ({event.get('eventType')} {event.get('job', {}).get('name')})"
        check(event, f"{CORE}#/$defs/RunEvent", where)
        for place, facet in facets(event):
            url = facet.get("_schemaURL", "") if isinstance(facet, dict) else ""
            document = url.split("#")[0]
            try:
                registry.get_or_retrieve(document)
            except Exception:
                problems.append(f"{where} {place}: its schema {url!r} is not vendored")
                continue
            check(facet, url, f"{where} {place}")
    for problem in problems:
        print(problem)
    print(f"{len(lines)} events, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
