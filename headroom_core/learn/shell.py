"""Reading shell command lines: what program a command runs, what job it does, and whether it
only inspects, sets something up, or starts a server.

Pure functions over command text; no shell is run. A *segment* is one simple command of a line
(split at ``&&``, ``||``, ``;``, ``|``, ``&``); the *main words* are those of the first segment
that is not a ``cd``/``export``, with wrappers (``sudo``, ``env X=1``, ``timeout 5``, ``npx``,
``uv run``, ``python -m`` ...) removed. The *program* is the first main word (``python3`` and
``pip3`` count as ``python`` and ``pip``); the *verb* its first positional argument
(``npm run test`` has the verb ``run test``).

The vocabularies below (jobs, set-up commands, inspection programs, servers) are this
project's, drawn from the tools the agents' logs show most; a command outside them is simply
not classified.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

SEPARATORS = ("&&", "||", ";", "|", "&", "|&", ";;")
_OPERATORS = {"&&", "||", ";", "|", "&", ">", ">>", "<", "<<", "<<<", "2>", "2>&1", ">&", "(", ")", "|&", "&>"}
_WRAPPERS = {
    "sudo",
    "env",
    "time",
    "nohup",
    "command",
    "exec",
    "nice",
    "timeout",
    "stdbuf",
    "gtimeout",
    "caffeinate",
    "unbuffer",
}
_RUNNERS = {"npx", "bunx", "pnpx", "uvx"}
_RUNNER_SUB = {
    ("uv", "run"),
    ("poetry", "run"),
    ("pipenv", "run"),
    ("pnpm", "exec"),
    ("pnpm", "dlx"),
    ("npm", "exec"),
    ("yarn", "dlx"),
    ("bundle", "exec"),
    ("hatch", "run"),
    ("pdm", "run"),
    ("conda", "run"),
    ("rye", "run"),
    ("mamba", "run"),
    ("pixi", "run"),
}
_PYTHONS = re.compile(r"^python(\d(\.\d+)?)?$")
_ALIASES = {re.compile(r"^python\d(\.\d+)?$"): "python", re.compile(r"^pip\d(\.\d+)?$"): "pip"}
CD_WORDS = frozenset({"cd", "pushd", "popd", "export", "set", "source", ".", "unset", "alias", "ulimit"})
FILLER = frozenset(
    {
        "grep",
        "rg",
        "cat",
        "head",
        "tail",
        "ls",
        "echo",
        "find",
        "xargs",
        "sort",
        "uniq",
        "wc",
        "sed",
        "awk",
        "tr",
        "cut",
        "less",
        "more",
        "tee",
        "true",
        "false",
        "sh",
        "bash",
        "cd",
        "pwd",
        "which",
        "test",
        "node_modules",
        ".git",
        ".",
        "..",
        "*",
        "/dev/null",
        "dist",
        "build",
        "src",
        "eof",
        "-",
        "--",
        "null",
        "then",
        "do",
        "done",
        "fi",
        "if",
        "for",
        "in",
        "while",
        "the",
        "and",
        "or",
        "not",
    }
)
# programs that only look at things: their failures report the state, they are not tasks
INSPECT = frozenset(
    {
        "ls",
        "cat",
        "head",
        "tail",
        "find",
        "fd",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "ack",
        "tree",
        "stat",
        "file",
        "wc",
        "du",
        "df",
        "less",
        "more",
        "pwd",
        "which",
        "whereis",
        "type",
        "echo",
        "printf",
        "test",
        "[",
        "[[",
        "realpath",
        "readlink",
        "basename",
        "dirname",
        "lsof",
        "ps",
        "pgrep",
        "env",
        "printenv",
        "id",
        "whoami",
        "uname",
        "date",
        "hostname",
        "sed",
        "awk",
        "sort",
        "uniq",
        "cut",
        "tr",
        "jq",
        "yq",
        "xxd",
        "hexdump",
        "od",
        "strings",
        "nl",
        "column",
        "diff",
        "cmp",
        "lsd",
        "exa",
        "eza",
        "bat",
        "locate",
        "open",
        "goto",
        "scroll_up",
        "scroll_down",
        "search_dir",
        "search_file",
        "find_file",
        "filemap",
        "view",
    }
)
# exit status 1 with no output means "nothing found" / "false", not a failure
NO_MATCH = frozenset(
    {
        "grep",
        "egrep",
        "fgrep",
        "zgrep",
        "rg",
        "ag",
        "ack",
        "lsof",
        "pgrep",
        "pidof",
        "test",
        "[",
        "[[",
        "which",
        "type",
        "fuser",
        "git-grep",
        "findstr",
    }
)
# exit status 1 with output means "they differ", not a failure
DIFFERS = frozenset({"diff", "cmp", "colordiff", "git-diff"})
# agent tools that change a file (SWE-agent commands, Codex apply_patch)
EDIT_PROGRAMS = frozenset(
    {
        "edit",
        "str_replace_editor",
        "apply_patch",
        "applypatch",
        "insert",
        "append",
        "create",
        "edit_file",
        "replace",
        "str_replace_based_edit_tool",
    }
)
# agent tools whose argument is an answer, not an invocation
ANSWER_PROGRAMS = frozenset({"submit", "check_flag", "exit_forfeit"})
# job-changing flags: with one of them a command checks, lists or explains instead of doing its job
_JOB_FLAGS = frozenset(
    {
        "--check",
        "--help",
        "-h",
        "--version",
        "-V",
        "--dry-run",
        "--dryrun",
        "--collect-only",
        "--co",
        "--list",
        "--list-tests",
        "--syntax-check",
        "-fsyntax-only",
        "--print-config",
        "--show-config",
        "--explain",
        "--just-print",
        "--recon",
        "--what-if",
        "--no-run",
        "--listTests",
        "--showConfig",
        "--print-only",
        "--noop",
        "--no-op",
    }
)
_JOB_FLAGS_BY_PROGRAM = {
    "node": {"-c"},
    "make": {"-n", "-q"},
    "bash": {"-n"},
    "sh": {"-n"},
    "php": {"-l"},
    "ruby": {"-c"},
    "perl": {"-c"},
    "terraform": set(),
    "git": {"--dry-run", "-n"},
}
_RUN_VERBS = {"run", "run-script", "task"}
_PACKAGE_MANAGERS = {"npm", "pnpm", "yarn", "bun", "deno"}
_VERB_ALIASES = {
    "t": "test",
    "tst": "test",
    "i": "install",
    "ci": "install",
    "add": "install",
    "in": "install",
    "s": "server",
    "serve": "server",
    "rm": "remove",
    "un": "remove",
    "uninstall": "remove",
}

# --- jobs ---------------------------------------------------------------------------------------
_JOB_WORDS = {
    "test": ("test", "tests", "spec", "check", "unit", "e2e", "integration"),
    "build": ("build", "compile", "bundle", "dist", "package", "assemble"),
    "lint": ("lint", "eslint", "stylelint"),
    "typecheck": ("typecheck", "type-check", "types", "tsc", "check-types"),
    "format": ("format", "fmt", "prettier"),
    "start": ("start", "dev", "serve", "server", "runserver", "preview", "watch", "up"),
}
_JOB_PROGRAMS = {
    "test": {
        "pytest",
        "py.test",
        "jest",
        "vitest",
        "mocha",
        "ava",
        "tap",
        "rspec",
        "phpunit",
        "tox",
        "nox",
        "ctest",
        "karma",
        "cypress",
        "playwright",
        "unittest",
        "nosetests",
        "trial",
        "bats",
    },
    "build": {
        "webpack",
        "rollup",
        "esbuild",
        "parcel",
        "gcc",
        "g++",
        "clang",
        "clang++",
        "javac",
        "rustc",
        "cc",
        "tsup",
    },
    "lint": {
        "eslint",
        "ruff",
        "flake8",
        "pylint",
        "golangci-lint",
        "rubocop",
        "stylelint",
        "shellcheck",
        "hadolint",
        "biome",
        "oxlint",
        "standard",
        "xo",
        "clippy-driver",
    },
    "typecheck": {"mypy", "pyright", "pyre", "pytype", "vue-tsc"},
    "format": {"prettier", "black", "gofmt", "rustfmt", "isort", "autopep8", "yapf", "clang-format", "dprint"},
    "start": {"uvicorn", "gunicorn", "hypercorn", "daphne", "http-server", "live-server", "nodemon", "serve"},
}
_FILE_RUNNERS = {"node", "python", "deno", "bun", "ts-node", "tsx", "ruby", "php", "perl"}

# --- set-up commands --------------------------------------------------------------------------
_SETUP_VERBS = {
    "npm": {"install", "link", "rebuild"},
    "pnpm": {"install", "link", "rebuild"},
    "yarn": {"install", "link"},
    "bun": {"install"},
    "pip": {"install"},
    "uv": {"sync", "install", "pip", "venv", "lock"},
    "poetry": {"install", "lock"},
    "pipenv": {"install", "sync"},
    "conda": {"install", "create", "env", "activate"},
    "mamba": {"install", "create"},
    "apt": {"install"},
    "apt-get": {"install", "update"},
    "brew": {"install", "link"},
    "yum": {"install"},
    "dnf": {"install"},
    "apk": {"install"},
    "port": {"install"},
    "choco": {"install"},
    "winget": {"install"},
    "snap": {"install"},
    "gem": {"install"},
    "bundle": {"install"},
    "cargo": {"install", "fetch", "build", "generate-lockfile"},
    "go": {"get", "mod", "install", "build", "generate", "work"},
    "composer": {"install", "require", "update", "dump-autoload"},
    "dotnet": {"restore", "build", "tool", "install"},
    "mvn": {"install", "compile", "package", "dependency:resolve"},
    "gradle": {"build", "assemble", "compileJava"},
    "git": {"add", "clone", "submodule", "fetch", "pull", "lfs", "init"},
    "docker": {"pull", "build", "start", "compose", "network", "volume"},
    "docker-compose": {"up", "build", "pull", "start"},
    "prisma": {"generate", "migrate", "db"},
    "alembic": {"upgrade"},
    "rake": {"db:migrate", "db:setup", "db:create"},
    "rails": {"db:migrate", "db:setup", "db:create"},
    "nvm": {"use", "install"},
    "pyenv": {"install", "local", "global"},
    "rustup": {"install", "target", "component", "default"},
    "corepack": {"enable", "prepare"},
    "deno": {"cache", "install"},
    "flutter": {"pub"},
    "dart": {"pub"},
    "mix": {"deps.get", "compile"},
    "systemctl": {"start"},
    "service": set(),
    "pre-commit": {"install"},
    "cmake": set(),
    "make": set(),
    "meson": {"setup"},
    "ninja": set(),
    "swift": {"build"},
    "stack": {"build", "setup"},
    "cabal": {"build", "update", "install"},
    "opam": {"install"},
}
_SETUP_ANY_VERB = {
    "make",
    "cmake",
    "ninja",
    "service",
    "virtualenv",
    "mkdir",
    "touch",
    "chmod",
    "chown",
    "ln",
    "cp",
    "mv",
    "createdb",
    "export",
    "source",
    ".",
    "unzip",
    "tar",
    "git-clone",
    "initdb",
    "pg_ctl",
    "redis-server",
    "mongod",
    "ssh-keygen",
    "direnv",
}
_SETUP_SCRIPT_WORDS = (
    "build",
    "generate",
    "codegen",
    "gen",
    "prepare",
    "setup",
    "migrate",
    "compile",
    "install",
    "bootstrap",
    "seed",
    "init",
    "postinstall",
    "prebuild",
)
_SERVER_PROGRAMS = {
    "uvicorn",
    "gunicorn",
    "hypercorn",
    "daphne",
    "http-server",
    "live-server",
    "nodemon",
    "serve",
    "redis-server",
    "mongod",
    "postgres",
    "caddy",
    "nginx",
    "httpd",
    "ngrok",
}
_SERVER_OUTPUT = re.compile(
    r"(?i)\blistening (?:on|at)\b|\bserver (?:is )?(?:running|started|listening)\b|\bready (?:in|on)\b|\bready - started\b"
    r"|\bstarted server\b|\bLocal:\s+https?://|\brunning on https?://|\bserving (?:at|on)\b|\bstarting development server\b"
    r"|\bhttps?://(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::\]):\d+"
)


def shell_tokens(line: str) -> list[str]:
    """Tokens of one command line, operators (``&&``, ``|``, ``>`` ...) as tokens of their own;
    falls back to whitespace splitting when the line does not parse (unbalanced quotes)."""
    try:
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        return list(lex)
    except ValueError:
        return line.split()


def first_line(command: str) -> str:
    """The command's first non-blank line, stripped (``""`` for none)."""
    for ln in command.strip().splitlines():
        if ln.strip():
            return ln.strip()
    return ""


@dataclass(frozen=True)
class Segment:
    """One simple command of a line: ``words`` and the separator before it (``""`` for the first)."""

    sep: str
    words: tuple[str, ...]


def segments_of(line: str) -> list[Segment]:
    """The simple commands of one line with the separators between them; redirections
    (``> file``, ``2>&1``, ``< in``) are dropped from the words."""
    out: list[Segment] = []
    sep = ""
    cur: list[str] = []
    toks = shell_tokens(line)
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.isdigit() and i + 1 < len(toks) and toks[i + 1] in (">", ">>", ">&", "<", "&>"):
            i += 1  # "2>/dev/null", "2>&1": the descriptor, then the redirection below
            t = toks[i]
        if t in SEPARATORS:
            if cur:
                out.append(Segment(sep, tuple(cur)))
            sep, cur = t, []
        elif t in (">", ">>", "<", "<<", "<<<", "&>", ">&", "2>") or re.match(r"^\d?>>?$", t):
            i += 1  # the redirection's target
        elif t in ("(", ")", "{", "}") or re.match(r"^\d?>&\d$", t):
            pass
        else:
            cur.append(t)
        i += 1
    if cur:
        out.append(Segment(sep, tuple(cur)))
    return out


def segments(line: str) -> list[list[str]]:
    """The simple commands of a line as word lists (see :func:`segments_of`)."""
    return [list(s.words) for s in segments_of(line)]


def strip_wrappers(words: list[str] | tuple[str, ...]) -> list[str]:
    """``words`` without leading wrappers: ``VAR=1``, ``sudo``, ``timeout 5``, ``npx``,
    ``uv run``, ``python -m`` ..."""
    w = list(words)
    while w:
        head = w[0].rsplit("/", 1)[-1]
        if "=" in w[0] and not w[0].startswith("-") and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w[0]):
            w = w[1:]
        elif head in _WRAPPERS:
            w = w[1:]
            while w and (w[0].startswith("-") or re.match(r"^\d+(\.\d+)?[smhd]?$", w[0])):
                w = w[1:]
        elif head in _RUNNERS:
            w = w[1:]
            while w and w[0].startswith("-"):
                w = w[1:]
        elif len(w) >= 2 and (head, w[1]) in _RUNNER_SUB:
            w = w[2:]
            while w and w[0].startswith("-"):
                w = w[1:]
        elif _PYTHONS.match(head) and len(w) >= 3 and w[1] == "-m":
            w = w[2:]
        else:
            break
    return w


def _canon(program: str) -> str:
    for pat, name in _ALIASES.items():
        if pat.match(program):
            return name
    return program


def word_program(words: list[str] | tuple[str, ...]) -> str:
    """The program of one segment's words (wrappers removed, ``python3`` -> ``python``)."""
    w = strip_wrappers(words)
    return _canon(w[0].rsplit("/", 1)[-1]) if w else ""


def main_words(command: str) -> list[str]:
    """The words of the command's first simple command that is not a ``cd``/``export``,
    with wrappers removed."""
    for seg in segments_of(first_line(command)):
        if seg.words[0] in CD_WORDS:
            continue
        return strip_wrappers(seg.words)
    return []


def program(command: str) -> str:
    """The effective program of a command: ``pytest`` for both ``pytest tests`` and ``python -m
    pytest tests``; ``python`` for ``python3 x.py``; ``""`` when there is none."""
    w = main_words(command)
    return _canon(w[0].rsplit("/", 1)[-1]) if w else ""


def positionals(words: list[str] | tuple[str, ...]) -> list[str]:
    """The words after the program that are not flags."""
    return [w for w in list(words)[1:] if w and not w.startswith("-")]


def verb(words: list[str] | tuple[str, ...]) -> str:
    """The job a command names after its program: its first positional argument, aliases
    folded for package managers (``npm t`` -> ``test``, ``npm i`` -> ``install``) and the script of
    ``run`` (``npm run test`` -> ``test``), for other programs ``run`` with what it runs
    (``cargo run app`` -> ``run app``); ``""`` when there is none."""
    pos = positionals(words)
    if not pos:
        return ""
    v = pos[0]
    manager = word_program(words) in _PACKAGE_MANAGERS
    if v in _RUN_VERBS and len(pos) > 1:
        return pos[1] if manager else f"run {pos[1]}"
    return _VERB_ALIASES.get(v, v) if manager else v


def script_name(words: list[str] | tuple[str, ...]) -> str:
    """For package-manager commands (``npm run build``, ``yarn build``, ``npm test``): the
    script they run, else ``""``."""
    prog = word_program(words)
    if prog not in _PACKAGE_MANAGERS:
        return ""
    w = strip_wrappers(words)
    pos = positionals(w)
    if not pos:
        return ""
    if pos[0] in _RUN_VERBS:
        return pos[1] if len(pos) > 1 else ""
    v = verb(w)
    if v in ("test", "start", "stop", "restart") or (
        prog in ("yarn", "pnpm", "bun")
        and v not in _SETUP_VERBS.get(prog, ())
        and v not in ("install", "add", "remove", "why", "list", "outdated", "exec", "dlx")
    ):
        return v
    return ""


def job_flags(words: list[str] | tuple[str, ...]) -> set[str]:
    """The job-changing flags of a segment (``--check``, ``--help``, ``--dry-run`` ...)."""
    prog = word_program(words)
    extra = _JOB_FLAGS_BY_PROGRAM.get(prog, set())
    out = set()
    for w in strip_wrappers(words)[1:]:
        flag = w.split("=", 1)[0]
        if flag in _JOB_FLAGS or flag in extra:
            out.add(flag)
    if verb(strip_wrappers(words)) in ("help", "version"):
        out.add(verb(strip_wrappers(words)))
    return out


_SELECT_FLAGS = frozenset(
    {
        "-k",
        "-m",
        "--deselect",
        "--ignore",
        "--ignore-glob",
        "-t",
        "--testNamePattern",
        "--grep",
        "-g",
        "--filter",
        "--only",
        "--skip",
        "--exclude",
        "-run",
        "--run",
        "--lf",
        "--last-failed",
        "--testPathPattern",
        "--testPathIgnorePatterns",
        "--spec",
        "--focus",
        "--tags",
        "-E",
        "--example",
        "--select",
    }
)


def select_flags(words: list[str] | tuple[str, ...]) -> set[str]:
    """The flags of a test or check command that run only part of it (``pytest -k``,
    ``jest -t``, ``go test -run``, ``--ignore`` ...)."""
    w = strip_wrappers(words)
    if not jobs(w) & {"test", "lint", "typecheck"}:
        return set()
    return {x.split("=", 1)[0] for x in w[1:] if x.split("=", 1)[0] in _SELECT_FLAGS}


def jobs(words: list[str] | tuple[str, ...]) -> set[str]:
    """The jobs (``test``, ``build``, ``lint``, ``typecheck``, ``format``, ``start``) a segment
    does, from its program, verb or script name; empty when unknown."""
    w = strip_wrappers(words)
    if not w:
        return set()
    prog = word_program(w)
    out = {j for j, progs in _JOB_PROGRAMS.items() if prog in progs}
    name = script_name(w) or verb(w)
    name = name[4:] if name.startswith("run ") else name
    for part in re.split(r"[:_\-./ ]", name.lower()):
        for j, words_ in _JOB_WORDS.items():
            if part in words_:
                out.add(j)
    if prog == "tsc":
        out.add("typecheck" if "--noEmit" in w else "build")
    if prog in ("next", "vite", "nuxt", "astro", "remix", "ng") and (
        verb(w) in ("", "dev", "start", "preview", "server", "serve")
    ):
        out.add("start")
    if prog == "flask" and verb(w) == "run" or prog == "rails" and verb(w) == "server":
        out.add("start")
    if prog == "python" and len(w) > 1 and w[1] in ("manage.py",) and "runserver" in w:
        out.add("start")
    if prog == "cargo" and verb(w) == "clippy":
        out.add("lint")
    return out


def runs_file(words: list[str] | tuple[str, ...]) -> str:
    """For ``node app.js``, ``python server.py``, ``deno run main.ts``...: the file run; else ``""``."""
    w = strip_wrappers(words)
    if not w or word_program(w) not in _FILE_RUNNERS:
        return ""
    if any(x in ("-e", "-c", "--eval", "-p", "--print") for x in w[1:]):
        return ""
    pos = positionals(w)
    if pos and pos[0] == "run" and len(pos) > 1:
        pos = pos[1:]
    return pos[0] if pos and re.search(r"\.(?:m?[jt]sx?|cjs|py|rb|php|pl)$", pos[0]) else ""


def is_setup(words: list[str] | tuple[str, ...]) -> bool:
    """Whether a segment prepares the environment (installs, creates, builds, migrates,
    generates, starts a service, activates an environment) rather than doing a task."""
    w = list(words)
    if not w:
        return False
    head = w[0].rsplit("/", 1)[-1]
    if head in ("export", "source", "."):
        return True
    w = strip_wrappers(w)
    if not w:
        return False
    prog = word_program(w)
    if prog in _SETUP_ANY_VERB:
        return True
    if prog in ("curl", "wget"):  # a download is a set-up; a request is not
        return any(
            x in ("-o", "-O", "--output", "--remote-name", "--output-document")
            or x.startswith(("--output=", "--output-document="))
            for x in w[1:]
        )
    if prog == "python":
        return (
            "venv" in w
            or "virtualenv" in w
            or any(x in ("develop", "migrate", "makemigrations", "collectstatic") for x in w)
            or (len(w) > 2 and w[1] == "setup.py" and w[2] in ("install", "develop", "build", "build_ext"))
        )
    v = verb(w)
    if prog in ("npm", "pnpm", "yarn", "bun"):
        if v in ("install", "link", "rebuild") or (prog == "yarn" and not positionals(w)):
            return True
        name = script_name(w)
        return bool(name) and any(part in _SETUP_SCRIPT_WORDS for part in re.split(r"[:_\-./]", name.lower()))
    if prog in ("docker", "docker-compose"):
        return (v in ("compose", "up") and "up" in w) or v in ("pull", "build", "start", "network", "volume")
    allowed = _SETUP_VERBS.get(prog)
    if allowed is None:
        return False
    base = v.split(" ", 1)[-1] if v.startswith("run ") else v
    return not allowed or base in allowed or _VERB_ALIASES.get(base, base) in allowed


def line_is_setup(line: str) -> bool:
    """Whether a command line prepares the environment: one of its segments does
    (:func:`is_setup`), or it pipes a downloaded script into a shell (``curl … | sh``)."""
    return any(is_setup(seg.words) for seg in segments_of(line)) or bool(
        re.search(r"\b(?:curl|wget)\b[^|]*\|\s*(?:sudo\s+)?(?:ba|z)?sh\b", line)
    )


def is_inspection(words: list[str] | tuple[str, ...]) -> bool:
    """Whether a segment only looks at things (``ls``, ``cat``, ``grep``, ``find`` ...; not
    ``sed -i``/``find -delete`` and the like, which change files)."""
    if word_program(words) not in INSPECT:
        return False
    return not any(
        w in ("-i", "--in-place", "-delete", "-exec", "-execdir") or w.startswith("-i") and word_program(words) == "sed"
        for w in list(words)[1:]
    )


def is_server(command: str, output: str = "") -> bool:
    """Whether a command runs a server or watcher that does not exit by itself (by its
    program, script name or verb, or by an output that says it is listening)."""
    for seg in segments_of(first_line(command)):
        w = strip_wrappers(seg.words)
        if not w:
            continue
        if word_program(w) in _SERVER_PROGRAMS or "start" in jobs(w):
            return True
        if word_program(w) in ("docker", "docker-compose") and "up" in w and "-d" not in w and "--detach" not in w:
            return True
        if word_program(w) == "python" and "http.server" in seg.words:
            return True
        if word_program(w) == "tail" and ("-f" in w or "-F" in w):
            return True
    return bool(_SERVER_OUTPUT.search(output[:4000]))


def has_timeout_wrapper(command: str) -> bool:
    """Whether the command bounds itself with ``timeout N`` (or ``gtimeout``)."""
    return any(
        seg.words and seg.words[0].rsplit("/", 1)[-1] in ("timeout", "gtimeout")
        for seg in segments_of(first_line(command))
    )


def without_timeout(line: str) -> str:
    """``timeout 5 node app.js`` -> ``node app.js`` (only a leading ``timeout`` wrapper)."""
    m = re.match(r"^(?:g?timeout)\s+(?:-\S+\s+)*\d+(?:\.\d+)?[smhd]?\s+(.+)$", line)
    return m.group(1) if m else line


# flags and wrappers a fix must not teach: they skip checks, discard work or escalate privileges
UNSAFE = frozenset(
    {
        "--no-verify",
        "--force",
        "--force-with-lease",
        "--hard",
        "--no-gpg-sign",
        "--skip-tests",
        "-DskipTests",
        "--dangerously-skip-permissions",
        "--unsafe-perm",
        "--break-system-packages",
        "--allow-root",
        "--insecure",
        "-k",
        "--no-check-certificate",
        "--trusted-host",
        "--disable-pip-version-check",
        "--yes-i-really-mean-it",
    }
)
_UNSAFE_BY_PROGRAM = {
    "git": {"-f", "-D", "--force", "-n"},
    "rm": {"-f", "-rf", "-fr"},
    "docker": {"-f", "--force"},
    "npm": {"-f", "--force"},
    "pip": {"--user"},
    "curl": {"-k"},
    "wget": {"--no-check-certificate"},
}


def unsafe_parts(words: list[str] | tuple[str, ...]) -> set[str]:
    """The flags and wrappers of a segment that a learned rule must never recommend
    (``--force``, ``--no-verify``, ``sudo`` ...); ``-k`` counts only for ``curl``."""
    out = {w for w in words if w in ("sudo", "doas")}
    stripped = strip_wrappers(words)
    prog = word_program(stripped)
    extra = _UNSAFE_BY_PROGRAM.get(prog, set())
    for w in stripped[1:]:
        flag = w.split("=", 1)[0]
        if (flag in UNSAFE and flag != "-k") or flag in extra:
            out.add(flag)
    return out


def last_programs(command: str) -> list[str]:
    """Programs of every segment of the command's last line, in order, ``xargs`` replaced by
    the program it runs and ``git grep``/``git diff`` read as ``git-grep``/``git-diff``."""
    lines = [ln for ln in command.strip().splitlines() if ln.strip()]
    if not lines:
        return []
    out = []
    for seg in segments_of(lines[-1].strip() if len(lines) == 1 or "<<" not in lines[0] else lines[0].strip()):
        if seg.words[0] in ("command", "hash") and len(seg.words) > 1 and seg.words[1] in ("-v", "-V"):
            out.append("which")
            continue
        w = strip_wrappers(seg.words)
        while w and w[0].rsplit("/", 1)[-1] == "xargs":
            w = w[1:]
            while w and w[0].startswith("-"):
                w = w[1:]
        if not w:
            continue
        prog = word_program(w)
        if prog == "git" and len(w) > 1 and w[1] in ("grep", "diff"):
            prog = f"git-{w[1]}"
        out.append(prog)
    return out


def literal(token: str) -> bool:
    """Whether a token is free text (a message, a pattern, a flag value like ``flag{...}``)
    rather than a name: it holds whitespace or braces, or is long."""
    return bool(re.search(r"\s|[{}]", token)) or len(token) > 60


def substantive_tokens(command: str, ignore: frozenset[str] = frozenset()) -> set[str]:
    """Tokens of the command's first line that carry meaning: not the program, not a flag, not
    an operator, not a filler word (:data:`FILLER`), not a number, at least 3 characters, not in
    ``ignore`` (e.g. the project's own directory)."""
    prog = program(command)
    out = set()
    for t in shell_tokens(first_line(command)):
        t2 = t.strip("'\"").rstrip("/").removeprefix("./")
        low = t2.lower()
        if (
            not t2
            or t2 == prog
            or t.startswith("-")
            or t in _OPERATORS
            or low in FILLER
            or len(t2) < 3
            or t2.isdigit()
            or t2 in ignore
            or not re.search(r"[A-Za-z]", t2)
        ):
            continue
        out.add(t2)
    return out


_WORDISH = re.compile(r"[A-Za-z0-9_@][A-Za-z0-9_@.+\-]*")


def name_tokens(text: str) -> set[str]:
    """Lower-case name-like tokens of any text (paths split at ``/``; at least 3 characters,
    not numbers, not filler), for relating an error message to a command."""
    out = set()
    for m in _WORDISH.finditer(text[:2000]):
        t = m.group(0).strip(".-").lower()
        if len(t) >= 3 and not t.isdigit() and t not in FILLER and re.search(r"[a-z]", t):
            out.add(t)
            if "." in t:
                out.add(t.rsplit(".", 1)[0])
    return out


def levenshtein(a: str, b: str, limit: int | None = None) -> int:
    """Edit distance (insertions, deletions, substitutions; Levenshtein 1966) between ``a`` and
    ``b``; stops early and returns ``limit + 1`` once every path exceeds ``limit``."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    if limit is not None and len(a) - len(b) > limit:
        return limit + 1
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if limit is not None and min(cur) > limit:
            return limit + 1
        prev = cur
    return prev[-1]


def normalize_command(command: str) -> str:
    """A command with runs of whitespace collapsed (multi-line texts kept line by line)."""
    return "\n".join(" ".join(ln.split()) for ln in command.strip().splitlines())
