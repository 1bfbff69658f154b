"""Settings read from the environment; with nothing set: SQLite and the in-memory channel layer.

See docs/deploy.md for every variable.
"""

import os
import re
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from dashboard.env import (
    env_bool,
    env_hosts,
    env_int,
    env_list,
    env_str,
    private_dir,
    private_file,
    secret_key,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("DASHBOARD_VAR_DIR", str(BASE_DIR / "var")))

SECRET_KEY = secret_key(VAR_DIR)
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

# Daphne's app only gives `runserver` its ASGI server; importing it (daphne.server, Twisted) costs every
# other manage.py command about 0.3 s of CPU for nothing.
RUNSERVER = sys.argv[1:2] == ["runserver"]
INSTALLED_APPS = [
    *(["daphne"] if RUNSERVER else []),
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "axes",
    "tasksapp",
]

MIDDLEWARE = [
    "tasksapp.middleware.RetryLostConnectionMiddleware",  # first: it may answer a page load again
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # After sessions, before CommonMiddleware (Django's order); the language is chosen in
    # tasksapp/prefs.py: the user's setting, then the switch's cookie, then Accept-Language.
    "tasksapp.middleware.LanguageMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "tasksapp.middleware.TimeZoneMiddleware",  # the reader's time zone (docs/operator.md)
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "tasksapp.middleware.NoStoreMiddleware",
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
ASGI_APPLICATION = "dashboard.asgi.application"
WSGI_APPLICATION = None

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
                "django.template.context_processors.i18n",
                "tasksapp.prefs.context",
            ],
        },
    },
]
# Django's renderer, with its commonest widget and error-list templates written in Python (the
# inbox's fields were a third of its time): tasksapp/lib/widgets.py.
FORM_RENDERER = "tasksapp.lib.widgets.Renderer"

# How long a worker's claim on a task lasts without renewal (docs/worker.md); also how long
# PostgreSQL lets a transaction sit idle (DATABASE_IDLE_IN_TRANSACTION_SECONDS below).
MCP_LEASE_SECONDS = env_int("MCP_LEASE_SECONDS", 30, minimum=2)

_DEFAULT_DB = f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
try:
    DATABASES = {"default": dj_database_url.parse(env_str("DATABASE_URL", _DEFAULT_DB), conn_max_age=60)}
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a database URL ({exc}).") from None
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's connection pool: every thread (Daphne's request and websocket threads, the worker's
    # database thread) borrows a connection for one step and gives it back, so a process holds at
    # most DATABASE_POOL_SIZE connections, and each is checked before it is lent (a connection
    # that PostgreSQL dropped is replaced, never handed out). 0 turns pooling off (e.g. behind
    # pgbouncer): then connections persist for a minute and are health-checked per request.
    _POOL_SIZE = env_int("DATABASE_POOL_SIZE", 10)
    # A transaction idle this long belongs to a stalled process (SIGSTOP, a paused VM, a starved
    # machine): PostgreSQL ends its session, so the row locks it holds stop keeping other workers
    # from the tasks whose leases lapsed meanwhile (our transactions never wait on the network).
    # Default: one lease (MCP_LEASE_SECONDS); 0 turns it off.
    _IDLE_IN_TRANSACTION = env_int("DATABASE_IDLE_IN_TRANSACTION_SECONDS", MCP_LEASE_SECONDS, minimum=0)
    if _IDLE_IN_TRANSACTION:
        _options = DATABASES["default"].setdefault("OPTIONS", {})
        _setting = f"-c idle_in_transaction_session_timeout={_IDLE_IN_TRANSACTION * 1000}"
        _options["options"] = f"{_options.get('options', '')} {_setting}".strip()
    if _POOL_SIZE:
        import psycopg_pool.base
        from psycopg_pool import ConnectionPool

        # psycopg_pool doubles the pause between reconnection attempts (1, 2, 4, 8 s...), so after
        # a three-second restart the pool would wait another ~15 s before it tried again, and every
        # page and worker step with it. Retry every second (jittered) for as long as it is away.
        # (The class is internal and was renamed in 3.3; the database-restart drill in
        # tests/faults/test_infra.py notices.)
        for _name in ("AttemptWithBackoff", "ConnectionAttempt"):
            if hasattr(psycopg_pool.base, _name):
                getattr(psycopg_pool.base, _name).DELAY_BACKOFF = 1.0

        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": min(2, _POOL_SIZE),
            "max_size": _POOL_SIZE,
            "timeout": env_int("DATABASE_POOL_TIMEOUT", 30, minimum=1),
            "max_idle": 60,
            "check": ConnectionPool.check_connection,
        }
    else:
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The database holds everything (credentials encrypted, but task data in clear): owner only.
    private_dir(VAR_DIR)
    _database_file = Path(DATABASES["default"]["NAME"])
    if str(_database_file) != ":memory:" and _database_file.parent.is_dir():
        private_file(_database_file)
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA busy_timeout=10000; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
    # A file, not memory, so worker and server processes started by tests share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_db.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Nothing uses a cache (the task list's rows are cheap to build: tasksapp/presenters/task_rows.py).
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "default"},
}

REDIS_URL = env_str("REDIS_URL", "")
if REDIS_URL:
    # tasksapp/redislayer.py says why: connections wait for a free one instead of failing, and a
    # socket timeout well above channels_redis's 5 s blocking read keeps quiet websockets open.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "tasksapp.redislayer.PooledRedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "max_connections": env_int("REDIS_MAX_CONNECTIONS", 50, minimum=2),
                        "timeout": 20,  # seconds a command waits for a free connection
                        "socket_timeout": env_int("REDIS_SOCKET_TIMEOUT", 30, minimum=10),
                        "socket_connect_timeout": 5,
                        "socket_keepalive": True,
                        "health_check_interval": 15,
                        "retry_on_timeout": True,
                    }
                ],
                # A process's local channels (its sockets' and its hub's, tasksapp/live/hub.py)
                # share one Redis list: room for a burst of every change for all its pages.
                "channel_capacity": {"specific.*": env_int("REDIS_PROCESS_CAPACITY", 10_000, minimum=100)},
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            # The hub's channel (tasksapp/live/hub.py) gets room for a burst; (pattern, capacity)
            # pairs, as this layer does not compile the globs the Redis one takes.
            "CONFIG": {"channel_capacity": [(re.compile(r"hub\.inmemory!"), 10_000)]},
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling (django-axes, tasksapp/login_throttle.py): per (account, address) pair, with much
# higher limits per account and per address, on /login/ and /admin/login/; failures are logged and
# kept in the admin (Axes → access failures).
# tasksapp.signin.Backend is ModelBackend with the user's row read through a compiled query;
# ModelBackend stays for sessions signed in before it (tasksapp/signin.py).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "tasksapp.signin.Backend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "tasksapp.login_throttle.PairThenWideThrottle"
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_ACCOUNT_FAILURE_LIMIT = env_int("LOGIN_ACCOUNT_FAILURE_LIMIT", 10 * AXES_FAILURE_LIMIT, minimum=1)
LOGIN_ADDRESS_FAILURE_LIMIT = env_int("LOGIN_ADDRESS_FAILURE_LIMIT", 10 * AXES_FAILURE_LIMIT, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "username", "ip_address"]  # login_throttle: this order
AXES_RESET_ON_SUCCESS = True
AXES_ENABLE_ACCESS_FAILURE_LOG = True
AXES_LOCKOUT_CALLABLE = "tasksapp.login_throttle.locked_out"
AXES_CLIENT_IP_CALLABLE = "tasksapp.login_throttle.client_address"
AXES_VERBOSE = False
AXES_SENSITIVE_PARAMETERS: list[str] = []  # the log names the account and address (never the password)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
# English, and Simplified Chinese (the language of the protocol brief): docs/operator.md "Language".
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
LANGUAGE_COOKIE_SAMESITE = "Lax"
LANGUAGE_COOKIE_HTTPONLY = True
LANGUAGE_COOKIE_SECURE = env_bool("SECURE_COOKIES", not DEBUG and env_bool("HTTPS", False))
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))

# Sessions in the database under a keyed hash of their key, never the key (tasksapp/sessions.py).
SESSION_ENGINE = "tasksapp.sessions"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", not DEBUG and env_bool("HTTPS", False))
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("HTTPS", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", SECURE_HSTS_SECONDS > 0)
# Preloading is a promise to browsers that is slow to take back: only when asked for.
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
BEHIND_PROXY = env_bool("BEHIND_PROXY", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_PROXY else None
X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {
        "one_line_refusals": {"()": "tasksapp.logfilters.RefusalsOnOneLine"},
        "one_line_retries": {"()": "tasksapp.logfilters.RetriedOnOneLine"},
        "once_per_second": {"()": "tasksapp.logfilters.OncePerSecond"},
        "layer_failures_counted": {"()": "tasksapp.logfilters.LayerFailuresCounted"},
        "one_line_client_left": {"()": "tasksapp.logfilters.ClientLeftOnOneLine"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        # A refused request is one line, without the traceback of the exception that refused it.
        # A page load answered again on a new connection logs one WARNING line, not an ERROR.
        "django.request": {"filters": ["one_line_refusals", "one_line_retries"]},
        # The pool's reconnecting threads each warn at every attempt while the database is away.
        "psycopg.pool": {"filters": ["once_per_second"]},
        # A websocket that Redis going away closed: counted in a few lines per outage, not a
        # traceback each (tasksapp/redislayer.py). A request whose client left mid-request: one
        # INFO line.
        "daphne.server": {"filters": ["layer_failures_counted", "one_line_client_left"]},
        # django-axes says four things at INFO for every sign-in; its warnings (a failed login, a
        # lockout) are the ones worth a line each.
        "axes": {"level": "WARNING"},
    },
}

# Encrypts server credentials, task ids and input keys at rest; falls back to SECRET_KEY. Older
# keys stay readable while listed as fallbacks; `manage.py rekey` rewrites under the current key.
DASHBOARD_ENCRYPTION_KEY = env_str("DASHBOARD_ENCRYPTION_KEY", "")
DASHBOARD_ENCRYPTION_KEY_FALLBACKS = env_list("DASHBOARD_ENCRYPTION_KEY_FALLBACKS", "")
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", "")

# The worker (tasksapp.engine); docs/worker.md explains each (MCP_LEASE_SECONDS is set above, beside
# the database it bounds).
MCP_POLL_FLOOR_MS = env_int("MCP_POLL_FLOOR_MS", 250, minimum=10)
MCP_POLL_DEFAULT_MS = env_int("MCP_POLL_DEFAULT_MS", 2000, minimum=10)
MCP_POLL_SAFETY_NET_MS = env_int("MCP_POLL_SAFETY_NET_MS", 30000, minimum=100)
MCP_POLL_JITTER = env_int("MCP_POLL_JITTER_PERCENT", 10, minimum=0) / 100
MCP_BACKOFF_BASE_MS = env_int("MCP_BACKOFF_BASE_MS", 1000, minimum=10)
MCP_BACKOFF_MAX_MS = env_int("MCP_BACKOFF_MAX_MS", 300000, minimum=10)
# /metrics accepts "Authorization: Bearer <METRICS_TOKEN>" (empty: logged-in viewers only); docs/deploy.md
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
# A worker whose polls start later than this (p99 between two heartbeats) reports itself behind.
MCP_WORKER_LAG_P99_MS = env_int("MCP_WORKER_LAG_P99_MS", 1000, minimum=0)
# The overview warns "the mirror is N s behind the servers" when a worker's p99 of server change ->
# mirror commit is over this.
MCP_MIRROR_LAG_WARN_MS = env_int("MCP_MIRROR_LAG_WARN_MS", 5000, minimum=0)
MCP_TTL_GRACE_MS = env_int("MCP_TTL_GRACE_MS", 60000, minimum=0)
# A task's timeline: message-only changes within this window fold into one event; at most this many.
MCP_TIMELINE_COALESCE_MS = env_int("MCP_TIMELINE_COALESCE_MS", 1000, minimum=0)
MCP_TIMELINE_MAX_EVENTS = env_int("MCP_TIMELINE_MAX_EVENTS", 1000, minimum=10)
MCP_LISTEN_ACK_TIMEOUT_MS = env_int("MCP_LISTEN_ACK_TIMEOUT_MS", 10000, minimum=100)
# Input requests a task may have recorded over its life (beyond: flagged, newer keys not recorded),
# and how long a request the server replaced (state "gone") is kept before it is deleted.
MCP_MAX_INPUT_REQUESTS_PER_TASK = env_int("MCP_MAX_INPUT_REQUESTS_PER_TASK", 500, minimum=1)
MCP_INPUT_GONE_KEEP_SECONDS = env_int("MCP_INPUT_GONE_KEEP_SECONDS", 3600, minimum=0)
# Questions a server asks before a task exists (MRTR) expire when nobody answers within this.
MCP_PENDING_CALL_TTL_SECONDS = env_int("MCP_PENDING_CALL_TTL_SECONDS", 900, minimum=10)
# One "input needed" notification per task per window of this many seconds, a digest when it ends.
NOTIFY_TASK_WINDOW_SECONDS = env_int("NOTIFY_TASK_WINDOW_SECONDS", 600, minimum=60)
MCP_MAX_BODY_BYTES = env_int("MCP_MAX_BODY_BYTES", 8 * 1024 * 1024, minimum=1024)
# What a server's tools/list may store (docs/security.md): the rest is left out, and the server page says so.
MCP_MAX_TOOLS = env_int("MCP_MAX_TOOLS", 1000, minimum=1)
MCP_MAX_TOOLS_BYTES = env_int("MCP_MAX_TOOLS_BYTES", 2 * 1024 * 1024, minimum=1024)
# Refuse server URLs (and names resolving to) loopback, private and link-local addresses (docs/deploy.md).
MCP_BLOCK_PRIVATE_ADDRESSES = env_bool("MCP_BLOCK_PRIVATE_ADDRESSES", False)
# URLs a remote party names (OAuth discovery: metadata, token, registration endpoints) must be
# https on public addresses, and webhooks must reach public addresses, except on the MCP server's
# own origin and on these: host names, host:port, addresses, networks (docs/security.md).
OUTBOUND_ALLOWED_HOSTS = env_hosts("OUTBOUND_ALLOWED_HOSTS", "")
# Overall deadlines (seconds) of one OAuth exchange and of one webhook or email delivery.
OAUTH_DEADLINE_SECONDS = env_int("OAUTH_DEADLINE_SECONDS", 20, minimum=1)
NOTIFY_DEADLINE_SECONDS = env_int("NOTIFY_DEADLINE_SECONDS", 30, minimum=1)
# Set by `manage.py demo` only: the page of its outbox sink (what its email and webhooks sent).
DEMO_SINK_URL = ""

# Retention (docs/operations.md#retention): days each kind is kept, 0 = forever; `manage.py purge`
# and the worker (daily) delete the rest, RETAIN_BATCH rows per transaction.
RETAIN_TASKS_DAYS = env_int("RETAIN_TASKS_DAYS", 90, minimum=0)  # finished tasks, events, input requests
RETAIN_AUDIT_DAYS = env_int("RETAIN_AUDIT_DAYS", 365, minimum=0)
RETAIN_OUTBOX_DAYS = env_int("RETAIN_OUTBOX_DAYS", 30, minimum=0)  # notifications sent or given up
RETAIN_SESSIONS_DAYS = env_int("RETAIN_SESSIONS_DAYS", 7, minimum=0)  # after the session expired
RETAIN_BATCH = env_int("RETAIN_BATCH", 500, minimum=1)
if RETAIN_BATCH > 10_000:
    raise ImproperlyConfigured(
        f"RETAIN_BATCH={RETAIN_BATCH} is above 10000: batches must stay short transactions."
    )

# The gateway (docs/gateway.md): the dashboard's public URL (for gatewayUrl in `servers list`), the
# largest request body an agent may send, origins besides the dashboard's own that may call it
# from a browser, how stale the mirror may be beyond a poll interval, listen keep-alives.
DASHBOARD_URL = env_str("DASHBOARD_URL", "http://127.0.0.1:8000").rstrip("/")
MCP_GATEWAY_MAX_BODY_BYTES = env_int("MCP_GATEWAY_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
MCP_GATEWAY_ALLOWED_ORIGINS = env_list("MCP_GATEWAY_ALLOWED_ORIGINS", "")
MCP_GATEWAY_FRESH_SLACK_MS = env_int("MCP_GATEWAY_FRESH_SLACK_MS", 250, minimum=0)
# How long a gateway process keeps a caller (token, scope) and a fresh task between requests
# (tasksapp/gateway/cache.py): a revoked token stops working within this. 0: not kept.
MCP_GATEWAY_CACHE_MS = env_int("MCP_GATEWAY_CACHE_MS", 1000, minimum=0)
MCP_GATEWAY_KEEPALIVE_SECONDS = env_int("MCP_GATEWAY_KEEPALIVE_SECONDS", 15, minimum=1)
MCP_GATEWAY_MAX_STREAMS = env_int("MCP_GATEWAY_MAX_STREAMS", 10, minimum=1)
MCP_GATEWAY_TRAFFIC_FLUSH_SECONDS = env_int("MCP_GATEWAY_TRAFFIC_FLUSH_SECONDS", 5, minimum=1)
MCP_GATEWAY_TRAFFIC_DAYS = env_int("MCP_GATEWAY_TRAFFIC_DAYS", 2, minimum=1)

# The live layer (docs/live.md): frames, catch-up, sockets' lifetime; the Content-Security-Policy.
LIVE_MAX_FRAME_BYTES = env_int("LIVE_MAX_FRAME_BYTES", 256 * 1024, minimum=16 * 1024)
LIVE_COALESCE_SECONDS = env_int("LIVE_COALESCE_MS", 150, minimum=0) / 1000
LIVE_OVERVIEW_SECONDS = env_int("LIVE_OVERVIEW_MS", 1000, minimum=0) / 1000
LIVE_CATCH_UP_LIMIT = env_int("LIVE_CATCH_UP_LIMIT", 100, minimum=1)
LIVE_SESSION_CHECK_SECONDS = env_int("LIVE_SESSION_CHECK_SECONDS", 60, minimum=1)
LIVE_SOCKET_MAX_SECONDS = env_int("LIVE_SOCKET_MAX_SECONDS", 3600, minimum=10)
# Threads a web process renders live fragments in (tasksapp/live/shared.py): each holds a pooled
# database connection while it renders, so keep DATABASE_POOL_SIZE above it.
LIVE_RENDER_THREADS = env_int("LIVE_RENDER_THREADS", 4, minimum=1)
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],  # results carry their images inline; the favicon is data:,
    "media-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],  # the live socket and the fallback poll: this origin only
    "frame-ancestors": [CSP.NONE],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
}

# Daphne serves /static/ itself unless a proxy or CDN does (set SERVE_STATIC=false then).
SERVE_STATIC = env_bool("SERVE_STATIC", True)

# Email for notifications (docs/notifications.md): Django's SMTP backend, configured from the
# environment. Each setting is set only when its variable is, so an unconfigured dashboard keeps
# Django's defaults (and Django 6.1's MAILERS deprecation notice stays quiet).
_environ = os.environ
if "EMAIL_HOST" in _environ:
    EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
if "EMAIL_PORT" in _environ:
    EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
if "EMAIL_HOST_USER" in _environ:
    EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
if "EMAIL_HOST_PASSWORD" in _environ:
    EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
if "EMAIL_USE_TLS" in _environ:
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
