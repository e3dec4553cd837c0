"""How results are read (no match, timeouts, SWE-agent's own messages) and which later call counts
as the fix of a failure, on calls shaped as the agents write them (Claude Code 1.x/2.x results,
Codex exit-code headers and JSON, SWE-agent observations)."""

from __future__ import annotations

import json

import pytest

from headroom_core.learn.outcome import read_outcome
from headroom_core.learn.pairing import find_pairs
from headroom_core.learn.rules import rule_for_pair
from headroom_core.learn.steps import make_step

CODEX_EXEC = "Chunk ID: 4f1a\nWall time: 0.0213 seconds\nProcess exited with code {code}\nOriginal token count: 0\nOutput:\n{out}"


def codex(out: str, code: int) -> str:
    return json.dumps({"output": out, "metadata": {"exit_code": code, "duration_seconds": 0.1}})


@pytest.mark.parametrize(
    "command, text, is_error, agent, status",
    [
        # a search or probe that found nothing: exit 1, no output
        ("grep -rn foo src/", codex("", 1), None, "", "no-match"),
        ("rg -n 'TODO' web/src", CODEX_EXEC.format(code=1, out=""), None, "", "no-match"),
        ("find . -name '*.ts' | xargs grep -l useTodos 2>/dev/null", "Error", True, "", "no-match"),  # Claude Code 1.x
        ("grep -q DATABASE_URL .env", "Exit code 1", True, "", "no-match"),  # Claude Code 2.x
        ("lsof -i :3000", codex("", 1), None, "", "no-match"),
        ("test -f package-lock.json", codex("", 1), None, "", "no-match"),
        ("command -v pnpm", codex("", 1), None, "", "no-match"),
        ("npm run build 2>&1 | grep -i error", "Exit code 1", True, "", "no-match"),
        # the search itself went wrong, or found something but failed later
        ("grep -rn foo srcc/", codex("grep: srcc/: No such file or directory\n", 2), None, "", "failed"),
        ("npm test", codex("", 1), None, "", "failed"),
        # files that differ
        ("diff a.txt b.txt", codex("1c1\n< a\n---\n> b\n", 1), None, "", "ok"),
        # a server stopped by a timeout is a timeout, not a failure
        (
            "timeout 15 npm run dev",
            codex("  VITE v5.4.8  ready in 412 ms\n  ➜  Local:   http://localhost:5173/\n", 124),
            None,
            "",
            "timeout",
        ),
        (
            "timeout 5 python -m http.server 8000",
            codex("Serving HTTP on 0.0.0.0 port 8000 ...\n", 143),
            None,
            "",
            "timeout",
        ),
        ("node server.js", codex("listening on http://localhost:8080\n", 137), None, "", "timeout"),
        (
            "npm run dev",
            "Command timed out after 2m 0.0s\n\n> app@0.1.0 dev\n> next dev\n   - Local:        http://localhost:3000",
            True,
            "",
            "timeout",
        ),
        # a harness timeout of a command meant to finish is a failure; killed without a bound is a failure
        (
            "python -m pytest tests",
            "Command timed out after 2m 0.0s\n============ test session starts ============",
            True,
            "",
            "failed",
        ),
        ("python train.py", codex("Killed\n", 137), None, "", "failed"),
        # SWE-agent's own messages
        (
            "./rev_me",
            "\nEXECUTION TIMED OUT BECAUSE NO OUTPUT WAS PRODUCED FOR MORE THAN 30.0 SECONDS.",
            None,
            "swe-agent",
            "failed",
        ),
        (
            "python -m pytest",
            "The command 'python -m pytest' was cancelled because it took more than 30 seconds. Please try a different command "
            "that completes more quickly.",
            None,
            "swe-agent",
            "failed",
        ),
        ("submit 'picoCTF{nope}'", "Wrong flag!", None, "swe-agent", "failed"),
        (
            "for f in *.py; do echo $f",
            "Your bash command contained syntax errors and was NOT executed. Please fix the syntax errors and try "
            "again.\nbash: line 1: syntax error: unexpected end of file\n",
            None,
            "swe-agent",
            "failed",
        ),
        (
            "str_replace_editor str_replace /t/a.py --old_str 'x' --new_str 'y'",
            "No replacement was performed, old_str `x` did not appear verbatim in /t/a.py.",
            None,
            "swe-agent",
            "failed",
        ),
        (
            "submit",
            "Thank you for your work on this issue. Please carefully follow the steps below to help review your changes.\n\n1. If you "
            "made any changes to your code after running the reproduction script, please run the reproduction script again.",
            None,
            "swe-agent",
            "ok",
        ),
        ("search_dir 'frobnicate'", 'No matches found for "frobnicate" in /testbed', None, "swe-agent", "ok"),
        # the provider's word is final: a passing command whose output mentions errors
        ("grep -rn 'raise ValueError' src", "src/a.py:3: raise ValueError: bad", False, "", "ok"),
    ],
)
def test_outcome(command, text, is_error, agent, status):
    assert read_outcome(text, is_error, command, agent).status == status


def test_error_summaries_say_what_went_wrong():
    npm10 = (
        "npm error code ENOENT\nnpm error syscall open\nnpm error enoent Could not read package.json: Error: ENOENT: no such file or "
        "directory, open '/repo/package.json'"
    )
    assert read_outcome(npm10, True, "npm run build").error.startswith("npm error enoent Could not read package.json")
    pytest_out = (
        "Exit code 1\n....F.                                          [100%]\n=== FAILURES ===\nE       AssertionError: assert 0 is None\n"
        "FAILED tests/test_stock.py::test_restock - AssertionError: assert 0 is None\n1 failed, 5 passed in 0.3s"
    )
    assert (
        read_outcome(pytest_out, True, "uv run pytest -q").error
        == "tests/test_stock.py::test_restock - AssertionError: assert 0 is None"
    )
    conftest = "ImportError while loading conftest '/t/tests/conftest.py'.\nE   ModuleNotFoundError: No module named 'hypothesis'"
    assert (
        read_outcome(conftest, None, "python -m pytest", "swe-agent").error
        == "ModuleNotFoundError: No module named 'hypothesis'"
    )
    assert (
        read_outcome(CODEX_EXEC.format(code=127, out="bash: yarn: command not found\n"), None, "yarn test").error
        == "command not found"
    )


def sh(cmd: str, ok: bool, out: str = "", *, i: int = 0, **args):
    """A Claude Code Bash call and its result (is_error as Claude Code sets it)."""
    text = out if ok else f"Exit code 1\n{out}"
    return make_step("Bash", {"command": cmd, **args}, text, is_error=not ok, index=i)


def lessons(*steps, root: str = "/repo"):
    return [
        (p.kind, p.failed.first_line, p.detail or p.fixed.first_line)
        for p in find_pairs(list(steps), root=root)
        if p.kind != "retry"
    ]


def test_another_job_of_the_same_program_is_never_the_fix():
    # a syntax check does not run the program; another script is another job
    assert (
        lessons(
            sh("node express.js", False, "Error: Cannot find module 'express'"), sh("node --check express.js", True)
        )
        == []
    )
    assert lessons(sh("npm run start", False, 'npm ERR! Missing script: "start"'), sh("npm run test", True, "ok")) == []
    assert lessons(sh("cargo run", False, "error: could not find `Cargo.toml`"), sh("cargo --version", True)) == []
    # a fix that skips checks or forces is never taught
    assert (
        lessons(
            sh(
                "git push",
                False,
                "error: failed to push some refs\nhint: Updates were rejected; did you mean to pull first?",
            ),
            sh("git push --force", True),
        )
        == []
    )
    assert (
        lessons(
            sh("pip install -e .", False, "error: externally-managed-environment"),
            sh("pip install -e . --break-system-packages", True),
        )
        == []
    )


def test_a_command_that_fails_on_the_code_is_not_fixed_by_running_less_of_it():
    failed = sh("python -m pytest tests/test_api.py", False, "FAILED tests/test_api.py::test_login - AssertionError")
    assert lessons(failed, sh("python -m pytest tests/test_api.py -k 'not login'", True)) == []
    hung = make_step(
        "swe-agent",
        {"command": "python -m pytest tests -x"},
        "The command 'python -m pytest tests -x' was cancelled because it took more than 30 seconds.",
        agent="swe-agent",
    )
    assert (
        lessons(
            hung,
            make_step(
                "swe-agent",
                {"command": "python -m pytest tests/test_core.py -x"},
                "8 passed",
                agent="swe-agent",
                index=1,
            ),
        )
        == []
    )


def test_fails_then_another_command_does_the_same_job():
    assert lessons(sh("yarn test", False, "bash: yarn: command not found"), sh("npm test", True, "4 passed")) == [
        ("command", "yarn test", "npm test")
    ]
    assert lessons(
        sh("python manage.py test", False, "python: command not found"), sh("python3 manage.py test", True, "OK")
    ) == [("command", "python manage.py test", "python3 manage.py test")]
    assert lessons(
        sh("git checkout main", False, "error: pathspec 'main' did not match any file(s) known to git"),
        sh("git checkout master", True),
    ) == [("command", "git checkout main", "git checkout master")]
    assert lessons(
        sh("npx jest --grep cart", False, "Unrecognized CLI Parameter: grep"), sh("npx jest -t cart", True)
    ) == [("command", "npx jest --grep cart", "npx jest -t cart")]
    # no `start` script: the server started another way (it kept running until its timeout)
    start = make_step("Bash", {"command": "npm start"}, 'Exit code 1\nnpm ERR! Missing script: "start"', is_error=True)
    served = make_step(
        "Bash", {"command": "timeout 5 node server.js"}, "Exit code 124\nlistening on :3000", is_error=True, index=1
    )
    (p,) = find_pairs([start, served])
    assert rule_for_pair(p).text == '`npm start` fails (Missing script: "start"); use `node server.js`'


def test_prerequisites_cwd_stdin_and_background():
    # A fails -> B (any program) works -> A works
    assert lessons(
        sh(
            "curl -sf localhost:3000/health",
            False,
            "curl: (7) Failed to connect to localhost port 3000: Connection refused",
        ),
        sh("npm run dev", True, "ready on http://localhost:3000", run_in_background=True),
        sh("curl -sf localhost:3000/health", True, '{"ok":true}'),
    ) == [("setup", "curl -sf localhost:3000/health", "npm run dev")]
    assert lessons(
        sh("git commit -m 'fix: rounding'", False, "nothing added to commit but untracked files present"),
        sh("git add -A && git commit -m 'fix: rounding'", True),
    ) == [("setup", "git commit -m 'fix: rounding'", "git add -A")]
    # the code changed in between: a content fix, not a prerequisite
    edit = make_step(
        "Edit",
        {"file_path": "/repo/a.py", "old_string": "x", "new_string": "y"},
        "The file /repo/a.py has been updated.",
    )
    assert lessons(sh("python a.py", False, "KeyError: 'x'"), edit, sh("python a.py", True)) == []
    # another folder; the project's own root is no lesson (the shell had wandered off)
    assert lessons(
        sh("npm run build", False, 'npm ERR! Missing script: "build"'), sh("cd web && npm run build", True)
    ) == [("cwd", "npm run build", "web")]
    assert (
        lessons(sh("npm run build", False, 'npm ERR! Missing script: "build"'), sh("cd /repo && npm run build", True))
        == []
    )
    # the program waits for input
    hung = make_step("swe-agent", {"command": "./chall"}, "EXECUTION TIMED OUT", agent="swe-agent")
    fed = make_step(
        "swe-agent", {"command": "printf 'AAAA\\n' | ./chall"}, "Enter the key: nope", agent="swe-agent", index=1
    )
    assert lessons(hung, fed) == [("stdin", "./chall", "printf 'AAAA\\n' | ./chall")]
    # longer than the harness allows: the same command in the background
    slow = make_step("Bash", {"command": "python scripts/ingest.py"}, "Command timed out after 2m 0.0s", is_error=True)
    bg = make_step(
        "Bash",
        {"command": "python scripts/ingest.py", "run_in_background": True},
        "Command running in background with ID: 2",
        index=1,
    )
    (p,) = find_pairs([slow, bg])
    assert p.kind == "background" and "start it in the background" in rule_for_pair(p).text


def test_edits_compare_whitespace_exactly_in_every_style():
    fail = make_step(
        "Edit",
        {"file_path": "/r/a.py", "old_string": "    if x:\n        y()", "new_string": "    if x:\n        z()"},
        "<tool_use_error>String to replace not found in file.</tool_use_error>",
        is_error=True,
    )
    ok = make_step(
        "Edit",
        {"file_path": "/r/a.py", "old_string": "\tif x:\n\t\ty()", "new_string": "\tif x:\n\t\tz()"},
        "The file /r/a.py has been updated.",
        index=1,
    )
    assert [p.kind for p in find_pairs([fail, ok])] == ["edit-indent"]
    swe_fail = make_step(
        "swe-agent",
        {"command": "str_replace_editor str_replace /t/a.py --old_str 'if x:\n  y()' --new_str 'if x:\n  z()'"},
        "No replacement was performed, old_str `if x:` did not appear verbatim in /t/a.py.",
        agent="swe-agent",
    )
    swe_ok = make_step(
        "swe-agent",
        {"command": "str_replace_editor str_replace /t/a.py --old_str 'if x:\n    y()' --new_str 'if x:\n    z()'"},
        "The file /t/a.py has been edited.",
        agent="swe-agent",
        index=1,
    )
    assert [p.kind for p in find_pairs([swe_fail, swe_ok])] == ["edit-indent"]
    # an identical retry teaches nothing, whatever the style
    assert (
        find_pairs(
            [
                swe_fail,
                make_step(
                    "swe-agent", {"command": swe_fail.command}, "The file /t/a.py has been edited.", agent="swe-agent"
                ),
            ]
        )
        == []
    )


FAILS, WORKS = False, True


@pytest.mark.parametrize(
    "calls, lesson",
    [
        # the environment or the invocation was wrong: the fix is a lesson
        (
            [
                ("npm install", FAILS, "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree"),
                ("npm install --legacy-peer-deps", WORKS, "added 300 packages"),
            ],
            ("command", "npm install", "npm install --legacy-peer-deps"),
        ),
        (
            [
                ("git push", FAILS, "fatal: The current branch feat has no upstream branch."),
                ("git push --set-upstream origin feat", WORKS, ""),
            ],
            ("command", "git push", "git push --set-upstream origin feat"),
        ),
        (
            [("tree src", FAILS, "bash: tree: command not found"), ("find src -type f", WORKS, "src/a.ts")],
            ("command", "tree src", "find src -type f"),
        ),
        (
            [
                ("ts-node src/index.ts", FAILS, 'TypeError [ERR_UNKNOWN_FILE_EXTENSION]: Unknown file extension ".ts"'),
                ("npx tsx src/index.ts", WORKS, ""),
            ],
            ("command", "ts-node src/index.ts", "npx tsx src/index.ts"),
        ),
        (
            [("./build.sh", FAILS, "bash: ./build.sh: Permission denied"), ("bash build.sh", WORKS, "ok")],
            ("command", "./build.sh", "bash build.sh"),
        ),
        (
            [
                ("make build", FAILS, "make: *** No rule to make target 'build'.  Stop."),
                ("npm run build", WORKS, "built"),
            ],
            ("command", "make build", "npm run build"),
        ),
        (
            [
                (
                    "cp config.example.yml config.yml",
                    FAILS,
                    "cp: cannot stat 'config.example.yml': No such file or directory",
                ),
                ("cp config.sample.yml config.yml", WORKS, ""),
            ],
            ("command", "cp config.example.yml config.yml", "cp config.sample.yml config.yml"),
        ),
        (
            [
                ("cargo test", FAILS, "error: could not find `Cargo.toml` in `/repo` or any parent directory"),
                ("cd crates/core && cargo test", WORKS, "ok"),
            ],
            ("cwd", "cargo test", "crates/core"),
        ),
        (
            [
                ("python app.py", FAILS, "ModuleNotFoundError: No module named 'flask'"),
                ("source .venv/bin/activate && python app.py", WORKS, ""),
            ],
            ("setup", "python app.py", "source .venv/bin/activate"),
        ),
        (
            [
                ("go build ./...", FAILS, "main.go:4:2: no required module provides package github.com/x/y"),
                ("go mod tidy", WORKS, ""),
                ("go build ./...", WORKS, ""),
            ],
            ("setup", "go build ./...", "go mod tidy"),
        ),
        (
            [
                ("pytest", FAILS, "sqlalchemy.exc.OperationalError: no such table: users"),
                ("alembic upgrade head", WORKS, ""),
                ("pytest", WORKS, "10 passed"),
            ],
            ("setup", "pytest", "alembic upgrade head"),
        ),
        (
            [
                (
                    "docker ps",
                    FAILS,
                    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
                ),
                ("sudo systemctl start docker", WORKS, ""),
                ("docker ps", WORKS, "CONTAINER ID"),
            ],
            ("setup", "docker ps", "sudo systemctl start docker"),
        ),
        (
            [
                ("git push", FAILS, " ! [rejected]        main -> main (fetch first)\nerror: failed to push some refs"),
                ("git pull --rebase", WORKS, ""),
                ("git push", WORKS, ""),
            ],
            ("setup", "git push", "git pull --rebase"),
        ),
        (
            [
                ("pip install httpx", FAILS, "error: externally-managed-environment"),
                ("uv pip install httpx", WORKS, "Installed 1 package"),
            ],
            ("command", "pip install httpx", "uv pip install httpx"),
        ),
        (
            [
                ("npm run test:unit", FAILS, 'npm ERR! Missing script: "test:unit"'),
                ("npm run test", WORKS, "12 passed"),
            ],
            ("command", "npm run test:unit", "npm run test"),
        ),
        (
            [("make check", FAILS, "make: *** No rule to make target 'check'.  Stop."), ("make test", WORKS, "ok")],
            ("command", "make check", "make test"),
        ),
        # transient state, narrower runs, guessed files: no lesson
        (
            [
                ("npm run dev", FAILS, "Error: listen EADDRINUSE: address already in use :::3000"),
                ("npm run dev -- --port 3001", WORKS, "ready"),
            ],
            None,
        ),
        (
            [
                ("pytest tests/test_api.py", FAILS, "ERROR: file or directory not found: tests/test_api.py"),
                ("pytest tests/api/test_routes.py", WORKS, ""),
            ],
            None,
        ),
        (
            [
                ("pytest tests", FAILS, "E   FileNotFoundError: [Errno 2] No such file or directory: 'data.csv'"),
                ("pytest tests --ignore=tests/data", WORKS, ""),
            ],
            None,
        ),
        ([("npm test", FAILS, "FAIL src/a.test.ts\n  ● adds"), ("npx jest src/b.test.ts", WORKS, "PASS")], None),
        (
            [
                ("grep -rn foo src/", FAILS, "grep: src/: No such file or directory"),
                ("grep -rn foo lib/", WORKS, "lib/a:1:foo"),
            ],
            None,
        ),
    ],
)
def test_lessons_from_realistic_sequences(calls, lesson):
    steps = [sh(cmd, ok, out, i=i) for i, (cmd, ok, out) in enumerate(calls)]
    assert lessons(*steps) == ([lesson] if lesson else [])


def test_a_set_up_after_which_the_command_fails_the_same_way_is_no_fix():
    calls = [
        ("python app.py", FAILS, "ModuleNotFoundError: No module named 'requests'"),
        ("pip install requests", WORKS, "Successfully installed"),
        ("python app.py", FAILS, "ModuleNotFoundError: No module named 'requests'"),
    ]
    assert lessons(*[sh(c, ok, out, i=i) for i, (c, ok, out) in enumerate(calls)]) == []


def test_a_probe_in_between_is_no_set_up():
    calls = [
        ("npm test", FAILS, "Error: connect ECONNREFUSED 127.0.0.1:5432"),
        ("curl -s localhost:5432", WORKS, ""),
        ("npm test", WORKS, "12 passed"),
    ]
    assert lessons(*[sh(c, ok, out, i=i) for i, (c, ok, out) in enumerate(calls)]) == []
    calls[1] = ("docker compose up -d postgres", WORKS, " Container app-postgres-1  Started")
    assert lessons(*[sh(c, ok, out, i=i) for i, (c, ok, out) in enumerate(calls)]) == [
        ("setup", "npm test", "docker compose up -d postgres")
    ]


def test_a_result_nested_past_the_json_decoders_limit_is_read_as_text():
    """Found by the fuzz run: a tool result of JSON nested 100,000 deep made live learning's
    observer raise RecursionError (json.loads raises it, not ValueError, past its depth)."""
    from headroom_core.learn.outcome import exit_code_of, output_text

    deep = '{"output":' * 100_000 + '"x"' + "}" * 100_000
    assert exit_code_of(deep) is None
    assert output_text(deep) == deep
