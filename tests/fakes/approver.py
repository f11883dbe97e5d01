"""A scripted Approver for tests."""

from __future__ import annotations

from codling.tools.ports import Answer, PermissionRequest


class ScriptedApprover:
    """Answers permission requests from a script and records every request it was asked."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.asked: list[PermissionRequest] = []

    async def ask(self, request: PermissionRequest) -> Answer:
        self.asked.append(request)
        return self.answers.pop(0)
