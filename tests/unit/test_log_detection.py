"""Logs are recognised by the structure of their lines, and look-alikes are not taken for logs.

Positive cases: the generated logs of :mod:`tests.support.log_variants` (systems the corpus does
not hold), the eight real loghub logs of ``../shared/corpus/logs``, and one generated log per
header shape the issue names (timestamps of every common form, epoch seconds, dates with dots,
dashes and slashes, bracketed times, pids, hosts, components, level words and letters,
``|``-separated fields, leading bullets). Negative cases: a Markdown list, a numbered list, CSV
and TSV tables, a Markdown table with dates and times, a Python and a Java stack trace alone,
prose with dates, a diary whose lines start with a date, an ``ls -la`` listing, ``git log``.
"""

from __future__ import annotations

import random

import pytest

from headroom_core.compress.logshape import analyse, header_of, log_share, token_class
from headroom_core.compress.router import classify
from tests.conftest import corpus_dir
from tests.support.log_variants import VARIANTS, variant

MESSAGES = (
    "session opened for user root by (uid=0)",
    "Connection closed by 10.0.3.4 port 52211",
    "instruction cache parity error corrected",
    "Scheduling restart of crashed service com.example/.Sync in 12000ms",
    "flush sensor data",
    "worker 7 finished job 3312 in 0.42 s",
    "cache miss for key user:1182",
    "starting replication from primary db-1",
)

# One header per shape: a function of (random, line index) giving the header text.
SHAPES = {
    "iso space millis": lambda r, i: f"2024-03-0{1 + i % 9} 1{i % 10}:0{i % 6}:{10 + i % 50},{i % 1000:03d} INFO ",
    "iso T zulu": lambda r, i: f"2024-03-04T10:{i % 60:02d}:{(i * 7) % 60:02d}.{i % 1000:03d}Z ",
    "iso T offset bracketed": lambda r, i: f"[2024-03-04T10:{i % 60:02d}:{(i * 7) % 60:02d}+02:00] ",
    "epoch seconds": lambda r, i: f"{1700000000 + i * 3} ",
    "epoch with fraction": lambda r, i: f"{1700000000 + i * 3}.{r.randint(0, 999999):06d} ",
    "dotted date": lambda r, i: f"2005.06.{1 + i % 28:02d} 12:{i % 60:02d}:07 ",
    "slashed date": lambda r, i: f"17/06/{1 + i % 28:02d} 20:10:{i % 60:02d} INFO ",
    "dashed short date and pid/tid": lambda r, i: (
        f"03-17 16:13:{i % 60:02d}.{i % 1000:03d}  {r.randint(100, 9999)}  {r.randint(100, 9999)} D "
    ),
    "bracketed time": lambda r, i: f"[{i % 24:02d}:{i % 60:02d}:{(i * 3) % 60:02d}] ",
    "bracketed short date and time": lambda r, i: f"[10.30 16:{i % 60:02d}:06] ",
    "syslog host component pid": lambda r, i: (
        f"Nov  {1 + i % 9} 12:01:{i % 60:02d} host{r.randint(1, 9)} sshd[{r.randint(100, 30000)}]: "
    ),
    "pipe separated": lambda r, i: f"20171223-22:15:{i % 60}:{r.randint(0, 999)}|Step_LSC|30002312|",
    "leading bullet epoch date": lambda r, i: (
        f"- {1117838570 + i} 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.{i % 60:02d}.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO "
    ),
    "alert flag epoch date": lambda r, i: (
        f"{r.choice(('-', 'KERNDTLB', '-', '-'))} {1131566461 + i} 2005.11.09 dn228 Nov 9 12:01:{i % 60:02d} dn228/dn228 "
    ),
    "level word first": lambda r, i: f"{r.choice(('INFO', 'WARN', 'DEBUG', 'INFO'))}: ",
    "bracketed level first": lambda r, i: f"[{r.choice(('INFO', 'WARN', 'DEBUG', 'INFO'))}] ",
    "python logging": lambda r, i: f"{r.choice(('INFO', 'WARNING', 'DEBUG'))}:app.worker:",
    "logfmt": lambda r, i: f'time="2024-03-04T10:{i % 60:02d}:00Z" level={r.choice(("info", "warn", "debug"))} msg=',
    "klog": lambda r, i: (
        f"I0302 20:53:{i % 60:02d}.959546 {r.randint(1, 40000):>7} controller.go:{r.randint(10, 300)}] "
    ),
    "access log": lambda r, i: (
        f"10.0.{r.randint(0, 9)}.{r.randint(1, 250)} - - [12/Mar/2024:13:{i % 60:02d}:43 +0000] "
    ),
    "hpc id node component": lambda r, i: (
        f"{134681 + i} node-{r.randint(0, 255)} unix.hw state_change.unavailable {1077804742 + i} 1 "
    ),
    "windows cbs": lambda r, i: f"2016-09-28 04:30:{i % 60:02d}, Info                  CBS    ",
    "apache error": lambda r, i: f"[Sun Dec 04 04:{i % 60:02d}:44 2005] [notice] ",
}


def shape_log(name: str, n: int = 120) -> str:
    r = random.Random(name)
    return "".join(SHAPES[name](r, i) + r.choice(MESSAGES) + "\n" for i in range(n))


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_header_shape_is_a_log(name):
    text = shape_log(name)
    lines = text.splitlines()
    assert all(header_of(ln) is not None for ln in lines), [ln for ln in lines if header_of(ln) is None][:2]
    assert log_share(lines) == 1.0
    assert classify(text).name == "log"


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_generated_system_logs_are_logs(name):
    v = variant(name)
    assert log_share(list(v.lines)) >= 0.95
    assert classify(v.text).name == "log"


@pytest.mark.parametrize("system", ["Apache", "HDFS", "Hadoop", "Linux", "OpenSSH", "OpenStack", "Spark", "Zookeeper"])
def test_corpus_logs_are_logs(system):
    lines = (corpus_dir("logs") / f"{system}_2k.log").read_text().splitlines()
    assert log_share(lines) == 1.0


def test_header_ends_where_the_message_starts():
    cases = {
        "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO instruction cache parity error corrected": "instruction cache parity error corrected",
        "03-17 16:13:38.819  1702  8671 D PowerManagerService: acquire lock=233570404, flags=0x1": "PowerManagerService: acquire lock=233570404, flags=0x1",
        "20171223-22:15:29:606|Step_LSC|30002312|onStandStepChanged 3579": "onStandStepChanged 3579",
        "[10.30 16:49:06] chrome.exe - proxy.example.org:5070 open through proxy proxy.example.org:5070 HTTPS": "chrome.exe - proxy.example.org:5070 open through proxy proxy.example.org:5070 HTTPS",
        "[Sun Dec 04 04:51:08 2005] [notice] jk2_init() Found child 6725 in scoreboard slot 10": "jk2_init() Found child 6725 in scoreboard slot 10",
        "Dec 10 06:55:46 LabSZ sshd[24200]: reverse mapping checking getaddrinfo for 1.2.3.4 failed": "LabSZ sshd[24200]: reverse mapping checking getaddrinfo for 1.2.3.4 failed",
    }
    for line, message in cases.items():
        h = header_of(line)
        assert h is not None, line
        assert line[h.end :].strip() == message


def test_token_classes():
    assert token_class("2005-06-03-15.42.50.675872", 4) == "DT"
    assert token_class("20171223-22:15:29:606", 0) == "DT"
    assert token_class("2017-05-16T00:00:00.008Z", 0) == "DT"
    assert token_class("[10/Oct/2000:13:55:36", 3) == "DT"
    assert token_class("16:13:38.819", 1) == "T"
    assert token_class("04:30:30,", 1) == "T"
    assert token_class("2005.06.03", 2) == "D"
    assert token_class("1131566461", 1) == "DT"  # epoch seconds
    assert token_class("30002312", 4) == "D"  # eight digits may be a date (20171223)
    assert token_class("8671", 3) == "N"
    assert token_class("Nov", 4) == "M"
    assert token_class("[error]", 5) == "L"
    assert token_class("Info", 2) == "L"
    assert token_class("D", 4) == "L"
    assert token_class("I", 0) == "W"  # a capital letter first is a word ("I think …")
    assert token_class("level=warn", 1) == "L"
    assert token_class("-", 0) == "P"
    assert token_class("dn228", 3) == "X"


# --- look-alikes ------------------------------------------------------------------------------

MARKDOWN_LIST = """\
# Changelog

## 2.4.0

- Added support for Python 3.12 wheels
- Fixed a crash when the config file is empty (#1204)
- Improved startup time by 30 % on large projects
  - lazy import of the plugin registry
  - cache of resolved entry points
- Removed the deprecated `--legacy` flag
- Documented the 2024-03-01 migration of the API
* Bumped pydantic to 2.6.1
* Dropped support for 3.7
- Retry uploads 3 times before failing
- New option `timeout` (default 30 s)

1. Install the package
2. Run `tool init`
3. Edit config.toml
4. Run `tool serve --port 8080`
"""

CSV = "date,time,symbol,open,close,volume\n" + "".join(
    f"2024-03-{d:02d},16:00:00,ACME,{100 + d}.{d:02d},{101 + d}.{d * 3 % 100:02d},{10000 + d * 37}\n"
    for d in range(1, 29)
)
CSV_SPACED = "".join(f"2024-03-{d:02d} 09:{d:02d}:00, {20 + d}.5, {30 - d}.1, ok\n" for d in range(1, 29))
TSV = "id\tcreated\tuser\tstatus\n" + "".join(
    f"{1000 + i}\t2024-01-{1 + i % 28:02d} 10:00\tuser{i}\tactive\n" for i in range(40)
)
MARKDOWN_TABLE = "| date | time | event | count |\n|---|---|---|---|\n" + "".join(
    f"| 2024-03-{d:02d} | 1{d % 10}:00 | deploy | {d} |\n" for d in range(1, 25)
)

PY_TRACE = """\
Traceback (most recent call last):
  File "/usr/lib/python3.11/runpy.py", line 198, in _run_module_as_main
    return _run_code(code, main_globals, None,
  File "/usr/lib/python3.11/runpy.py", line 88, in _run_code
    exec(code, run_globals)
  File "/srv/app/main.py", line 12, in <module>
    main()
  File "/srv/app/main.py", line 8, in main
    load("config.toml")
  File "/srv/app/config.py", line 41, in load
    raise ValueError(f"bad config {path}")
ValueError: bad config config.toml
"""

JAVA_TRACE = (
    "java.lang.IllegalStateException: Connection pool shut down\n"
    + "".join(
        f"\tat org.apache.http.impl.conn.PoolingHttpClientConnectionManager.requestConnection(PoolingHttpClientConnectionManager.java:{200 + i})\n"
        for i in range(20)
    )
    + "Caused by: java.io.IOException: Broken pipe\n\tat sun.nio.ch.FileDispatcherImpl.write0(Native Method)\n\t... 23 more\n"
)

PROSE = """\
The project started on 2019-04-01 as a weekend experiment. By March 2020 it had
grown to twelve contributors, and on 2020-06-15 the first stable release shipped.
2021 was the year of the rewrite: the core moved to an event loop, and the
scheduler was replaced on 2021-09-30 after a long review.

In 2022 the team added plugins. At 10:00 on 2022-05-02 the plugin registry went
live, and within a week 40 plugins were published. The registry is mirrored
daily at 03:00 UTC.

Release dates are listed in the changelog; the 2023.1 and 2023.2 releases were
cut on 2023-02-01 and 2023-08-01. Since then releases follow a fixed cadence of
two per year, each supported for 18 months.
"""

DIARY = "".join(
    f"2024-01-{d:02d} {s}\n"
    for d, s in enumerate(
        [
            "Went to the market and bought apples.",
            "Rain all day; finished the book about lighthouses.",
            "Called grandmother, she is doing well.",
            "Long walk by the river, saw herons.",
            "Worked late on the garden shed.",
            "Visited the museum with Tom.",
            "Quiet day, baked bread.",
            "Started learning the violin again.",
        ]
        * 3,
        start=1,
    )
)

LS_LA = """\
total 48
drwxr-xr-x  12 user  staff   384 Mar  4 10:12 .
drwxr-xr-x   8 user  staff   256 Mar  1 09:00 ..
-rw-r--r--   1 user  staff  1204 Mar  4 10:12 README.md
-rw-r--r--   1 user  staff   880 Mar  3 18:40 pyproject.toml
drwxr-xr-x   5 user  staff   160 Mar  4 10:11 src
drwxr-xr-x   9 user  staff   288 Mar  4 10:11 tests
-rw-r--r--   1 user  staff  5120 Feb 28 14:02 notes.txt
-rwxr-xr-x   1 user  staff   310 Feb 28 14:02 run.sh
"""

GIT_LOG = "".join(
    f"commit {h}\nAuthor: Dev {i} <dev{i}@example.com>\nDate:   Mon Mar {1 + i} 10:0{i}:00 2024 +0000\n\n    Fix the thing number {i}\n\n"
    for i, h in enumerate(
        ("a1b2c3d4e5f6", "b2c3d4e5f6a1", "c3d4e5f6a1b2", "d4e5f6a1b2c3", "e5f6a1b2c3d4", "f6a1b2c3d4e5")
    )
)


@pytest.mark.parametrize(
    "name,text",
    [
        ("markdown list", MARKDOWN_LIST),
        ("csv", CSV),
        ("csv with spaced time cells", CSV_SPACED),
        ("tsv", TSV),
        ("markdown table", MARKDOWN_TABLE),
        ("python stack trace", PY_TRACE),
        ("java stack trace", JAVA_TRACE),
        ("prose with dates", PROSE),
        ("diary", DIARY),
        ("ls -la", LS_LA),
        ("git log", GIT_LOG),
    ],
)
def test_look_alikes_are_not_logs(name, text):
    lines = text.splitlines()
    assert log_share(lines) < 0.4, (name, analyse(lines))
    assert classify(text).name != "log", name


def test_stack_traces_under_log_lines_belong_to_the_log():
    """A Java service log where most lines are stack frames is still one log (the frames
    continue the headed line above them); the same frames alone are not a log."""
    entry = (
        "2024-03-04 10:{m:02d}:00,001 ERROR [worker-{m}] com.example.Sync: sync failed\n"
        "java.io.IOException: Broken pipe\n"
        + "".join(f"\tat com.example.net.Channel.write(Channel.java:{100 + k})\n" for k in range(8))
        + "Caused by: java.net.SocketException: Connection reset\n\t... 12 more\n"
    )
    text = "".join(entry.format(m=m) for m in range(40))
    lines = text.splitlines()
    assert sum(1 for ln in lines if header_of(ln)) == 40 and len(lines) == 480
    assert log_share(lines) == 1.0
    assert classify(text).name == "log"
    frames_only = "\n".join(ln for ln in lines if header_of(ln) is None)
    assert log_share(frames_only.splitlines()) == 0.0
