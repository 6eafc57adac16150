"""What the seeded trajectories stand on: people, phones, apps and their function trees, policies,
queries (with their apps and functions) and the RL query pool. Written with the ORM (thousands of
rows) except queries and their links, which are COPYed like the big tables."""
from dataclasses import dataclass, field
from datetime import timedelta

from django.contrib.auth.models import Group, User

from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR, MANAGER
from devices.models import Device
from flywheel.models import App, FailureClass, FunctionNode, ModelVersion, Query, QueryApp, QueryFunction, RlQueryEntry
from flywheel.policies import default_policy_version
from flywheel.queries.vocabulary import CAPABILITIES, PERSONAS, TIER_SUBCLASSES

APP_NAMES = [  # package suffix, label, category
    ("settings", "Settings", "system"), ("translator", "Translator", "productivity"), ("shop", "ShopMart", "shopping"),
    ("chatter", "Chatter", "social"), ("fooddash", "FoodDash", "food"), ("notes", "Notes", "productivity"),
    ("gallery", "Gallery", "photo"), ("cliptube", "ClipTube", "video"), ("maps", "Maps", "navigation"),
    ("trips", "TripBook", "travel"), ("tunes", "Tunes", "music"), ("daily", "Daily News", "news"),
    ("bank", "PocketBank", "life"), ("rides", "RideNow", "travel"), ("mail", "Mail", "social"),
    ("calendar", "Calendar", "productivity"), ("camera", "Camera", "photo"), ("podcasts", "Podcasts", "music"),
    ("market", "FreshMarket", "shopping"), ("weather", "Weather", "life"), ("clock", "Clock", "system"),
    ("files", "Files", "system"), ("reader", "Reader", "news"), ("fitness", "FitTrack", "life"),
]
BRANCHES = ["search", "account", "settings", "orders", "share", "history"]
LEAVES = ["open", "filter", "sort", "edit", "delete", "add", "toggle"]
VERBS = ["Open", "Find", "Turn on", "Change", "Add", "Share", "Sort", "Filter", "Check", "Set"]
OBJECTS = ["dark mode", "the latest order", "a note called groceries", "Sony headphones", "the weekly report",
           "tomorrow's alarm", "the photo from yesterday", "a table for two", "the bus route home", "my balance"]
TIER_WEIGHTS = {"L1": 0.4, "L2": 0.4, "L3": 0.2}
SOURCES = [("synthesized", 0.7), ("external", 0.15), ("derived", 0.05), ("rqa", 0.1)]
STATUSES = [("ready", 0.62), ("done", 0.2), ("review", 0.1), ("rejected", 0.05), ("in_progress", 0.03)]
RL_STATES = [("banked", 0.3), ("active", 0.35), ("retired", 0.2), ("left", 0.15)]
RL_CHANNELS = [("phase0", 0.5), ("routing", 0.2), ("business", 0.1), ("badcase", 0.1), ("derived", 0.1)]
L3_CAUSES = ["perception_drift", "state_tracking", "constraint_violation", "over_scoped"]


@dataclass
class Catalog:
    annotators: list = field(default_factory=list)
    adjudicators: list = field(default_factory=list)
    managers: list = field(default_factory=list)
    devices: list = field(default_factory=list)
    apps: list = field(default_factory=list)
    leaves_by_app: dict = field(default_factory=dict)
    versions: list = field(default_factory=list)          # (id, kind)
    query_apps: list = field(default_factory=list)        # per query (by position): [package, ...]
    query_ids: list = field(default_factory=list)
    rl_query_ids: list = field(default_factory=list)
    failure_classes: dict = field(default_factory=dict)   # (cause, capability) -> id
    rl_entry_of: dict = field(default_factory=dict)       # query id -> RL pool entry id
    texts: dict = field(default_factory=dict)             # query id -> text

    def packages_of(self, query_id: int) -> list[str]:
        return self.query_apps[query_id - self.query_ids[0]]

    def text_of(self, query_id: int) -> str:
        return self.texts.get(query_id, "")


def pick(rng, weighted):
    values, weights = zip(*weighted)
    return rng.choices(values, weights)[0]


def seed_people(tag: str, catalog: Catalog):
    counts = {ANNOTATOR: 12, ADJUDICATOR: 4, MANAGER: 3, ADMIN: 1}
    for role, count in counts.items():
        group, _ = Group.objects.get_or_create(name=role)
        for n in range(count):
            user = User(username=f"scale-{tag}-{role}-{n + 1:02d}")
            user.set_unusable_password()
            user.save()
            user.groups.add(group)
            {ANNOTATOR: catalog.annotators, ADJUDICATOR: catalog.adjudicators,
             MANAGER: catalog.managers}.get(role, []).append(user.pk)


def seed_devices(tag: str, rng, catalog: Catalog, now):
    statuses = ["idle"] * 18 + ["leased"] * 8 + ["offline", "offline", "unhealthy", "unhealthy",
                                                 "quarantined", "quarantined"]
    packages = [f"com.sim.{name}" for name, _, _ in APP_NAMES]
    devices = [Device(serial=f"scale-{tag}-{n:03d}", adb_server=f"10.0.{n // 8}.1:5037", model=rng.choice(
        ["Pixel 7", "Vivo X100", "Galaxy S23", "Redmi Note 12"]), resolution=rng.choice(["1080x2400", "1440x3200", "720x1600"]),
        os_version=rng.choice(["13", "14"]), installed_apps=rng.sample(packages, 18), accounts=["test-account"],
        battery=rng.randint(20, 100), status=status, last_seen=now - timedelta(seconds=rng.randint(1, 90)),
        health={"ok": status not in ("unhealthy", "quarantined"), "checked_at": now.isoformat()})
        for n, status in enumerate(statuses)]
    catalog.devices = [d.pk for d in Device.objects.bulk_create(devices)]


def seed_apps_and_trees(tag: str, catalog: Catalog):
    """Each app with a two-level function tree: 6 branches of 7 leaves."""
    for suffix, label, category in APP_NAMES:
        app, _ = App.objects.get_or_create(package=f"com.sim.{suffix}", defaults={"label": label, "category": category})
        catalog.apps.append(app)
        existing = set(FunctionNode.objects.filter(app=app).values_list("path", flat=True))
        branches = []
        for position, branch in enumerate(BRANCHES):
            if branch not in existing:
                branches.append(FunctionNode(app=app, path=branch, label=branch.title(), position=position))
        FunctionNode.objects.bulk_create(branches)
        parents = dict(FunctionNode.objects.filter(app=app, path__in=BRANCHES).values_list("path", "pk"))
        leaves = [FunctionNode(app=app, path=f"{branch}/{leaf}", label=f"{leaf} {branch}", parent_id=parents[branch],
                               is_leaf=True, position=n)
                  for branch in BRANCHES for n, leaf in enumerate(LEAVES) if f"{branch}/{leaf}" not in existing]
        FunctionNode.objects.bulk_create(leaves)
        catalog.leaves_by_app[app.package] = list(FunctionNode.objects.filter(app=app, is_leaf=True).values_list("pk", flat=True))


def seed_versions(tag: str, catalog: Catalog):
    offline = default_policy_version()
    catalog.versions.append((offline.pk, ModelVersion.Kind.OFFLINE))
    Kind = ModelVersion.Kind
    for n, kind in enumerate([Kind.ENDPOINT, Kind.ENDPOINT, Kind.CHECKPOINT, Kind.COMPACT]):
        version = ModelVersion.objects.create(
            name=f"scale-{tag}-policy-{n + 1}-{kind.value}", kind=kind, parent_id=offline.pk,
            endpoint_url="http://gpu-host:8000/v1" if kind == Kind.ENDPOINT else "",
            served_model_name="qwen2.5-vl-7b-gui" if kind == Kind.ENDPOINT else "",
            sampling={"temperature": 0.2, "max_tokens": 512} if kind == Kind.ENDPOINT else {})
        catalog.versions.append((version.pk, kind))


def _query_row(rng, pk, tag, number, packages, now, catalog):
    tier = pick(rng, TIER_WEIGHTS.items())
    subclass = rng.choice(list(TIER_SUBCLASSES[tier]))
    status = pick(rng, STATUSES)
    source = pick(rng, SOURCES)
    first = packages[0]
    steps = rng.randint(2, 14)
    assignee = rng.choice(catalog.annotators) if status in ("in_progress",) or rng.random() < 0.02 else None
    created = now - timedelta(days=90 * rng.random() ** 0.7)
    return {
        "id": pk, "key": f"scale-{tag}/{first.split('.')[-1]}/{number:06d}",
        "text": f"{rng.choice(VERBS)} {rng.choice(OBJECTS)} in {first.split('.')[-1].title()}",
        "tier": tier, "subclass": subclass, "persona": rng.choice(list(PERSONAS)),
        "capabilities": rng.sample(list(CAPABILITIES), rng.choice([0, 1, 1, 2])),
        "labels": {"scenario": {"ownership": "third-party", "categories": [first.split(".")[-1]]},
                   "complexity": {"path": "simple" if steps <= 5 else "medium" if steps <= 10 else "complex",
                                  "steps": steps, "app_scope": "single-app" if len(packages) == 1 else "cross-app"}},
        "risk": pick(rng, [("low", 0.8), ("medium", 0.15), ("high", 0.05)]),
        "requirements": {"apps": packages}, "source": source, "status": status,
        "tags": rng.sample(["settings", "cross-app", "search", "checkout", "media", "regression"], rng.choice([0, 1, 2])),
        "known_path": {"mode": "tap", "steps": [{"action": "open", "app": first}] +
                       [{"action": "click", "target": {"text": f"item {n}"}} for n in range(steps - 2)] +
                       [{"action": "terminate", "status": "success"}]} if source == "synthesized" else None,
        "reset": {"force_stop": packages, "home": True},
        "verification": {"terminal": [{"check": "foreground", "package": packages[-1]}],
                         "milestones": [{"name": f"step {n}", "text": f"item {n}"} for n in range(min(steps, 4))],
                         "veto": []},
        "gate_results": {"gate1": {"passed": True, "realism": round(rng.uniform(0.5, 1), 2)}},
        "evaluation_only": rng.random() < 0.05, "assignee_id": assignee,
        "reviewed_by_id": rng.choice(catalog.managers) if status != "review" else None,
        "reviewed_at": created + timedelta(hours=2) if status != "review" else None,
        "status_reason": "ambiguous target" if status in ("review", "rejected") else "",
        "created_at": created, "updated_at": created,
    }


def seed_queries(writer, rng, tag: str, count: int, catalog: Catalog, now):
    """`count` queries over the apps (1–3 each, the first is where the task starts) and 1–3 leaves."""
    packages = [app.package for app in catalog.apps]
    app_ids = {app.package: app.pk for app in catalog.apps}
    first = writer.reserve(Query, count)
    catalog.query_ids = list(range(first, first + count))
    catalog.query_apps = [rng.sample(packages, pick(rng, [(1, 0.8), (2, 0.18), (3, 0.02)])) for _ in range(count)]
    def rows():
        for n in range(count):
            row = _query_row(rng, first + n, tag, n, catalog.query_apps[n], now, catalog)
            catalog.texts[row["id"]] = row["text"]
            yield row

    writer.copy(Query, rows(), total=count)
    links = sum(len(apps) for apps in catalog.query_apps)
    link_id = writer.reserve(QueryApp, links)
    app_rows = []
    for n, apps in enumerate(catalog.query_apps):
        for position, package in enumerate(apps):
            app_rows.append({"id": link_id, "query_id": first + n, "app_id": app_ids[package], "position": position})
            link_id += 1
    writer.copy(QueryApp, app_rows, total=links)
    function_rows = []
    for n, apps in enumerate(catalog.query_apps):
        chosen = {rng.choice(catalog.leaves_by_app[package]) for package in apps}
        function_rows.extend({"query_id": first + n, "function_id": leaf, "position": p} for p, leaf in enumerate(chosen))
    function_id = writer.reserve(QueryFunction, len(function_rows))
    for offset, row in enumerate(function_rows):
        row["id"] = function_id + offset
    writer.copy(QueryFunction, function_rows, total=len(function_rows))


def seed_rl_pool(writer, rng, catalog: Catalog, now):
    """About 15% of the queries in the RL query pool, in every state and channel."""
    chosen = [pk for pk in catalog.query_ids if rng.random() < 0.15]
    catalog.rl_query_ids = chosen
    first = writer.reserve(RlQueryEntry, len(chosen))
    rows = []
    for n, query_id in enumerate(chosen):
        state = pick(rng, RL_STATES)
        created = now - timedelta(days=80 * rng.random())
        rows.append({"id": first + n, "query_id": query_id, "state": state, "channel": pick(rng, RL_CHANNELS),
                     "phase0_features": {"features": rng.sample(["l2_l3", "deep_path", "cross_app", "multi_function"], 2)},
                     "success_rate": None if state == "banked" else round(rng.random(), 3),
                     "created_at": created, "updated_at": created + timedelta(days=rng.random() * 5)})
    writer.copy(RlQueryEntry, rows, total=len(rows))
    catalog.rl_entry_of = {query_id: first + n for n, query_id in enumerate(chosen)}


def seed_failure_classes(tag: str, catalog: Catalog):
    rows = [FailureClass(key=f"scale-{tag}:3:{cause}:{capability}", level=3, cause=cause, capability=capability,
                         label=f"{cause.replace('_', ' ')} under {capability.replace('_', ' ')}",
                         status="recurring" if n % 3 else "derived")
            for n, (cause, capability) in enumerate((c, k) for c in L3_CAUSES for k in CAPABILITIES)]
    for row in FailureClass.objects.bulk_create(rows):
        catalog.failure_classes[(row.cause, row.capability)] = row.pk
