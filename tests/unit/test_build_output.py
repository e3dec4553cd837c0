"""Build output without timestamps or levels (ninja, CMake, kbuild, make running the compiler,
cargo, gradle, npm) is routed as test/build output by its shape: its steps fold into a marker,
the errors, warnings and make's summary stay. Prose, lists, code, JSON and tables that merely
hold a counter or a compiler name are not taken for it."""

from __future__ import annotations

import json

import pytest

from headroom_core.compress.router import classify, compress_text
from headroom_core.compress.testout import build_step_share

ERROR = "error: src/net/socket.c:1042: undefined reference to `ssl_ctx_new'"


def ninja(n: int = 400, error_at: int = 377) -> str:
    out = []
    for i in range(n):
        out.append(f"[{i:4d}/{n}] CC src/module_{i % 40}/file_{i}.c -o build/obj/file_{i}.o")
        if i == error_at:
            out.append(ERROR)
    out.append("make: *** [Makefile:12: all] Error 1")
    return "\n".join(out) + "\n"


def cmake(n: int = 200) -> str:
    out = [f"[{100 * i // n:3d}%] Building C object src/CMakeFiles/core.dir/part_{i}.c.o" for i in range(n)]
    out.insert(150, "/w/src/part_150.c:33:9: warning: unused variable 'tmp' [-Wunused-variable]")
    out.append("[100%] Linking C executable app")
    out.append("[100%] Built target app")
    return "\n".join(out) + "\n"


def kbuild(n: int = 200) -> str:
    out = ["make[1]: Entering directory '/usr/src/linux'"]
    out += [f"  CC      drivers/net/part_{i}.o" for i in range(n)]
    out.append("drivers/net/part_9.c:12:1: error: expected ';' before '}' token")
    out.append("make[2]: *** [scripts/Makefile.build:243: drivers/net/part_9.o] Error 1")
    out.append("make[1]: Leaving directory '/usr/src/linux'")
    return "\n".join(out) + "\n"


def make_gcc(n: int = 150) -> str:
    out = [f"gcc -O2 -Wall -Iinclude -c src/unit_{i}.c -o obj/unit_{i}.o" for i in range(n)]
    out.append("src/unit_77.c:5:10: fatal error: missing.h: No such file or directory")
    out.append("compilation terminated.")
    out.append("make: *** [Makefile:20: obj/unit_77.o] Error 1")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("text", [ninja(), cmake(), kbuild(), make_gcc()], ids=["ninja", "cmake", "kbuild", "make-gcc"])
def test_build_output_is_routed_as_build_output(text):
    assert classify(text).name == "test"


@pytest.mark.parametrize(
    "text, kept",
    [
        (ninja(), [ERROR, "make: *** [Makefile:12: all] Error 1"]),
        (cmake(), ["/w/src/part_150.c:33:9: warning: unused variable 'tmp' [-Wunused-variable]"]),
        (
            kbuild(),
            [
                "drivers/net/part_9.c:12:1: error: expected ';' before '}' token",
                "make[2]: *** [scripts/Makefile.build:243: drivers/net/part_9.o] Error 1",
            ],
        ),
        (
            make_gcc(),
            [
                "src/unit_77.c:5:10: fatal error: missing.h: No such file or directory",
                "make: *** [Makefile:20: obj/unit_77.o] Error 1",
            ],
        ),
    ],
    ids=["ninja", "cmake", "kbuild", "make-gcc"],
)
def test_build_steps_fold_and_errors_stay(counter, text, kept):
    res = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1)
    assert res.kind == "test" and len(res.text) < len(text) / 4
    for line in kept:
        assert line in res.text.splitlines()
    assert [o.original for o in res.offloads] == [text]  # the whole output retrievable


def test_a_build_log_inside_codexs_envelope_keeps_the_envelope(counter):
    head = (
        "Chunk ID: f5e62a\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 6246\nOutput:\n"
    )
    text = head + ninja()
    res = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1)
    assert res.text.startswith(head) and ERROR in res.text and len(res.text) < len(text) / 10


@pytest.mark.parametrize(
    "text",
    [
        # prose and lists holding a counter or a compiler's name
        "\n".join(
            f"[{i}/12] Chapter {i}: how the compiler reads a file and why cc -o names its output."
            if i % 4 == 0
            else f"The {i}th paragraph explains the build in plain words, without any step of it."
            for i in range(1, 13)
        ),
        "\n".join(f"- step {i}: run the build, then read the log" for i in range(20)),
        # code that calls a compiler
        "import subprocess\n\n\ndef build(src, out):\n    cmd = ['gcc', '-c', src, '-o', out]\n    return subprocess.run(cmd, check=True)\n\n\n"
        "def main():\n    for s in ['a.c', 'b.c']:\n        build(s, s[:-2] + '.o')\n",
        # JSON and a CSV table
        json.dumps([{"step": f"{i}/40", "cmd": f"cc -c f{i}.c -o f{i}.o"} for i in range(40)]),
        "\n".join(["step,done,total"] + [f"s{i},{i},40" for i in range(40)]),
    ],
    ids=["prose", "list", "code", "json", "csv"],
)
def test_other_content_is_not_build_output(text):
    assert classify(text).name != "test"


def test_build_step_share_counts_only_build_steps():
    assert build_step_share(ninja().splitlines()) > 0.9
    assert build_step_share(["a", "b", "c"]) == 0.0  # too few lines to judge
    assert build_step_share([f"line {i} of prose" for i in range(10)]) == 0.0
