"""The JSON Schemas of the report (``report.schema.json``) and of expectation files
(``expectations.schema.json``), and the field reference page generated from them
(``docs/report-format.md``: ``python -m reports.schema`` writes it)."""
from __future__ import annotations

from triton_cts import CHECKOUT
from triton_cts.results.json_schema import fields, load_schema, resolve
from triton_cts.results.report_io import READABLE_VERSIONS, SCHEMA_VERSION

PAGE = CHECKOUT / "docs" / "report-format.md"

RULES = f"""\
## Versions

`schema_version` is {SCHEMA_VERSION}. Any added, removed or retyped field bumps it (a test
fingerprints the schema's fields per version). Readers (`python -m reports`) accept the
versions they know, {", ".join(map(str, READABLE_VERSIONS))}, bringing an older one to this
form as it loads, and refuse any other with an error naming the file and the versions they
read. Version 1 held non-finite numbers as text (`"inf"`) and an error's bound as text
(`"rtol=0.01 atol=1e-05"`); version 2 added `message`, `traceback`, `expectations.known`, the
expectation's `finding`, `repro` and `known`, and holds numbers as numbers; version 3 added
the record's `device` (index and name of the accelerator a device-mode check ran on) and the
environment's `devices` (the run's accelerators); version 4 added the record's `inputs`
(the value classes, layouts and boundary row lengths its cases met, and those it offers)
and `input_coverage` (those per op, dtype, profile and mode, with the gaps). A version 2
report reads as one whose records say no device, a version 3 report as one whose records
say no inputs (its coverage table is made from its records: empty).

A number that is not finite (inf, -inf, NaN: JSON has none) is `null`, with a
`<field>_nonfinite` field beside it saying which (`"inf"`, `"-inf"`, `"nan"`).
"""


def _type(schema: dict, root: dict) -> str:
    schema = resolve(schema, root)
    kinds = schema.get("type", "any")
    text = " or ".join(kinds) if isinstance(kinds, list) else kinds
    if "enum" in schema:
        text += ": " + ", ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        text += f": `{schema['const']}`"
    return text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _sections(schema: dict, title: str) -> list[str]:
    """One table per object of ``schema``: its fields, their types and meanings."""
    objects = [("", schema)] + [(p, resolve(s, schema)) for p, s in fields(schema)]
    out = []
    for path, sub in objects:
        node = resolve(sub.get("items"), schema) if isinstance(sub.get("items"), dict) else sub
        path = path + "[]" if node is not sub else path
        props = node.get("properties")
        if not props:
            continue
        required = set(node.get("required") or ())
        out += [f"### {title}{(' ' + '`' + path + '`') if path else ''}", "",
                _cell(node.get("description") or sub.get("description") or ""), "",
                "| field | type | required | meaning |", "|---|---|---|---|"]
        out += [f"| `{name}` | {_cell(_type(s, schema))} | {'yes' if name in required else ''} "
                f"| {_cell(resolve(s, schema).get('description') or s.get('description', ''))} |"
                for name, s in props.items()]
        more = node.get("additionalProperties", True)
        if more is not False:
            out.append("| (other names) | any | | free-form: further fields may appear |")
        out.append("")
    return out


def render() -> str:
    report, expectations = load_schema("report"), load_schema("expectations")
    lines = ["# Report format", "",
             "<!-- Generated from reports/schema/*.schema.json by `python -m reports.schema`;"
             " do not edit: tests/test_report_schema.py checks it is current. -->", "",
             report["description"], "",
             "Schemas (JSON Schema, draft 2020-12): `reports/schema/report.schema.json` and "
             "`reports/schema/expectations.schema.json`; "
             "`triton_cts.results.json_schema.validate` checks a document against one.", "",
             RULES, "## The report", ""]
    lines += _sections(report, "report")
    lines += ["## Expectation files", "", expectations["description"], ""]
    lines += _sections(expectations, "expectation file")
    return "\n".join(lines).rstrip("\n") + "\n"
