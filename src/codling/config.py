"""Settings: ``$CODLING_HOME/config.toml`` plus environment variables.

config.toml keys (all optional)::

    model = "anthropic:claude-sonnet-5-5"   # default model (CODLING_MODEL and --model win)
    mode = "ask"                            # read-only | ask | accept-edits | auto | yolo
    max_requests_per_turn = 50              # model requests one turn may make
    command_timeout = 120                   # seconds before run_command kills a command
    compact_threshold = 0.7                 # compact once the context passes this share of the limit
    max_tool_passes = 40                    # rounds of tool calls per turn before the model must answer
    titles = true                           # name new sessions with a model-made title after the first turn
    title_model = "anthropic:claude-haiku-4-5"  # a cheaper model for titles (default: the session's model)
    greeting = false                        # greet new editor sessions (one short model-made message)
    delegates = true                        # let the model hand tasks to planner, reviewer and coder sub-agents
    checkpoints = true                      # checkpoint the workspace around turns and edits, for /undo and /rewind
    sandbox = "on"                          # confine commands (not in yolo): on | always (yolo too) | off
    sandbox_writable = ["~/.cache"]         # more directories sandboxed commands may write (default: none)

    [permissions]                           # your rules for commands: deny wins, then ask, then allow
    allow = ["pytest", "git status"]        # run without asking (a simple command starting with these words)
    ask = ["git push"]                      # always asked, in every mode
    deny = ["curl", "rm -rf /"]             # never run, in every mode, anywhere in a chain
    stream_idle_timeout = 120               # seconds without data from the model provider before a reply is stopped
    cache = "5m"                            # prompt caching where codling places it (Anthropic): 5m | 1h | off
    command_env_allow = ["GITHUB_TOKEN"]    # secret variables commands may still see (default: none)
    mcp_startup_timeout = 30                # seconds an MCP server may take to start before it is left out
    mcp_tool_timeout = 120                  # seconds one MCP tool call may take
    notify = "bell"                         # a question waits, a long turn ended: bell | osc | off
    notify_command = ["notify-send"]        # also run this with the title and body appended (default: none)

    [mcp_servers.NAME]                      # MCP servers (see codling/mcp_servers.py)
    command = "uvx"
    args = ["mcp-server-time"]

Commands (run_command) never see secret variables: those named like keys, tokens, secrets, passwords or
credentials (``codling/secrecy.py`` has the rule) and the model providers' own. ``command_env_allow`` names the
ones a command may see anyway; their values are still redacted from history.jsonl and the logs.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal, cast

from codling.errors import ConfigError
from codling.mcp_servers import McpServerSpec, parse_servers
from codling.paths import codling_home, config_file, user_home
from codling.permission_rules import Rules, user_rules
from codling.text import did_you_mean
from codling.vocabulary import SANDBOX_SETTINGS, PermissionMode, SandboxSetting

PromptCache = Literal["5m", "1h", "off"]
"""How long the provider keeps the prompt cached ("off": no cache breakpoints are sent)."""
PROMPT_CACHES: tuple[PromptCache, ...] = ("5m", "1h", "off")

NotifyStyle = Literal["bell", "osc", "off"]
"""How the chat tells a user in another window that it waits (``cli/notify.py``)."""
NOTIFY_STYLES: tuple[NotifyStyle, ...] = ("bell", "osc", "off")

PERMISSION_MODES: tuple[PermissionMode, ...] = ("read-only", "ask", "accept-edits", "auto", "yolo")

MODE_DESCRIPTIONS: dict[PermissionMode, tuple[str, str]] = {
    "read-only": ("Read only", "Reads and searches; refuses edits and commands."),
    "ask": ("Ask", "Asks before every edit and command."),
    "accept-edits": ("Accept edits", "Edits files without asking; asks before commands."),
    "auto": ("Auto", "Edits files and runs commands in the sandbox without asking; asks to lift it."),
    "yolo": ("Yolo", "Edits and runs commands without asking, outside the sandbox."),
}
"""Each mode's name and what it allows, for pickers and /mode."""


def parse_mode(value: str) -> PermissionMode:
    """Validate a permission mode name."""
    if value not in PERMISSION_MODES:
        raise ConfigError(f"unknown mode {value!r}; choose one of {', '.join(PERMISSION_MODES)}")
    return value


@dataclass(frozen=True)
class Settings:
    """Everything codling reads from config.toml and the environment."""

    home: Path
    model: str | None = None
    """The model from config.toml (``--model`` and ``CODLING_MODEL`` take precedence)."""
    login_model: str | None = None
    """The model chosen at ``codling login`` (``codling.credentials``), used when none of those names one."""
    mode: PermissionMode = "ask"
    max_requests_per_turn: int = 50
    command_timeout: float = 120.0
    compact_threshold: float = 0.7
    """Compact the history before a turn once the context passes this share of the model's limit."""
    max_tool_passes: int = 40
    """Rounds of tool calls one turn may make before the model is asked to answer without tools."""
    titles: bool = True
    """Name a new session with the title special turn after its first turn."""
    title_model: str | None = None
    """The model that writes titles (None: the session's model)."""
    greeting: bool = False
    """Greet the user of a new editor session with the greeting special turn."""
    delegates: bool = True
    """Offer the model the delegate tool (planner, reviewer and coder sub-agents)."""
    permissions: Rules = field(default_factory=Rules)
    """The user's rules for commands (``[permissions]``: allow, ask, deny); a project's own
    ``.codling/permissions.toml`` adds to them (see ``codling/permission_rules.py``)."""
    checkpoints: bool = True
    """Checkpoint the workspace before each turn, each call that may change files and each turn's end, in the
    session's folder (``tools/checkpoints/``), so ``/undo`` and ``/rewind`` can put the code back."""
    sandbox: SandboxSetting = "on"
    """Whether commands run confined (``tools/sandbox/``): in every mode but yolo, in yolo too, or never."""
    sandbox_writable: tuple[Path, ...] = ()
    """Directories, besides the workspace and temp, that sandboxed commands may write (``~`` expanded)."""
    stream_idle_timeout: float = 120.0
    """Seconds the model provider may send nothing (mid-reply, or before answering) before the turn fails."""
    cache: PromptCache = "5m"
    """Prompt caching on providers where codling places the breakpoints (Anthropic): the cache's lifetime."""
    command_env_allow: tuple[str, ...] = ()
    """Secret variables that commands may still see (their values stay out of history and logs)."""
    mcp_servers: tuple[McpServerSpec, ...] = ()
    """The MCP servers of config.toml's ``[mcp_servers.NAME]`` tables (enabled ones)."""
    mcp_startup_timeout: float = 30.0
    """Seconds an MCP server may take to start (and list its tools) before the session goes on without it."""
    mcp_tool_timeout: float = 120.0
    """Seconds one MCP tool call may take before it is cancelled."""
    notify: NotifyStyle = "bell"
    """How a terminal chat or run says a question waits or a long turn ended: the bell, an OSC 9/777 desktop
    notification, or nothing."""
    notify_command: tuple[str, ...] = ()
    """A program (and its first arguments) run for the same events, with the title and body appended."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The environment the settings were read from (never logged: it holds secrets)."""


def _positive(data: dict[str, object], key: str, default: float, path: Path) -> float:
    value = data.get(key, default)
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{path}: {key} must be a positive number, not {value!r}")
    return float(value)


def _share(data: dict[str, object], key: str, default: float, path: Path) -> float:
    value = _positive(data, key, default, path)
    if value > 1:
        raise ConfigError(f"{path}: {key} is a share of the context window, between 0 and 1, not {value}")
    return value


def _flag(data: dict[str, object], key: str, default: bool, path: Path) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: {key} must be true or false, not {value!r}")
    return value


def _names(data: dict[str, object], key: str, path: Path) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f'{path}: {key} must be a list of variable names like ["GITHUB_TOKEN"], not {value!r}')
    return tuple(cast(list[str], value))


def _home_path(value: str, env: Mapping[str, str]) -> Path:
    """``value`` with a leading ``~`` read as the user's home (of ``env``)."""
    if value == "~" or value.startswith("~/"):
        return user_home(env) / value[2:]
    return Path(value)


def _notify(data: dict[str, object], path: Path) -> tuple[NotifyStyle, tuple[str, ...]]:
    """``notify`` and ``notify_command``, checked."""
    style = data.get("notify", "bell")
    if style not in NOTIFY_STYLES:
        raise ConfigError(f"{path}: notify must be one of {', '.join(map(repr, NOTIFY_STYLES))}, not {style!r}")
    command = data.get("notify_command", [])
    if not isinstance(command, list) or not all(isinstance(v, str) and v for v in command):
        raise ConfigError(
            f'{path}: notify_command must be a program and its arguments, like ["notify-send"], not {command!r}'
        )
    return style, tuple(cast(list[str], command))


KNOWN_KEYS = frozenset(f.name for f in fields(Settings)) - {"home", "env", "login_model"}
"""The settings config.toml may hold; any other key is a mistake worth saying (a typo would go unnoticed)."""


def _login_model(home: Path) -> str | None:
    """The model ``codling login`` chose (None: none, or its file is unusable, which starting codling said)."""
    from codling.credentials import read

    try:
        return read(home).model
    except ConfigError:
        return None


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read settings from ``$CODLING_HOME/config.toml`` (if present) and ``env``."""
    env = dict(os.environ) if env is None else dict(env)
    home = codling_home(env)
    path = config_file(home)
    data: dict[str, object] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: not valid TOML: {e}") from e
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})") from e
        except OSError as e:
            raise ConfigError(f"{path}: cannot be read: {e.strerror or e}") from e
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown setting {unknown[0]!r}{did_you_mean(unknown[0], KNOWN_KEYS)}")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"{path}: model must be a string like 'openai:gpt-5'")
    title_model = data.get("title_model")
    if title_model is not None and (not isinstance(title_model, str) or ":" not in title_model):
        raise ConfigError(f"{path}: title_model must be a model id like 'anthropic:claude-haiku-4-5'")
    cache = data.get("cache", "5m")
    if cache not in PROMPT_CACHES:
        raise ConfigError(f"{path}: cache must be one of {', '.join(map(repr, PROMPT_CACHES))}, not {cache!r}")
    mode = data.get("mode", "ask")
    if not isinstance(mode, str):
        raise ConfigError(f"{path}: mode must be a string")
    notify, notify_command = _notify(data, path)
    sandbox = data.get("sandbox", "on")
    if sandbox not in SANDBOX_SETTINGS:
        raise ConfigError(f"{path}: sandbox must be one of {', '.join(map(repr, SANDBOX_SETTINGS))}, not {sandbox!r}")
    writable = data.get("sandbox_writable", [])
    if not isinstance(writable, list) or not all(isinstance(v, str) and v for v in writable):
        raise ConfigError(f'{path}: sandbox_writable must be a list of directories like ["~/.cache"], not {writable!r}')
    return Settings(
        home=home,
        model=model or None,
        login_model=_login_model(home),
        mode=parse_mode(mode),
        max_requests_per_turn=int(_positive(data, "max_requests_per_turn", 50, path)),
        command_timeout=_positive(data, "command_timeout", 120.0, path),
        compact_threshold=_share(data, "compact_threshold", 0.7, path),
        max_tool_passes=int(_positive(data, "max_tool_passes", 40, path)),
        titles=_flag(data, "titles", True, path),
        title_model=title_model,
        greeting=_flag(data, "greeting", False, path),
        delegates=_flag(data, "delegates", True, path),
        checkpoints=_flag(data, "checkpoints", True, path),
        sandbox=sandbox,
        sandbox_writable=tuple(_home_path(v, env) for v in writable),
        permissions=Rules.parse(data.get("permissions"), "config.toml", path) + user_rules(home),
        stream_idle_timeout=_positive(data, "stream_idle_timeout", 120.0, path),
        cache=cache,
        command_env_allow=_names(data, "command_env_allow", path),
        mcp_servers=parse_servers(data.get("mcp_servers"), path),
        mcp_startup_timeout=_positive(data, "mcp_startup_timeout", 30.0, path),
        mcp_tool_timeout=_positive(data, "mcp_tool_timeout", 120.0, path),
        notify=notify,
        notify_command=notify_command,
        env=env,
    )
