"""The README's promises that can drift: every setting in its table, the two commands exist."""

from __future__ import annotations

import os
import re
from pathlib import Path

from desk.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def test_every_setting_is_in_the_configuration_table() -> None:
    readme = (ROOT / "README.md").read_text()
    listed = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", readme, flags=re.MULTILINE))
    missing = {f.upper() for f in Settings.model_fields} - listed
    assert not missing, f"add these to README's configuration table: {sorted(missing)}"


def test_the_two_commands_are_executable_scripts() -> None:
    for path in ("scripts/dev", "scripts/test", ".ci/run"):
        assert os.access(ROOT / path, os.X_OK), path
        assert (ROOT / path).read_text().startswith("#!/usr/bin/env bash\n"), path
