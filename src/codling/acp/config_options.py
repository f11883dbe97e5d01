"""Session modes and config options: the model picker (grouped by provider), the thinking toggle and thought
level (for a model that can think), the mode picker; and reading the values a client sets."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from acp import RequestError
from acp.schema import (
    ClientCapabilities,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectGroup,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
)

from codling.brain.thinking import THOUGHT_LEVEL_NAMES, THOUGHT_LEVELS, Thinking, ThoughtLevel
from codling.config import MODE_DESCRIPTIONS, PERMISSION_MODES
from codling.llm.catalog import ModelInfo, provider_name, provider_of
from codling.vocabulary import PermissionMode

MODEL = "model"
MODE = "mode"
THINKING = "thinking"
THOUGHT_LEVEL = "thought_level"
OPTION_IDS = (MODEL, THINKING, THOUGHT_LEVEL, MODE)
"""codling's config options, in the order they are offered."""

_ON_OFF = {"on": True, "off": False}
"""The values of the thinking toggle offered as a select (to a client without boolean options)."""


def mode_state(current: PermissionMode) -> SessionModeState:
    """The session's modes, for session/new, load, resume and fork responses."""
    return SessionModeState(
        current_mode_id=current,
        available_modes=[
            SessionMode(id=mode, name=MODE_DESCRIPTIONS[mode][0], description=MODE_DESCRIPTIONS[mode][1])
            for mode in PERMISSION_MODES
        ],
    )


def takes_booleans(caps: ClientCapabilities) -> bool:
    """Whether the client advertised boolean config options (``session.configOptions.boolean``): only then may
    an option be sent as type ``boolean``."""
    options = caps.session.config_options if caps.session is not None else None
    return options is not None and options.boolean is not None


def config_options(
    model: ModelInfo,
    model_ids: Sequence[str],
    mode: PermissionMode,
    thinking: Thinking,
    *,
    booleans: bool,
    order: Sequence[str] = (),
) -> list[Any]:
    """Every option's current state: the model picker (``model_ids`` in catalog ``order``), for a model that
    can think the thinking toggle (a boolean if the client takes ``booleans``, else an On/Off select) and the
    thought level, and the mode picker."""
    options: list[Any] = [model_picker(model.id, model_ids, order)]
    if model.thinking:
        options += [thinking_toggle(thinking.on, booleans=booleans), thought_level_picker(thinking.level)]
    options.append(
        SessionConfigOptionSelect(
            type="select",
            id=MODE,
            name="Mode",
            category="mode",
            current_value=mode,
            options=[
                SessionConfigSelectOption(value=m, name=MODE_DESCRIPTIONS[m][0], description=MODE_DESCRIPTIONS[m][1])
                for m in PERMISSION_MODES
            ],
        )
    )
    return options


def model_picker(current: str, model_ids: Sequence[str], order: Sequence[str] = ()) -> SessionConfigOptionSelect:
    """The models (``current`` always among them), grouped by provider (group id: the prefix; name: the
    provider's), in catalog ``order`` so a switch moves nothing (a model the catalog lacks comes first)."""
    rank = {model_id: i for i, model_id in enumerate(order)}
    ids = sorted(dict.fromkeys([current, *model_ids]), key=lambda m: rank.get(m, -1))
    groups: dict[str, list[SessionConfigSelectOption]] = {}
    for model_id in ids:
        provider = provider_of(model_id)
        name = model_id[len(provider) + 1 :] if provider else model_id
        groups.setdefault(provider, []).append(
            SessionConfigSelectOption(value=model_id, name=name, description=model_id)
        )
    return SessionConfigOptionSelect(
        type="select",
        id=MODEL,
        name="Model",
        category="model",
        current_value=current,
        options=[
            SessionConfigSelectGroup(group=provider or "other", name=provider_name(provider), options=choices)
            for provider, choices in groups.items()
        ],
    )


def thinking_toggle(on: bool, *, booleans: bool) -> SessionConfigOptionBoolean | SessionConfigOptionSelect:
    """The thinking toggle. Its category is ``model_config``, not ``thought_level``: Zed cycles the first
    option of a category with its thought-level key, which would then flip the toggle, not the level."""
    name, description = "Thinking", "Whether the model thinks before it answers"
    if booleans:
        return SessionConfigOptionBoolean(
            type="boolean", id=THINKING, name=name, description=description, category="model_config", current_value=on
        )
    return SessionConfigOptionSelect(
        type="select",
        id=THINKING,
        name=name,
        description=description,
        category="model_config",
        current_value="on" if on else "off",
        options=[SessionConfigSelectOption(value="on", name="On"), SessionConfigSelectOption(value="off", name="Off")],
    )


def thought_level_picker(level: ThoughtLevel) -> SessionConfigOptionSelect:
    """How hard the model thinks (when thinking is on)."""
    return SessionConfigOptionSelect(
        type="select",
        id=THOUGHT_LEVEL,
        name="Thought level",
        description="How hard the model thinks when thinking is on",
        category="thought_level",
        current_value=level,
        options=[SessionConfigSelectOption(value=v, name=THOUGHT_LEVEL_NAMES[v]) for v in THOUGHT_LEVELS],
    )


def shape_problem(params: dict[str, Any]) -> str | None:
    """What is wrong with a ``session/set_config_option`` value whose JSON type does not fit its form (the SDK
    would refuse it only with pydantic's "Input should be a valid string"), or None. Checked on the wire
    (``transport.py``), before the SDK reads the request."""
    value, kind = params.get("value"), params.get("type")
    if "value" not in params:
        return None
    shown = json.dumps(value)[:60]
    if kind == "boolean" and not isinstance(value, bool):
        return f'a "boolean" config option takes true or false, not {shown}'
    if kind is None and isinstance(value, bool):
        return f'value {shown} is a boolean: send it with "type": "boolean" (a select takes one of its value ids)'
    if kind is None and not isinstance(value, str):
        return f'value {shown} is neither a select\'s value id (a string) nor a boolean sent with "type": "boolean"'
    return None


def refused(config_id: str, value: object, message: str) -> RequestError:
    """-32602 for a value a config option does not take, saying what it takes."""
    return RequestError.invalid_params({"configId": config_id[:200], "value": _shown(value), "message": message})


def _shown(value: object) -> str | bool:
    return value if isinstance(value, bool) else str(value)[:200]


def parse_mode(value: str) -> PermissionMode:
    """A mode id from the client, or an invalid-params error."""
    if value not in PERMISSION_MODES:
        raise RequestError.invalid_params({"modeId": value, "message": f"choose one of {', '.join(PERMISSION_MODES)}"})
    return value


def mode_value(value: str | bool) -> PermissionMode:
    """The mode a set_config_option names, or -32602 saying which there are."""
    if not isinstance(value, str) or value not in PERMISSION_MODES:
        raise refused(MODE, value, f"the mode is one of {', '.join(PERMISSION_MODES)} (a value id, not a boolean)")
    return value


def thinking_value(value: str | bool) -> bool:
    """The thinking toggle's new state: a boolean (the boolean form) or "on"/"off" (the select form)."""
    if isinstance(value, bool):
        return value
    if value in _ON_OFF:
        return _ON_OFF[value]
    raise refused(THINKING, value, 'thinking is true or false (or, as a select, "on" or "off")')


def thought_level_value(value: str | bool) -> ThoughtLevel:
    """The thought level a set_config_option names, or -32602 saying which there are."""
    if not isinstance(value, str) or value not in THOUGHT_LEVELS:
        raise refused(THOUGHT_LEVEL, value, f"the thought level is one of {', '.join(THOUGHT_LEVELS)}")
    return value
