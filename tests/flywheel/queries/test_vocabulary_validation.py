"""Subclass, persona and capabilities are fixed vocabularies: the published schema lists exactly the
names of flywheel/queries/vocabulary.py, and import, the REST API and the admin refuse anything else."""
import json
import re

import pytest
from django.forms import modelform_factory

from flywheel.admin import QueryAdminForm
from flywheel.models import Query
from flywheel.queries import vocabulary
from flywheel.queries.jsonl import QueryImportError, import_queries, parse_queries_jsonl
from flywheel.queries.query_format import SCHEMA_PATH, query_schema
from tests.annotation.conftest import TASKS
from tests.flywheel.queries.test_jsonl import jsonl, record

DOC = SCHEMA_PATH.parent / "query-format.md"


def test_schema_enums_are_the_vocabulary():
    properties = query_schema()["properties"]
    assert properties["subclass"]["enum"] == ["", *vocabulary.SUBCLASSES]
    assert properties["persona"]["enum"] == ["", *vocabulary.PERSONAS]
    assert properties["capabilities"]["items"]["enum"] == list(vocabulary.CAPABILITIES)
    assert properties["tier"]["enum"] == list(vocabulary.TIER_SUBCLASSES)
    assert len(vocabulary.SUBCLASSES) == 11 and len(vocabulary.PERSONAS) == 8 and len(vocabulary.CAPABILITIES) == 6


def test_the_format_document_lists_every_name():
    documented = set(re.findall(r"^\| (?:L\d \| )?`([a-z_]+)` \|", DOC.read_text(encoding="utf-8"), re.M))
    assert {*vocabulary.SUBCLASSES, *vocabulary.PERSONAS, *vocabulary.CAPABILITIES} <= documented


def test_the_farm_task_set_uses_the_vocabulary():
    records = parse_queries_jsonl(TASKS.read_text(encoding="utf-8"))
    assert records and all(r["subclass"] in vocabulary.SUBCLASS_TIER for r in records)


@pytest.mark.parametrize("changes, field, words", [
    ({"subclass": "vague_mumbling"}, "subclass", "must be one of"),
    ({"tier": "L1", "subclass": "intent_inference"}, "subclass", "belongs to L3, not L1"),
    ({"persona": "pirate"}, "persona", "must be one of"),
    ({"capabilities": ["looping", "telepathy"]}, "capabilities[1]", "must be one of"),
])
def test_import_refuses_other_names_line_by_line(db, changes, field, words):
    text = jsonl(record("good"), record("bad", **changes), record("also-good"))
    with pytest.raises(QueryImportError) as error:
        import_queries(text)
    problems = error.value.problems
    assert [(p.line, p.field) for p in problems] == [(2, field)]
    assert words in problems[0].message
    assert not Query.objects.exists()  # all or nothing


def test_import_accepts_empty_labels(db):
    import_queries(jsonl(record("q", subclass="", persona="", capabilities=[])))
    assert Query.objects.get(key="q").subclass == ""


def api_query(**changes):
    return {"key": "api-q", "text": "Turn on dark mode", "tier": "L2", "subclass": "function_statement",
            "persona": "programmer", "capabilities": ["conditional_logic"], "verification": {}, **changes}


@pytest.mark.parametrize("changes, words", [
    ({"subclass": "plain_narration"}, "belongs to L1, not L2"),
    ({"persona": "pirate"}, "unknown persona"),
    ({"capabilities": ["telepathy"]}, "unknown capability"),
    ({"capabilities": "looping"}, "must be a list"),
])
def test_api_writes_are_checked(client_as, changes, words):
    client = client_as("manager")
    response = client.post("/api/queries/", json.dumps(api_query(**changes)), content_type="application/json")
    assert response.status_code == 400 and words in response.content.decode()
    assert not Query.objects.exists()


def test_api_patch_is_checked_against_the_stored_labels(client_as):
    client = client_as("manager")
    created = client.post("/api/queries/", json.dumps(api_query()), content_type="application/json")
    assert created.status_code == 201, created.content
    url = f"/api/queries/{created.json()['id']}/"
    refused = client.patch(url, json.dumps({"tier": "L3"}), content_type="application/json")
    assert refused.status_code == 400 and "belongs to L2, not L3" in refused.content.decode()
    accepted = client.patch(url, json.dumps({"tier": "L3", "subclass": "intent_inference"}),
                            content_type="application/json")
    assert accepted.status_code == 200
    assert Query.objects.get(key="api-q").subclass == "intent_inference"


def test_admin_form_is_checked(db):
    form_class = modelform_factory(Query, form=QueryAdminForm,
                                   fields=["key", "text", "tier", "subclass", "persona", "capabilities",
                                           "risk", "source", "status", "verification"])
    data = {"key": "adm", "text": "x", "tier": "L1", "subclass": "state_constraint", "persona": "novice",
            "capabilities": '["looping"]', "risk": "low", "source": "synthesized", "status": "ready",
            "verification": '{"terminal": []}'}
    form = form_class(data)
    assert not form.is_valid() and "belongs to L2, not L1" in str(form.errors)
    fixed = form_class({**data, "subclass": "plain_narration"})
    assert fixed.is_valid(), fixed.errors
