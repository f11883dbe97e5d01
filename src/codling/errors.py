"""The one error tree of codling.

Every error codling raises on purpose derives from :class:`CodlingError`, so callers can catch the family
they care about and let the rest propagate::

    CodlingError
    ├── ConfigError            bad settings or usage; the CLI exits 2
    │   ├── NoModelError       no model chosen and no provider has credentials
    │   ├── MissingCredentialsError  the chosen model's provider has no credentials (ACP: auth_required)
    │   ├── UnknownProviderError  a model id whose provider codling cannot build
    │   └── StoreError         $CODLING_HOME cannot hold sessions (not a directory, not writable)
    ├── ToolError              a tool could not do what the model asked; the message goes back to the model
    │   ├── PathError          a path is missing, outside the workspace, or of the wrong type
    │   │   └── MissingPathError   nothing exists at the path
    │   ├── EditError          an edit's old text is missing or not unique
    │   ├── PermissionDenied   the user or the mode refused the action
    │   │   └── RejectedError  the user answered "reject" when asked
    │   └── CommandError       a command could not start or was stopped
    │       └── SandboxUnavailable  the sandbox cannot be set up here, so the command was not run
    ├── ModelError             the model provider failed (HTTP error, bad response); the turn ends with an error reply
    └── SessionError           a session operation is invalid
        ├── InvalidSessionIdError  a session id that is not of codling's fixed form (never used as a path)
        ├── UnknownSessionError  no session with that id (or, over ACP, not open)
        ├── SessionHeldError     the session is open in another codling process (ACP: -32003)
        ├── SpecialTurnError     a special turn is configured wrongly, or its run ended without an answer
        └── CheckpointError      a checkpoint cannot be taken or read (its store is damaged or unwritable)
            └── RewindRefused    a rewind would overwrite changes made outside codling (``paths``)

Messages are written for the person (or model) who must act on them: they say what went wrong and, where
it helps, what to do instead. Wrap lower-level exceptions with ``raise ... from e``.
"""

from __future__ import annotations


class CodlingError(Exception):
    """Base of every error codling raises on purpose."""


class ConfigError(CodlingError):
    """Settings or usage are wrong; nothing was run."""


class NoModelError(ConfigError):
    """No model was chosen and no provider has credentials in the environment."""


class MissingCredentialsError(ConfigError):
    """The model's provider needs a credential (``variables``, any one of them) the environment does not hold."""

    def __init__(self, message: str, variables: tuple[str, ...]) -> None:
        super().__init__(message)
        self.variables = variables


class UnknownProviderError(ConfigError):
    """A model id names a provider codling cannot construct."""


class StoreError(ConfigError):
    """The session store (``$CODLING_HOME/sessions``) cannot be read or written; nothing was recorded."""


class ToolError(CodlingError):
    """A tool failed in a way the model can act on; the message is returned to the model."""


class PathError(ToolError):
    """A path is missing, outside the workspace, or not what the tool needs."""


class MissingPathError(PathError):
    """Nothing exists at the path (a write may create it; a read cannot)."""


class EditError(ToolError):
    """An edit could not be applied (old text missing or ambiguous)."""


class PermissionDenied(ToolError):
    """The user or the permission mode refused the action."""


class RejectedError(PermissionDenied):
    """The user was asked and rejected the action."""


class CommandError(ToolError):
    """A command could not be started, or was stopped."""


class SandboxUnavailable(CommandError):
    """The sandbox a command must run in cannot be set up on this machine; the command was not run (fail closed)."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"the command was not run: the sandbox cannot run here ({reason}). `codling sandbox check` says what "
            'this machine lacks; sandbox = "off" in config.toml runs commands unconfined (asked, as before)'
        )
        self.reason = reason


class ModelError(CodlingError):
    """The model provider failed; the turn ends with a visible error reply."""


class SessionError(CodlingError):
    """A session operation is invalid."""


class InvalidSessionIdError(SessionError):
    """A session id is malformed: not of the fixed form codling gives out, so it is never turned into a path."""


class UnknownSessionError(SessionError):
    """No session has the given id."""


class SessionHeldError(SessionError):
    """The session is open in another codling process, which alone may write it."""


class SpecialTurnError(SessionError):
    """A special turn's configuration is invalid (raised when it is built), or its run stopped before it
    answered (then it is the special turn's error result, never raised to the caller)."""


class CheckpointError(SessionError):
    """A checkpoint of the workspace cannot be taken, read or restored."""


class RewindRefused(CheckpointError):
    """A rewind was not done: ``paths`` (relative to the workspace) changed outside codling since the last
    checkpoint, and rewinding would overwrite or delete those changes."""

    def __init__(self, message: str, paths: tuple[str, ...]) -> None:
        super().__init__(message)
        self.paths = paths
