"""The run_command tool: a shell command in the working directory, through the session's terminal port."""

from __future__ import annotations

import re
import shutil

from pydantic_ai import RunContext

from codling.errors import ToolError
from codling.paths import user_home
from codling.text import original_lines
from codling.tools.base import ShownResult, ToolOutput
from codling.tools.deps import ToolDeps
from codling.tools.ports import PermissionRequest
from codling.tools.salient import salient_lines
from codling.tools.sandbox.blocked import blocked_note
from codling.tools.sandbox.policy import Lift, made_protected
from codling.tools.specs import describe_call

MIN_TIMEOUT_SECONDS = 1.0
MAX_TIMEOUT_SECONDS = 600.0
SUMMARY_OUTPUT_CHARS = 1_500
"""Most characters of a command's output kept in its summary."""
SUMMARY_HEAD_CHARS = 300
"""Of those, most characters of the output's first lines (when no line stands out)."""
SUMMARY_KEY_CHARS = 600
"""Of those, most characters of the lines that matter (``salient_lines``); the rest is the output's end."""


async def run_command(
    ctx: RunContext[ToolDeps],
    command: str,
    timeout_seconds: float | None = None,
    lift_sandbox: Lift | None = None,
    reason: str | None = None,
) -> ToolOutput:
    """Run a shell command (/bin/sh -c) in the working directory; returns its exit code and output.

    stdout and stderr come back together. There is no input: a command that waits for a keypress or a
    password gets end-of-file. Long output is cut in the middle. A non-zero exit code is reported in the
    text, not as an error. Commands that never finish on their own (servers, watch modes) are stopped at the
    timeout, together with every process they started; whatever a command leaves running in the background
    (`&`, nohup, setsid) is stopped when it exits, so start a server and use it within one command. Secret
    environment variables (API keys, tokens, passwords) are not set. The user may be asked to approve the
    command first.

    Unless the user turned it off (or chose yolo mode), commands run in a sandbox: they may change files only
    in the workspace and temp directories, .git is read-only (git status, diff and log work; add and commit
    do not), the network is off (servers a command starts itself still answer on 127.0.0.1), and credentials
    (~/.ssh, ~/.aws…) read as empty. What it blocked is named after the output. When a task needs more, run
    the command with lift_sandbox and a reason: the user is asked.

    Args:
        command: The command line, e.g. "pytest -q tests/unit" or "git status".
        timeout_seconds: Seconds to let the command run before it is stopped (1 to 600). Defaults to the
            session's limit, usually 120.
        lift_sandbox: "network" to run it with the network on (installing packages, fetching), "all" to run it
            outside the sandbox (a git commit); when the sandbox blocked it or the command plainly needs it.
            Give it on each such call: the user's "always" answer spares the question, not the argument.
        reason: With lift_sandbox: why the command needs it, in one sentence for the user.
    """
    deps = ctx.deps
    if not command.strip():
        raise ToolError("the command is empty; give a shell command line to run")
    timeout = deps.command_timeout if timeout_seconds is None else timeout_seconds
    timeout = min(max(timeout, MIN_TIMEOUT_SECONDS), MAX_TIMEOUT_SECONDS)
    raw_input: dict[str, object] = {"command": command}
    if timeout_seconds is not None:
        raw_input["timeout_seconds"] = timeout_seconds
    sandbox = deps.sandbox if deps.sandbox is not None and deps.sandbox.applies(deps.permissions.mode) else None
    lift = lift_sandbox if sandbox is not None else None  # unconfined already: nothing to lift
    if sandbox is not None:
        sandbox = await sandbox.with_git_asked(shutil.which("git"))
    if lift is not None:
        raw_input |= {"lift_sandbox": lift, "reason": reason or ""}
    request = PermissionRequest(
        tool_call_id=ctx.tool_call_id or "",
        tool_name="run_command",
        kind="execute",
        title=describe_call("run_command", raw_input, deps.workspace).title,
        subject=command,
        raw_input=raw_input,
        sandboxed=sandbox is not None and lift != "all",
        lift=lift,
        reason=reason,
    )
    await deps.permissions.check(request)
    cwd = deps.workspace.cwd
    call_id = ctx.tool_call_id or ""
    absent = sandbox.absent() if sandbox is not None and lift != "all" else []
    result = await deps.terminal.run(
        command,
        cwd=cwd,
        timeout=timeout,
        # A token is at least one character and seldom more than four: the token cap of the result does the rest.
        output_limit=min(deps.output_limit, deps.output_tokens * 4),
        on_terminal=lambda terminal_id: deps.progress.terminal(call_id, terminal_id),
        sandbox=sandbox.policy(lift) if sandbox is not None else None,
    )
    if result.timed_out:
        status = f"timed out after {timeout:g}s"
        detail = ", process group killed"
    elif result.exit_code is None:
        status, detail = "stopped before it exited (no exit code)", ""
    else:
        status, detail = f"exit code {result.exit_code}", ""
    output = result.output if result.output.strip() else "(no output)"
    if sandbox is not None and lift != "all":
        made = made_protected(absent)  # after the command: everything it started has ended
        note = blocked_note(
            result.output,
            sandbox,
            cwd=cwd,
            home=user_home(),
            network=lift == "network",
            failed=result.exit_code != 0,
            made=made,
            command=command,
            askable=deps.permissions.approver is not None,
        )
        output = f"{output.rstrip()}\n{note}" if note else output
    if lift is not None:
        lifted = "with the network on" if lift == "network" else "outside the sandbox"
        output = f"(ran {lifted}, as the user allowed)\n{output}"
    if result.terminal_id is not None:  # the editor's terminal: its own limits, its own way of cutting
        if result.truncated:
            output = "[the editor kept only part of this command's output]\n" + output
        output = trim_middle(output, deps.output_limit)
    # (not the command, nor where it ran, the session's directory: the call's title and arguments say them)
    summary = f"{status}\n{output_summary(output.strip(chr(10)).rstrip())}"
    return ToolOutput(
        text=f"{status}{detail}\n{output}",
        summary=summary,
        terminal_id=result.terminal_id,
        shown=ShownResult(exit_code=result.exit_code),
    )


_MARKERS = re.compile(r"\s*[\^~]+\s*")


def output_summary(output: str) -> str:
    """A command's output as its summary keeps it: whole when short; else the lines that matter (failures,
    errors, a traceback's exception, a test run's summary line: ``salient_lines``) and its last lines — or,
    when no line stands out (a listing, a log), its first and last lines — each part headed, within
    ``SUMMARY_OUTPUT_CHARS``. Never just the head, which for a test run is progress lines that the same run
    repeats word for word each time."""
    # Python's traceback markers (a line of ^^^^ under the expression that failed) say nothing in a summary.
    lines = [line for line in output.split("\n") if not _MARKERS.fullmatch(line)]
    output = "\n".join(lines)
    if len(output) <= SUMMARY_OUTPUT_CHARS:
        return output
    key = list(salient_lines(output, max_lines=12, max_chars=SUMMARY_KEY_CHARS, last_lines=False))
    head = [] if key else _fitting(lines, SUMMARY_HEAD_CHARS)
    rest = lines[len(head) :]
    total = original_lines(output)  # the command's whole output, through the notes of what a cap cut
    headings = [
        f"[{total:,} lines of output; the lines that matter:]"
        if key
        else f"[{total:,} lines of output; its first lines:]",
        "[… its last lines:]",
    ]
    tail: list[str] = []
    for _ in range(2):  # a key line the end shows is said there, once; its room goes to the end
        room = SUMMARY_OUTPUT_CHARS - sum(len(line) + 1 for line in (*head, *key, *headings))
        tail = _fitting(rest[::-1], room)[::-1]
        shown = [line.strip() for line in tail]
        key = [line for line in key if not any(full.startswith(line.rstrip("…")) for full in shown)]
    if not tail:  # lines too long to keep whole (a minified file, one line of JSON): cut in the middle
        return trim_middle(output, SUMMARY_OUTPUT_CHARS)
    if not key and not head:  # every line that matters is among the last ones
        return "\n".join([f"[{len(lines):,} lines of output; its last lines:]", *tail])
    return "\n".join([headings[0], *head, *key, headings[1], *tail])


def _fitting(lines: list[str], room: int) -> list[str]:
    """The first of ``lines`` that fit ``room`` characters (one more each for its newline)."""
    kept: list[str] = []
    for line in lines:
        room -= len(line) + 1
        if room < 0:
            break
        kept.append(line)
    return kept


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
