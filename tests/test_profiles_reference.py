"""The profile reference page is generated from the field declarations and kept current."""
from triton_cts.profiles import reference, tuning
from triton_cts.profiles.fields import Field
from triton_cts.profiles.schema import SCHEMA


def test_the_profile_page_is_generated_from_the_declarations():
    assert reference.PAGE.read_text() == reference.render(), (
        "docs/profiles.md is stale: run python -m triton_cts.profiles.reference")


def test_every_declared_field_is_on_the_page_with_its_default():
    page = reference.render()
    for section, fields in SCHEMA.items():
        for key, spec in (fields.items() if isinstance(fields, dict) else [(None, fields)]):
            path = f"{section}.{key}" if key else section
            assert f"| `{path}` |" in page
    for family, fields in tuning.families().items():
        for key, spec in fields.items():
            assert isinstance(spec, Field) and not spec.required
            assert f"| `tuning.{family}.{key}` |" in page
            row = next(line for line in page.splitlines()
                       if line.startswith(f"| `tuning.{family}.{key}` |"))
            assert spec.describe_default() in row
