"""Query keys hold only letters, digits and - _ . : (issue #35): import, the REST API and the admin
refuse any other key, naming it, and every key the console or the farm already uses still fits."""
import json
from pathlib import Path

import pytest
from django.conf import settings
from django.forms import modelform_factory

from flywheel.admin import QueryAdminForm
from flywheel.models import Query
from flywheel.queries.jsonl import QueryImportError, import_queries
from flywheel.rules.query_keys import QUERY_KEY_MAX_LENGTH, query_key_problem
from tests.flywheel.queries.test_jsonl import jsonl, record
from tests.flywheel.queries.test_vocabulary_validation import api_query

BAD_KEYS = ["=HYPERLINK(\"http://x\")", "-2+3", "@SUM(A1)", "a b", "a/b", "../etc", "q\tx", "ключ", ".hidden",
            "x" * (QUERY_KEY_MAX_LENGTH + 1)]


def test_the_limit_is_the_models():
    assert QUERY_KEY_MAX_LENGTH == Query._meta.get_field("key").max_length


@pytest.mark.parametrize("key", ["gen-3-14", "derived-5-1-0", "rqa-7-s2", "vbench-12", "settings.bt:on_1", "A",
                                 "x" * QUERY_KEY_MAX_LENGTH])
def test_keys_the_console_makes_are_accepted(key):
    assert query_key_problem(key) == ""


@pytest.mark.parametrize("key", BAD_KEYS)
def test_unsafe_keys_are_refused_with_the_key_named(key):
    problem = query_key_problem(key)
    assert problem and repr(key[:40])[1:-1] in problem  # named as written, a tab shown as \t


def test_every_key_of_the_farm_task_set_is_accepted():
    lines = (Path(settings.BASE_DIR) / "simfarm" / "tasks" / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    keys = [json.loads(line)["key"] for line in lines if line.strip()]
    assert keys and [k for k in keys if query_key_problem(k)] == []


@pytest.mark.django_db
def test_import_refuses_an_unsafe_key_and_imports_nothing():
    with pytest.raises(QueryImportError) as refused:
        import_queries(jsonl(record("fine-1"), record("=cmd|' /C calc'!A0")))
    problem = refused.value.problems[0]
    assert (problem.line, problem.field) == (2, "key") and "=cmd|" in problem.message
    assert not Query.objects.exists()


def test_api_refuses_an_unsafe_key(client_as):
    client = client_as("manager")
    response = client.post("/api/queries/", json.dumps(api_query(key="+1 555 evil")), content_type="application/json")
    assert response.status_code == 400 and "+1 555 evil" in response.json()["key"][0]
    assert client.post("/api/queries/", json.dumps(api_query(key="api-q.1:ok")),
                       content_type="application/json").status_code == 201


def test_admin_refuses_an_unsafe_new_key(db):
    form_class = modelform_factory(Query, form=QueryAdminForm, fields=["key", "text", "tier", "verification"])
    form = form_class(data={"key": "@risky", "text": "Turn on dark mode", "tier": "L1", "verification": "{}"})
    assert not form.is_valid() and "@risky" in form.errors["key"][0]
