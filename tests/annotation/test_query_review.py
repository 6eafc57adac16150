"""The query review page: who may use it, what it shows and filters, approve/reject/edit one by one
and in bulk, stale pages refused, and approved queries being what collection runs draw."""
import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation import review
from flywheel.collection.launch import select_queries
from flywheel.models import App, FunctionNode, GenerationRun, Query
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db
URL = "/query-review/"
ACT = "/query-review/act/"
HTMX = {"HTTP_HX_REQUEST": "true"}


def gate_results(rejected_gate=None, reason=""):
    """gate_results as generation writes them (contracts.md)."""
    results = {
        "gate1": {"passed": True, "realism": 0.82, "completability": True, "complexity": "medium",
                  "path_steps": 3, "reason": "reachable in 3 steps"},
        "gate2": {"passed": True, "before": "open notes and add milk", "rules": ["persona:novice"]},
        "gate3": {"passed": True, "nodes": ["notes/new_note"], "scores": [0.71], "reason": "best node 0.71"},
    }
    if rejected_gate:
        results[rejected_gate] = {**results[rejected_gate], "passed": False, "reason": reason}
    return results


def make_query(key, status="review", apps=("com.sim.notes",), tier="L2", subclass="function_statement",
               persona="novice", capabilities=("conditional_logic",), source="synthesized", run=None,
               text=None, function="notes/new_note", **fields):
    query = Query.objects.create(
        key=key, text=text or f"Add milk to my notes ({key})", tier=tier, subclass=subclass, persona=persona,
        capabilities=list(capabilities), status=status, source=source, generation_run=run,
        labels={"relation": "relay", "complexity": "medium", "step_depth": 3, "ambiguity": "L2"},
        gate_results=fields.pop("gate_results", gate_results()),
        known_path={"steps": [{"action": "click", "target": {"text": "New note"}}]},
        verification=fields.pop("verification", {
            "draft": True, "terminal": [{"check": "content", "uri": "content://com.sim.notes/notes",
                                         "contains": "milk"}],
            "milestones": [{"name": "editor open", "text": "New note"}]}),
        **fields)
    app_rows = [App.objects.get_or_create(package=package)[0] for package in apps]
    query.set_apps(app_rows)
    if function:
        node, _ = FunctionNode.objects.get_or_create(app=app_rows[0], path=function, defaults={"is_leaf": True})
        query.set_functions([node])
    return query


def version(query):
    query.refresh_from_db()
    return review.version_of(query)


def post_act(client, action, queries, reason="", htmx=False, versions=None):
    data = {"action": action, "ids": [q.pk for q in queries], "reason": reason}
    for q in queries:
        data[f"version_{q.pk}"] = (versions or {}).get(q.pk, version(q))
    return client.post(ACT, data, **(HTMX if htmx else {}))


def shown_keys(response):
    return {row["query"].key for row in response.context["rows"]}


# --- who may review ---------------------------------------------------------------------------

@pytest.mark.parametrize("role, allowed", [("manager", True), ("admin", True), ("annotator", False),
                                           ("adjudicator", False), (None, False)])
def test_managers_and_admins_review_by_default(client_as, role, allowed, settings):
    settings.QUERY_REVIEW_ALLOW_ANNOTATORS = False
    response = client_as(role).get(URL)
    assert response.status_code == (200 if allowed else 403)
    home = client_as(role).get(reverse("home"), follow=True)
    assert ('href="/query-review/"' in home.content.decode()) is allowed


def test_the_setting_lets_annotators_review(client_as, settings):
    settings.QUERY_REVIEW_ALLOW_ANNOTATORS = True
    query = make_query("q1")
    client = client_as("annotator")
    assert client.get(URL).status_code == 200
    assert 'href="/query-review/"' in client.get(reverse("my-queue")).content.decode()
    assert post_act(client, "approve", [query]).status_code == 302
    query.refresh_from_db()
    assert query.status == "ready" and query.reviewed_by.username == "annotator-user"
    assert client_as("adjudicator").get(URL).status_code == 403  # the setting is for annotators only


def test_refused_roles_cannot_post_either(client_as, settings):
    settings.QUERY_REVIEW_ALLOW_ANNOTATORS = False
    query = make_query("q1")
    for role in ("annotator", "adjudicator"):
        assert post_act(client_as(role), "approve", [query]).status_code == 403
        response = client_as(role).post(f"/query-review/{query.pk}/edit/",
                                        {"text": "hijacked", "tier": "L2", "risk": "low", "version": version(query)})
        assert response.status_code == 403
    query.refresh_from_db()
    assert query.status == "review" and query.text.startswith("Add milk")


def test_anonymous_goes_to_login(client):
    response = client.get(URL)
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_posts_need_the_csrf_token(role_users):
    query = make_query("q1")
    client = Client(enforce_csrf_checks=True)
    client.force_login(role_users["manager"])
    assert client.post(ACT, {"action": "approve", "ids": [query.pk]}).status_code == 403
    page = client.get(URL)
    token = page.cookies["csrftoken"].value
    assert client.post(ACT, {"action": "approve", "ids": [query.pk], "csrfmiddlewaretoken": token}).status_code == 302
    query.refresh_from_db()
    assert query.status == "ready"


# --- what the page shows --------------------------------------------------------------------------

def test_empty_state_says_what_to_do(client_as):
    body = client_as("manager").get(URL).content.decode()
    assert "No queries waiting for review." in body
    assert 'href="/generation/"' in body and reverse("query-import") in body


def test_rows_show_labels_paths_gates_and_the_draft_verification(client_as):
    make_query("q-review")
    make_query("q-ready", status="ready")
    make_query("q-gate1", status="rejected", status_reason="gate 1: not reachable",
               gate_results=gate_results("gate1", "no GEM path to the target page"))
    client = client_as("manager")
    response = client.get(URL)
    assert shown_keys(response) == {"q-review"}  # "review" by default
    body = response.content.decode()
    assert "L2</strong> · <span" in body and "function_statement" in body
    assert "Average user / novice" in body and "Conditional logic" in body
    assert "com.sim.notes" in body and "com.sim.notes:notes/new_note" in body
    assert 'title="reachable in 3 steps — realism: 0.82' in body  # the reason on hover
    assert "draft</span>" in body and "content content://com.sim.notes/notes contains &#x27;milk&#x27;" in body
    assert "milestones: editor open" in body
    rejected = client.get(URL, {"status": "rejected"})
    assert shown_keys(rejected) == {"q-gate1"}
    assert 'data-testid="gate-rejection">G1: no GEM path to the target page' in rejected.content.decode()


def test_keyboard_hints_and_script(client_as):
    make_query("q1")
    body = client_as("manager").get(URL).content.decode()
    assert "js/review_keys.js" in body and "js/shortcuts.js" in body
    assert 'data-shortcut="/"' in body and 'id="review-help"' in body
    for hint in ("<kbd>j</kbd>/<kbd>k</kbd> move", "<kbd>x</kbd> select", "<kbd>a</kbd> approve",
                 "<kbd>r</kbd> reject", "<kbd>e</kbd> edit", "<kbd>Shift</kbd>+<kbd>A</kbd> approve selected",
                 "<kbd>/</kbd> search", "<kbd>?</kbd> help"):
        assert hint in body
    assert 'class="approve"' in body and 'class="reason"' in body and 'class="edit secondary"' in body


def test_filters(client_as):
    run = GenerationRun.objects.create(config={"apps": ["com.sim.shop"]})
    make_query("a-l1", tier="L1", subclass="plain_narration", persona="programmer", capabilities=["looping"])
    make_query("b-l3", tier="L3", subclass="intent_inference", persona="senior_citizen",
               capabilities=["numerical_reasoning", "information_synthesis"], apps=("com.sim.shop", "com.sim.chat"),
               run=run, text="Find the cheapest charger and tell Wang")
    make_query("c-ext", source="external", capabilities=[])
    client = client_as("manager")

    def keys(**params):
        return shown_keys(client.get(URL, params))

    assert keys() == {"a-l1", "b-l3", "c-ext"}
    assert keys(tier="L1") == {"a-l1"}
    assert keys(subclass="intent_inference") == {"b-l3"}
    assert keys(persona="programmer") == {"a-l1"}
    assert keys(capability="information_synthesis") == {"b-l3"}
    assert keys(capability="looping") == {"a-l1"}
    assert keys(app="com.sim.chat") == {"b-l3"}
    assert keys(app="com.sim.notes") == {"a-l1", "c-ext"}
    assert keys(source="external") == {"c-ext"}
    assert keys(run=str(run.pk)) == {"b-l3"}
    assert keys(q="charger") == {"b-l3"}
    assert keys(q="A-L1") == {"a-l1"}  # the key too, case-insensitive
    assert keys(tier="L3", capability="looping") == set()
    assert "No review queries match these filters" in client.get(URL, {"tier": "L3", "capability": "looping"}) \
        .content.decode()
    assert keys(status="bogus") == {"a-l1", "b-l3", "c-ext"}  # an unknown status falls back to review


def test_pages_of_fifty(client_as):
    for n in range(51):
        make_query(f"q{n:03d}", function=None)
    client = client_as("manager")
    first, second = client.get(URL), client.get(URL, {"page": 2})
    assert len(first.context["rows"]) == 50 and len(second.context["rows"]) == 1
    assert shown_keys(first).isdisjoint(shown_keys(second))


# --- approve, reject, edit ------------------------------------------------------------------------

def test_approve_one_in_place(client_as, role_users):
    query = make_query("q1")
    before = timezone.now()
    response = post_act(client_as("manager"), "approve", [query], htmx=True)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith("<tr") and 'data-testid="row-note">approved' in body
    query.refresh_from_db()
    assert query.status == "ready" and query.reviewed_by == role_users["manager"] and query.reviewed_at >= before
    assert "draft" not in query.verification and query.verification["terminal"]  # confirmed, checks kept
    assert query.gate_results["gate1"]["passed"]  # what the gates said is kept


def test_reject_one_with_and_without_a_reason(client_as):
    first, second = make_query("q1"), make_query("q2")
    client = client_as("manager")
    post_act(client, "reject", [first], reason="  duplicates q7  ", htmx=True)
    post_act(client, "reject", [second], htmx=True)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.status_reason) == ("rejected", "duplicates q7")
    assert (second.status, second.status_reason) == ("rejected", "rejected in review")
    assert first.reviewed_by.username == "manager-user" and first.reviewed_at


def test_bulk_approve_and_reject_report_what_someone_else_changed(client_as, role_users):
    queries = [make_query(f"q{n}") for n in range(4)]
    versions = {q.pk: version(q) for q in queries}
    review.approve({queries[3].pk: versions[queries[3].pk]}, role_users["admin"])  # someone else, first
    client = client_as("manager")
    response = post_act(client, "approve", queries[1:], versions=versions)
    assert response.status_code == 302 and response["Location"].startswith(URL)
    states = {q.key: Query.objects.get(pk=q.pk) for q in queries}
    assert [states[k].status for k in ("q0", "q1", "q2", "q3")] == ["review", "ready", "ready", "ready"]
    assert states["q3"].reviewed_by == role_users["admin"]  # not overwritten
    shown = [str(m) for m in client.get(URL).context["messages"]]
    assert any("2 queries approved." in m and f"#{queries[3].pk} not changed: it is already ready by admin-user"
               in m for m in shown), shown
    post_act(client, "reject", [queries[0], queries[1]], reason="off-topic")
    assert Query.objects.get(pk=queries[0].pk).status == "rejected"
    assert Query.objects.get(pk=queries[1].pk).status == "ready"  # approved rows are not rejected here


def test_bulk_keeps_the_filters_and_needs_a_selection(client_as):
    make_query("q1")
    client = client_as("manager")
    response = client.post(ACT, {"action": "approve", "back": "tier=L2&persona=novice&evil=x\r\nSet-Cookie: a"})
    assert response["Location"] == f"{URL}?tier=L2&persona=novice"
    assert any("Select at least one query" in str(m) for m in client.get(URL).context["messages"])


def test_a_stale_page_is_refused_not_overwritten(client_as, role_users):
    query = make_query("q1")
    stale = version(query)
    review.edit(query.pk, stale, role_users["admin"], {"text": "Add oat milk to my shopping note"})
    client = client_as("manager")
    response = post_act(client, "approve", [query], htmx=True, versions={query.pk: stale})
    body = response.content.decode()
    assert "Not approved: it was changed by admin-user" in body and "reload" in body
    query.refresh_from_db()
    assert query.status == "review" and query.text == "Add oat milk to my shopping note"
    edit = client.post(f"/query-review/{query.pk}/edit/", {"text": "mine", "tier": "L2", "risk": "low",
                                                           "subclass": "function_statement", "version": stale}, **HTMX)
    assert "Not saved: it was changed by admin-user" in edit.content.decode()
    query.refresh_from_db()
    assert query.text == "Add oat milk to my shopping note"


def test_edit_inline_keeps_the_query_in_review(client_as, role_users):
    query = make_query("q1")
    client = client_as("manager")
    form = client.get(f"/query-review/{query.pk}/edit/", **HTMX)
    assert 'data-testid="edit-form"' in form.content.decode() and 'value="function_statement" selected' in \
        form.content.decode()
    response = client.post(f"/query-review/{query.pk}/edit/", {
        "text": "Jot down that we need milk", "tier": "L3", "subclass": "incomplete_instruction",
        "persona": "stay_at_home_parent", "capabilities": ["looping", "conditional_logic"], "risk": "medium",
        "version": version(query)}, **HTMX)
    assert "saved; approve it when it reads right" in response.content.decode()
    query.refresh_from_db()
    assert (query.text, query.tier, query.subclass, query.persona, query.risk) == (
        "Jot down that we need milk", "L3", "incomplete_instruction", "stay_at_home_parent", "medium")
    assert sorted(query.capabilities) == ["conditional_logic", "looping"]
    assert query.status == "review" and query.reviewed_by == role_users["manager"]
    assert query.verification.get("draft") is True  # only approving confirms the verification


def test_edit_is_checked_against_the_vocabulary(client_as):
    query = make_query("q1")
    client = client_as("manager")
    response = client.post(f"/query-review/{query.pk}/edit/", {
        "text": "Jot it down", "tier": "L1", "subclass": "intent_inference", "persona": "pirate",
        "capabilities": ["telepathy"], "risk": "low", "version": version(query)}, **HTMX)
    body = response.content.decode()
    assert 'data-testid="edit-form"' in body
    assert "belongs to L3, not L1" in body
    assert "pirate is not one of the available choices" in body and "telepathy is not one of" in body
    query.refresh_from_db()
    assert query.tier == "L2" and query.text.startswith("Add milk")
    with pytest.raises(ValueError, match="belongs to L3, not L1"):
        review.edit(query.pk, version(query), None, {"tier": "L1", "subclass": "intent_inference"})


def test_editing_a_gate_rejected_query_puts_it_back_in_review(client_as):
    query = make_query("q1", status="rejected", status_reason="gate 1: too unrealistic",
                       gate_results=gate_results("gate1", "too unrealistic"))
    client = client_as("manager")
    client.post(f"/query-review/{query.pk}/edit/", {"text": "Add milk to the shopping note", "tier": "L2",
                                                     "subclass": "function_statement", "risk": "low",
                                                     "version": version(query)}, **HTMX)
    query.refresh_from_db()
    assert (query.status, query.status_reason) == ("review", "")
    assert query.gate_results["gate1"]["reason"] == "too unrealistic"


# --- approved queries are what collection runs draw -----------------------------------------------

def test_collection_runs_draw_approved_queries_only(client_as):
    approved, refused = make_query("q-approved"), make_query("q-refused")
    make_query("q-waiting")
    client = client_as("manager")
    post_act(client, "approve", [approved])
    post_act(client, "reject", [refused])
    selected = set(select_queries({"apps": ["com.sim.notes"]}).values_list("key", flat=True))
    assert "q-approved" in selected
    assert "q-waiting" not in selected and "q-refused" not in selected


# --- the keyboard, in a real browser --------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_reviewing_from_the_keyboard_in_a_real_browser(role_users, asgi_server, browser):
    first, second, third, fourth = (make_query(f"q{n}") for n in range(1, 5))
    page = browser.new_page()
    page.goto(asgi_server + "/login/")
    page.fill("input[name=username]", role_users["manager"].username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state()
    page.goto(asgi_server + URL)
    assert page.locator("tr.current").get_attribute("data-query") == str(first.pk)
    page.keyboard.press("j")
    page.keyboard.press("a")                                   # approves the second, in place
    page.locator(f"#query-{second.pk} [data-testid=row-note]").wait_for()
    page.wait_for_function(f"document.querySelector('tr.current').dataset.query === '{third.pk}'")
    page.keyboard.press("r")                                   # the reason field of the third
    page.keyboard.type("duplicate of q1")
    page.keyboard.press("Enter")
    page.locator(f"#query-{third.pk} [data-testid=row-note]").wait_for()
    page.wait_for_function(f"document.querySelector('tr.current').dataset.query === '{fourth.pk}'")
    page.keyboard.press("e")
    page.get_by_test_id("edit-form").wait_for()
    page.click(f"#query-{fourth.pk} button.secondary")         # Cancel: the row comes back
    page.locator(f"#query-{fourth.pk} button.approve").wait_for()
    for key in ("k", "k", "k", "x", "j", "j", "j", "x"):
        page.keyboard.press(key)
    assert page.locator("input.select:checked").count() == 2
    page.keyboard.press("?")
    assert page.get_by_test_id("review-help").is_visible()
    page.keyboard.press("Shift+A")                             # approves the selected rows
    page.wait_for_load_state()
    page.get_by_text("2 queries approved.").wait_for()
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.name") == "q"
    page.close()
    states = {q.key: Query.objects.get(pk=q.pk) for q in (first, second, third, fourth)}
    assert [states[k].status for k in ("q1", "q2", "q3", "q4")] == ["ready", "ready", "rejected", "ready"]
    assert states["q3"].status_reason == "duplicate of q1"
