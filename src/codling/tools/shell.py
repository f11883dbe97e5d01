"""The run_command tool: a shell command in the working directory, through the session's terminal port."""

from __future__ import annotations

from pydantic_ai import RunContext

from codling.errors import ToolError
from codling.tools.base import ShownResult, ToolOutput
from codling.tools.deps import ToolDeps
from codling.tools.ports import PermissionRequest
from codling.tools.specs import describe_call

MIN_TIMEOUT_SECONDS = 1.0
MAX_TIMEOUT_SECONDS = 600.0
SUMMARY_OUTPUT_CHARS = 1_500
"""Most characters of a command's output kept in its summary (its head and its tail)."""


async def run_command(ctx: RunContext[ToolDeps], command: str, timeout_seconds: float | None = None) -> ToolOutput:
    """Run a shell command (/bin/sh -c) in the working directory; returns its exit code and output.

    stdout and stderr come back together. There is no input: a command that waits for a keypress or a
    password gets end-of-file. Long output is cut in the middle. A non-zero exit code is reported in the
    text, not as an error. Commands that never finish on their own (servers, watch modes) are stopped at the
    timeout, together with every process they started; whatever a command leaves running in the background
    (`&`, nohup, setsid) is stopped when it exits, so start a server and use it within one command. Secret
    environment variables (API keys, tokens, passwords) are not set. The user may be asked to approve the
    command first.

    Args:
        command: The command line, e.g. "pytest -q tests/unit" or "git status".
        timeout_seconds: Seconds to let the command run before it is stopped (1 to 600). Defaults to the
            session's limit, usually 120.
    """
    deps = ctx.deps
    if not command.strip():
        raise ToolError("the command is empty; give a shell command line to run")
    timeout = deps.command_timeout if timeout_seconds is None else timeout_seconds
    timeout = min(max(timeout, MIN_TIMEOUT_SECONDS), MAX_TIMEOUT_SECONDS)
    raw_input: dict[str, object] = {"command": command}
    if timeout_seconds is not None:
        raw_input["timeout_seconds"] = timeout_seconds
    request = PermissionRequest(
        tool_call_id=ctx.tool_call_id or "",
        tool_name="run_command",
        kind="execute",
        title=describe_call("run_command", raw_input, deps.workspace).title,
        subject=command,
        raw_input=raw_input,
    )
    await deps.permissions.check(request)
    cwd = deps.workspace.cwd
    call_id = ctx.tool_call_id or ""
    result = await deps.terminal.run(
        command,
        cwd=cwd,
        timeout=timeout,
        # A token is at least one character and seldom more than four: the token cap of the result does the rest.
        output_limit=min(deps.output_limit, deps.output_tokens * 4),
        on_terminal=lambda terminal_id: deps.progress.terminal(call_id, terminal_id),
    )
    if result.timed_out:
        status = f"timed out after {timeout:g}s"
        detail = ", process group killed"
    elif result.exit_code is None:
        status, detail = "stopped before it exited (no exit code)", ""
    else:
        status, detail = f"exit code {result.exit_code}", ""
    output = result.output if result.output.strip() else "(no output)"
    if result.terminal_id is not None:  # the editor's terminal: its own limits, its own way of cutting
        if result.truncated:
            output = "[the editor kept only part of this command's output]\n" + output
        output = trim_middle(output, deps.output_limit)
    shown = trim_middle(output.rstrip().lstrip("\n"), SUMMARY_OUTPUT_CHARS)
    summary = f"`{command}` in {cwd} → {status}\n{shown}"
    return ToolOutput(
        text=f"{status}{detail}\n{output}",
        summary=summary,
        terminal_id=result.terminal_id,
        shown=ShownResult(exit_code=result.exit_code),
    )


def trim_middle(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: its head and tail, at line breaks where that loses little,
    around a note saying how many characters were left out."""
    if len(text) <= limit:
        return text
    half = limit // 2
    head = text[:half]
    if (cut := head.rfind("\n")) >= half // 2:
        head = head[:cut]
    tail = text[-half:]
    if 0 <= (cut := tail.find("\n")) <= half // 2:
        tail = tail[cut + 1 :]
    return f"{head}\n[… {len(text) - len(head) - len(tail)} characters trimmed …]\n{tail}"
