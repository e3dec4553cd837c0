"""Compress test and build output: pytest, unittest, jest/vitest, go test, cargo, npm/pnpm, pip,
maven/gradle, make/ninja/CMake/kbuild builds.

Build steps are known by their shape, whatever the project (:data:`BUILD_STEP_PATTERNS`): a
progress counter first (ninja's ``[ 12/400] CC src/x.c``, CMake's ``[ 45%] Building C object``),
a quiet-rules step (kbuild/automake ``  CC      kernel/fork.o``, ``  CCLD     app``), or a
compiler or linker invoked with ``-c``/``-o`` (``gcc -O2 -c src/x.c -o x.o``); make's and
ninja's own lines (``make[1]: Entering directory``, ``make: *** [all] Error 1``, ``ninja: build
stopped``) and compiler diagnostics (``src/x.c:12:5: error: ...``) are signs of a build.

A line is *passing or progress noise* when it matches one of :data:`PASS_PATTERNS` (a test that
passed, a file of dots, ``=== RUN``, ``Compiling foo v1.2``, ``Collecting x``, ``Downloading …``,
``[INFO] Building …``) and none of :data:`KEEP_PATTERNS` (fail, error, exception, traceback,
panic, warning, ✗ …). Every other line stays: failures with their tracebacks and captured
output, warnings and their counts, the summary lines (``== 3 failed, 120 passed in 4.2s ==``,
``Tests: 2 failed, 40 passed``, ``test result: FAILED. …``, ``FAIL pkg 0.3s``, ``BUILD
FAILURE``). A run of at least :data:`MIN_RUN` noise lines becomes one marker line naming how many
lines went; the key retrieves the whole original output. ANSI colour codes are ignored when
matching (the output keeps them), and a line with carriage returns is judged by its last segment
(what a terminal shows).
"""

from __future__ import annotations

import re

from headroom_core.compress.gain import finish, too_small
from headroom_core.compress.markers import make_marker, offload_key
from headroom_core.compress.result import CompressResult
from headroom_core.compress.tokens import TokenCounter

KIND = "test"
MIN_RUN = 3

ANSI_RX = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

PASS_PATTERNS = (
    r"^\S+::\S+.*\bPASSED\b",  # pytest -v
    r"^\S+\.py [.sx]+\s*(\[\s*\d+%\])?$",  # pytest progress dots (no F/E)
    r"^\s*[.sx]{3,}\s*(\[\s*\d+%\])?$",
    r"^test\w* \(.*\)( \S+)? \.\.\. (ok|skipped.*)$",  # unittest -v
    r"^=== (RUN|PAUSE|CONT|NAME)\s",  # go test -v
    r"^\s*--- (PASS|SKIP): ",
    r"^ok\s+\S+\s+(\(cached\)|[\d.]+s)",
    r"^\?\s+\S+\s+\[no test files\]",
    r"^PASS$",
    r"^test \S+ \.\.\. (ok|ignored)$",  # cargo test
    r"^\s+(Compiling|Checking|Downloaded|Downloading|Fresh|Updating|Locking|Adding|Blocking|Documenting|Packaging|Verifying)\s",
    r"^\s*(✓|√|✔)\s",  # jest / vitest / mocha
    r"^\s*PASS\s+\S",  # jest file line
    r"^npm (http|timing|info|verb|sill)\b",
    r"^(Progress|Resolving|Fetching|Packages|Downloading|Already up-to-date)\b",
    r"^(Collecting|Requirement already satisfied|Using cached|Obtaining|Processing|Building wheels? for|Created wheel|Stored in|Installing collected packages|Preparing metadata|Getting requirements|Installing build dependencies|Attempting uninstall|Found existing installation|Uninstalling|Successfully uninstalled)\b",
    r"^\s+(Downloading|Using cached|Building wheel|Created wheel|Stored in|Preparing metadata|Getting requirements|Installing build|Found existing installation|Uninstalling|Successfully uninstalled)\b",
    r"^\s*(━|─|█|▉|▊|▋|▌|▍|▎|▏|#|=){6,}",  # progress bars
    r"^\[INFO\] (Download(ed|ing)|Progress|Building |Installing |Copying |Compiling |Nothing to compile|Using |skip |No sources|--- |-+\s*$|\s*$|Tests run: \d+, Failures: 0, Errors: 0, Skipped: \d+, Time elapsed)",
    r"^Download(ed|ing) from ",
    r"^> Task \S+( (UP-TO-DATE|NO-SOURCE|FROM-CACHE|SKIPPED))?$",  # gradle
    r"^Running \S+Test$",
    r"^(?:g|mingw32-)?make(?:\[\d+\])?: (?:Entering|Leaving) directory\b",
    r"^(?:g|mingw32-)?make(?:\[\d+\])?: Nothing to be done\b",
)
#: One step of a build, by shape (see the module docstring); each is progress noise unless it
#: names a failure (:data:`KEEP_PATTERNS`).
BUILD_STEP_PATTERNS = (
    r"^\s*\[\s*\d+\s*/\s*\d+\s*\]\s+\S",  # ninja, Meson, Bazel-like progress counter
    r"^\s*\[\s*\d{1,3}%\]\s+\S",  # CMake's Makefile generator
    r"^\s+(?:CC|CXX|C\+\+|CPP|LD|AR|AS|CCLD|CXXLD|HOSTCC|HOSTCXX|HOSTLD|LINK|GEN|OBJCOPY|STRIP|MODPOST|INSTALL|RUSTC|BTF|SYNC)\s+\S",  # quiet rules
    r"^\s*(?:\S*/)?(?:[\w.+-]+-)?(?:cc|c\+\+|gcc|g\+\+|clang|clang\+\+|nvcc|icc|icpc|icx|ld|ld\.lld|lld|ar|rustc|javac|emcc|em\+\+)"
    r"(?:-[\d.]+)?\s(?:.*\s)?-[co]\s+\S",  # a compiler or linker invoked
)
KEEP_PATTERNS = (
    r"(?i)\b(fail(ed|ure|s)?|errors?|exception|traceback|panic(ked)?|fatal|warn(ing)?s?|deprecat\w*|assert\w*|timeout|timed out|abort(ed)?|segmentation)\b",
    r"(✗|✕|×|✘)",
)
_BUILD_STEP = tuple(re.compile(p) for p in BUILD_STEP_PATTERNS)
_PASS = tuple(re.compile(p) for p in PASS_PATTERNS) + _BUILD_STEP
_KEEP = tuple(re.compile(p) for p in KEEP_PATTERNS)

# Signs that text is test or build output (for the router).
SIGNS = (
    r"^=+ (test session starts|FAILURES|ERRORS|short test summary info|warnings summary)\b",
    r"^=+ .*\b(passed|failed|error|errors|skipped)\b.* in [\d.]+s",
    r"^Ran \d+ tests? in [\d.]+s$",
    r"^(OK|FAILED \()",
    r"^(=== RUN|--- (FAIL|PASS):|ok  \t|FAIL\t|PASS$|FAIL$)",
    r"^test result: (ok|FAILED)\. \d+ passed",
    r"^\s+Compiling \S+ v\d",
    r"^(Tests|Test Suites|Test Files):\s+\d+",
    r"^\s*(✓|✗|✕|√) ",
    r"^\[INFO\] (BUILD (SUCCESS|FAILURE)|Tests run:)",
    r"^(BUILD SUCCESSFUL|BUILD FAILED)",
    r"^npm (ERR!|error|warn)",
    r"^(Successfully installed|Collecting \S+|Requirement already satisfied)",
    r"^\S+::\S+ (PASSED|FAILED|ERROR|SKIPPED)",
    r"^Traceback \(most recent call last\):$",
    r"^\w+(Error|Exception)(: |$)",
    r"^error(\[E\d+\])?: ",
    # builds: a step of one (the first shape of BUILD_STEP_PATTERNS each), make's/ninja's own
    # lines, a compiler diagnostic at a source position, a cargo/gradle/npm build's frame
    BUILD_STEP_PATTERNS[0],
    BUILD_STEP_PATTERNS[1],
    BUILD_STEP_PATTERNS[2],
    BUILD_STEP_PATTERNS[3],
    r"^(?:g|mingw32-)?make(?:\[\d+\])?: (?:\*\*\*|Entering directory|Leaving directory|Nothing to be done)",
    r"^ninja: (?:build stopped|no work to do|Entering directory|error)",
    r"^\S+:\d+(?::\d+)?: (?:fatal error|error|warning): ",
    r"^\s+Finished .*\btarget\(s\) in [\d.]+m?s$",
    r"^> Task :\S+",
    r"^> [\w@./-]+@[\w.+-]+ [\w:.-]+$",
)
_SIGNS = tuple(re.compile(p) for p in SIGNS)


def visible(line: str) -> str:
    """``line`` as a terminal shows it: ANSI codes removed, only the last ``\\r`` segment."""
    line = ANSI_RX.sub("", line)
    if "\r" in line.rstrip("\r"):
        line = line.rstrip("\r").rsplit("\r", 1)[-1]
    return line.rstrip("\r")


def test_signs(lines: list[str]) -> int:
    """How many distinct :data:`SIGNS` of test/build output appear in ``lines`` (first 3000)."""
    seen = set()
    for ln in lines[:3000]:
        v = visible(ln)
        for i, rx in enumerate(_SIGNS):
            if i not in seen and rx.search(v):
                seen.add(i)
    return len(seen)


def build_step_share(lines: list[str]) -> float:
    """The share (0-1) of the non-blank ``lines`` (first 3000) that are build steps
    (:data:`BUILD_STEP_PATTERNS`, judged as a terminal shows them); 0 for fewer than 5 lines."""
    sample = [v for v in (visible(ln) for ln in lines[:3000]) if v.strip()]
    if len(sample) < 5:
        return 0.0
    return sum(1 for v in sample if any(rx.search(v) for rx in _BUILD_STEP)) / len(sample)


def is_noise(line: str) -> bool:
    """True when ``line`` is passing or progress noise (see module docstring)."""
    v = visible(line)
    if not v.strip():
        return False
    return any(rx.search(v) for rx in _PASS) and not any(rx.search(v) for rx in _KEEP)


def compress_test_output(
    text: str,
    query: str,
    counter: TokenCounter,
    *,
    min_tokens: int = 250,
    min_saving_ratio: float = 0.10,
) -> CompressResult:
    """Collapse passing and progress lines of test/build output ``text`` (see module docstring).

    ``query`` is unused (failures always stay). Returns unchanged, with the reason, when the text
    is under ``min_tokens`` tokens, has no run of :data:`MIN_RUN` noise lines, or saves less than
    ``min_saving_ratio``. Otherwise strategy ``"collapse"`` with one offload holding ``text``.
    """
    if too_small(text, counter, min_tokens):
        return CompressResult.unchanged(text, KIND, "small")
    lines = text.split("\n")
    key = offload_key(text)
    out: list[str] = []
    run: list[str] = []
    dropped = runs = 0
    # blank lines inside a run of noise belong to the run
    for i, ln in enumerate(lines + [None]):
        if ln is not None and (
            is_noise(ln) or (run and not ln.strip() and i + 1 < len(lines) and is_noise(lines[i + 1]))
        ):
            run.append(ln)
            continue
        noise = sum(1 for r in run if r.strip())
        if noise >= MIN_RUN:
            out.append(make_marker(f"{len(run)} passing or progress lines", key))
            dropped += len(run)
            runs += 1
        else:
            out.extend(run)
        run = []
        if ln is not None:
            out.append(ln)
    if not runs:
        return CompressResult.unchanged(text, KIND, "no passing lines to collapse")
    kept = len(lines) - dropped
    reason = (
        f"collapsed {dropped} passing/progress lines in {runs} runs, kept {kept} lines (failures, warnings, summary)"
    )
    return finish(text, "\n".join(out), counter, kind=KIND, strategy="collapse", reason=reason,
                  what=f"{dropped} passing or progress lines", min_saving_ratio=min_saving_ratio)  # fmt: skip
