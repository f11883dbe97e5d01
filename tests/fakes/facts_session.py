"""A scripted 100-turn coding session with planted facts, asked for 60+ turns after they were planted.

It measures what issue 28 calls the harder held-out session: does a fact the session came across long ago
still reach the model when the user asks about it? Fourteen facts are planted in varied ways, each with a
value found nowhere else in the session (see :data:`FACTS`):

- in the user's prompts: mid-paragraph, without a trigger phrase, as an id mid-sentence, with a trigger
  ("the release codename is …");
- in tool results: a ``NAME = value`` line of a settings module, a key of a YAML file and of a TOML file that
  were read, a line of a command's 20 KB output, a search match;
- in the assistant's replies: a decision, a value mid-paragraph, a choice ("I chose port …"), a suggestion.

The other turns are ordinary work: reads, commands printing 10–30 KB (``tools/check.py`` in the repository
:func:`make_repo` writes), edits, a pasted log, small talk, follow-ups. With ``turn_count`` turns, the facts
are planted in turns 2–28 (every other turn) and each is asked ``turn_count - 29`` turns later (71 in the
100-turn session), in turns of their own; a fact counts as kept when the first request of its asking turn
that the server accepted holds its value anywhere (system prompt, context block, history, summary).

:class:`FactsModel` is the scripted model, a responder for :class:`tests.fakes.openai_server.OpenAIServer`
(codling's real provider path): it counts each request with o200k as ``tests/fakes/fidelity.py`` does,
rejects one over the window (HTTP 400, OpenAI's wording), plays the current turn's tool calls and reply, and
answers summary requests as a summarizer in one of the :data:`MODES`:

- ``working``: a good model's handoff summary (:func:`good_summary`), written from the transcript it is sent
  and only from it: the goal, the user's statements of concrete values, the assistant's decisions and stated
  values, the ``NAME = value`` and ``key: value`` lines and the port/version lines of what tools showed, the
  latest test status, and the lines of an earlier summary carried forward; noted briefly, and within the
  length the request asks for (when codling asks for a short summary, the oldest go);
- ``failing``: HTTP 500;
- ``empty``: an empty answer;
- ``garbage``: a few hundred characters of keyboard mash (long enough to pass for a summary by its length);
- ``hanging``: the stream starts and then nothing comes until the server stops. codling gives up on a silent
  summarizer after ``SUMMARY_IDLE_TIMEOUT`` seconds (``brain/builtin_turns.py``: 30, not a setting) and uses its
  fallback, so each hang costs that much wall-clock time (its circuit breaker then skips the summarizer for a
  few compactions): only the bench runs this mode, once, on a short schedule.

``run_facts_session`` drives it through codling's session store, live, and returns a :class:`FactsResult`;
``table`` prints results. scripts/bench.py reports it; tests/unit/test_facts_session.py runs a short version.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from codling.llm.tokens import count_tokens
from tests.fakes.fidelity import MAX_OUTPUT, Request, Turn, request_tokens
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, ScriptedReply, ToolCall, Usage, text_of
from tests.fakes.prefix_cache import cache_share
from tests.fakes.scenarios import user_prompt
from tests.fakes.summarizer import is_summary_body, transcript_of_body

MODEL_NAME = "facts-model"

Mode = Literal["working", "failing", "empty", "garbage", "hanging"]
MODES: tuple[Mode, ...] = ("working", "failing", "empty", "garbage", "hanging")

FIRST_PLANT = 2
"""The turn the first fact is planted in (the first request is kept by every compaction: nothing is planted
in it)."""
PLANT_EVERY = 2
"""Turns from one planted fact to the next."""


# --- the facts ---------------------------------------------------------------------------------------------

Where = Literal["user", "tool", "assistant"]


@dataclass(frozen=True)
class Fact:
    """A value planted once and asked about much later.

    ``key`` is the value as the report names it; ``pattern`` (a regular expression, case-insensitive, within
    one line) is what a request must hold for the fact to count as kept (``key`` itself when empty).
    ``plant`` is the turn that plants it, ``ask`` the prompt of the turn that asks about it; ``source`` the
    repository file a tool fact is read from."""

    key: str
    where: Where
    how: str
    plant: Turn
    ask: str
    pattern: str = ""
    source: str = ""

    @property
    def regex(self) -> re.Pattern[str]:
        """What is looked for."""
        return re.compile(self.pattern or re.escape(self.key), re.IGNORECASE)


FACTS: tuple[Fact, ...] = (
    Fact(
        "PROJ-4411",
        "user",
        "an id mid-sentence in a prompt",
        Turn(
            "Next I want to tighten the upload handler. This is for ticket PROJ-4411, so keep the change small "
            "and don't refactor anything around it. Read src/ingest/handlers.py first.",
            (ToolCall("read_file", {"path": "src/ingest/handlers.py"}),),
            "The handlers are thin wrappers that hand the payload to the queue; none of them validates its input.",
        ),
        "I'm writing the PR description now: which ticket is this work for?",
    ),
    Fact(
        "MAX_WORKERS = 12",
        "tool",
        "a NAME = value line of a settings module that was read",
        Turn(
            "Read src/ingest/settings.py, I want to know what we're working with before we touch the worker pool.",
            (ToolCall("read_file", {"path": "src/ingest/settings.py"}),),
            "Read it. The settings module holds the HTTP, queue, worker, retry and storage knobs, each overridable "
            "from the environment; nothing looks off at first sight.",
        ),
        "How many worker processes does the settings module configure?",
        pattern=r"MAX_WORKERS\W{1,8}(?:is\W+)?12\b",
        source="src/ingest/settings.py",
    ),
    Fact(
        "orjson",
        "assistant",
        "a decision the assistant stated",
        Turn(
            "The JSON encoding in the export path is slow. What should we use instead of the json module? Have a "
            "look at src/ingest/export.py.",
            (ToolCall("read_file", {"path": "src/ingest/export.py"}),),
            "I compared the usual options against the export path. We'll use orjson for serialization from here "
            "on: it is the fastest of them and encodes datetimes and dataclasses natively, so the custom encoder "
            "in export.py can go.",
        ),
        "Which JSON library did we settle on for serialization?",
    ),
    Fact(
        "17 attempts",
        "user",
        "a value mid-paragraph in a prompt",
        Turn(
            "The reconnect storms on Monday were odd, the dashboards showed the queue clients hammering redis for "
            "almost ten minutes. I checked yesterday and the retry budget turned out to be 17 attempts, which "
            "explains it; anyway, read the queue module.",
            (ToolCall("read_file", {"path": "src/ingest/queue.py"}),),
            "The queue module wraps the redis client and retries every failed call with a fixed backoff, so a "
            "long retry budget turns one outage into a storm.",
        ),
        "Remind me, what was the retry budget I mentioned when we talked about the reconnect storms?",
        pattern=r"\b17 (?:attempts|retries)|retry budget\D{0,24}\b17\b",
    ),
    Fact(
        "timeout_ms: 4500",
        "tool",
        "a key of a YAML file that was read",
        Turn(
            "Open config/service.yaml, I need to see how the upstream client is configured.",
            (ToolCall("read_file", {"path": "config/service.yaml"}),),
            "The upstream section sets the base URL, the timeouts, the connection pool and the TLS options; the "
            "server and storage sections are the defaults.",
        ),
        "What is the upstream client's timeout in config/service.yaml?",
        pattern=r"timeout_ms\W{1,8}(?:is\W+)?4500\b",
        source="config/service.yaml",
    ),
    Fact(
        "0x5A3F",
        "assistant",
        "a value mid-paragraph in a reply",
        Turn(
            "Why does the fixture loader reject samples/orders.bin? Run the fixture check.",
            (ToolCall("run_command", {"command": "python3 tools/check.py fixture"}),),
            "The loader checks the header before it reads the body, so a truncated body still passes the first "
            "check and fails later with a confusing error. I worked it out by hand: the checksum of the fixture "
            "is 0x5A3F, so the test pins it, and the loader should compare against the trailer instead of the "
            "header.",
        ),
        "What checksum did you work out for the orders fixture?",
    ),
    Fact(
        "pg-stage-4.internal:6432",
        "user",
        "a fact without a trigger phrase",
        Turn(
            "Staging DB: pg-stage-4.internal:6432. Run the migration check against the local copy first.",
            (ToolCall("run_command", {"command": "python3 tools/check.py migrations --kb 11"}),),
            "All migrations apply cleanly to the local copy; none of them locks a large table.",
        ),
        "What's the staging database host and port again?",
        pattern=r"pg-stage-4\.internal\D{0,12}6432\b",
    ),
    Fact(
        "8744",
        "tool",
        "a line of a command's 20 KB output",
        Turn(
            "Start the dev server in check mode and tell me whether it comes up cleanly.",
            (ToolCall("run_command", {"command": "python3 tools/check.py serve --kb 20"}),),
            "It comes up cleanly: startup completes, the health checks all answer 200 and it shuts down as check "
            "mode should.",
        ),
        "Which port did the dev server listen on when we started it in check mode?",
        pattern=r"\b8744\b",
        source="tools/check.py",
    ),
    Fact(
        "9317",
        "assistant",
        "a choice the assistant stated",
        Turn(
            "We need a metrics endpoint for Prometheus. Pick a port that doesn't clash with anything we run; "
            "just tell me, I'll add it to the deploy config myself.",
            (),
            "I chose port 9317 for the metrics server. Nothing in the service or its sidecars listens there, and "
            "it is in the range exporters usually take, so it will not surprise whoever reads the scrape config.",
        ),
        "Which port did we pick for the metrics server?",
        pattern=r"\b9317\b",
    ),
    Fact(
        "BLUE-HERON",
        "user",
        "a fact stated with a trigger phrase",
        Turn(
            "For the record, the release codename is BLUE-HERON; don't put it anywhere in the code yet. Now run "
            "the full test suite.",
            (ToolCall("run_command", {"command": "python3 tools/check.py tests --shard 5 --kb 26"}),),
            "Two tests fail, test_cache_roundtrip and test_parser_empty_input; the rest pass.",
        ),
        "What's the release codename? I need it for the changelog.",
    ),
    Fact(
        "rates-2019q3",
        "tool",
        "a search match",
        Turn(
            "Where do we still reference the legacy rate tables? Search src for LEGACY_.",
            (ToolCall("search", {"pattern": "LEGACY_", "path": "src"}),),
            "A handful of references, all in billing; nothing in the ingest path uses them.",
        ),
        "Which legacy rate table did that LEGACY_ search turn up in billing?",
        source="src/billing/rates.py",
    ),
    Fact(
        "45 minutes",
        "assistant",
        "a suggestion the assistant stated without a trigger phrase",
        Turn(
            "The dashboard keeps hitting the database. Look at the cache layer in src/ingest/cache.py.",
            (ToolCall("read_file", {"path": "src/ingest/cache.py"}),),
            "The dashboard refreshes its panels every 40 minutes, so the cache TTL should be 45 minutes; with the "
            "current ten it misses on almost every refresh. I have not changed it yet.",
        ),
        "What cache TTL did you suggest for the dashboard queries?",
        pattern=r"\b45 ?(?:minutes|mins?)\b",
    ),
    Fact(
        "02:40 UTC",
        "user",
        "a fact mid-paragraph in a long prompt, attributed to someone else",
        Turn(
            "Some context for the next few changes, since they touch scheduling: Marta from infra owns the ingest "
            "boxes, and she says the nightly batch window starts at 02:40 UTC, so nothing heavy should be "
            "scheduled around then. She also asked us to keep the cron entries in one place. With that in mind, "
            "read src/ingest/scheduler.py.",
            (ToolCall("read_file", {"path": "src/ingest/scheduler.py"}),),
            "The scheduler keeps its jobs in one table, each with a cron expression and a handler; the reindex and "
            "the compaction jobs both run at night.",
        ),
        "When does the nightly batch window start? I want to schedule the reindex job.",
        pattern=r"02:40\s*UTC",
    ),
    Fact(
        "export_rows_per_day = 86000",
        "tool",
        "a key of a TOML file that was read",
        Turn(
            "Read config/quotas.toml; a customer says their exports stop halfway through the day.",
            (ToolCall("read_file", {"path": "config/quotas.toml"}),),
            "Each tenant has its own upload, export and request quotas, with defaults for the rest; the export "
            "quota is counted per day in rows, which would explain exports stopping halfway.",
        ),
        "What's Initech's daily export row limit in config/quotas.toml?",
        pattern=r"export_rows_per_day\W{1,8}(?:is\W+)?86,?000\b",
        source="config/quotas.toml",
    ),
)
"""The planted facts, in plant order (the i-th is planted in turn ``FIRST_PLANT + PLANT_EVERY * i``)."""


def plant_turn(index: int) -> int:
    """The turn (numbered from 1) the ``index``-th fact is planted in."""
    return FIRST_PLANT + PLANT_EVERY * index


def ask_gap(turn_count: int) -> int:
    """How many turns after its planting a fact is asked, in a session of ``turn_count`` turns."""
    gap = turn_count - 1 - plant_turn(len(FACTS) - 1)
    if gap < 2:
        raise ValueError(f"a session needs at least {turn_count - gap + 2} turns, not {turn_count}")
    return gap


# --- the other turns ---------------------------------------------------------------------------------------

MODULES = ("handlers", "parser", "queue", "storage", "scheduler", "cache", "export")


def _failing(shard: int) -> tuple[str, str]:
    """The two tests ``tools/check.py tests --shard N`` reports failing (it computes them the same way)."""
    return MODULES[shard % len(MODULES)], MODULES[(shard + 3) % len(MODULES)]


PASTED_LOG = "\n".join(
    f"2026-11-24T08:{i // 60:02d}:{i % 60:02d}Z ingest.storage WARNING slow write to bucket ingest-raw "
    f"(attempt {1 + i % 3}, {900 + (i * 37) % 400} ms)"
    for i in range(110)
) + (
    "\nTraceback (most recent call last):\n"
    '  File "src/ingest/storage.py", line 88, in put\n'
    "    raise StorageTimeout(key)\n"
    "ingest.storage.StorageTimeout: ingest-raw/2026/11/24/batch-0931.ndjson"
)


def _filler(number: int, k: int, rng: random.Random) -> Turn:
    """Ordinary work for turn ``number`` (the ``k``-th such turn): reads, commands with long output, edits,
    searches, follow-ups and small talk, in a fixed rotation with some variety."""
    kind = ("tests", "read", "edit", "talk", "log", "follow", "read", "lint", "edit", "search", "talk", "tests")[k % 12]
    module = MODULES[(k * 3 + 1) % len(MODULES)]
    if number == 1:
        return Turn(
            "We're going to spend the next while on the ingest service in this repository: tightening the "
            "handlers, the queue's retries and the export path. Start by reading the README and give me a short "
            "overview.",
            (ToolCall("read_file", {"path": "README.md"}),),
            "The service accepts uploads over HTTP, queues them in redis and writes batches to object storage; "
            "exports and a nightly scheduler sit beside it.",
        )
    if k % 17 == 16:
        return Turn(
            "Here is what I get locally when I run the exporter against my copy, any idea?\n```\n"
            + PASTED_LOG
            + "\n```",
            (),
            "That is the storage backend timing out on a slow bucket, the same thing CI saw; it is not caused by "
            "our changes.",
        )
    if kind == "tests":
        shard = k % 7
        first, second = _failing(shard)
        prompt = rng.choice(
            (
                "Run the test suite.",
                "Run the tests again and tell me what's still failing.",
                f"Can you rerun the tests, the {module} ones in particular?",
                "Run the tests please, I want to see where we are.",
            )
        )
        return Turn(
            prompt,
            (ToolCall("run_command", {"command": f"python3 tools/check.py tests --shard {shard} --kb {10 + k % 21}"}),),
            f"Two tests fail, test_{first}_roundtrip and test_{second}_empty_input; everything else passes.",
        )
    if kind == "read":
        prompt = rng.choice(
            (f"Read src/ingest/{module}.py.", f"Open src/ingest/{module}.py and walk me through it briefly.")
        )
        return Turn(
            prompt,
            (ToolCall("read_file", {"path": f"src/ingest/{module}.py"}),),
            f"The {module} module is a set of small functions around one class; nothing in it needs changing for "
            "what we are doing.",
        )
    if kind == "edit":
        j = k // 6 % 40
        return Turn(
            f"In src/ingest/handlers.py, make handle_{j} reject empty payloads with a ValueError.",
            (
                ToolCall(
                    "edit_file",
                    {
                        "path": "src/ingest/handlers.py",
                        "old_text": f"def handle_{j}(payload):\n    return enqueue(payload)",
                        "new_text": f"def handle_{j}(payload):\n    if not payload:\n"
                        '        raise ValueError("empty payload")\n    return enqueue(payload)',
                    },
                ),
            ),
            f"Done: handle_{j} raises ValueError on an empty payload now.",
        )
    if kind == "talk":
        prompt, reply = rng.choice(
            (
                ("Thanks, that helps.", "Glad it does."),
                ("ok", "Okay."),
                ("Nice, that was quick.", "Thanks."),
                ("Sorry, got pulled into a meeting. Where were we?", "We were going through the ingest handlers."),
                ("Hmm, let me think about that for a moment.", "Sure, take your time."),
            )
        )
        return Turn(prompt, (), reply)
    if kind == "log":
        return Turn(
            rng.choice(("Show me the worker log.", "Tail the worker log, something feels slow.")),
            (ToolCall("run_command", {"command": f"python3 tools/check.py log --kb {15 + k % 16}"}),),
            "The workers process batches steadily; the slow ones all wait on the storage backend.",
        )
    if kind == "follow":
        first, _ = _failing(k % 7)
        return Turn(
            f"Why would test_{first}_roundtrip fail only in CI and not on my machine?",
            (),
            "Most likely ordering: CI runs the shards in parallel against one fixture directory, so the round "
            "trip sometimes sees another test's files. Giving each test its own temporary directory would fix it.",
        )
    if kind == "lint":
        return Turn(
            "Run the linter.",
            (ToolCall("run_command", {"command": f"python3 tools/check.py lint --kb {10 + k % 5}"}),),
            "Only line-length warnings, all in the handlers and the parser.",
        )
    pattern, shown = rng.choice(
        (("def handle_", "the handler definitions"), ("TODO", "TODO markers"), ("enqueue\\(", "calls to enqueue"))
    )
    return Turn(
        f"Search src for {shown}.",
        (ToolCall("search", {"pattern": pattern, "path": "src"}),),
        "A few hits, mostly in the handlers.",
    )


def script(turn_count: int = 100) -> list[Turn]:
    """The session's turns (numbered from 1 in the text: turn ``n`` is ``script()[n - 1]``)."""
    gap = ask_gap(turn_count)
    planted = {plant_turn(i): fact.plant for i, fact in enumerate(FACTS)}
    asked = {plant_turn(i) + gap: fact.ask for i, fact in enumerate(FACTS)}
    rng = random.Random(28)
    turns: list[Turn] = []
    k = 0
    for number in range(1, turn_count + 1):
        if number in planted:
            turns.append(planted[number])
        elif number in asked:
            turns.append(Turn(asked[number], (), "Here is what I have on that from earlier in the session."))
        else:
            turns.append(_filler(number, k, rng))
            k += 1
    return turns


# --- the repository ----------------------------------------------------------------------------------------

README = """# ingest

The ingest service accepts uploads over HTTP (JSON, NDJSON or CSV), queues them in redis and writes them in
batches to object storage. An export endpoint streams stored batches back out, and a small scheduler runs the
nightly jobs (reindex, compaction, quota resets).

## Layout

- `src/ingest/`: the service (handlers, parser, queue, storage, scheduler, cache, export, settings)
- `src/billing/`: usage accounting for the invoices
- `config/`: the service configuration and the tenant quotas
- `tools/check.py`: the project's checks (tests, lint, the dev server in check mode, logs, migrations)

## Working on it

Run `python3 tools/check.py tests` before pushing. The service reads its configuration once at start-up;
environment variables override the settings module.
""" + "\n".join(f"Some more prose about the service's history and its design, paragraph {i}." for i in range(30))

SETTINGS = '''"""Settings of the ingest service, read once at start-up; environment variables override them."""

from __future__ import annotations

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
ENVIRONMENT = os.environ.get("INGEST_ENV", "development")
DEBUG = ENVIRONMENT == "development"

# --- HTTP ------------------------------------------------------------------------------------------------
HTTP_HOST = os.environ.get("INGEST_HOST", "0.0.0.0")
REQUEST_BODY_LIMIT = 8 * 1024 * 1024
ALLOWED_CONTENT_TYPES = ("application/json", "application/x-ndjson", "text/csv")
CORS_ORIGINS = [
    "https://dashboard.example.com",
    "https://admin.example.com",
]

# --- queue -----------------------------------------------------------------------------------------------
QUEUE_URL = os.environ.get("INGEST_QUEUE_URL", "redis://localhost:6379/2")
QUEUE_DEPTH = 256
BATCH_SIZE = 500
BATCH_LINGER_SECONDS = 2.5

# --- workers ---------------------------------------------------------------------------------------------
MAX_WORKERS = 12
WORKER_PREFETCH = 4
WORKER_HEARTBEAT_SECONDS = 15
WORKER_SHUTDOWN_GRACE = 30

# --- retries ---------------------------------------------------------------------------------------------
RETRY_BACKOFF_SECONDS = 0.5
RETRY_BACKOFF_MAX_SECONDS = 20
RETRY_JITTER = 0.2

# --- storage ---------------------------------------------------------------------------------------------
STORAGE_BUCKET = os.environ.get("INGEST_BUCKET", "ingest-raw")
STORAGE_PREFIX = "uploads/"
STORAGE_REGION = "eu-west-1"
STORAGE_MULTIPART_THRESHOLD = 64 * 1024 * 1024

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"},
        "json": {"()": "ingest.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
        "file": {
            "class": "logging.handlers.RotatingFileHandler",
            "filename": "var/log/ingest.log",
            "maxBytes": 10485760,
            "backupCount": 5,
            "formatter": "json",
        },
    },
    "loggers": {
        "ingest": {"handlers": ["console", "file"], "level": "INFO"},
        "ingest.storage": {"handlers": ["file"], "level": "WARNING", "propagate": False},
    },
}


def env_flag(name: str, default: bool = False) -> bool:
    """A boolean from the environment ("1", "true", "yes" are true)."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes")


def storage_path(kind: str, day: str) -> str:
    """Where a batch of ``kind`` for ``day`` is stored in the bucket."""
    return f"{STORAGE_PREFIX}{kind}/{day}/"


FEATURE_BULK_EXPORT = env_flag("INGEST_BULK_EXPORT")
FEATURE_CSV_SNIFFING = env_flag("INGEST_CSV_SNIFFING", default=True)
'''

SERVICE_YAML = """# The ingest service's configuration (environment variables override it; see src/ingest/settings.py).
server:
  bind: 0.0.0.0
  workers_from_settings: true
  access_log: true
  body_limit_mb: 8

upstream:
  base_url: https://partner-api.example.com/v2
  timeout_ms: 4500
  connect_timeout_ms: 800
  pool_size: 20
  keepalive: true
  tls:
    verify: true
    ca_bundle: /etc/ssl/certs/ca-certificates.crt
    min_version: TLSv1.2

storage:
  bucket: ingest-raw
  region: eu-west-1
  multipart_threshold_mb: 64
  retention_days: 90

logging:
  level: INFO
  format: json
  file: var/log/ingest.log

features:
  bulk_export: false
  csv_sniffing: true
  ndjson_streaming: true

alerts:
  queue_depth_warning: 200
  queue_depth_critical: 240
  error_rate_warning: 0.02
  error_rate_critical: 0.05
  notify:
    - channel: ops-ingest
    - channel: oncall-platform
"""

QUOTAS_TOML = """# Tenant quotas: uploads, exports and requests (anything not given takes the defaults).

[defaults]
upload_mb_per_day = 2048
export_rows_per_day = 250000
requests_per_minute = 600
burst = 50

[tenants.initech]
upload_mb_per_day = 1024
export_rows_per_day = 86000
requests_per_minute = 300
burst = 20

[tenants.globex]
upload_mb_per_day = 8192
export_rows_per_day = 1500000
requests_per_minute = 1200
burst = 200

[tenants.umbrella]
upload_mb_per_day = 4096
requests_per_minute = 900

[tenants.hooli]
upload_mb_per_day = 512
export_rows_per_day = 40000

[reset]
timezone = "Europe/Berlin"
hour = 0
"""

RATES = (
    """\"\"\"Rate tables for the invoices (the legacy ones stay until the last pre-2020 contracts run out).\"\"\"

from __future__ import annotations

CURRENT_RATE_TABLE = "rates-2025q1"
"""
    + "\n".join(f"RATE_TIER_{i} = {i * 3 + 1}.{i % 10}5" for i in range(30))
    + """


def legacy_lookup(tenant: str) -> str | None:
    \"\"\"The legacy rate table a tenant is still on, if any.\"\"\"
    return LEGACY_TENANTS.get(tenant)


LEGACY_RATE_TABLE = "rates-2019q3"
LEGACY_TENANTS = {"initrode": LEGACY_RATE_TABLE, "vandelay": LEGACY_RATE_TABLE}
"""
)

INVOICES = """\"\"\"Invoice lines from usage.\"\"\"

from billing.rates import CURRENT_RATE_TABLE, legacy_lookup


def rate_table(tenant: str) -> str:
    # LEGACY_ tables first: a tenant on one keeps it until its contract runs out.
    return legacy_lookup(tenant) or CURRENT_RATE_TABLE


def uses_legacy(tenant: str) -> bool:
    return legacy_lookup(tenant) is not None  # see LEGACY_TENANTS
"""


def _module(name: str) -> str:
    """A plain module of the service: a class and small functions (no planted value)."""
    functions = "\n\n\n".join(
        f'def {name}_step_{i}(item):\n    """Step {i} of the {name} pipeline."""\n    return item' for i in range(45)
    )
    extra = ""
    if name == "cache":
        extra = "CACHE_TTL_SECONDS = 600\nCACHE_PREFIX = 'ingest:'\n\n\n"
    if name == "export":
        extra = "import json\n\n\nclass Encoder(json.JSONEncoder):\n    pass\n\n\n"
    return (
        f'"""The {name} part of the ingest service."""\n\nfrom __future__ import annotations\n\n{extra}'
        f"class {name.title()}:\n    def __init__(self):\n        self.items = []\n\n    def add(self, item):\n"
        f"        self.items.append(item)  # TODO: bound this\n\n\n{functions}\n"
    )


HANDLERS = (
    '"""HTTP handlers: each takes the decoded payload and hands it to the queue."""\n\n'
    "from ingest.queue import enqueue\n\n\n"
    + "\n\n\n".join(f"def handle_{j}(payload):\n    return enqueue(payload)" for j in range(40))
    + "\n"
)

CHECK = '''"""The project's checks: prints what tests, lint, the dev server in check mode, logs or migrations report."""

import sys

MODULES = ("handlers", "parser", "queue", "storage", "scheduler", "cache", "export")


def option(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def tests(shard, kb):
    count = max(20, kb * 1024 // 75)
    print("============================= test session starts ==============================")
    print("platform linux -- Python 3.11.7, pytest-8.3.3, pluggy-1.5.0")
    print("rootdir: /srv/ingest")
    print(f"collected {count + 2} items")
    print()
    for i in range(count):
        module = MODULES[(i + shard) % len(MODULES)]
        print(f"tests/test_{module}.py::test_{module}_case_{i} PASSED                [{i * 100 // count:3d}%]")
    first, second = MODULES[shard % len(MODULES)], MODULES[(shard + 3) % len(MODULES)]
    print("=================================== FAILURES ===================================")
    print(f"__________________________ test_{first}_roundtrip __________________________")
    print(f"E       AssertionError: the {first} round trip lost the payload")
    print(f"__________________________ test_{second}_empty_input __________________________")
    print(f"E       ValueError: empty input in {second}")
    print("=========================== short test summary info ============================")
    print(f"FAILED tests/test_{first}.py::test_{first}_roundtrip - AssertionError")
    print(f"FAILED tests/test_{second}.py::test_{second}_empty_input - ValueError")
    print(f"======================== 2 failed, {count} passed in 6.31s ========================")


def serve(kb):
    print("INFO:     ingest.server starting in check mode")
    print("INFO:     configuration from config/service.yaml")
    print("INFO:     Started server process [31337]")
    print("INFO:     Waiting for application startup.")
    print("INFO:     Application startup complete.")
    print("INFO:     Listening on port 8744 (press CTRL+C to quit)")
    for i in range(max(20, kb * 1024 // 70)):
        print(f'INFO:     10.0.3.{i % 250 + 1}:{40000 + i} - "GET /healthz HTTP/1.1" 200 OK')
    print("INFO:     check mode: shutting down after the health checks")
    print("INFO:     Finished server process [31337]")


def log(kb):
    for i in range(max(20, kb * 1024 // 90)):
        worker = i % 6
        print(f"2026-11-24T07:{i // 60 % 60:02d}:{i % 60:02d}Z worker-{worker} processed batch {1000 + i} "
              f"({20 + i % 480} items) in {30 + (i * 7) % 400} ms")


def lint(kb):
    for i in range(max(20, kb * 1024 // 80)):
        module = MODULES[i % len(MODULES)]
        print(f"src/ingest/{module}.py:{10 + i}:101: E501 Line too long ({101 + i % 40} > 100)")
    print("Found the line-length warnings above; no other findings.")


def migrations(kb):
    for i in range(max(20, kb * 1024 // 60)):
        print(f"  Applying ingest.{i + 1:04d}_change_{MODULES[i % len(MODULES)]}... OK")
    print("All migrations applied to the local copy.")


def fixture():
    print("loading samples/orders.bin")
    print("header: ok (format 3, 1200 records)")
    print("body: truncated after record 1187")
    print("error: ValueError: unexpected end of data while reading record 1188")


command = sys.argv[1] if len(sys.argv) > 1 else "tests"
if command == "tests":
    tests(option("--shard", 0), option("--kb", 12))
elif command == "serve":
    serve(option("--kb", 20))
elif command == "log":
    log(option("--kb", 20))
elif command == "lint":
    lint(option("--kb", 10))
elif command == "migrations":
    migrations(option("--kb", 10))
elif command == "fixture":
    fixture()
else:
    sys.exit(f"unknown check {command!r}")
'''


def repo_files() -> dict[str, str]:
    """The repository's files by path."""
    files = {
        "README.md": README,
        "src/ingest/__init__.py": '"""The ingest service."""\n',
        "src/ingest/settings.py": SETTINGS,
        "src/ingest/handlers.py": HANDLERS,
        "src/billing/__init__.py": '"""Billing."""\n',
        "src/billing/rates.py": RATES,
        "src/billing/invoices.py": INVOICES,
        "config/service.yaml": SERVICE_YAML,
        "config/quotas.toml": QUOTAS_TOML,
        "tools/check.py": CHECK,
    }
    for name in MODULES:
        files.setdefault(f"src/ingest/{name}.py", _module(name))
    return files


def make_repo(root: Path) -> None:
    """Write the project the session works in under ``root``."""
    for name, text in repo_files().items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


# --- the model ---------------------------------------------------------------------------------------------


def _system(body: dict[str, Any]) -> str:
    return "\n".join(
        text_of(m.get("content")) for m in body.get("messages", []) if m.get("role") in ("system", "developer")
    )


def request_texts(body: dict[str, Any]) -> str:
    """Everything a request's messages say, one message after another: texts, tool calls' arguments."""
    parts: list[str] = []
    for message in body.get("messages", []):
        parts.append(text_of(message.get("content")))
        for call in message.get("tool_calls") or ():
            parts.append(str((call.get("function") or {}).get("arguments", "")))
    return "\n".join(parts)


def new_material(body: dict[str, Any]) -> str:
    """What a turn's request brings that the session did not carry before: the user's prompt (after the
    context block) and the tool results after it."""
    messages = body.get("messages", [])
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    if last_user < 0:
        return ""
    parts = [user_prompt(text_of(messages[last_user].get("content")))]
    parts += [text_of(m.get("content")) for m in messages[last_user + 1 :] if m.get("role") == "tool"]
    return "\n".join(parts)


GARBAGE_WORDS = ("asdf", "qwer", "zxcv", "uiop", "hjkl", "vbnm", "fghj", "tyui", "sdfg", "wert", "xcvb", "ghjk")


def garbage(seed: int) -> str:
    """Keyboard mash of about 300 characters (lowercase words, no digits: it can hold no planted value)."""
    rng = random.Random(seed)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < 300:
        words.append("".join(rng.choice(GARBAGE_WORDS) for _ in range(rng.randint(1, 2))))
    return " ".join(words)


@dataclass
class FactsModel:
    """The scripted model (see the module's docstring). ``turn`` is the user turn in progress (1-based), set
    by the driver before each turn; requests of any kind are recorded with it."""

    window: int
    mode: Mode
    script: list[Turn]
    requests: list[Request] = field(default_factory=list)
    turn: int = 0

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        tokens = request_tokens(body)
        system = _system(body)
        kind = "summary" if is_summary_body(body) else "delegate" if "Your role:" in system else "turn"
        record = Request(kind, tokens, body, self.turn)
        self.requests.append(record)
        if tokens > self.window:
            record.rejected = True
            return ErrorReply.context_length_exceeded(
                f"This model's maximum context length is {self.window} tokens. However, your messages resulted "
                f"in {tokens} tokens. Please reduce the length of the messages."
            )
        usage = Usage(tokens, 30)
        if kind == "summary":
            return self._summarizer(body, usage)
        if kind == "delegate":
            return Reply(text=["Done."], usage=usage)
        turn = self.script[self.turn - 1]
        messages = body.get("messages", [])
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        done = sum(1 for m in messages[last_user + 1 :] if m.get("role") == "tool")
        offered = {t.get("function", {}).get("name") for t in body.get("tools", [])}
        calls = [c for c in turn.calls if c.name in offered]
        if done < len(calls):
            call = calls[done]
            return Reply(tool_calls=[ToolCall(call.name, call.arguments, f"call-{self.turn}-{done}")], usage=usage)
        return Reply(text=[turn.reply], usage=usage)

    def _summarizer(self, body: dict[str, Any], usage: Usage) -> ScriptedReply:
        if self.mode == "failing":
            return ErrorReply.server_error("the summarizer is down")
        if self.mode == "empty":
            return Reply(text=[""], usage=usage)
        if self.mode == "garbage":
            return Reply(text=[garbage(len(self.requests))], usage=usage)
        if self.mode == "hanging":
            return Reply(text=["## Goal\n"], usage=usage, stall_after=1)  # then nothing until the server stops
        return Reply(text=[good_summary(transcript_of_body(body))], usage=usage)


# --- the working summarizer ----------------------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=\S)|\n+")
_CONCRETE = re.compile(
    r"\d|\b[A-Z][A-Z0-9]*[_-][A-Z0-9_-]+\b|\b[A-Z]{3,}\b|\b[\w-]+\.(?:internal|local|com|org|net|io)\b|`[^`]+`"
)
_DECISION = re.compile(
    r"\b(?:we'll|we will|i chose|i picked|we chose|we picked|decided|settled on|from here on|going forward|"
    r"should be|we should|i'd use|i would use)\b",
    re.IGNORECASE,
)
_PROGRESS = re.compile(r"\b(?:tests? fail|passes|pass|done|fixed|warnings?)\b", re.IGNORECASE)
_REQUEST = re.compile(
    r"^(?:read|run|open|show|search|start|tail|make|add|fix|look|check|can you|could you|please|now|in src/)\b",
    re.IGNORECASE,
)
_LOG_LINE = re.compile(r"^(?:\d{4}-\d\d-\d\d|(?:INFO|DEBUG|WARNING|ERROR|CRITICAL)\b)")
_KEY_VALUE = re.compile(r"^(?P<name>[A-Za-z_][\w.\-]*)\s*(?::|=)\s*(?P<value>\S.*)$")
_OUTPUT_VALUE = re.compile(r"\b(?:port|listening|version|url|host|checksum)\b", re.IGNORECASE)
_WORDS = re.compile(r"under about ([\d,]+) words")
TOOLS_HEADING = "[Tool calls in this turn]"
"""Where an assistant message's reply ends and its tool calls' summaries begin (codling's history text)."""


def _sentences(text: str) -> list[str]:
    """The sentences of ``text`` outside code fences and bracketed notes."""
    found: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("["):
            continue
        for sentence in _SENTENCE.split(line):
            sentence = " ".join(sentence.split()).strip(" -")
            if len(sentence) > 8:
                found.append(sentence)
    return found


def _words(text: str) -> set[str]:
    """The words of ``text`` of four letters or more, lowercased (for telling what a request was about)."""
    return {w for w in re.findall(r"[a-z]{4,}", text.lower())}


def _relevant(name: str, request: set[str]) -> bool:
    """Whether a value's name shares a word with the request (``MAX_WORKERS`` with "the worker pool")."""
    return any(p.startswith(w) or w.startswith(p) for p in _words(name.replace("_", " ")) for w in request)


def _tool_values(calls: str, request: str) -> list[tuple[bool, str]]:
    """The values a turn's tool digests show, as a good model notes them: per call, its title and its
    ``NAME = value`` and ``key: value`` lines with a concrete value (of a file read, of a search match; named
    with their TOML section) and its output lines naming a port, a version, a URL or a checksum. Those that
    bear on the ``request`` of the turn (or name a port or a version) come first, as ``(True, line)``; the
    others as ``(False, line)``."""
    found: list[tuple[bool, str]] = []
    title = ""
    section = ""
    wanted = _words(request)
    values: dict[bool, list[str]] = {True: [], False: []}

    def close() -> None:
        for relevant in (True, False):
            if values[relevant]:
                found.append((relevant, f"{title}: " + "; ".join(dict.fromkeys(values[relevant]))))
            values[relevant].clear()

    for line in calls.splitlines():
        if not line.startswith("    "):
            close()
            title = line.strip().lstrip("- ").split(" (", 1)[0][:80]
            section = ""
            continue
        content = line.strip()
        content = re.sub(r"^\d+\t\s*", "", content)  # a read's line number
        content = re.sub(r"^\S+?:\d+:\s*", "", content)  # a search match's path and line
        if heading := re.fullmatch(r"\[([\w.\-]+)\]", content):
            section = heading.group(1) + "."
            continue
        match = _KEY_VALUE.match(content)
        if _LOG_LINE.match(content) or match is None:
            if _OUTPUT_VALUE.search(content) and _CONCRETE.search(content) and not content.startswith("["):
                values[True].append(content)
        elif _CONCRETE.search(match.group("value")) and len(match.group("value")) < 100:
            name = section + match.group("name")
            values[_relevant(name, wanted)].append(f"{name} = {match.group('value').strip()}")
    close()
    return found


def _condensed(sentence: str) -> str:
    """A long sentence as a good model notes it: its clauses that hold a concrete value or a decision."""
    if len(sentence.split()) <= 16:
        return sentence
    clauses = [c for c in re.split(r"[,;]\s+", sentence) if _CONCRETE.search(c) or _DECISION.search(c)]
    return ", ".join(clauses) if clauses else sentence


def good_summary(transcript: str) -> str:
    """A good model's handoff summary of ``transcript`` (codling's summarize request), within the length the
    request asks for.

    It keeps the goal (from an earlier summary, else the first request), the lines of earlier summaries
    (carried forward), the user's statements of concrete values (not their requests for work, nor questions),
    the assistant's decisions and stated values, the values tools showed that bear on what the user asked
    (one line per call; the other values after them) and the latest status, each noted briefly (the clauses
    that hold the value). When that is too long for the length asked, the other values go first, then the
    oldest of the rest."""
    words = _WORDS.search(transcript)
    budget = int(int(words.group(1).replace(",", "")) * 1.3) if words else 1_000
    body = transcript[: words.start()] if words else transcript
    goal = ""
    status = ""
    request = ""
    found: list[tuple[int, str, str]] = []  # (priority, section, line), oldest first
    for block in re.split(r"^### ", body, flags=re.MULTILINE)[1:]:
        role, _, text = block.partition("\n")
        role = role.strip()
        if role == "Earlier summary":
            section = ""
            for raw in text.splitlines():
                if raw.startswith("## "):
                    section = raw[3:].strip()
                elif section == "Goal" and raw.strip() and not goal:
                    goal = raw.strip()
                elif section == "Latest status" and raw.startswith("- "):
                    status = raw[2:].strip()
                elif raw.startswith("- ") and section in SECTIONS:
                    found.append((int(section == OTHER_VALUES), section, raw[2:].strip()))
        elif role == "User":
            request = text
            sentences = _sentences(text)
            if not goal and sentences:
                goal = _condensed(sentences[0])
            for sentence in sentences:
                if _CONCRETE.search(sentence) and not sentence.endswith("?") and not _REQUEST.match(sentence):
                    found.append((0, USER, _condensed(sentence)))
        elif role == "Assistant":
            reply, _, calls = text.partition(TOOLS_HEADING)
            for sentence in _sentences(reply):
                if _DECISION.search(sentence) or (
                    _CONCRETE.search(sentence) and re.search(r"\b(?:is|are)\b", sentence)
                ):
                    found.append((0, FINDINGS, _condensed(sentence)))
                elif _PROGRESS.search(sentence):
                    status = sentence
            for relevant, value in _tool_values(calls, request):
                found.append((0, VALUES, value) if relevant else (1, OTHER_VALUES, value))
    latest: dict[str, tuple[int, int, str]] = {}  # line: (priority, when it was last said, section)
    for order, (priority, section, line) in enumerate(found):
        latest.pop(line, None)
        latest[line] = (priority, order, section)
    used = count_tokens(goal) + count_tokens(status) + 40
    chosen: set[str] = set()
    for line, (_priority, _order, _section) in sorted(latest.items(), key=lambda item: (item[1][0], -item[1][1])):
        cost = count_tokens(line) + 2
        if used + cost <= budget:
            chosen.add(line)
            used += cost
    parts = [f"## Goal\n{goal or 'Continue the session.'}"]
    for section in SECTIONS:
        items = [f"- {line}" for line, (_, _, s) in latest.items() if s == section and line in chosen]
        if items:
            parts.append(f"## {section}\n" + "\n".join(items))
    if status:
        parts.append(f"## Latest status\n- {status}")
    parts.append("## Next steps\n- Continue with the user's latest request.")
    return "\n\n".join(parts)


USER, FINDINGS = "What the user stated", "Decisions and findings"
VALUES, OTHER_VALUES = "Values that matter", "Other values seen"
SECTIONS = (USER, FINDINGS, VALUES, OTHER_VALUES)
"""The working summary's sections of facts, the first kept first when the summary must be short."""


# --- running and measuring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FactsResult:
    """What one run measured."""

    window: int
    mode: str
    turns: int
    facts: int
    kept: tuple[str, ...]
    """The keys of the facts whose asking turn's first request held them."""
    lost: tuple[str, ...]
    requests: int
    """User-turn requests the server received."""
    summaries: int
    """Summary requests the server received."""
    compactions: int
    fallbacks: int
    """Compactions that used codling's summary assembled without the model."""
    rejected: int
    bodies: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    """Every request the server received, in order (summaries and delegates included)."""

    def cache(self) -> tuple[int, int]:
        """(tokens an automatic prefix cache would serve, input tokens in all) over ``bodies``."""
        return cache_share(self.bodies)

    @property
    def share(self) -> float:
        """The share of the facts kept."""
        return len(self.kept) / self.facts if self.facts else 1.0


class HarnessError(AssertionError):
    """The script is wrong: a planted value reached the model outside its planting turn."""


def measure(model: FactsModel, turn_count: int, compactions: int, fallbacks: int) -> FactsResult:
    """The facts kept by the run ``model`` served: for each fact, whether the first request of its asking turn
    that the server accepted holds its value. Raises :class:`HarnessError` when a value came up in another turn
    than its planting one (the measure would be void)."""
    gap = ask_gap(turn_count)
    firsts: dict[int, Request] = {}
    for r in model.requests:
        if r.kind == "turn" and not r.rejected:
            firsts.setdefault(r.turn, r)
    for index, fact in enumerate(FACTS):
        for r in model.requests:
            if r.kind == "turn" and r.turn != plant_turn(index) and fact.regex.search(new_material(r.body)):
                raise HarnessError(f"{fact.key!r} (planted in turn {plant_turn(index)}) came up in turn {r.turn}")
    kept: list[str] = []
    lost: list[str] = []
    for index, fact in enumerate(FACTS):
        first = firsts.get(plant_turn(index) + gap)
        (kept if first is not None and fact.regex.search(request_texts(first.body)) else lost).append(fact.key)
    return FactsResult(
        window=model.window,
        mode=model.mode,
        turns=turn_count,
        facts=len(FACTS),
        kept=tuple(kept),
        lost=tuple(lost),
        requests=sum(1 for r in model.requests if r.kind == "turn"),
        summaries=sum(1 for r in model.requests if r.kind == "summary"),
        compactions=compactions,
        fallbacks=fallbacks,
        rejected=sum(1 for r in model.requests if r.rejected),
        bodies=tuple(r.body for r in model.requests),
    )


async def run_facts_session(window: int, mode: Mode, turn_count: int = 100) -> FactsResult:
    """Run the session on a ``window``-token model whose summarizer is in ``mode``, live through codling's
    session store, and measure it (see the module's docstring)."""
    from codling.brain.events import ContextCompacted
    from codling.config import Settings
    from codling.llm.catalog import ModelInfo
    from codling.llm.providers import build_model
    from codling.store.header import SessionHeader
    from codling.store.ids import new_session_id
    from codling.store.index import SessionStore
    from codling.store.live import start_session

    model = FactsModel(window, mode, script(turn_count))
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer(responder=model, model=MODEL_NAME) as server:
        root = Path(tmp)
        project = root / "project"
        make_repo(project)
        settings = Settings(home=root / "home", mode="yolo", titles=False)
        store = SessionStore(settings.home)
        info = ModelInfo(f"openai-chat:{MODEL_NAME}", context_limit=window, max_output_tokens=MAX_OUTPUT)
        env = server.env()

        def factory(model_id: str) -> Any:
            return build_model(model_id, env=env)

        header = SessionHeader(new_session_id(), project, info.id, "yolo")
        live = start_session(store, settings, info, header, None, approver=None, model_factory=factory)
        compactions = fallbacks = 0
        try:
            for number, turn in enumerate(model.script, start=1):
                model.turn = number
                async for event in live.brain.stream(turn.prompt):
                    if isinstance(event, ContextCompacted):
                        compactions += 1
                        fallbacks += event.fallback
        finally:
            await live.close()
        result = measure(model, turn_count, compactions, fallbacks)
        shutil.rmtree(root, ignore_errors=True)
        return result


def table(results: Sequence[FactsResult]) -> str:
    """The results as a plain-text table, with the facts each run lost."""
    head = (
        f"{'window':>7} {'summarizer':>10} {'turns':>5} {'kept':>9} {'requests':>8} {'rejected':>8} "
        f"{'compactions':>11} {'fallbacks':>9}  lost"
    )
    lines = [head]
    for r in results:
        kept = f"{len(r.kept)}/{r.facts} {r.share:.0%}"
        lines.append(
            f"{r.window:>7,} {r.mode:>10} {r.turns:>5} {kept:>9} {r.requests:>8} {r.rejected:>8} "
            f"{r.compactions:>11} {r.fallbacks:>9}  {', '.join(r.lost) or '-'}"
        )
    return "\n".join(lines)


def facts_json(results: Sequence[FactsResult]) -> str:
    """The results as JSON (for keeping a baseline)."""
    return json.dumps([{**r.__dict__, "share": r.share} for r in results], indent=1)
