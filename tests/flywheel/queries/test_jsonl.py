import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from flywheel.models import App, FunctionNode, Query
from flywheel.queries.jsonl import QueryImportError, export_queries, import_queries

pytestmark = pytest.mark.django_db


def record(key="q1", **overrides):
    base = {
        "key": key, "text": "Check the WLAN MAC address",
        "apps": ["com.android.settings"],
        "functions": ["com.android.settings:wlan/advanced/mac_address"],
        "tier": "L1", "subclass": "plain_narration", "persona": "novice",
        "capabilities": ["cross_page_state_tracking"], "labels": {"scenario": "system"}, "risk": "low",
        "prerequisites": ["wifi on"], "requirements": {"apps": ["com.android.settings"]},
        "source": "synthesized", "tags": ["settings"],
        "known_path": {"mode": "tap", "summary": "Settings → WLAN → Advanced → MAC address",
                       "steps": [{"action": "click", "target": {"text": "WLAN"}}]},
        "reset": {"force_stop": ["com.android.settings"], "clear": [], "home": True},
        "verification": {"terminal": [{"check": "foreground", "package": "com.android.settings"}],
                         "milestones": [{"name": "WLAN", "text": "WLAN"}], "veto": []},
    }
    base.update(overrides)
    return base


def jsonl(*records):
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n"


def test_export_gives_back_what_was_imported():
    records = [record("a"), record("b", apps=["com.sim.shop", "com.sim.chat"], tier="L3",
                                   subclass="incomplete_instruction", text="比较价格，然后发给小王", known_path=None, functions=[])]
    assert import_queries(jsonl(*records)) == {"created": 2, "updated": 0, "total": 2}
    exported = [json.loads(line) for line in export_queries(Query.objects.all())]
    assert exported == records
    node = FunctionNode.objects.get(path="wlan/advanced/mac_address")
    assert node.is_leaf and node.parent.path == "wlan/advanced" and not node.parent.is_leaf


def test_reimport_updates_by_key():
    import_queries(jsonl(record("a")))
    result = import_queries(jsonl(record("a", text="changed")))
    assert result == {"created": 0, "updated": 1, "total": 1}
    assert Query.objects.get(key="a").text == "changed"


def test_malformed_line_reports_line_and_field_and_imports_nothing():
    text = jsonl(record("good")) + '{"key": "bad", "text": "x", "apps": ["a"], "tier": "L9", "verification": {}}\n'
    text += "not json\n"
    with pytest.raises(QueryImportError) as error:
        import_queries(text)
    problems = [(p.line, p.field) for p in error.value.problems]
    assert (2, "tier") in problems
    assert (3, "(json)") in problems
    assert Query.objects.count() == 0 and App.objects.count() == 0


def test_missing_and_mistyped_fields_are_named():
    bad = record("x")
    del bad["verification"]
    bad["apps"] = "com.android.settings"
    with pytest.raises(QueryImportError) as error:
        import_queries(jsonl(bad))
    assert {(p.line, p.field) for p in error.value.problems} == {(1, "verification"), (1, "apps")}


def test_duplicate_keys_in_one_file_are_refused():
    with pytest.raises(QueryImportError) as error:
        import_queries(jsonl(record("same"), record("same")))
    assert error.value.problems[0].line == 2 and "duplicate" in error.value.problems[0].message


def test_management_command(tmp_path, capsys):
    good = tmp_path / "good.jsonl"
    good.write_text(jsonl(record("a"), record("b")))
    call_command("import_queries", str(good))
    assert Query.objects.count() == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(jsonl(record("c")) + jsonl(record("d", tier="X")))
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_queries", str(bad))
    assert "bad.jsonl:line 2: tier" in capsys.readouterr().err
    assert not Query.objects.filter(key="c").exists()
    out = tmp_path / "out.jsonl"
    call_command("export_queries", str(out))
    assert [json.loads(line)["key"] for line in out.read_text().splitlines()] == ["a", "b"]


def test_api_import_and_export(client_as):
    client = client_as("manager")
    response = client.post("/api/queries/import/", {"text": jsonl(record("a"))})
    assert response.status_code == 200 and response.json()["created"] == 1
    response = client.post("/api/queries/import/", {"text": jsonl(record("b", tier="nope"))})
    assert response.status_code == 400
    assert response.json()["problems"][0] == {"line": 1, "field": "tier",
                                              "message": "must be one of ['L1', 'L2', 'L3']"}
    exported = b"".join(client.get("/api/queries/export/").streaming_content).decode()
    assert json.loads(exported) == record("a")


def test_import_page(client_as):
    client = client_as("manager")
    page = client.post("/queries/import/", {"text": jsonl(record("a")) + "{oops\n"})
    assert page.status_code == 200 and b"line 2: (json)" in page.content
    assert Query.objects.count() == 0
    page = client.post("/queries/import/", {"text": jsonl(record("a"))}, follow=True)
    assert b"Imported 1 queries" in page.content and b"<code>a</code>" in page.content
    assert Query.objects.filter(key="a").exists()
    export = client.get("/queries/export.jsonl")
    assert json.loads(b"".join(export.streaming_content)) == record("a")


def problems_of(text):
    with pytest.raises(QueryImportError) as error:
        import_queries(text)
    return {(p.line, p.field): p.message for p in error.value.problems}


def test_verification_checks_are_validated_field_by_field_against_the_published_schema():
    def checks(*terminal):
        return record("q", verification={"terminal": list(terminal), "milestones": [], "veto": []})

    problems = problems_of(jsonl(
        checks({"check": "shell", "cmd": "getprop persist.sys.locale"}),
        checks({"check": "settings", "namespace": "global; reboot", "key": "wifi_on"}),
        checks({"check": "settings", "key": "wifi_on && reboot"}),
        checks({"check": "content", "uri": "content://com.sim.notes/notes`reboot`"}),
        checks({"check": "getprop", "key": "persist.sys.locale", "cmd": "reboot"}),
        checks({"check": "file", "path": "relative/x.txt"}),
        checks({"check": "content", "uri": "content://a.b/c", "matches": "([unclosed"}),
        record("q", verification={"milestones": [{"name": "nothing named"}], "veto": [{"reason": "?"}]}),
    ))
    assert problems[(1, "verification.terminal[0].check")].startswith("must be one of ['settings', 'getprop'")
    assert problems[(2, "verification.terminal[0].namespace")] == "must be one of ['system', 'secure', 'global']"
    assert problems[(3, "verification.terminal[0].key")].startswith("must be a settings key")
    assert problems[(4, "verification.terminal[0].uri")].startswith("must be a content:// URI")
    assert problems[(5, "verification.terminal[0].cmd")] == "unknown field"
    assert problems[(6, "verification.terminal[0].path")].startswith("must be an absolute path")
    assert problems[(7, "verification.terminal[0].matches")] == "is not a valid regex"
    assert problems[(8, "verification.milestones[0]")].startswith("must name what is on screen")
    assert problems[(8, "verification.veto[0]")].startswith("must name the element")
    assert Query.objects.count() == 0


def test_the_schema_is_published_and_linked_from_the_format_doc():
    from jsonschema import Draft202012Validator

    from flywheel.queries.query_format import SCHEMA_PATH, query_schema

    Draft202012Validator.check_schema(query_schema())
    assert "query-format.schema.json" in (SCHEMA_PATH.parent / "query-format.md").read_text()
    assert not Draft202012Validator(query_schema()).is_valid(record("x", tier="L4"))
    assert Draft202012Validator(query_schema()).is_valid(record("x"))


def test_a_large_import_writes_in_a_few_bulk_statements():
    """Validation happens before any transaction; the writes do not grow with the file."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    many = [record(f"q{i}", functions=[f"com.android.settings:area{i % 7}/page{i}/leaf"],
                   apps=["com.android.settings", f"com.example.app{i % 5}"]) for i in range(300)]
    with CaptureQueriesContext(connection) as first:
        assert import_queries(jsonl(*many)) == {"created": 300, "updated": 0, "total": 300}
    with CaptureQueriesContext(connection) as again:
        assert import_queries(jsonl(*many)) == {"created": 0, "updated": 300, "total": 300}
    assert len(first) < 40 and len(again) < 40, (len(first), len(again))
    query = Query.objects.get(key="q8")
    assert query.app_packages == ["com.android.settings", "com.example.app3"]
    leaf = FunctionNode.objects.get(path="area1/page8/leaf")
    assert leaf.is_leaf and leaf.parent.path == "area1/page8" and leaf.parent.parent.path == "area1"
    assert [link.function for link in query.function_links.all()] == [leaf]


def test_oversized_imports_are_refused_with_a_clear_error(client_as, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.QUERY_IMPORT_MAX_BYTES = 2000
    big = jsonl(*[record(f"q{i}") for i in range(5)])
    assert len(big.encode()) > 2000
    client = client_as("manager")
    page = client.post("/queries/import/", {"file": SimpleUploadedFile("q.jsonl", big.encode())})
    assert b"larger than the 2,000-byte limit" in page.content
    page = client.post("/queries/import/", {"text": big})
    assert b"larger than the 2,000-byte limit" in page.content
    response = client.post("/api/queries/import/", {"file": SimpleUploadedFile("q.jsonl", big.encode())})
    assert response.status_code == 413
    assert "2,000-byte limit" in response.json()["problems"][0]["message"]
    response = client.post("/api/queries/import/", big, content_type="application/x-ndjson")
    assert response.status_code == 413
    assert Query.objects.count() == 0
    response = client.post("/api/queries/import/", jsonl(record("small")), content_type="application/x-ndjson")
    assert response.status_code == 200 and response.json()["created"] == 1
