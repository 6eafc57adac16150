"""Settings come from the environment; every one has a working default (README: Environment)."""
import ipaddress
import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("FLYWHEEL_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name, default=False):
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_list(name, default=""):
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _secret_key():
    """SECRET_KEY from the environment, else generated once into var/ (never committed)."""
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

# HTTPS=1 when the site is served over TLS (a proxy in front terminates it and sets
# X-Forwarded-Proto; it must overwrite that header from clients): secure cookies, HTTP → HTTPS
# redirects and HSTS. /healthz stays reachable over plain HTTP for load-balancer probes.
HTTPS = env_bool("HTTPS", False)
if HTTPS:
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_results",
    "auditlog",  # the decision history (accounts/history.py)
    "accounts",
    "devices",
    "flywheel",
    "annotation",
    "benchmark",
    "training",
    "flywheel_demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The decision history's actor is the request's user (django-auditlog, accounts/history.py).
    "accounts.history.HistoryMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.roles.roles_context",
            ],
        },
    },
]
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

# A process's threads share at most this many PostgreSQL connections (Django's psycopg pool; 0: one
# per thread). A phone host's driver hands its connection back between steps (devices/db_pool.py),
# so 100 phones need a few connections, not 100. Pooled connections are never kept per thread.
DATABASE_POOL_SIZE = int(os.environ.get("DATABASE_POOL_SIZE", "0"))
DATABASE_POOL_TIMEOUT_S = float(os.environ.get("DATABASE_POOL_TIMEOUT_S", "30"))  # waiting for a free one
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'flywheel.sqlite3'}"),
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Several processes (web, worker, beat) share the file: wait for locks instead of failing.
    # IMMEDIATE transactions take the write lock up front, so two writers queue on the timeout
    # instead of failing at once with "database is locked"; WAL lets readers go on meanwhile.
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "timeout": 30, "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"})
    # Tests start real worker and web processes, so the test database must be a file they can open.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
elif DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # Across machines a link can go down: a connection whose sent data goes unacknowledged for 30 s
    # fails instead of hanging for TCP's ~15 minutes, so a cut-off host notices and recovers when
    # the link is back. (Settings in DATABASE_URL's query string, e.g. sslmode, take precedence.)
    for option, value in {"connect_timeout": 10, "tcp_user_timeout": 30_000, "keepalives": 1,
                          "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}.items():
        DATABASES["default"].setdefault("OPTIONS", {}).setdefault(option, value)
    if DATABASE_POOL_SIZE > 0:
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": 1, "max_size": DATABASE_POOL_SIZE,
            "timeout": DATABASE_POOL_TIMEOUT_S}
        DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# Prefix for every Redis key of Celery and Channels, so test runs sharing one Redis stay apart.
# A test session sets its own (the worker and web processes it starts inherit the environment).
REDIS_KEY_PREFIX = os.environ.get("FLYWHEEL_KEY_PREFIX", "")

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py reads with a 5 s timeout, exactly how long channels_redis blocks waiting for a
        # message: a quiet websocket would die. A longer socket timeout keeps it alive.
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}], "capacity": 200, "expiry": 10,
                   "prefix": f"{REDIS_KEY_PREFIX}asgi"},
    }
}

# Celery: Redis broker, results in the database so task state is visible in the site.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = "django-db"
CELERY_RESULT_EXTENDED = True
CELERY_TASK_TRACK_STARTED = True
CELERY_TASK_ACKS_LATE = True
# A task whose worker process died goes back to the queue (tasks are idempotent: judging claims
# its trajectory, collection claims its work items).
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Every task ends well within the broker's visibility timeout, so Redis never hands out again a
# task that is still running. collect_on_host acks on receipt and keeps to its own budget.
CELERY_TASK_SOFT_TIME_LIMIT = 25 * 60
CELERY_TASK_TIME_LIMIT = 30 * 60
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A broker that goes away must not cancel the collection in hand; what it forgot is re-dispatched.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_QUEUES_NAMES = ["default", "collection", "evaluation", "repair", "training", "benchmark"]
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
if REDIS_KEY_PREFIX:
    CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] = REDIS_KEY_PREFIX

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Login throttling (django-axes): after AXES_FAILURE_LIMIT failed sign-ins for one username from
# one address, that pair is locked for AXES_COOLOFF_MINUTES (the login page, the admin and the
# API's basic auth alike). A stranger elsewhere cannot lock a colleague out. An admin unlocks early
# with `manage.py axes_reset_username NAME`. Each test rolls back its attempts with its database.
INSTALLED_APPS.append("axes")
MIDDLEWARE.append("axes.middleware.AxesMiddleware")  # last, as axes requires
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("AXES_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("AXES_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# The address counted is REMOTE_ADDR; X-Forwarded-For is believed only from TRUSTED_PROXIES
# (comma-separated addresses or CIDRs of the reverse proxies in front; none by default), else a
# client could rotate made-up addresses past the limit or lock a colleague out by naming theirs.
TRUSTED_PROXIES = [str(ipaddress.ip_network(entry, strict=False)) for entry in env_list("TRUSTED_PROXIES", "")]
AXES_CLIENT_IP_CALLABLE = "accounts.client_address.client_address"

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)

MEDIA_URL = "/media/"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media"))

# Media on the filesystem by default; any S3-compatible store when S3_BUCKET is set.
if os.environ.get("S3_BUCKET"):
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": os.environ["S3_BUCKET"],
            "endpoint_url": os.environ.get("S3_ENDPOINT_URL") or None,
            "access_key": os.environ.get("S3_ACCESS_KEY_ID"),
            "secret_key": os.environ.get("S3_SECRET_ACCESS_KEY"),
            "region_name": os.environ.get("S3_REGION") or None,
            "file_overwrite": False,
        },
    }
else:
    _default_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(MEDIA_ROOT), "base_url": MEDIA_URL},
    }
STORAGES = {
    "default": _default_storage,
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
                    if not DEBUG else "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.roles.HasAnyRole"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "accounts.api_defaults.ApiPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "accounts.api_defaults.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Flywheel console API",
    "DESCRIPTION": "Queries, trajectories, verdicts, pools, devices and runs of the data flywheel.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_PERMISSIONS": ["accounts.roles.HasAnyRole"],
    # The docs pages load nothing from outside: no online validator badge, system fonts for ReDoc
    # (templates/drf_spectacular/redoc.html drops the package's Google Fonts link).
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "REDOC_UI_SETTINGS": {"theme": {"typography": {
        "fontFamily": 'system-ui, -apple-system, "Segoe UI", sans-serif',
        "headings": {"fontFamily": 'system-ui, -apple-system, "Segoe UI", sans-serif'},
        "code": {"fontFamily": "ui-monospace, Menlo, Consolas, monospace"}}}},
}

# Phones: every phone host this process reaches. An entry is `host:port` of an ADB server, or
# `name=host:port`: `name` is how the console knows the phone host (its phones' adb_server, its
# Celery queue) and host:port is where this process connects (the phone host's own ADB server; on a
# central server, an SSH tunnel to it: an ADB server never listens beyond its host).
ADB_ROUTES = {name.strip(): (address or name).strip()
              for name, _, address in (entry.partition("=") for entry in env_list("ADB_SERVERS", "127.0.0.1:15037"))}
ADB_SERVERS = list(ADB_ROUTES)
# A phone host's worker says it is alive this often; silent for PHONE_HOST_STALE_S, its phones are
# marked offline (and its work goes to the other hosts) until it speaks again.
PHONE_HOST_HEARTBEAT_S = float(os.environ.get("PHONE_HOST_HEARTBEAT_S", "5"))
PHONE_HOST_STALE_S = float(os.environ.get("PHONE_HOST_STALE_S", "30"))
# Live screens (devices/streaming/, README: Live screens): where pictures come from (auto, scrcpy,
# minicap or screencap), the fastest a viewer gets them, how old a frame an input may be aimed at,
# the threads for blocking phone I/O and encoding, and the phone-side encoders' files and options.
STREAM_SOURCE = os.environ.get("STREAM_SOURCE", "auto")
STREAM_MAX_FPS = float(os.environ.get("STREAM_MAX_FPS", "60"))
STREAM_STALE_INPUT_MS = float(os.environ.get("STREAM_STALE_INPUT_MS", "2000"))
STREAM_THREADS = int(os.environ.get("STREAM_THREADS", "32"))
SCRCPY_SERVER_JAR = os.environ.get("SCRCPY_SERVER_JAR", "")  # empty: the copy provisioned on the phone
SCRCPY_SERVER_VERSION = os.environ.get("SCRCPY_SERVER_VERSION", "2.4")
SCRCPY_MAX_SIZE = int(os.environ.get("SCRCPY_MAX_SIZE", "1280"))
MINICAP_DIR = os.environ.get("MINICAP_DIR", "")  # empty: the copy provisioned on the phone
MINICAP_QUALITY = int(os.environ.get("MINICAP_QUALITY", "80"))
# An OpenAI-compatible model version (by name) that judges for HTSC Systems B and C; rules otherwise.
JUDGE_MODEL_VERSION = os.environ.get("JUDGE_MODEL_VERSION", "")
# Calibration rounds (flywheel/judging/calibration.py): adjudicated trajectories needed before
# thresholds move, the most a round reads, and how many become examples in the LLM judge's prompt.
CALIBRATION_MIN_CASES = int(os.environ.get("CALIBRATION_MIN_CASES", "5"))
CALIBRATION_MAX_CASES = int(os.environ.get("CALIBRATION_MAX_CASES", "300"))
CALIBRATION_JUDGE_EXAMPLES = int(os.environ.get("CALIBRATION_JUDGE_EXAMPLES", "4"))
# The benchmark's VLM judges (§4.3): names of registered endpoint model versions, comma-separated;
# each rules beside the offline rule-set judges, and all must agree.
BENCHMARK_VLM_JUDGES = [n for n in os.environ.get("BENCHMARK_VLM_JUDGES", "").split(",") if n.strip()]
# Model endpoints (flywheel/endpoints/url_safety.py): link-local/metadata addresses are always refused;
# these CIDRs, when set, narrow the rest (e.g. "10.0.0.0/8,127.0.0.0/8"). Replies are size-capped.
MODEL_ENDPOINT_ALLOWED_NETWORKS = env_list("MODEL_ENDPOINT_ALLOWED_NETWORKS", "")
MODEL_ENDPOINT_MAX_REPLY_BYTES = int(os.environ.get("MODEL_ENDPOINT_MAX_REPLY_BYTES", str(8 * 1024 * 1024)))
# Uploads: an import (query JSONL, external queries) may be this large (flywheel/queries/uploads.py).
# Form fields and non-file bodies stay small (pasted text); bigger imports come as files, which
# Django spools to disk above FILE_UPLOAD_MAX_MEMORY_SIZE. Cap the body at the proxy too.
QUERY_IMPORT_MAX_BYTES = int(os.environ.get("QUERY_IMPORT_MAX_BYTES", str(20 * 1024 * 1024)))
# The query review page (/query-review/) is for managers; this lets annotators approve, edit and reject too.
QUERY_REVIEW_ALLOW_ANNOTATORS = env_bool("QUERY_REVIEW_ALLOW_ANNOTATORS", False)
# Intake gates (flywheel/queries/gates.py): gate 1's realism floor (0–1, a hard filter) and gate 3's
# cosine floor for back-tagging a query to a function-tree node (all-MiniLM-L6-v2 embeddings).
GATE1_MIN_REALISM = float(os.environ.get("GATE1_MIN_REALISM", "0.5"))
GATE3_MIN_SIMILARITY = float(os.environ.get("GATE3_MIN_SIMILARITY", "0.35"))
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("DATA_UPLOAD_MAX_MEMORY_SIZE", str(5 * 1024 * 1024)))
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440  # Django's default, said here so it is not forgotten
# A collection worker that stops sending heartbeats loses its phones after this long (its work goes
# to other phones then: a lost host is recovered from within about this long).
COLLECTION_LEASE_SECONDS = int(os.environ.get("COLLECTION_LEASE_SECONDS", "30"))
# One driving task per host works this long, then hands the rest of the run to a fresh task.
COLLECTION_TASK_BUDGET_S = int(os.environ.get("COLLECTION_TASK_BUDGET_S", "1800"))
# A run with open work, no live lease and no dispatch for this long is dispatched again (beat).
COLLECTION_REDISPATCH_AFTER_S = int(os.environ.get("COLLECTION_REDISPATCH_AFTER_S", "60"))
# A GEM edge an Env_ERROR broke is left out of path queries this long, then re-checked on a phone
# (flywheel/queries/gem/feedback.py); each failed re-check doubles the wait, up to a day.
GEM_EDGE_COOLDOWN_S = int(os.environ.get("GEM_EDGE_COOLDOWN_S", "1800"))
# Same page or new page during exploration (flywheel/screens/page_identity.py): at most this many
# differing pHash bits (of 64) and this layout distance (Jaccard, 0..1); App.page_identity overrides.
GEM_PHASH_DISTANCE = int(os.environ.get("GEM_PHASH_DISTANCE", "12"))
GEM_LAYOUT_DISTANCE = float(os.environ.get("GEM_LAYOUT_DISTANCE", "0.25"))
# An exploration run whose heartbeat is older than this is dispatched again by beat.
EXPLORATION_STALE_AFTER_S = int(os.environ.get("EXPLORATION_STALE_AFTER_S", "120"))
# After each action the explorer waits this long before it reads the screen (a real phone's
# transition); the virtual farm draws an input's result before the command returns.
EXPLORATION_SETTLE_S = float(os.environ.get("EXPLORATION_SETTLE_S", "0.05"))
# A type action taps its field, waits this long for the keyboard, then sends the text.
INPUT_FOCUS_SETTLE_S = float(os.environ.get("INPUT_FOCUS_SETTLE_S", "0.15"))

# The repair side (§2.5): the Teacher (an endpoint model version's name; empty: the offline
# GEM / known-path Teacher), how sure it must be before its correction is trusted without a
# person, when a failure class counts as recurring, and whether routing starts the ECDM itself.
TEACHER_MODEL_VERSION = os.environ.get("TEACHER_MODEL_VERSION", "")
ECDM_TEACHER_MIN_CONFIDENCE = float(os.environ.get("ECDM_TEACHER_MIN_CONFIDENCE", "0.6"))
ECDM_RECUR_MIN_TRAJECTORIES = int(os.environ.get("ECDM_RECUR_MIN_TRAJECTORIES", "3"))
ECDM_RECUR_MIN_QUERIES = int(os.environ.get("ECDM_RECUR_MIN_QUERIES", "2"))
# Counterfactual derivation (flywheel/repair/counterfactual.py): adversarial queries derived per
# recurring class, and the cosine a failure naming no capability needs to join a class of its cause.
ECDM_DERIVE_PER_CLASS = int(os.environ.get("ECDM_DERIVE_PER_CLASS", "6"))
ECDM_CLASS_SIMILARITY = float(os.environ.get("ECDM_CLASS_SIMILARITY", "0.75"))
ECDM_AUTOMATIC = env_bool("ECDM_AUTOMATIC", True)
# Periodic environment teardown (devices/teardown.py): a phone is restored to its recorded baseline
# between two of its tasks after this many tasks, or when it drifts past these (0: never by count).
TEARDOWN_EVERY_TASKS = int(os.environ.get("TEARDOWN_EVERY_TASKS", "50"))
TEARDOWN_MAX_NOTIFICATIONS = int(os.environ.get("TEARDOWN_MAX_NOTIFICATIONS", "10"))
TEARDOWN_MAX_STORAGE_PCT = int(os.environ.get("TEARDOWN_MAX_STORAGE_PCT", "90"))
# The hand-back channel (flywheel/collection/handback.py): every routed trajectory is read for the
# states a real farm cannot inject, and each gives a targeted sample; the target per class is what
# the Hand-back page counts against (§2.3.7: ~5,000 samples over 14 classes).
HANDBACK_SAMPLES = env_bool("HANDBACK_SAMPLES", True)
HANDBACK_TARGET_PER_CLASS = int(os.environ.get("HANDBACK_TARGET_PER_CLASS", "360"))
# A Teacher's or person's step correction is replayed on a phone (prefix, correction, continuation).
ECDM_REPLAY = env_bool("ECDM_REPLAY", True)
# The self-evolution loop's trainer: compact models train in one step, served models by SFT then RL
# iterations (training.round_trainer); empty: the loop stops before training and says so.
EVOLUTION_TRAINER = os.environ.get("EVOLUTION_TRAINER", "training.compact.loop_trainer")
# Training (training/): pool snapshots and run directories live on a local disk the trainers read.
TRAINING_ROOT = Path(os.environ.get("TRAINING_ROOT", VAR_DIR / "training"))
# Where model weights are kept (os.pathsep-separated): a run config's model, reference and DeepSpeed paths
# must lie under one of these or under TRAINING_ROOT (training/config_paths.py).
TRAINING_MODEL_ROOTS = [Path(p) for p in os.environ.get("TRAINING_MODEL_ROOTS", "/models").split(os.pathsep) if p]
# The flywheel demo (issue #16) keeps every run's report here (`make flywheel-demo` and the page alike).
FLYWHEEL_DEMO_REPORTS = Path(os.environ.get("FLYWHEEL_DEMO_REPORTS", VAR_DIR / "flywheel-demo"))
FLYWHEEL_DEMO_TASKS = os.environ.get("FLYWHEEL_DEMO_TASKS", "")  # a task file in the farm's format; default: the farm's
# How a run is launched: "torchrun" (default; one process per GPU with TRAINING_NPROC), "accelerate"
# (with a DeepSpeed config when the run names one) or "llamafactory" (a generated config, handed over).
TRAINING_LAUNCHER = os.environ.get("TRAINING_LAUNCHER", "torchrun")
TRAINING_NPROC = int(os.environ.get("TRAINING_NPROC", "1"))
# The weights a run starts from when neither its config nor its base model names any (a local path).
TRAINING_BASE_MODEL = os.environ.get("TRAINING_BASE_MODEL", "")
# The evolution loop's rounds (training.round_trainer): {"run": {...}, "snapshot": {...}, "rl": {...}} as JSON:
# the SFT run's and snapshot's settings, and each RL iteration's (G, queries per iteration...).
TRAINING_LOOP_CONFIG = os.environ.get("TRAINING_LOOP_CONFIG", "{}")
# A pool larger than this is exported by a training worker instead of in the request.
TRAINING_SNAPSHOT_SYNC_ROWS = int(os.environ.get("TRAINING_SNAPSHOT_SYNC_ROWS", "500"))
# An RL run's rollouts (training/rl_round.py): phones they are collected on, and how long they may take.
TRAINING_ROLLOUT_PHONES = int(os.environ.get("TRAINING_ROLLOUT_PHONES", "4"))
TRAINING_ROLLOUT_TIMEOUT_S = float(os.environ.get("TRAINING_ROLLOUT_TIMEOUT_S", str(3 * 3600)))
# Model hosts (`make model-host`, training/model_host/): serve trained checkpoints unattended.
MODEL_HOST_NAME = os.environ.get("MODEL_HOST_NAME", "")  # default: the machine's hostname
MODEL_HOST_ADDRESS = os.environ.get("MODEL_HOST_ADDRESS", "127.0.0.1")  # how the console reaches its servers
MODEL_HOST_PORT = int(os.environ.get("MODEL_HOST_PORT", "8100"))  # the first port its servers listen on
MODEL_HOST_MAX_SERVERS = int(os.environ.get("MODEL_HOST_MAX_SERVERS", "2"))  # servers one host runs at once
# The newest N trained checkpoints stay served while no run uses them (the next round's is ready at once).
MODEL_HOST_KEEP_WARM = int(os.environ.get("MODEL_HOST_KEEP_WARM", "1"))
MODEL_HOST_ENGINE = os.environ.get("MODEL_HOST_ENGINE", "auto")  # auto (vLLM with a GPU), vllm or builtin
MODEL_HOST_DEVICE = os.environ.get("MODEL_HOST_DEVICE", "auto")  # the built-in server's torch device
MODEL_HOST_START_TIMEOUT_S = float(os.environ.get("MODEL_HOST_START_TIMEOUT_S", "900"))
MODEL_HOST_MAX_RESTARTS = int(os.environ.get("MODEL_HOST_MAX_RESTARTS", "5"))  # in a row without answering
MODEL_HOST_STALE_S = float(os.environ.get("MODEL_HOST_STALE_S", "120"))  # a silent host's versions are free
# "Serve it now" on a checkpoint's page keeps it served this long though no run uses it (then a run keeps it).
MODEL_HOST_REQUEST_HOLD_S = float(os.environ.get("MODEL_HOST_REQUEST_HOLD_S", "3600"))
# The environment service (training/env_service.py) over leased phones, for external RL frameworks.
ENV_SERVICE_TOKEN = os.environ.get("ENV_SERVICE_TOKEN", "")
# How long a session's phone stays leased without a step (then it is interrupted and routed).
ENV_SERVICE_LEASE_SECONDS = int(os.environ.get("ENV_SERVICE_LEASE_SECONDS", "300"))
# Prometheus scrapes /metrics with `Authorization: Bearer <METRICS_TOKEN>` (flywheel/console/metrics.py);
# empty: token access is off, and only signed-in admins and managers read it.
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
