"""Session modes and config options (the model picker and the mode picker)."""

from __future__ import annotations

from typing import Any, cast

from acp import RequestError
from acp.schema import SessionConfigOptionSelect, SessionConfigSelectOption, SessionMode, SessionModeState

from codling.config import MODE_DESCRIPTIONS, PERMISSION_MODES, PermissionMode


def mode_state(current: PermissionMode) -> SessionModeState:
    """The session's modes, for session/new, load, resume and fork responses."""
    return SessionModeState(
        current_mode_id=current,
        available_modes=[
            SessionMode(id=mode, name=MODE_DESCRIPTIONS[mode][0], description=MODE_DESCRIPTIONS[mode][1])
            for mode in PERMISSION_MODES
        ],
    )


def config_options(current_model: str, model_ids: list[str], current_mode: PermissionMode) -> list[Any]:
    """The model picker (category ``model``) and the mode picker (category ``mode``)."""
    return [
        SessionConfigOptionSelect(
            type="select",
            id="model",
            name="Model",
            category="model",
            current_value=current_model,
            options=[SessionConfigSelectOption(value=m, name=m) for m in model_ids],
        ),
        SessionConfigOptionSelect(
            type="select",
            id="mode",
            name="Mode",
            category="mode",
            current_value=current_mode,
            options=[
                SessionConfigSelectOption(value=m, name=MODE_DESCRIPTIONS[m][0], description=MODE_DESCRIPTIONS[m][1])
                for m in PERMISSION_MODES
            ],
        ),
    ]


def parse_mode(value: str) -> PermissionMode:
    """A mode id from the client, or an invalid-params error."""
    if value not in PERMISSION_MODES:
        raise RequestError.invalid_params({"modeId": value, "message": f"choose one of {', '.join(PERMISSION_MODES)}"})
    return cast(PermissionMode, value)
