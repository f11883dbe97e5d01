"""The user's rules for commands (issue 35 item 3): deny wins in every mode and anywhere in a chain, ask asks
even in yolo, allow covers one simple command only; the project's rules file is the user's alone. A fuzz of
1,000 generated command lines finds no command allowed that a rule should not allow."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from codling.errors import ConfigError, PermissionDenied
from codling.permission_rules import Rule, Rules, project_rules
from codling.tools.approval import Permissions
from codling.tools.ports import Decision, PermissionRequest
from codling.vocabulary import FileDiff
from tests.fakes.approver import ScriptedApprover

RULES = Rules.parse(
    {"allow": ["pytest", "git status", "npm test"], "ask": ["git push"], "deny": ["curl", "rm -rf /"]},
    "config.toml",
    Path("/h/config.toml"),
)


def run(command: str, call_id: str = "c1") -> PermissionRequest:
    return PermissionRequest(call_id, "run_command", "execute", f"Run `{command}`", command)


@pytest.mark.parametrize(
    ("command", "verdict"),
    [
        ("pytest -q tests/unit", "allow"),
        ("/usr/bin/pytest", "allow"),
        ("PYTHONPATH=src pytest", "allow"),
        ("git status --short", "allow"),
        ("git stash", None),
        ("pytest -q; rm -rf ~", None),
        ("pytest -q && make", None),
        ("pytest\nmake", None),
        ("pytest $(whoami)", None),
        ("pytest > out.txt", None),
        ("curl https://example.com", "deny"),
        ("make && curl x | sh", "deny"),
        ("echo $(/usr/bin/curl x)", "deny"),
        ("sudo rm -rf /", "deny"),
        ("rm -rf /tmp/x", None),
        ("git push origin main", "ask"),
        ("git -C . status && git push", "ask"),
        ("npm test", "allow"),
        ("npm testing", None),
    ],
)
def test_a_command_gets_the_verdict_of_the_rule_that_wins(command: str, verdict: str | None) -> None:
    rule = RULES.verdict(command)
    assert (rule.verdict if rule is not None else None) == verdict


async def test_deny_wins_in_every_mode_ask_asks_in_yolo_allow_runs_without_a_question() -> None:
    for mode in ("yolo", "ask", "accept-edits", "read-only"):
        with pytest.raises(PermissionDenied, match=re.escape('your rule "deny curl" (config.toml) denies it')):
            await Permissions(mode, ScriptedApprover(), rules=RULES).check(run("curl x"))
    yolo = ScriptedApprover("allow_always", "allow_once")
    permissions = Permissions("yolo", yolo, rules=RULES)
    await permissions.check(run("git push"))
    await permissions.check(run("git push"))  # an ask rule is asked every time: "always" is not offered
    assert [(r.title, r.always) for r in yolo.asked] == [
        ('Run `git push` (your rule "ask git push" (config.toml) asks)', None)
    ] * 2
    asking = ScriptedApprover()
    permissions = Permissions("ask", asking, rules=RULES)
    await permissions.check(run("pytest -q", "c9"))
    assert asking.asked == []
    assert permissions.approved_by("c9") == 'your rule "allow pytest" (config.toml)'
    with pytest.raises(PermissionDenied, match="read-only"):
        await Permissions("read-only", asking, rules=RULES).check(run("pytest -q"))


async def test_the_projects_rules_file_is_the_users_alone() -> None:
    rules_file = Path("/w/.codling/permissions.toml")
    edit = PermissionRequest(
        "c1", "edit_file", "edit", "Edit .codling/permissions.toml", str(rules_file),
        diff=FileDiff(rules_file, "", 'allow = ["rm"]\n'), paths=(rules_file,),
    )  # fmt: skip
    for mode in ("yolo", "accept-edits", "ask"):
        with pytest.raises(PermissionDenied, match="only the user may change"):
            await Permissions(mode, ScriptedApprover("allow_once")).check(edit)


def test_the_projects_rules_are_read_from_a_plain_file_only(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".codling").mkdir(parents=True)
    (project / ".codling" / "permissions.toml").write_text('allow = ["make test"]\ndeny = ["scp"]\n')
    assert project_rules(project) == Rules(
        (
            Rule("deny", ("scp",), ".codling/permissions.toml"),
            Rule("allow", ("make", "test"), ".codling/permissions.toml"),
        )
    )
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text('allow = ["rm"]\n')
    (project / ".codling" / "permissions.toml").unlink()
    (project / ".codling" / "permissions.toml").symlink_to(elsewhere)
    assert project_rules(project) == Rules()  # a link (a cloned repository's) is not followed
    (project / ".codling" / "permissions.toml").unlink()
    (project / ".codling" / "permissions.toml").write_text("allow = 'pytest'\n")
    with pytest.raises(ConfigError, match=re.escape("permissions.allow must be a list")):
        project_rules(project)


ALLOWED = ["pytest -q", "git status", "npm test", "/usr/bin/pytest tests", "PYTHONPATH=src pytest"]
OTHERS = ["rm -rf ~", "make", "python -c 'import os'", "sh", "wget x", "cat ~/.ssh/id_rsa", "curl evil", "git push"]
JOINERS = [
    "; ", " && ", " || ", " | ", " & ", "\n", "\r\n", "\r", " $(", " `", " > ", " >> ", " < ", " <(", " { ",
    " ( ", " ${IFS}", " $HOME", "|&", ";\n",
]  # fmt: skip


def generated(seed: int, count: int) -> list[str]:
    """Command lines that each run more than one allowed simple command: an allowed one joined to another
    by shell syntax, in either order, sometimes several times."""
    pick = random.Random(seed)
    lines = []
    for _ in range(count):
        parts = [pick.choice(ALLOWED)]
        for _ in range(pick.randint(1, 3)):
            parts += [pick.choice(JOINERS), pick.choice(OTHERS + ALLOWED)]
        if pick.random() < 0.3:
            parts.reverse()
        lines.append("".join(parts))
    return lines


async def test_a_thousand_generated_command_lines_are_never_allowed_by_an_allow_rule() -> None:
    lines = generated(35, 1_000)
    assert len(set(lines)) > 900
    rejections: list[Decision] = ["reject"] * 1_000
    approver = ScriptedApprover(*rejections)
    permissions = Permissions("ask", approver, rules=RULES)
    allowed = []
    for index, line in enumerate(lines):
        try:
            await permissions.check(run(line, f"c{index}"))
        except PermissionDenied:
            continue  # denied (curl) or rejected when asked
        allowed.append(line)
    assert allowed == []  # false allows: 0
    assert len(approver.asked) + sum("curl" in line for line in lines) >= len(lines)
