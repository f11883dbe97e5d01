"""Fakes for tests: stand-ins for the services codling talks to."""

from .openai_server import (
    DEFAULT_MODEL,
    ErrorReply,
    OpenAIServer,
    RecordedRequest,
    Reply,
    Responder,
    ScriptedReply,
    ToolCall,
    Usage,
    last_user_text,
    running_server,
)

__all__ = [
    "DEFAULT_MODEL",
    "ErrorReply",
    "OpenAIServer",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedReply",
    "ToolCall",
    "Usage",
    "last_user_text",
    "running_server",
]
