"""A failed shell call recognised from its text alone (opencode gives no ``is_error`` and no exit
code): shells' own diagnostics, make's ``***``, ``prog: error:``, ``prog: cannot ...``, apt's
``E:``, a stated non-zero exit; and ordinary outputs that merely mention errors stay ok."""

from __future__ import annotations

import pytest

from headroom_core.learn.steps import make_step


def step(text: str, command: str = "pytest tests"):
    return make_step("bash", {"command": command, "description": "run"}, text)  # opencode's bash tool: no flag, no code


@pytest.mark.parametrize(
    "text, error",
    [
        ("/bin/sh: 1: pytest: not found", "pytest: not found"),  # dash, as opencode's spawn(shell: true) runs on Debian
        ("sh: pytest: not found", "pytest: not found"),
        ("bash: line 1: pytest: command not found", "command not found"),
        ("/bin/sh: 1: cd: can't cd to build", "/bin/sh: 1: cd: can't cd to build"),
        ("gcc -o app app.c\nmake: *** [Makefile:3: all] Error 1", "make: *** [Makefile:3: all] Error 1"),
        ("cargo: error: no such command: `biuld`", "cargo: error: no such command: `biuld`"),
        ("go: cannot find main module, but found .git/config", "go: cannot find main module, but found .git/config"),
        ("Reading package lists...\nE: Unable to locate package jq2", "E: Unable to locate package jq2"),
        ("building...\nCommand exited with non-zero status 2", "Command exited with non-zero status 2"),
        # the program named by its path (argv[0] as the shell resolved it), Python's OSError text
        (
            "/root/.pyenv/versions/3.11.7/bin/python3: can't open file '/ws/tool/stats.py': [Errno 2] No such file or directory",
            "/root/.pyenv/versions/3.11.7/bin/python3: can't open file '/ws/tool/stats.py': [Errno 2] No such file or directory",
        ),
        ("/usr/bin/ld: cannot find -lssl", "/usr/bin/ld: cannot find -lssl"),
        (
            "./configure: error: C compiler cannot create executables",
            "./configure: error: C compiler cannot create executables",
        ),
        (
            "cp: cannot stat 'a.txt': [Errno 2] No such file or directory",
            "cp: cannot stat 'a.txt': [Errno 2] No such file or directory",
        ),
    ],
)
def test_error_shaped_text_is_a_failure(text, error):
    s = step(text)
    assert not s.ok and s.error == error


@pytest.mark.parametrize(
    "text, command",
    [
        (
            "src/log.py:12:    raise ValueError('error: bad input')\nsrc/log.py:30:    # error: handled",
            "grep -rn error src",
        ),
        ("tests/test_x.py::test_errors PASSED\n===== 12 passed, 0 errors in 0.3s =====", "pytest"),
        ("Process finished with exit code 0", "./run.sh"),
        ("retries: 3 (status code 1 ignored)\ndone", "./sync"),
        ("README.md:12:the shell: sh: is great", "grep -n sh: README.md"),
        ("Success: no issues found in 3 source files", "mypy ."),
        ("docs/errors.md: how to read them\nsrc/app/cache.py: caching, cannot be disabled in tests", "cat INDEX"),
    ],
)
def test_outputs_that_mention_errors_are_not_failures(text, command):
    assert step(text, command).ok
