"""bash itself completing a model id past its `:` (issue 32 item 6), through the script `codling
--install-completion` installs and a real codling process: bash hands the words split at `:` (COMP_WORDBREAKS), and
COMPREPLY must hold what replaces the part after it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer._completion_shared import get_completion_script

from tests.e2e.test_cli import base_env
from tests.fakes.deadlines import deadline

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def test_bash_completes_a_model_id_after_its_colon(home: Path, tmp_path: Path) -> None:
    script = tmp_path / "codling.bash"
    script.write_text(get_completion_script(prog_name="codling", complete_var="_CODLING_COMPLETE", shell="bash"))
    program = Path(sys.executable).with_name("codling")  # the installed script: completion keys on its name
    # COMP_WORDS as bash makes them of `codling -m openai:gpt-5-`, the cursor at its end.
    line = (
        f"source {script}; COMP_WORDS=(codling -m openai : gpt-5-); COMP_CWORD=4; "
        f'_codling_completion {program}; printf "%s\\n" "${{COMPREPLY[@]}}"'
    )
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", line],
        env=base_env(home),
        capture_output=True,
        text=True,
        timeout=deadline(60),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["gpt-5-mini", "gpt-5-codex"]
