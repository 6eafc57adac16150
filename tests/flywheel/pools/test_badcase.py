"""The BadCase intake channel (§2.4.3 "targeted supplementation of BadCases exposed online"): failed
real-user cases by API, page or command, validated whole (a bad case writes nothing), anonymised,
marked with their channel and sent through the RL pool's Phase-1 gate (awaiting measurement)."""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from flywheel.models import EvolutionLoop, ModelVersion, Query, RlQueryEntry
from flywheel.pools.badcase import BadCasesInvalid, import_cases, parse_cases

pytestmark = pytest.mark.django_db

CHATTER = "com.example.chatter"
GOOD = {"goal": "Send my boarding pass to Anna Smith on Chatter, her number is 13812345678",
        "apps": [CHATTER], "notes": "the agent opened the wrong chat and sent it to Bob"}
API = "/api/pools/rl/badcases/"


@pytest.fixture
def policy():
    model = ModelVersion.objects.create(name="m1", kind="endpoint", endpoint_url="http://gpu:8000/v1")
    EvolutionLoop.objects.create(name="loop", model_version=model, config={"group_size": 4})
    return model


def test_a_case_becomes_an_anonymised_badcase_query_awaiting_measurement(policy):
    result = import_cases([GOOD, {"goal": "Pay the electricity bill", "apps": "com.example.pay",
                                  "channel": "business"}])
    assert (result["created"], result["existing"], result["measuring"]) == (2, 0, 2)
    query = Query.objects.get(key=result["results"][0]["key"])
    assert query.source == "badcase" and query.tags == ["badcase"] and query.status == "ready"
    assert "13812345678" not in query.text and "[PHONE]" in query.text  # nothing personal is stored
    assert query.labels["what_went_wrong"].startswith("the agent opened the wrong chat")
    assert query.app_packages == [CHATTER] and query.tier in ("L1", "L2", "L3")
    entry = RlQueryEntry.objects.get(query=query)
    assert (entry.state, entry.channel) == ("measuring", "badcase")  # never admitted unmeasured
    business = Query.objects.get(key=result["results"][1]["key"])
    assert business.source == "business" and business.rl_entry.channel == "business"
    again = import_cases([GOOD])  # the same case twice is one query
    assert (again["created"], again["existing"]) == (0, 1) and Query.objects.count() == 2


@pytest.mark.parametrize("records, problem", [
    ([], "no cases given"),
    ([{"apps": [CHATTER]}], "goal is required"),
    ([{"goal": "Open the chat"}], "apps is required"),
    ([{"goal": "Open the chat", "apps": ["not a package"]}], "is not a package name"),
    ([{"goal": "Open the chat", "apps": [CHATTER], "user_id": "u-991"}], "unknown field 'user_id'"),
    ([{"goal": "Open the chat", "apps": [CHATTER], "channel": "phase0"}], "channel must be one of"),
    ([{"goal": "Open the chat", "apps": [CHATTER], "notes": 7}], "notes must be text"),
    ([GOOD, dict(GOOD)], "case 2: the same goal as case 1"),
    (["just a string"], "must be an object"),
])
def test_one_bad_case_writes_nothing(policy, records, problem):
    together = records if not records or problem.startswith("case 2") else [GOOD, *records]  # a good one too
    with pytest.raises(BadCasesInvalid) as error:
        import_cases(together)
    assert any(problem in p for p in error.value.problems), error.value.problems
    assert not Query.objects.exists() and not RlQueryEntry.objects.exists()


def test_csv_and_jsonl_files_read_the_same_cases():
    jsonl = parse_cases(json.dumps(GOOD) + "\n\n" + json.dumps({"goal": "Mute the group", "apps": [CHATTER]}))
    csv_text = 'goal,apps,notes\n"Mute the group",com.example.chatter;com.example.notes,\n'
    assert [r["goal"] for r in jsonl] == [GOOD["goal"], "Mute the group"]
    assert parse_cases(csv_text, "cases.csv") == [{"goal": "Mute the group",
                                                   "apps": "com.example.chatter;com.example.notes"}]
    with pytest.raises(BadCasesInvalid, match="line 1: not JSON"):
        parse_cases("{broken")


def test_the_api_is_for_managers_and_answers_400_with_nothing_written(client_as, policy):
    assert client_as("annotator").post(API, {"cases": [GOOD]}, content_type="application/json").status_code == 403
    client = client_as("manager")
    bad = client.post(API, {"cases": [GOOD, {"goal": "", "apps": []}]}, content_type="application/json")
    assert bad.status_code == 400 and any("case 2: goal is required" in p for p in bad.json()["problems"])
    assert not Query.objects.exists()
    assert client.post(API, {"cases": "nope"}, content_type="application/json").status_code == 400
    ok = client.post(API, {"cases": [GOOD]}, content_type="application/json")
    assert ok.status_code == 200 and ok.json()["measuring"] == 1
    upload = SimpleUploadedFile("cases.csv", b"goal,apps\nMute the group,com.example.chatter\n")
    assert client.post(API, {"file": upload}).json()["created"] == 1
    assert set(RlQueryEntry.objects.values_list("state", flat=True)) == {"measuring"}


def test_the_pools_page_has_the_upload_form_and_says_what_a_file_looks_like(client_as, policy):
    client = client_as("manager")
    page = client.get("/pools/").content.decode()
    assert 'data-testid="badcase-form"' in page and "No query awaits measurement." in page
    assert "goal,apps,notes" in page and "&quot;goal&quot;" in page  # the empty state shows both formats
    bad = client.post("/pools/rl/badcases/", {"text": '{"goal": "Mute the group"}'})
    assert bad.status_code == 400 and "Nothing was imported" in bad.content.decode()
    assert "case 1: apps is required" in bad.content.decode() and not Query.objects.exists()
    upload = SimpleUploadedFile("cases.jsonl", json.dumps(GOOD).encode())
    done = client.post("/pools/rl/badcases/", {"file": upload}, follow=True)
    assert done.status_code == 200 and "1 await the current policy" in done.content.decode()
    assert "awaiting measurement" in done.content.decode()  # the waiting query is listed with its state
    assert client_as("annotator").post("/pools/rl/badcases/", {"text": json.dumps(GOOD)}).status_code == 403
    assert Query.objects.count() == 1


def test_the_command_reads_a_file_and_refuses_a_bad_one_whole(tmp_path, policy):
    good = tmp_path / "cases.jsonl"
    good.write_text(json.dumps(GOOD) + "\n")
    call_command("import_badcases", str(good))
    assert RlQueryEntry.objects.get().channel == "badcase"
    bad = tmp_path / "bad.csv"
    bad.write_text("goal,apps\nMute the group,com.example.chatter\nOpen it,\n")
    with pytest.raises(CommandError, match="case 2: apps is required"):
        call_command("import_badcases", str(bad))
    assert Query.objects.count() == 1
