"""The pairing rules as data (``headroom_core/learn/pair_rules.py``): every row of every table has
a case here that this row decides (the first row that applies), with the answer it gives; the
tables' order is the documented one; every table ends with a row that always applies. Adding a
row means adding its case below (``test_every_row_has_a_case`` fails until then)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from headroom_core.learn import pairing
from headroom_core.learn.pair_rules import (
    EDIT_RULES,
    MATCH_RULES,
    SAME_JOB_RULES,
    TOOL_RULES,
    Candidate,
    PairKind,
    decide,
    first_match,
)
from headroom_core.learn.steps import Step


def sh(
    command: str,
    error: str = "",
    *,
    tool: str = "Bash",
    workdir: str = "",
    background: bool = False,
    target: str = "",
    output: str = "",
) -> Step:
    """A shell call; it failed when ``error`` is given."""
    return Step(
        tool=tool,
        command=command,
        target=target,
        args=json.dumps({"command": command}),
        keys=frozenset({"command"}),
        ok=not error,
        error=error,
        index=0,
        workdir=workdir,
        background=background,
        output=output,
    )


def swe(command: str, error: str = "", target: str = "") -> Step:
    """A SWE-agent action (its shell, with ``edit``, ``str_replace_editor`` ...)."""
    return sh(command, error, tool="swe-agent", target=target)


def tool(name: str, error: str = "", **args: str) -> Step:
    """An agent tool call (``Read``, ``Edit``, ``Task`` ...); its file is ``file_path``."""
    return Step(
        tool=name,
        command="",
        target=args.get("file_path", ""),
        args=json.dumps(args, sort_keys=True),
        keys=frozenset(args),
        ok=not error,
        error=error,
        index=0,
    )


LOOKS = [sh("ls")] * 5  # enough calls in between to be out of WINDOW


@dataclass(frozen=True)
class Case:
    """``f`` failed, ``s`` came later with ``between`` in between; ``want``: the pair's
    ``(kind, detail)`` (None: no pair) or, for SAME_JOB_RULES, True/False."""

    f: Step
    s: Step
    want: object
    between: tuple[Step, ...] = ()
    root: str = ""
    ignore: frozenset[str] = field(default_factory=frozenset)

    def candidate(self) -> Candidate:
        return Candidate(self.f, self.s, self.between, self.ignore, self.root.rstrip("/"))


NOT_READ = "File has not been read yet. Read it first before writing to it."
MISSING_PROMPT = "The required parameter `prompt` is missing"
NO_YAML = "ModuleNotFoundError: No module named 'yaml'"
NO_START = 'npm ERR! Missing script: "start"'
NO_TEST = 'npm ERR! Missing script: "test"'

MATCH_CASES: dict[str, Case] = {
    "mixed-call": Case(tool("Edit", NOT_READ, file_path="/p/a.py", old_string="a", new_string="b"), sh("ls"), None),
    "tool-calls": Case(
        tool("Task", MISSING_PROMPT, description="x"),
        tool("Task", description="x", prompt="go"),
        (PairKind.PARAM, "prompt"),
    ),
    "edit-far": Case(
        swe("edit 3:5\nx = (1\nend_of_edit", "E999 SyntaxError"),
        swe("edit 3:6\nx = (1\nend_of_edit"),
        None,
        tuple(LOOKS),
    ),
    "edit-after-reread": Case(
        swe(
            "str_replace_editor str_replace /p/a.py --old_str 'x = 1' --new_str 'x = 2'",
            "No replacement was performed, old_str `x = 1` did not appear verbatim in /p/a.py.",
        ),
        swe("str_replace_editor str_replace /p/a.py --old_str 'x  = 1' --new_str 'x = 2'"),
        (PairKind.PREREQUISITE, ""),
        (swe("str_replace_editor view /p/a.py"),),
    ),
    "edit": Case(
        swe("edit 3:5\nx = (1\nend_of_edit", "E999 SyntaxError"),
        swe("edit 3:6\nx = (1\nend_of_edit"),
        (PairKind.EDIT_RANGE, ""),
    ),
    "answer-retyped": Case(sh("submit 'flag{a}'", "Wrong flag"), sh("submit 'flag{b}'"), (PairKind.RETRY, "")),
    "answer": Case(sh("submit 'flag{a}'", "Wrong flag"), sh("python solve.py"), None),
    "same-command-far-away": Case(
        sh("npm test", NO_TEST, workdir="/p"), sh("npm test", workdir="/p/app"), None, tuple(LOOKS), "/p"
    ),
    "same-command-from-root": Case(
        sh("npm test", NO_TEST, workdir="/p/app"), sh("npm test", workdir="/p/"), (PairKind.RETRY, ""), root="/p"
    ),
    "same-command-elsewhere": Case(
        sh("npm test", NO_TEST, workdir="/p"), sh("npm test", workdir="/p/app"), (PairKind.CWD, "app"), root="/p"
    ),
    "background": Case(
        sh("npm run dev", "Command timed out after 2m 0.0s"),
        sh("npm run dev", background=True),
        (PairKind.BACKGROUND, ""),
    ),
    "same-inspection": Case(
        sh("ls build", "ls: cannot access 'build': No such file or directory"), sh("ls build"), None
    ),
    "setup-between": Case(
        sh("python app.py", NO_YAML),
        sh("python app.py"),
        (PairKind.SETUP, "pip install pyyaml"),
        (sh("pip install pyyaml"),),
    ),
    "code-edited-between": Case(
        sh("pytest tests", "FAILED tests/test_a.py::test_x - AssertionError"),
        sh("pytest tests"),
        (PairKind.RETRY, ""),
        (tool("Edit", file_path="/p/a.py", old_string="a", new_string="b"),),
    ),
    "same-command-again": Case(
        sh("pytest tests", "FAILED tests/test_a.py::test_x - AssertionError"), sh("pytest tests"), None
    ),
    "far": Case(sh("yarn test", "bash: yarn: command not found"), sh("npm test"), None, tuple(LOOKS)),
    "inline-setup": Case(
        sh("python app.py", NO_YAML), sh("pip install pyyaml && python app.py"), (PairKind.SETUP, "pip install pyyaml")
    ),
    "inline-cd-no-lesson": Case(sh("npm test", NO_TEST), sh("cd /p && npm test"), (PairKind.RETRY, ""), root="/p"),
    "inline-cd": Case(sh("npm test", NO_TEST), sh("cd app && npm test"), (PairKind.CWD, "app"), root="/p"),
    "inline-other": Case(
        sh("pytest", "FAILED tests/test_a.py::test_x - AssertionError"), sh("echo go && pytest"), (PairKind.RETRY, "")
    ),
    "stdin": Case(
        sh("python ask.py", "EOFError: EOF when reading a line"),
        sh("echo y | python ask.py"),
        (PairKind.STDIN, "echo y | python ask.py"),
    ),
    "retyped": Case(
        sh("pytest test_a.py test_b.py", "syntax error, not executed"),
        sh("pytest test_a.py test_c.py"),
        (PairKind.RETRY, ""),
    ),
    "code-failure": Case(sh("pytest tests", "AssertionError: 1 != 2"), sh("python -m pytest tests"), None),
    "same-job": Case(
        sh("pytest tests", "bash: pytest: command not found"), sh("python -m pytest tests"), (PairKind.COMMAND, "")
    ),
    "installs-missing": Case(
        sh(
            "node express.js", "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'express' imported from /p/express.js"
        ),
        sh("npm install express"),
        (PairKind.SETUP, "npm install express"),
    ),
    "otherwise": Case(sh("make build", "make: *** No rule to make target 'build'.  Stop."), sh("git status"), None),
}

TOOL_CASES: dict[str, Case] = {
    "far": Case(
        tool("Edit", NOT_READ, file_path="/p/a.py", old_string="a", new_string="b"),
        tool("Edit", file_path="/p/a.py", old_string="a", new_string="b"),
        None,
        tuple(tool("Read", file_path="/p/a.py") for _ in range(5)),
    ),
    "other-family": Case(
        tool("Edit", NOT_READ, file_path="/p/a.py", old_string="a", new_string="b"),
        tool("Read", file_path="/p/a.py"),
        None,
    ),
    "other-file": Case(
        tool("Edit", NOT_READ, file_path="/p/a.py", old_string="a", new_string="b"),
        tool("Edit", file_path="/p/b.py", old_string="a", new_string="b"),
        None,
    ),
    "param-given": Case(
        tool("Task", MISSING_PROMPT, description="x"),
        tool("Task", description="x", prompt="go"),
        (PairKind.PARAM, "prompt"),
    ),
    "param-not-given": Case(tool("Task", MISSING_PROMPT, description="x"), tool("Task", description="y"), None),
    "other-call": Case(
        tool("Glob", "Invalid pattern", pattern="src/**/[a-"), tool("Glob", pattern="tests/unit/fixtures/*.json"), None
    ),
    "same-call": Case(
        tool("Edit", "File has been modified since read", file_path="/p/a.py", old_string="a", new_string="b"),
        tool("Edit", file_path="/p/a.py", old_string="a", new_string="b"),
        None,
    ),
    "indentation": Case(
        tool(
            "Edit",
            "String to replace not found in file.",
            file_path="/p/a.py",
            old_string="  x = 1",
            new_string="  x = 2",
        ),
        tool("Edit", file_path="/p/a.py", old_string="    x = 1", new_string="    x = 2"),
        (PairKind.EDIT_INDENT, ""),
    ),
    "read-first": Case(
        tool("Edit", NOT_READ, file_path="/p/a.py", old_string="a", new_string="b"),
        tool("Edit", file_path="/p/a.py", old_string="a", new_string="b"),
        (PairKind.PREREQUISITE, ""),
        (tool("Read", file_path="/p/a.py"),),
    ),
    "param": Case(
        tool("Edit", "missing required parameter: old_string", file_path="/p/a.py", new_string="b"),
        tool("Edit", file_path="/p/a.py", old_string="a", new_string="b"),
        (PairKind.PARAM, "old_string"),
    ),
    "otherwise": Case(
        tool(
            "Edit", "String to replace not found in file.", file_path="/p/a.py", old_string="x = 1", new_string="x = 2"
        ),
        tool("Edit", file_path="/p/a.py", old_string="y = 1", new_string="y = 2"),
        (PairKind.RETRY, ""),
    ),
}

EDIT_CASES: dict[str, Case] = {
    "not-both-edits": Case(swe("edit 3:5\nx = (1\nend_of_edit", "E999 SyntaxError"), swe("python a.py"), None),
    "other-file": Case(
        swe("edit 3:5\nx = (1\nend_of_edit", "E999 SyntaxError", target="/p/a.py"),
        swe("edit 3:6\nx = (1\nend_of_edit", target="/p/b.py"),
        None,
    ),
    "other-edit-command": Case(
        swe("edit 3:5\nx = (1\nend_of_edit", "E999 SyntaxError"),
        swe("str_replace_editor str_replace /p/a.py --old_str 'x = (1' --new_str 'x = 1'"),
        None,
    ),
    "same-text": Case(
        swe("edit 3:5\nx = (1\nend_of_edit", "E999 SyntaxError"), swe("edit 3:5\nx = (1\nend_of_edit\n"), None
    ),
    "line-range": Case(
        swe("edit 3:5\nx = (1\nend_of_edit", "E999 SyntaxError"),
        swe("edit 3:6\nx = (1\nend_of_edit"),
        (PairKind.EDIT_RANGE, ""),
    ),
    "indentation": Case(
        swe("edit 3:5\n  x = 1\nend_of_edit", "E999 IndentationError: unexpected indent"),
        swe("edit 3:5\n    x = 1\nend_of_edit"),
        (PairKind.EDIT_INDENT, ""),
    ),
    "other-text": Case(
        swe("edit 3:5\nx = (1\nend_of_edit", "E999 SyntaxError"),
        swe("edit 3:5\nx = 1\nend_of_edit"),
        (PairKind.RETRY, ""),
    ),
}

NOT_FOUND_RG = "bash: rg: command not found"
SAME_JOB_CASES: dict[str, Case] = {
    "no-command": Case(sh("cd app", "cd: app: No such file or directory"), sh("npm test"), False),
    "adds-job-flag": Case(sh("node app.js", "Error: Cannot find module 'x'"), sh("node --check app.js"), False),
    "selects-part": Case(
        sh("pytest tests", "ERROR: file or directory not found: tests"), sh("pytest -k foo tests"), False
    ),
    "forces-or-skips": Case(
        sh("git push", "error: failed to push some refs; Updates were rejected"), sh("git push --force"), False
    ),
    "same-program-looks": Case(
        sh("ls build", "ls: cannot access 'build': No such file or directory"), sh("ls dist"), False
    ),
    "same-program-answer": Case(sh("submit a", "Wrong"), sh("submit b"), False),
    "other-verb": Case(sh("npm run start", NO_START), sh("npm run test"), False),
    "free-text-only": Case(
        sh("git commit -m 'fix a'", "error: pathspec did not match any file"), sh("git commit -m 'fix b'"), False
    ),
    "identical": Case(sh("npm test", NO_TEST), sh("npm test"), False),
    "similar-line": Case(
        sh("pytest tests/unit", "ERROR: file or directory not found: tests/unit"), sh("pytest tests/units"), True
    ),
    "shared-words": Case(
        sh("python manage.py runserver", "error: unrecognized arguments: runserver"),
        sh("python manage.py migrate --database replica --fake-initial --plan-only"),
        True,
    ),
    "same-program-otherwise": Case(
        sh("cargo build --release --target x86_64-unknown-linux-gnu", "error: unrecognized arguments"),
        sh(
            "cargo build --features serde,tokio,everything-else --manifest-path crates/x86_64-unknown-linux-gnu/Cargo.toml"
        ),
        False,
    ),
    "same-script": Case(sh("ts-node a.ts", 'Error: Unknown file extension ".ts"'), sh("npx tsx a.ts"), True),
    "same-arguments": Case(
        sh("docker-compose up", "bash: docker-compose: command not found"), sh("docker compose up"), True
    ),
    "looks-instead": Case(sh("npm run start", NO_START), sh("cat package.json"), False),
    "installs-the-program": Case(sh("rg foo", NOT_FOUND_RG), sh("apt-get install -y rg"), False),
    "missing-program-same-arguments": Case(sh("rg foo src", NOT_FOUND_RG), sh("grep -r foo src"), True),
    "missing-program-related": Case(sh("rg foo src", NOT_FOUND_RG), sh("grep -rn foo src/"), True),
    "missing-program-otherwise": Case(sh("rg foo", NOT_FOUND_RG), sh("ls"), False),
    "no-common-job": Case(
        sh("make build", "make: *** No rule to make target 'build'.  Stop."), sh("git status"), False
    ),
    "looks": Case(sh("echo test", "echo: write error: No such file or directory"), sh("npm test --silent"), False),
    "server-kept-running": Case(sh("npm run start", NO_START), sh("node server.js", background=True), True),
    "server-stopped": Case(sh("npm run start", NO_START), sh("node server.js"), False),
    "common-job": Case(sh("yarn test", 'error Command "test" not found.'), sh("npm test -- --watchAll=false"), True),
}

TABLES = {
    "MATCH_RULES": (MATCH_RULES, MATCH_CASES),
    "TOOL_RULES": (TOOL_RULES, TOOL_CASES),
    "EDIT_RULES": (EDIT_RULES, EDIT_CASES),
    "SAME_JOB_RULES": (SAME_JOB_RULES, SAME_JOB_CASES),
}

# The documented order (pair_rules' module docstring and the comments above each group of rows).
DOCUMENTED_ORDER = {
    "MATCH_RULES": [
        "mixed-call",
        "tool-calls",
        "edit-far",
        "edit-after-reread",
        "edit",
        "answer-retyped",
        "answer",
        "same-command-far-away",
        "same-command-from-root",
        "same-command-elsewhere",
        "background",
        "same-inspection",
        "setup-between",
        "code-edited-between",
        "same-command-again",
        "far",
        "inline-setup",
        "inline-cd-no-lesson",
        "inline-cd",
        "inline-other",
        "stdin",
        "retyped",
        "code-failure",
        "same-job",
        "installs-missing",
        "otherwise",
    ],
    "TOOL_RULES": [
        "far",
        "other-family",
        "other-file",
        "param-given",
        "param-not-given",
        "other-call",
        "same-call",
        "indentation",
        "read-first",
        "param",
        "otherwise",
    ],
    "EDIT_RULES": [
        "not-both-edits",
        "other-file",
        "other-edit-command",
        "same-text",
        "line-range",
        "indentation",
        "other-text",
    ],
    "SAME_JOB_RULES": [
        "no-command",
        "adds-job-flag",
        "selects-part",
        "forces-or-skips",
        "same-program-looks",
        "same-program-answer",
        "other-verb",
        "free-text-only",
        "identical",
        "similar-line",
        "shared-words",
        "same-program-otherwise",
        "same-script",
        "same-arguments",
        "looks-instead",
        "installs-the-program",
        "missing-program-same-arguments",
        "missing-program-related",
        "missing-program-otherwise",
        "no-common-job",
        "looks",
        "server-kept-running",
        "server-stopped",
        "common-job",
    ],
}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_the_order_is_the_documented_one(table: str):
    rows, _ = TABLES[table]
    assert [r.name for r in rows] == DOCUMENTED_ORDER[table]


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_row_has_a_case(table: str):
    rows, cases = TABLES[table]
    assert sorted(cases) == sorted(r.name for r in rows)


@pytest.mark.parametrize("table", sorted(TABLES))
def test_rows_are_named_once_documented_and_the_last_always_applies(table: str):
    rows, cases = TABLES[table]
    assert len({r.name for r in rows}) == len(rows)
    assert all(r.doc.strip() for r in rows)
    assert rows[-1].name in ("otherwise", "other-text", "common-job")
    assert all(rows[-1].applies(c.candidate()) for c in cases.values())


@pytest.mark.parametrize("name", list(MATCH_CASES))
def test_match_rule(name: str):
    case = MATCH_CASES[name]
    c = case.candidate()
    path = decide(MATCH_RULES, c)
    assert path[0].name == name
    assert pairing._match(case.f, case.s, case.between, case.ignore, case.root) == case.want


@pytest.mark.parametrize("name", list(TOOL_CASES))
def test_tool_rule(name: str):
    case = TOOL_CASES[name]
    assert [r.name for r in decide(MATCH_RULES, case.candidate())] == ["tool-calls", name]
    assert pairing._match(case.f, case.s, case.between, case.ignore, case.root) == case.want


@pytest.mark.parametrize("name", list(EDIT_CASES))
def test_edit_rule(name: str):
    case = EDIT_CASES[name]
    c = case.candidate()
    assert first_match(EDIT_RULES, c).name == name
    kind = case.want[0] if isinstance(case.want, tuple) else None
    assert c.edit_kind == kind
    if name != "not-both-edits":  # shell edits on both sides: MATCH_RULES hands them to EDIT_RULES
        assert [r.name for r in decide(MATCH_RULES, case.candidate())] == ["edit", name]
        assert pairing._match(case.f, case.s, case.between, case.ignore, case.root) == case.want


@pytest.mark.parametrize("name", list(SAME_JOB_CASES))
def test_same_job_rule(name: str):
    case = SAME_JOB_CASES[name]
    assert first_match(SAME_JOB_RULES, case.candidate()).name == name
    assert pairing.same_job(case.f, case.s, case.ignore) is case.want


def test_a_checker_that_ran_fixes_only_how_a_command_was_run():
    """``match``: a later test run that reported failures (not ok) is a fix of kind command or
    cwd only (CHECKER_KINDS); as a fix of the same command line in between edits it is none."""
    f = sh("pytest tests", "bash: pytest: command not found")
    s = Step(
        **{
            **sh("python -m pytest tests").__dict__,
            "ok": False,
            "error": "FAILED tests/test_a.py::test_x - AssertionError",
        }
    )
    assert pairing.match(f, s, ()) == (PairKind.COMMAND, "")
    again = sh("pytest tests", "FAILED tests/test_a.py::test_x - AssertionError")
    edit = tool("Edit", file_path="/p/a.py", old_string="a", new_string="b")
    assert pairing._match(again, s.__class__(**{**again.__dict__}), (edit,), frozenset(), "") == (PairKind.RETRY, "")
    assert pairing.match(again, Step(**{**again.__dict__, "error": "FAILED tests/test_b.py"}), (edit,)) is None


def test_kinds_compare_equal_to_the_stored_texts():
    assert PairKind.EDIT_RANGE == "edit-range" and f"{PairKind.COMMAND}" == "command" and str(PairKind.SETUP) == "setup"
    assert json.dumps([PairKind.CWD]) == '["cwd"]'
