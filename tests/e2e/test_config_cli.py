"""``headroom config show`` / ``init`` (the command as a process) say and write what the settings
object holds (moved from ``tests/unit/test_config.py``: it runs the installed command)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tomllib
from pathlib import Path

from headroom_core.settings import Settings

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config.example.toml"
HEADROOM = str(Path(sys.executable).parent / "headroom")


def _cli(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"HEADROOM_HOME": str(home), "PATH": "/usr/bin:/bin", "COLUMNS": "200", **env}
    return subprocess.run([HEADROOM, *args], env=base, capture_output=True, text=True, timeout=60)


def test_config_show_and_init(tmp_path):
    out = _cli("config", "init", home=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "config.toml").read_text() == EXAMPLE.read_text()
    tomllib.loads((tmp_path / "config.toml").read_text())  # a valid, all-commented TOML file
    assert _cli("config", "init", home=tmp_path).returncode == 1  # never overwrites silently
    (tmp_path / "config.toml").write_text("min_saving_ratio = 0.25\n")
    out = _cli("config", "show", "--json", home=tmp_path, HEADROOM_TOOLS_MINIFY="false")
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    assert set(shown) == {f.name for f in dataclasses.fields(Settings)}
    assert shown["min_saving_ratio"] == {"value": 0.25, "source": str(tmp_path / "config.toml")}
    assert shown["tools_minify"] == {"value": False, "source": "environment HEADROOM_TOOLS_MINIFY"}
    assert shown["min_tokens"] == {"value": 250, "source": "default"}
    table = _cli("config", "show", home=tmp_path).stdout
    assert "min_saving_ratio" in table and "0.25" in table and "database in force: sqlite:///" in table
    (tmp_path / "config.toml").write_text("min_tokens = 'x'\n")
    bad = _cli("config", "show", home=tmp_path)
    assert bad.returncode == 2 and "min_tokens" in bad.stdout + bad.stderr
