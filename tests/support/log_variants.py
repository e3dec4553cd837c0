"""Hand-made log generators in the shapes of systems the corpus does not hold, with ground truth.

The corpus (``../shared/corpus/logs``) has eight loghub systems; the log compressor is judged on
others. Each generator here writes a log in the line shape of one such system (Blue Gene/L RAS,
Thunderbird cluster syslog, Android logcat, a health app's ``|`` log, a proxy client's log,
macOS syslog, an HPC cluster's event log, Windows CBS) or of a common format (Kubernetes klog,
logfmt, Python ``logging``, nginx access log, PostgreSQL), written from the formats' published
descriptions: the headers, the kinds of events, rare events, error events, bursts of one event,
exact repeats. Nothing is copied from a real log.

Every log comes with its ground-truth templates (``<*>`` for a varying value, as loghub writes
them) and is deterministic: :func:`variant` with the same name gives the same text.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable

Gen = Callable[[random.Random], str]

# A line that holds an error word or is a stack frame: what the log compressor must keep verbatim.
ERROR_WORD = re.compile(r"error|fatal|severe|critical|exception|fail|panic|denied", re.IGNORECASE)
STACK_FRAME = re.compile(
    r"^\s+at [\w$.<>]+\(|^\s+File \".*\", line \d+|^Traceback \(most recent call last\)|^Caused by: "
)


def is_error_word_line(line: str) -> bool:
    """True when ``line`` holds an error word (any case: error, fatal, severe, critical,
    exception, fail…, panic, denied) or is a stack-trace line."""
    return bool(ERROR_WORD.search(line) or STACK_FRAME.search(line))


@dataclass(frozen=True)
class Event:
    """One ground-truth template: ``fmt`` with ``{}`` slots filled by ``values``; ``weight`` its
    relative frequency; ``level`` where the format has a level field; ``burst`` the largest run
    of it in a row (a storm of one event)."""

    fmt: str
    values: tuple[Gen, ...] = ()
    weight: float = 1.0
    level: str = "INFO"
    burst: int = 1

    @property
    def template(self) -> str:
        return self.fmt.format(*["<*>"] * len(self.values))


@dataclass(frozen=True)
class LogVariant:
    """A generated log: ``text`` (lines joined by newlines, final newline), its ``lines``, the
    ground-truth ``templates`` and each line's template index (-1 for continuation lines)."""

    name: str
    text: str
    lines: tuple[str, ...]
    templates: tuple[str, ...]
    template_of: tuple[int, ...]


# --- value generators -------------------------------------------------------------------------


def num(lo: int, hi: int) -> Gen:
    return lambda r: str(r.randint(lo, hi))


def hexs(n: int, prefix: str = "0x") -> Gen:
    return lambda r: prefix + "".join(r.choice("0123456789abcdef") for _ in range(n))


def pick(*xs: str) -> Gen:
    return lambda r: r.choice(xs)


def ip(net: str = "10.100") -> Gen:
    return lambda r: f"{net}.{r.randint(0, 40)}.{r.randint(1, 254)}"


def word(n: int = 6) -> Gen:
    return lambda r: "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))


def mac_addr(r: random.Random) -> str:
    return ":".join(f"{r.randint(0, 255):02x}" for _ in range(6))


# --- the generator ----------------------------------------------------------------------------


def _generate(
    name: str,
    seed: int,
    n: int,
    events: list[Event],
    header: Callable[[random.Random, int, Event], str],
    *,
    extra: Callable[[random.Random, int, Event, str], list[str]] | None = None,
    repeat_rate: float = 0.0,
) -> LogVariant:
    """``n`` lines: every event at least once (rare ones placed at random), the rest drawn by
    weight, in bursts up to ``Event.burst``; ``repeat_rate`` of lines repeat the previous line
    exactly; ``extra`` may add continuation lines (stack frames) after a line."""
    r = random.Random(seed)
    order: list[int] = []
    weights = [e.weight for e in events]
    while len(order) < n:
        k = r.choices(range(len(events)), weights)[0]
        order.extend([k] * r.randint(1, events[k].burst))
    order = order[:n]
    missing = [k for k in range(len(events)) if k not in order]
    present = Counter(order)
    places = list(range(1, n - 1))
    r.shuffle(places)
    for p in places:  # every template at least once, in place of a line of a frequent one
        if not missing:
            break
        if present[order[p]] > 1:
            present[order[p]] -= 1
            order[p] = missing.pop()
    lines: list[str] = []
    tof: list[int] = []
    i = 0
    for k in order:
        e = events[k]
        if lines and tof[-1] == k and r.random() < repeat_rate:
            lines.append(lines[-1])
            tof.append(tof[-1])
            continue
        msg = e.fmt.format(*(g(r) for g in e.values))
        line = header(r, i, e) + msg
        lines.append(line)
        tof.append(k)
        if extra is not None:
            more = extra(r, i, e, line)
            lines.extend(more)
            tof.extend([-1] * len(more))
        i += 1
    # templates that only ever appear with continuation lines count too
    return LogVariant(name, "\n".join(lines) + "\n", tuple(lines), tuple(e.template for e in events), tuple(tof))


MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _clock(base: int, i: int, step: float = 2.7) -> tuple[int, int, int, int, int, int]:
    """(month 1-12, day, hour, minute, second, millisecond) ``i`` events after ``base`` seconds."""
    t = base + int(i * step)
    ms = (i * 137) % 1000
    day = 1 + (t // 86400) % 28
    month = 1 + (t // (86400 * 28)) % 12
    return month, day, (t // 3600) % 24, (t // 60) % 60, t % 60, ms


_VERBS = (
    "started",
    "stopped",
    "finished",
    "reset",
    "queued",
    "skipped",
    "resumed",
    "loaded",
    "unloaded",
    "rejected",
    "accepted",
    "flushed",
    "expired",
    "renewed",
    "suspended",
    "attached",
    "detached",
    "enabled",
    "disabled",
    "dropped",
    "committed",
    "scheduled",
)
_NOUNS = (
    "session",
    "transfer",
    "handshake",
    "snapshot",
    "lease",
    "index",
    "profile",
    "channel",
    "buffer",
    "policy",
    "bundle",
    "cursor",
    "descriptor",
    "mailbox",
    "journal",
    "tunnel",
    "quota",
    "token",
    "socket",
    "widget",
)
_USERS = (
    "root",
    "daemon",
    "alice",
    "bob",
    "carol",
    "dave",
    "erin",
    "frank",
    "grace",
    "heidi",
    "ivan",
    "judy",
    "mallory",
    "oscar",
    "peggy",
    "trent",
    "victor",
    "walter",
)


def long_tail(seed: int, n: int, prefixes: tuple[str, ...], weight: float = 0.12) -> list[Event]:
    """``n`` rare events (real logs have a long tail of templates seen once or twice) that
    differ from each other by one or two words: the hard case for template mining, where
    events of one shape are told apart only by a constant word in a varying position."""
    r = random.Random(seed)
    out: list[Event] = []
    seen: set[str] = set()
    while len(out) < n:
        p, v, o = r.choice(prefixes), r.choice(_VERBS), r.choice(_NOUNS)
        shape = r.randrange(7)
        if shape == 0:
            fmt, vals = f"{p}{o} {v} for user {{}}", (pick(*_USERS),)
        elif shape == 1:
            fmt, vals = f"{p}{v} {o} {{}} after {{}} ms", (hexs(6), num(1, 5000))
        elif shape == 2:
            fmt, vals = f"{p}{o} {{}} {v}", (num(1, 99999),)
        elif shape == 3:
            fmt, vals = f"{p}{o} {v}: {{}} of {{}} {o}s", (num(1, 64), num(64, 128))
        elif shape == 4:
            fmt, vals = f"{p}{o} {{}} was {v} by {{}}", (word(8), pick(*_USERS))
        elif shape == 5:
            # a long message told from its siblings by two words only
            fmt, vals = (
                f"{p}the {o} of the current request was {v} because the remote peer {{}} sent no reply in time",
                (ip("172.20"),),
            )
        else:
            fmt, vals = (
                f"{p}{v} the {o} on device {{}} while the controller was busy with queue {{}}",
                (pick("sda", "sdb", "nvme0n1"), num(1, 64)),
            )
        if fmt not in seen:
            seen.add(fmt)
            out.append(Event(fmt, vals, weight=weight * r.choice((0.5, 1, 1, 2))))
    return out


# --- Blue Gene/L RAS --------------------------------------------------------------------------


def _bgl_node(r: random.Random) -> str:
    return f"R{r.randint(0, 7)}{r.randint(0, 7)}-M{r.randint(0, 1)}-N{r.randint(0, 15):X}-C:J{r.randint(2, 17):02d}-U{r.choice(('01', '11'))}"


BGL_EVENTS = [
    Event("instruction cache parity error corrected", weight=12, burst=4),
    Event("{} double-hummer alignment exceptions", (num(1, 9),), weight=3),
    Event("CE sym {}, at {}, mask {}", (num(0, 31), hexs(8), hexs(2)), weight=25, burst=6),
    Event("generating core.{}", (num(100, 9999),), weight=40, burst=8),
    Event(
        "ciod: generated {} core files for program {}",
        (num(1, 128), pick("/g/g0/user/sppm/sppm.x", "/p/gb1/run/umt2k")),
        weight=2,
    ),
    Event(
        "ciod: Received signal {}, code={}, errno={}, address={}", (num(1, 15), num(0, 3), num(0, 9), hexs(8)), weight=2
    ),
    Event("iar {} dear {}", (hexs(8), hexs(8)), weight=4),
    Event(
        "r{}={} r{}={} r{}={} r{}={}",
        (num(10, 31), hexs(8), num(10, 31), hexs(8), num(10, 31), hexs(8), num(10, 31), hexs(8)),
        weight=8,
        burst=8,
    ),
    Event("lr:{} cr:{} xer:{} ctr:{}", (hexs(8), hexs(8), hexs(8), hexs(8)), weight=2),
    Event("debug wait enable.................{}", (num(0, 1),), weight=2),
    Event(
        "{} microseconds spent in the rbs signal handler during {} calls. {} microseconds was the maximum time for a single instance of a correctable condition.",
        (num(100, 9000), num(1, 900), num(10, 900)),
        weight=3,
    ),
    Event(
        "Kernel detected {} integer alignment exceptions ({}) iar {}, dear {}",
        (num(1, 9999), num(1, 30), hexs(8), hexs(8)),
        weight=1,
    ),
    Event("total of {} ddr error(s) detected and corrected", (num(1, 40),), weight=6),
    Event("ddr: activating redundant bit steering: rank={} symbol={}", (num(0, 1), num(0, 35)), weight=1),
    Event("{} torus receiver z+ input pipe error(s) (dcr {}) detected and corrected", (num(1, 9), hexs(4)), weight=2),
    Event("{} L3 EDRAM error(s) (dcr {}) detected and corrected", (num(1, 9), hexs(4)), weight=2),
    Event("data TLB error interrupt", level="FATAL", weight=6, burst=3),
    Event("data storage interrupt", level="FATAL", weight=3),
    Event("instruction address: {}", (hexs(8),), level="FATAL", weight=4),
    Event("machine check interrupt", level="FATAL", weight=2),
    Event("program interrupt", level="FATAL", weight=1),
    Event("rts panic! - stopping execution", level="FATAL", weight=1),
    Event("rts: kernel terminated for reason {}", (num(1001, 1010),), level="FATAL", weight=1),
    Event(
        "ciod: failed to read message prefix on control stream (CioStream socket to {}:{}",
        (ip("172.16"), num(30000, 40000)),
        level="FATAL",
        weight=3,
    ),
    Event(
        "ciod: Error reading message prefix after LOGIN_MESSAGE on CioStream socket to {}:{}, Link has been severed",
        (ip("172.16"), num(30000, 40000)),
        level="FATAL",
        weight=2,
    ),
    Event(
        "ciod: LOGIN chdir({}) failed: No such file or directory",
        (pick("/home/bgluser/run", "/p/gb1/stella/RAPTOR/2183", "/g/g0/jones/run12"),),
        level="FATAL",
        weight=1,
    ),
    Event(
        "ciod: duplicate canonical-rank {} to logical-rank {} mapping at line {} of node map file {}",
        (num(0, 63), num(0, 63), num(1, 99), pick("/p/gb2/map.txt", "/home/x/map2")),
        level="FATAL",
        weight=1,
    ),
    Event(
        "idoproxydb hit ASSERT condition: ASSERT expression={} Source file=idotransportmgr.cpp Source line={} Function=int IdoTransportMgr::SendPacket(IdoUdpMgr*, BglCtlPavTrace*)",
        (num(0, 1), num(1000, 1100)),
        level="FATAL",
        weight=1,
    ),
    Event("floating point unavailable interrupt", weight=1),
    Event("machine state register: {}", (hexs(8),), weight=2),
    Event("exception syndrome register: {}", (hexs(8),), weight=2),
    Event("byte ordering exception.......................{}", (num(0, 1),), weight=2),
    Event("force load/store alignment...................{}", (num(0, 1),), weight=2),
    Event("auxiliary processor.........................{}", (num(0, 1),), weight=2),
    Event("critical input interrupt enable...{}", (num(0, 1),), weight=1),
    Event("wait state enable.................{}", (num(0, 1),), weight=1),
    Event("guaranteed data cache block touch............{}", (num(0, 1),), weight=1),
    Event("NodeCard is not fully functional", level="ERROR", weight=1),
    Event(
        "Node card VPD check: {} node in processor card slot {} do not match. VPD ecid {}, found {}",
        (pick("U01", "U11"), pick("J12", "J08"), hexs(24, ""), hexs(24, "")),
        level="WARNING",
        weight=1,
    ),
    Event(
        "PrepareForService shutting down Node card(mLctn({}), mCardSernum({}), mLp({}), mIp({}), mType({}))",
        (pick("R05-M0-N4", "R17-M1-NC"), hexs(16, ""), hexs(12, ""), ip("10.0"), num(2, 4)),
        level="INFO",
        weight=1,
    ),
    Event(
        "MidplaneSwitchController performing bit sparing on {} bit {}",
        (pick("R02-M1-L1-U18-C", "R11-M0-L0-U18-A"), num(0, 9)),
        level="INFO",
        weight=1,
    ),
    Event("Can not get assembly information for node card", level="ERROR", weight=1),
    Event("Lustre mount FAILED : {} : block_id : location", (pick("bglio11", "bglio42"),), level="FATAL", weight=1),
    Event("shutdown complete", weight=1),
    Event(
        "Target=ido://FF:F2:9F:16:E1:{}:R{}-M1-N0:J18-U01 Message=Illegal Inquiry request on Ido Packet",
        (hexs(2, ""), num(10, 77)),
        level="ERROR",
        weight=1,
    ),
    Event(
        "BGLMaster has been started: ./BGLMaster --consoleip 127.0.0.1 --consoleport 32035 --configfile bglmaster.init",
        level="INFO",
        weight=1,
    ),
    Event("mmcs_server exited normally with exit code {}", (num(0, 13),), level="INFO", weight=1),
    Event(
        "while reading FPGA status register: data read: {} expected: {}", (hexs(8), hexs(8)), level="SEVERE", weight=1
    ),
]
_BGL_COMP = {
    "ERROR": ("DISCOVERY", "MMCS"),
    "WARNING": ("DISCOVERY",),
    "SEVERE": ("HARDWARE",),
    "FATAL": ("KERNEL", "APP"),
}
_BGL_ALERT = {"FATAL": ("KERNDTLB", "KERNSTOR", "APPREAD", "KERNMC", "KERNRTSP", "APPSEV")}


def bgl() -> LogVariant:
    def header(r: random.Random, i: int, e: Event) -> str:
        t = 1117838570 + int(i * 41.3)
        mo, d, h, mi, s, ms = _clock(t - 1117838570 + 13_000_000, i, 0)
        node = _bgl_node(r) if e.fmt[:4] not in ("MMCS", "BGLM") else "NULL"
        label = r.choice(_BGL_ALERT[e.level]) if e.level in _BGL_ALERT and r.random() < 0.7 else "-"
        comp = r.choice(_BGL_COMP.get(e.level, ("KERNEL",)))
        if e.fmt.startswith(("BGLMaster", "mmcs_server")):
            comp = "BGLMASTER"
        return (
            f"{label} {t} 2005.{mo:02d}.{d:02d} {node} 2005-{mo:02d}-{d:02d}-{h:02d}.{mi:02d}.{s:02d}.{ms:03d}{r.randint(100, 999)} "
            f"{node} RAS {comp} {e.level} "
        )

    return _generate("bgl", 11, 2000, BGL_EVENTS, header)


# --- Thunderbird cluster syslog ---------------------------------------------------------------

TB_EVENTS = [
    Event("crond(pam_unix)[{}]: session opened for user root by (uid=0)", (num(1000, 32000),), weight=20, burst=3),
    Event("crond(pam_unix)[{}]: session closed for user root", (num(1000, 32000),), weight=20, burst=3),
    Event("crond[{}]: (root) CMD (run-parts /etc/cron.hourly)", (num(1000, 32000),), weight=8),
    Event(
        "crond[{}]: (root) CMD ({})",
        (num(1000, 32000), pick("/usr/lib/sa/sa1 1 1", "/opt/maint/check_ib.sh", "touch /var/run/alive")),
        weight=6,
    ),
    Event("ntpd[{}]: synchronized to {}, stratum {}", (num(1000, 9000), ip(), num(2, 4)), weight=6),
    Event("ntpd[{}]: time reset {} s", (num(1000, 9000), pick("+0.204", "-0.155", "+1.020")), weight=2),
    Event(
        "sshd[{}]: Accepted publickey for {} from {} port {} ssh2",
        (num(1000, 32000), pick("root", "jdoe", "sysadm"), ip(), num(30000, 60000)),
        weight=5,
    ),
    Event(
        "sshd(pam_unix)[{}]: session opened for user {} by (uid=0)",
        (num(1000, 32000), pick("root", "jdoe", "sysadm")),
        weight=4,
    ),
    Event(
        "sshd(pam_unix)[{}]: session closed for user {}", (num(1000, 32000), pick("root", "jdoe", "sysadm")), weight=4
    ),
    Event(
        "sshd[{}]: Failed password for {} from {} port {} ssh2",
        (num(1000, 32000), pick("root", "guest"), ip("192.168"), num(30000, 60000)),
        weight=1,
    ),
    Event(
        "postfix/postdrop[{}]: warning: unable to look up public/pickup: No such file or directory",
        (num(1000, 32000),),
        weight=3,
    ),
    Event(
        "ib_sm.x[{}]: [ib_sm_sweep.c:{}]: No topology change", (num(20000, 30000), num(1800, 1900)), weight=8, burst=4
    ),
    Event(
        "ib_sm.x[{}]: [ib_sm_sweep.c:{}]: No configuration change required",
        (num(20000, 30000), num(1400, 1500)),
        weight=8,
        burst=4,
    ),
    Event(
        "ib_sm.x[{}]: [ib_sm_bringup.c:{}]: Bringup completed for port {}",
        (num(20000, 30000), num(500, 600), num(1, 24)),
        weight=1,
    ),
    Event("in.tftpd[{}]: tftp: client does not accept options", (num(1000, 32000),), weight=2),
    Event("dhcpd: DHCPREQUEST for {} from {} via eth1", (ip(), mac_addr), weight=4),
    Event("dhcpd: DHCPACK on {} to {} via eth1", (ip(), mac_addr), weight=4),
    Event("dhcpd: DHCPDISCOVER from {} via eth1: network 10.100.0.0/16: no free leases", (mac_addr,), weight=1),
    Event("kernel: e1000: eth0: e1000_watchdog_task: NIC Link is Up 1000 Mbps Full Duplex", weight=1),
    Event("kernel: e1000: eth0: e1000_watchdog_task: NIC Link is Down", weight=1),
    Event(
        "kernel: EXT3-fs error (device {}): ext3_find_entry: reading directory #{} offset {}",
        (pick("sda5", "sdb1"), num(2, 90000), num(0, 3)),
        level="ERR",
        weight=1,
    ),
    Event(
        "kernel: [KERNEL_IB][ib_mad_dispatch][{}]Error: Bad MAD class {}",
        (pick("mad.c:1227", "mad.c:1304"), hexs(2)),
        level="ERR",
        weight=1,
    ),
    Event(
        "pbs_mom: Connection refused ({}) in open_demux, open_demux: connect {}:{}",
        (num(110, 111), ip(), num(40000, 50000)),
        weight=2,
    ),
    Event(
        "pbs_mom: task_check, cannot tm_reply to {} task {}",
        (pick("5021.tbird-admin1", "5990.tbird-admin1"), num(1, 9)),
        weight=1,
    ),
    Event("kernel: VFS: file-max limit {} reached", (num(200000, 400000),), weight=1),
    Event("xinetd[{}]: START: tftp pid={} from={}", (num(1000, 9000), num(1000, 32000), ip()), weight=2),
    Event(
        "xinetd[{}]: EXIT: tftp status=0 pid={} duration={}(sec)",
        (num(1000, 9000), num(1000, 32000), num(0, 30)),
        weight=2,
    ),
    Event(
        "su(pam_unix)[{}]: authentication failure; logname={} uid={} euid=0 tty= ruser={} rhost=  user=root",
        (num(1000, 32000), pick("jdoe", "kim"), num(500, 600), pick("jdoe", "kim")),
        weight=1,
    ),
    Event(
        "smartd[{}]: Device: /dev/{}, SMART Prefailure Attribute: {} Raw_Read_Error_Rate changed from {} to {}",
        (num(1000, 9000), pick("sda", "sdb"), num(1, 1), num(60, 80), num(60, 80)),
        weight=1,
    ),
    *long_tail(103, 40, ("kernel: ", "automount[1703]: ", "syslog-ng[512]: ", "named[2044]: ")),
    Event(
        "gmond[{}]: data_thread() got no answer from any [{}] datasource",
        (num(1000, 9000), pick("cluster", "tbird")),
        weight=1,
    ),
]


def thunderbird() -> LogVariant:
    hosts = ("dn228", "dn73", "an668", "bn251", "cn142", "cn700", "tbird-admin1", "tbird-sm1", "aadmin1", "en74")

    def header(r: random.Random, i: int, e: Event) -> str:
        t = 1131566461 + int(i * 17.9)
        mo, d, h, mi, s, _ = _clock(t - 1131566461 + 26_000_000, i, 0)
        host = r.choice(hosts)
        loc = f"src@{host}" if host.startswith(("tbird", "aadmin")) else f"{host}/{host}"
        label = r.choice(("VAPI", "EXT_FS", "PBS_CON")) if e.level == "ERR" and r.random() < 0.8 else "-"
        return f"{label} {t} 2005.{mo:02d}.{d:02d} {host} {MONTHS[mo - 1]} {d} {h:02d}:{mi:02d}:{s:02d} {loc} "

    return _generate("thunderbird", 12, 2000, TB_EVENTS, header, repeat_rate=0.01)


# --- Android logcat (threadtime) --------------------------------------------------------------

ANDROID_EVENTS = [
    Event(
        'PowerManagerService: acquire lock={}, flags=0x1, tag="View Lock", name=com.android.systemui, ws=null, uid=10037, pid=2227',
        (num(100000000, 999999999),),
        level="D",
        weight=15,
        burst=3,
    ),
    Event(
        'PowerManagerService: release:lock={}, flg=0x0, tag="View Lock", name=com.android.systemui", ws=null, uid=10037, pid=2227',
        (num(100000000, 999999999),),
        level="D",
        weight=15,
        burst=3,
    ),
    Event(
        "PowerManagerService: ready=true,policy=3,wakefulness=1,wksummary={},uasummary=0x1,bootcompleted=true,boostinprogress=false,waitmodeenable=false,mode=false,manual={},auto=-1,adj=0.0userId=0",
        (hexs(2), num(20, 80)),
        level="D",
        weight=10,
    ),
    Event(
        "WindowManager: printFreezingDisplayLogsopening app wtoken = AppWindowToken{{{} token=Token{{{} ActivityRecord{{{} u0 com.tencent.qt.qtl/.activity.info.NewsDetailXmlActivity t761}}}}}}, allDrawn= false, startingDisplayed =  false, startingMoved =  false, isRelaunching =  false",
        (hexs(7, ""), hexs(7, ""), hexs(7, "")),
        level="D",
        weight=3,
    ),
    Event(
        "WindowManager: Skipping AppWindowToken{{{} token=Token{{{} ActivityRecord{{{} u0 {} t761}}}}}} -- going to hide",
        (
            hexs(7, ""),
            hexs(7, ""),
            hexs(7, ""),
            pick("com.tencent.qt.qtl/.activity.MainActivity", "com.android.settings/.Settings"),
        ),
        level="V",
        weight=4,
    ),
    Event("TextView: visible is system.time.showampm", level="D", weight=4),
    Event("TextView: mVisiblity.getValue is false", level="D", weight=3),
    Event(
        "DisplayPowerController: Animating brightness: target={}, rate={}",
        (num(10, 255), num(10, 60)),
        level="D",
        weight=5,
    ),
    Event(
        "ActivityManager: Start proc {}:{}/u0a{} for service {}",
        (
            num(1000, 32000),
            pick("com.tencent.mm", "com.android.phone", "com.google.android.gms"),
            num(10, 200),
            pick("com.tencent.mm/.booter.CoreService", "com.google.android.gms/.chimera.GmsIntentOperationService"),
        ),
        level="I",
        weight=3,
    ),
    Event(
        "ActivityManager: Process {} (pid {}) has died",
        (pick("com.tencent.mm:push", "com.android.browser"), num(1000, 32000)),
        level="I",
        weight=2,
    ),
    Event(
        "ActivityManager: Unable to start service Intent {{ act={} pkg={} }} U=0: not found",
        (
            pick("com.tencent.mm.plugin.PUSH", "com.huawei.android.pushagent.PushService"),
            pick("com.tencent.mm", "com.huawei.android.pushagent"),
        ),
        level="W",
        weight=2,
    ),
    Event(
        "ActivityManager: Scheduling restart of crashed service {} in {}ms",
        (
            pick("com.tencent.mm/.booter.NotifyReceiver$NotifyService", "com.sohu.inputmethod.sogou/.SogouIME"),
            num(1000, 60000),
        ),
        level="W",
        weight=1,
    ),
    Event("AndroidRuntime: FATAL EXCEPTION: main", level="E", weight=1),
    Event(
        "AndroidRuntime: Process: {}, PID: {}",
        (pick("com.tencent.qt.qtl", "com.example.app"), num(1000, 32000)),
        level="E",
        weight=1,
    ),
    Event(
        "AndroidRuntime: java.lang.NullPointerException: Attempt to invoke virtual method 'int java.lang.String.length()' on a null object reference",
        level="E",
        weight=1,
    ),
    Event(
        "AndroidRuntime: \tat com.tencent.qt.qtl.activity.info.NewsDetailXmlActivity.onCreate(NewsDetailXmlActivity.java:{})",
        (num(40, 400),),
        level="E",
        weight=1,
    ),
    Event("WifiStateMachine: processMsg: ConnectedState", level="D", weight=2),
    Event("WifiStateMachine: get link layer stats {}", (num(0, 3),), level="D", weight=2),
    Event(
        "wpa_supplicant: wlan0: CTRL-EVENT-SIGNAL-CHANGE above=1 signal={} noise=9999 txrate={}",
        (num(-80, -40), num(6000, 150000)),
        level="I",
        weight=3,
    ),
    Event("KeyguardUpdateMonitor: handleBatteryUpdate", level="D", weight=2),
    Event(
        "BatteryService: level:{}, scale:100, status:2, health:2, present:true, voltage: {}, temperature: {}, technology: Li-poly, AC powered:false, USB powered:true",
        (num(10, 100), num(3700, 4300), num(250, 400)),
        level="I",
        weight=2,
    ),
    Event(
        "StatusBar: updateNetworkState, mNetworkState = {}", (pick("CONNECTED", "DISCONNECTED"),), level="D", weight=1
    ),
    Event("SendBroadcastPermission: action:android.intent.action.SCREEN_ON, mPermissionType:0", level="D", weight=2),
    Event("chatty: uid=1000(system) Binder_{} expire {} lines", (num(1, 9), num(2, 40)), level="I", weight=2),
    Event(
        'SELinux: avc:  denied  {{ read }} for  pid={} comm="{}" name="cpuinfo_max_freq" dev="sysfs" ino={} scontext=u:r:untrusted_app:s0 tcontext=u:object_r:sysfs:s0 tclass=file permissive=0',
        (num(1000, 32000), pick("Thread-12", "qtl.process"), num(10000, 30000)),
        level="W",
        weight=1,
    ),
    Event("HwSystemManager: ServiceConnection failed: {}", (pick("binder died", "timeout"),), level="E", weight=1),
    *long_tail(
        102,
        50,
        ("ActivityManager: ", "PackageManager: ", "InputDispatcher: ", "AudioFlinger: ", "ConnectivityService: "),
    ),
    Event(
        "Adreno-EGL: <qeglDrvAPI_eglInitialize:{}>: EGL 1.4 QUALCOMM build: Nondeterministic_AU_msm8974_LA.BF.1.1.3_RB1__release_AU",
        (num(300, 500),),
        level="I",
        weight=1,
    ),
]


def android() -> LogVariant:
    pids = (
        (1702, 2395),
        (1702, 8671),
        (1702, 1820),
        (1702, 2113),
        (2227, 2227),
        (1702, 1717),
        (754, 1024),
        (21430, 21430),
    )

    def header(r: random.Random, i: int, e: Event) -> str:
        mo, d, h, mi, s, ms = _clock(6_000_000, i, 0.31)
        pid, tid = r.choice(pids)
        lv = e.level if len(e.level) == 1 else "I"
        return f"{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}.{ms:03d}  {pid:>4}  {tid:>4} {lv} "

    return _generate("android", 13, 2000, ANDROID_EVENTS, header, repeat_rate=0.005)


# --- a health app's "|" log -------------------------------------------------------------------

HEALTH_EVENTS = [
    Event("Step_LSC|30002312|onStandStepChanged {}", (num(3000, 9000),), weight=25, burst=3),
    Event(
        "Step_LSC|30002312|onExtend:{} {} {} {}",
        (num(1514038440000, 1514038590000), num(0, 30), num(0, 3), num(0, 9)),
        weight=15,
    ),
    Event(
        "Step_StandReportReceiver|30002312|onReceive action: android.intent.action.{}",
        (pick("SCREEN_ON", "SCREEN_OFF", "TIME_TICK"),),
        weight=6,
    ),
    Event(
        "Step_LSC|30002312|processHandleBroadcastAction action:android.intent.action.{}",
        (pick("SCREEN_ON", "SCREEN_OFF", "TIME_TICK"),),
        weight=6,
    ),
    Event("Step_StandStepCounter|30002312|flush sensor data", weight=8),
    Event(
        "Step_SPUtils|30002312| getTodayTotalDetailSteps = {}##{}##{}##{}##{}##{}",
        (
            num(1514038440000, 1514038590000),
            num(5000, 9000),
            num(500000, 600000),
            num(8000, 9000),
            num(12000, 13000),
            num(27000000, 28000000),
        ),
        weight=10,
    ),
    Event(
        "Step_SPUtils|30002312|setTodayTotalDetailSteps={}##{}##{}##{}##{}##{}",
        (
            num(1514038440000, 1514038590000),
            num(5000, 9000),
            num(500000, 600000),
            num(8000, 9000),
            num(12000, 13000),
            num(27000000, 28000000),
        ),
        weight=3,
    ),
    Event("Step_ExtSDM|30002312|calculateCaloriesWithCache totalCalories={}", (num(100000, 200000),), weight=8),
    Event("Step_ExtSDM|30002312|calculateAltitudeWithCache totalAltitude={}", (num(200, 300),), weight=8),
    Event(
        "Step_ExtSDM|30002312|onExtend:{} {} {} {}",
        (num(1514038440000, 1514038590000), num(0, 30), num(0, 3), num(0, 9)),
        weight=8,
    ),
    Event("Step_ScreenUtil|30002312|screen status unknown,think screen on", weight=2),
    Event(
        "Step_NotificaitonUtils|30002312|REPORT : {} {} {} {}",
        (num(5000, 9000), num(5000, 6000), num(150000, 160000), num(200, 300)),
        weight=3,
    ),
    Event("Step_HGNH|30002312|notifyHealthNotification()", weight=2),
    Event(
        "HiH_HiHealthDataInsertStore|30002312|saveHealthDetailData() saveOneDetailData fail hiHealthData = {}",
        (num(1, 40),),
        weight=1,
    ),
    Event("HiH_HiSyncControl|30002312|syncData() failed, errorCode = {}", (pick("-1", "1003"),), weight=1),
    Event("HiH_HiBroadcastUtil|30002312|sendSyncFailedBroadcast", weight=1),
    Event(
        "HiH_HiHealthDataInsertStore|30002312|insertHealthData() time = {}, type = {}, value = {}",
        (num(1514038440000, 1514038590000), num(2, 9), num(1, 900)),
        weight=3,
    ),
    Event(
        "HiH_DataStatManager|30002312|onReceive action = com.huawei.health.{}",
        (pick("STEP_UPDATE", "SYNC_DONE"),),
        weight=2,
    ),
    Event("Step_DaemonService|30002312|onStartCommand: startId = {}", (num(1, 99),), weight=1),
    Event("Step_SPUtils|30002312|getTodayTotalSteps: {}", (num(5000, 9000),), weight=2),
]


def healthapp() -> LogVariant:
    def header(r: random.Random, i: int, e: Event) -> str:
        _, d, h, mi, s, ms = _clock(80_000, i, 1.3)
        # the app pads neither hours nor minutes nor seconds
        return f"201712{23 + d // 28:02d}-{h}:{mi}:{s}:{ms}|"

    return _generate("healthapp", 14, 2000, HEALTH_EVENTS, header)


# --- a proxy client's log ---------------------------------------------------------------------

PROX_APPS = (
    "chrome.exe",
    "chrome.exe *64",
    "Dropbox.exe",
    "SogouCloud.exe",
    "WeChat.exe",
    "QQ.exe",
    "svchost.exe *64",
    "git-remote-https.exe",
)
PROX_HOSTS = (
    "proxy.example.org:5070",
    "www.example.com:443",
    "block.dropbox.com:443",
    "get.sogou.com:80",
    "mmbiz.qpic.cn:80",
    "github.com:443",
    "update.googleapis.com:443",
)
PROXIFIER_EVENTS = [
    Event("open through proxy proxy.example.org:5070 HTTPS", weight=30),
    Event("open through proxy proxy.example.org:5070 SOCKS5", weight=5),
    Event(
        "close, {} bytes sent, {} bytes received, lifetime {}",
        (num(0, 900), num(0, 900), pick("<1 sec", "00:01", "00:02")),
        weight=20,
    ),
    Event(
        "close, {} bytes ({} KB) sent, {} bytes ({} KB) received, lifetime {}",
        (
            num(1100, 90000),
            pick("1.16", "4.07", "12.3"),
            num(1100, 90000),
            pick("1.63", "8.20", "44.1"),
            pick("00:02", "01:15", "09:59"),
        ),
        weight=15,
    ),
    Event(
        "close, {} bytes ({} MB) sent, {} bytes ({} MB) received, lifetime {}",
        (
            num(2000000, 9000000),
            pick("2.07", "8.15"),
            num(2000000, 9000000),
            pick("3.63", "6.02"),
            pick("05:12", "1:02:40"),
        ),
        weight=2,
    ),
    Event(
        "error : Could not connect through proxy proxy.example.org:5070 - Proxy server cannot establish a connection with the target, status code {}",
        (pick("403", "503"),),
        weight=4,
    ),
    Event(
        "error : Could not connect to proxy proxy.example.org:5070 - connection attempt failed with error {}",
        (pick("10060", "10061"),),
        weight=2,
    ),
    Event("error : A connection request was canceled before the completion.", weight=1),
]


def proxifier() -> LogVariant:
    def header(r: random.Random, i: int, e: Event) -> str:
        mo, d, h, mi, s, _ = _clock(25_000_000, i, 1.9)
        return f"[{mo:02d}.{d:02d} {h:02d}:{mi:02d}:{s:02d}] {r.choice(PROX_APPS)} - {r.choice(PROX_HOSTS)} "

    return _generate("proxifier", 15, 2000, PROXIFIER_EVENTS, header)


# --- macOS syslog ------------------------------------------------------------------------------

MAC_EVENTS = [
    Event(
        "kernel[0]: IOThunderboltSwitch<0>(0x0)::listenerCallback - Thunderbolt HPD packet for route = 0x0 port = {} unplug = {}",
        (num(10, 12), num(0, 1)),
        weight=6,
    ),
    Event(
        "kernel[0]: ARPT: {}: AirPort_Brcm43xx::syncPowerState: WWEN[{}]",
        (lambda r: f"{r.randint(600000, 700000)}.{r.randint(0, 999999):06d}", pick("enabled", "disabled")),
        weight=8,
    ),
    Event(
        "kernel[0]: ARPT: {}: wl0: wl_update_tcpkeep_seq: Original Seq: {}, Ack: {}, Win size: {}",
        (
            lambda r: f"{r.randint(600000, 700000)}.{r.randint(0, 999999):06d}",
            num(10**9, 4 * 10**9),
            num(10**9, 4 * 10**9),
            num(1000, 9000),
        ),
        weight=4,
    ),
    Event(
        "kernel[0]: ARPT: {}: wl0: MDNS: IPV4 Addr: {}",
        (lambda r: f"{r.randint(600000, 700000)}.{r.randint(0, 999999):06d}", ip("10.105")),
        weight=3,
    ),
    Event("kernel[0]: AppleThunderboltNHIType2::prepareForSleep - enter", weight=2),
    Event("kernel[0]: AppleThunderboltNHIType2::prepareForSleep - exit", weight=2),
    Event(
        "kernel[0]: Sandbox: {}({}) deny(1) network-outbound /private/var/run/mDNSResponder",
        (pick("com.apple.Addres", "QQ", "Safari"), num(100, 40000)),
        weight=3,
    ),
    Event("kernel[0]: Previous sleep cause: {}", (num(5, 5),), weight=1),
    Event(
        "kernel[0]: Wake reason: {}", (pick("RTC (Alarm)", "EC.SleepTimer (SleepTimer)", "ARPT (Network)"),), weight=2
    ),
    Event(
        "com.apple.CDScheduler[{}]: Thermal pressure state: {} Memory pressure state: {}",
        (num(40, 50), num(0, 1), num(0, 1)),
        weight=5,
    ),
    Event("QQ[{}]: FA||Url||taskID[{}] dealloc", (num(10000, 10020), num(2019352994, 2019359999)), weight=6, burst=4),
    Event(
        "mDNSResponder[{}]: mDNS_DeregisterInterface: Frequent transitions for interface en0 ({})",
        (num(90, 99), ip("10.105")),
        weight=2,
    ),
    Event(
        "com.apple.WebKit.WebContent[{}]: [{}] <<<< CRABS >>>> crabsFlumeHostAvailable: [{}] Byte flume reports host available again.",
        (
            num(20000, 30000),
            lambda r: f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d}",
            hexs(12),
        ),
        weight=3,
    ),
    Event(
        "GoogleSoftwareUpdateAgent[{}]: {} GoogleSoftwareUpdateAgent[{}/{}] [lvl=2] -[KSUpdateEngine updateAllExceptProduct:] KSUpdateEngine updating all installed products, except:'com.google.Keystone'.",
        (
            num(28000, 29000),
            lambda r: (
                f"2017-07-01 {r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d}"
            ),
            num(28000, 29000),
            hexs(12),
        ),
        weight=2,
    ),
    Event(
        "GoogleSoftwareUpdateAgent[{}]: {} GoogleSoftwareUpdateAgent[{}/{}] [lvl=2] -[KSAgentApp performSelfUpdateWithEngine:] Finished self update check.",
        (
            num(28000, 29000),
            lambda r: (
                f"2017-07-01 {r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d}"
            ),
            num(28000, 29000),
            hexs(12),
        ),
        weight=1,
    ),
    Event(
        "sharingd[{}]: {} : SDStatusMonitor::kStatusWirelessPowerChanged",
        (
            num(30000, 31000),
            lambda r: f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d}",
        ),
        weight=3,
    ),
    Event(
        "com.apple.cts[{}]: com.apple.suggestions.harvest: scheduler_evaluate_activity told me to run this job; however, but the start time isn't for {} seconds.  Ignoring.",
        (num(250, 260), num(100, 9000)),
        weight=2,
    ),
    Event(
        "WindowServer[{}]: CGXDisplayDidWakeNotification [{}]: posting kCGSDisplayDidWake",
        (num(180, 190), num(700000000000, 800000000000)),
        weight=2,
    ),
    Event(
        "WindowServer[{}]: device_generate_desktop_screenshot: authw {}({}), shield {}({})",
        (num(180, 190), hexs(12), num(2000, 3000), hexs(12), num(2000, 3000)),
        weight=1,
    ),
    Event(
        "Safari[{}]: tcp_connection_tls_session_error_callback_imp {} __tcp_connection_tls_session_callback_write_block_invoke.434 error 22",
        (num(9000, 9900), num(1000, 3000)),
        weight=2,
    ),
    Event(
        "com.apple.WebKit.Networking[{}]: NSURLSession/NSURLConnection HTTP load failed (kCFStreamErrorDomainSSL, {})",
        (num(9000, 9900), pick("-9802", "-9806")),
        weight=2,
    ),
    Event(
        "symptomsd[{}]: __73-[NetworkAnalyticsEngine observeValueForKeyPath:ofObject:change:context:]_block_invoke unexpected switch value {}",
        (num(210, 220), num(1, 3)),
        weight=2,
    ),
    Event(
        "locationd[{}]: Location icon should now be in state '{}'", (num(80, 90), pick("Active", "Inactive")), weight=3
    ),
    Event(
        "com.apple.AddressBook.InternetAccountsBridge[{}]: dnssd_clientstub ConnectToServer: connect()-> No of tries: {}",
        (num(35000, 36000), num(1, 3)),
        weight=2,
    ),
    Event(
        "com.apple.AddressBook.InternetAccountsBridge[{}]: Checking iCloud account status",
        (num(35000, 36000),),
        weight=1,
    ),
    Event("--- last message repeated {} time ---", (num(1, 3),), weight=2),
    Event(
        "corecaptured[{}]: CCFile::captureLog Received Capture notice id: {}, reason = {}:{}",
        (
            num(30000, 40000),
            lambda r: f"{r.randint(1498000000, 1499000000)}.{r.randint(0, 999999):06d}",
            pick("AuthFail", "DeauthInd"),
            pick("sts:1_rsn:0", "sts:0_rsn:7"),
        ),
        weight=2,
    ),
    Event(
        "networkd[{}]: -[NETClientConnection evaluateCrazyIvan46] CI46 - Hit by torpedo! QQ.{} tc{} {}:{}",
        (num(190, 200), num(10000, 10100), num(10000, 90000), ip("183.57"), num(80, 443)),
        weight=1,
    ),
    Event(
        "UserEventAgent[{}]: Captive: [CNInfoNetworkActive:{}] en0: SSID '{}' making interface primary (protected network)",
        (num(40, 50), num(1700, 1800), pick("CalVisitor", "CUHK1x")),
        weight=1,
    ),
    Event(
        'secd[{}]:  SOSAccountThisDeviceCanSyncWithCircle sync with device failure: Error Domain=com.apple.security.sos.error Code=1000 "Account identity not set" UserInfo={{NSDescription=Account identity not set}}',
        (num(270, 280),),
        weight=1,
    ),
    *long_tail(
        101,
        60,
        (
            "com.apple.xpc.launchd[1]: (com.apple.",
            "kernel[0]: ",
            "cloudd[321]: ",
            "syncdefaultsd[410]: ",
            "nsurlsessiond[220]: ",
        ),
    ),
    Event(
        "Microsoft Word[{}]: Error: Cannot open file {}",
        (num(1000, 9000), pick("/Users/x/Documents/report.docx", "/Volumes/USB/notes.docx")),
        weight=1,
    ),
    Event("loginwindow[{}]: USER_PROCESS: {} console", (num(90, 99), num(300, 400)), weight=1),
    Event("configd[{}]: network changed: v4(en0-:{}) DNS- Proxy- SMB", (num(50, 60), ip("10.105")), weight=1),
    Event(
        "Dock[{}]: -[UABestAppSuggestionManager notifyBestAppChanged:type:options:bundleIdentifier:activityType:dynamicIdentifier:when:confidence:deviceName:deviceIdentifier:deviceType:] (null) UASuggestedActionType=0 (null)/(null) opts=(null) when=2017-07-01 {} confidence=1 from=(null)/(null) (UABestAppSuggestionManager.m #319)",
        (
            num(270, 300),
            lambda r: f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d} +0000",
        ),
        weight=1,
    ),
]


def mac() -> LogVariant:
    hosts = ("calvisitor-10-105-160-95", "authorMacBook-Pro", "calvisitor-10-105-162-124")

    def header(r: random.Random, i: int, e: Event) -> str:
        _, d, h, mi, s, _ = _clock(10_000, i, 29.0)
        host = hosts[0] if r.random() < 0.8 else r.choice(hosts)
        return f"Jul {d:>2} {h:02d}:{mi:02d}:{s:02d} {host} "

    return _generate("mac", 16, 2000, MAC_EVENTS, header, repeat_rate=0.004)


def mac_long_tail() -> LogVariant:
    """macOS lines where one process writes 200 kinds of event, many told apart by one or two
    words in a long message: the hardest case for template mining."""
    events = MAC_EVENTS[:8] + long_tail(104, 200, ("kernel[0]: ",), weight=0.25)

    def header(r: random.Random, i: int, e: Event) -> str:
        _, d, h, mi, s, _ = _clock(50_000, i, 13.0)
        return f"Jul {d:>2} {h:02d}:{mi:02d}:{s:02d} authorMacBook-Pro "

    return _generate("mac_long_tail", 24, 2000, events, header)


# --- an HPC cluster's event log ---------------------------------------------------------------

HPC_EVENTS = [
    Event(
        "Component State Change: Component \\042{}\\042 is in the unavailable state (HWID={})",
        (pick("alt0", "scsi0", "ide1"), num(1000, 4000)),
        weight=10,
        burst=5,
    ),
    Event(
        "Component State Change: Component \\042{}\\042 is in the available state (HWID={})",
        (pick("alt0", "scsi0", "ide1"), num(1000, 4000)),
        weight=6,
    ),
    Event("clusterAddMember  (command {})", (num(1000, 3000),), weight=6),
    Event("halt (command {})", (num(1000, 3000),), weight=3),
    Event("boot (command {})", (num(1000, 3000),), weight=5),
    Event(
        "boot (command {}) Error: EBADF: Bad file descriptor - (from {})",
        (num(1000, 3000), pick("node-2", "node-31")),
        weight=2,
    ),
    Event("Linkerror event interval expired", weight=3),
    Event(
        "Link error on broadcast tree Interconnect-{}:{}:{}:{}",
        (pick("0T00", "1T00"), num(0, 15), num(0, 3), num(0, 7)),
        weight=2,
    ),
    Event(
        "NIFF: node {} has detected an available network connection on network {} via interface alt0",
        (lambda r: f"node-{r.randint(0, 255)}", ip("5.5")),
        weight=6,
    ),
    Event(
        "NIFF: node {} has detected an unavailable network connection on network {} via interface alt0",
        (lambda r: f"node-{r.randint(0, 255)}", ip("5.5")),
        weight=3,
    ),
    Event("running", weight=4),
    Event("not responding", weight=3),
    Event("configured out", weight=2),
    Event(
        "Targeting domains:node-D{} and nodes:node-[{}-{}] child of command {}",
        (num(0, 7), num(0, 31), num(32, 63), num(1000, 3000)),
        weight=2,
    ),
    Event("psu failure\\ ambient={}", (num(20, 40),), weight=1),
    Event("Temperature ({}C) exceeds warning threshold", (num(40, 80),), weight=2),
    Event("Fan speeds ( {} {} {} {} {} {} )", tuple(num(3000, 4500) for _ in range(6)), weight=2),
    Event("ServerFileSystem: domain storage{} is full", (num(0, 3),), weight=1),
    Event("PSU status ( {} {} )", (pick("on", "off"), pick("on", "off")), weight=1),
    Event("Command has completed successfully", weight=3),
    Event("Command Execution Failed (exit code {})", (num(1, 255),), weight=1),
    Event("Kernel panic - not syncing: Attempted to kill init!", weight=1),
]
_HPC_COMP = {
    "Component State": ("unix.hw", "state_change.unavailable"),
    "clusterAddMember": ("action", "start"),
    "halt": ("action", "start"),
    "boot": ("action", "start"),
    "Link": ("gige.components", "linkerror"),
    "NIFF": ("unix.hw", "net.niff.up"),
    "running": ("node", "status"),
    "not responding": ("node", "status"),
    "configured out": ("node", "status"),
    "Targeting": ("node", "boot"),
    "psu": ("node", "psu"),
    "PSU": ("node", "psu"),
    "Temperature": ("node", "temp"),
    "Fan": ("node", "fan"),
    "ServerFileSystem": ("domain", "fs"),
    "Command": ("action", "error"),
    "Kernel": ("node", "kernel"),
}


def hpc() -> LogVariant:
    def header(r: random.Random, i: int, e: Event) -> str:
        comp, state = next((v for k, v in _HPC_COMP.items() if e.fmt.startswith(k)), ("node", "status"))
        node = r.choice(("gige7", "switch_module")) if comp == "gige.components" else f"node-{r.randint(0, 255)}"
        return f"{134681 + i * 7 + r.randint(0, 6)} {node} {comp} {state} {1077804742 + i * 31} 1 "

    return _generate("hpc", 17, 2000, HPC_EVENTS, header)


# --- Windows CBS --------------------------------------------------------------------------------

CBS_EVENTS = [
    Event(
        "CBS    Loaded Servicing Stack v6.1.7601.{} with Core: C:\\Windows\\winsxs\\amd64_microsoft-windows-servicingstack_31bf3856ad364e35_6.1.7601.{}_none_{}\\cbscore.dll",
        (num(23000, 24000), num(23000, 24000), hexs(16, "")),
        weight=2,
    ),
    Event(
        "CSI    {}@2016/9/27:20:30:31.455 WcpInitialize (wcp.dll version 0.0.0.6) called (stack @{} @{} @{} @{})",
        (hexs(8, ""), hexs(11), hexs(11), hexs(8), hexs(8)),
        weight=2,
    ),
    Event("CBS    Ending TrustedInstaller initialization.", weight=2),
    Event("CBS    Starting the TrustedInstaller main loop.", weight=2),
    Event("CBS    TrustedInstaller service starts successfully.", weight=2),
    Event("CBS    SQM: Initializing online with Windows opt-in: False", weight=2),
    Event("CBS    SQM: Cleaning up report files older than 10 days.", weight=2),
    Event("CBS    SQM: Requesting upload of all unsent reports.", weight=2),
    Event(
        "CBS    SQM: Failed to start upload with file pattern: C:\\Windows\\servicing\\sqm\\*_std.sqm, flags: 0x2 [HRESULT = 0x80004005 - E_FAIL]",
        weight=2,
    ),
    Event("CBS    SQM: Failed to start standard sample upload. [HRESULT = 0x80004005 - E_FAIL]", weight=2),
    Event("CBS    NonStart: Checking to ensure startup processing was not required.", weight=2),
    Event("CBS    NonStart: Success, startup processing not required as expected.", weight=2),
    Event("CBS    Startup processing thread terminated normally", weight=2),
    Event(
        "CBS    Session: {}_{} initialized by client WindowsUpdateAgent.",
        (num(30546173, 30546999), num(1000000000, 4000000000)),
        weight=12,
        burst=3,
    ),
    Event(
        "CBS    Session: {}_{} finalized. Reboot required: no [HRESULT = 0x00000000 - S_OK]",
        (num(30546173, 30546999), num(1000000000, 4000000000)),
        weight=10,
    ),
    Event(
        "CBS    Read out cached package applicability for package: Package_for_KB{}~31bf3856ad364e35~amd64~~6.1.1.{}, ApplicableState: {}, CurrentState:{}",
        (num(2000000, 3999999), num(0, 9), pick("112", "80"), pick("112", "0")),
        weight=60,
        burst=8,
    ),
    Event("CBS    Failed to internally open package. [HRESULT = 0x800f0805 - CBS_E_INVALID_PACKAGE]", weight=3),
    Event("CBS    Failed to OpenPackage using worker session [HRESULT = 0x800f0805]", weight=3),
    Event("CBS    Warning: Unrecognized packageExtended attribute.", weight=6, burst=3),
    Event("CBS    Expecting attribute name [HRESULT = 0x800f080d - CBS_E_MANIFEST_INVALID_ITEM]", weight=6, burst=3),
    Event("CBS    Failed to get next element [HRESULT = 0x800f080d - CBS_E_MANIFEST_INVALID_ITEM]", weight=6, burst=3),
    Event(
        "CBS    Exec: Processing started.  Client: WindowsUpdateAgent, Session(Stack): {}_{}",
        (num(30546173, 30546999), num(1000000000, 4000000000)),
        weight=1,
    ),
    Event("CBS    Scavenge: Starts", weight=1),
    Event(
        'CSI    {} (F) STATUS_OBJECT_NAME_NOT_FOUND #{}# from Windows::Rtl::SystemImplementation::DirectFileSystemProvider::SysCreateFile(flags = (AllowSharingViolation), handle = {{provider=NULL, handle=0, name= ("null")}}, da = (SYNCHRONIZE|FILE_READ_ATTRIBUTES), oa = @{}->OBJECT_ATTRIBUTES {{s:48; rd:NULL; on:[{}]"\\??\\C:\\Windows\\Temp\\foo.log"; a:(OBJ_CASE_INSENSITIVE)}})[gle=0xd0000034]',
        (hexs(8, ""), num(100000, 999999), hexs(11), num(50, 90)),
        level="Error",
        weight=1,
    ),
    Event(
        "CBS    Warning: Failed to get the DPX storage for update: {} [HRESULT = 0x80070002 - ERROR_FILE_NOT_FOUND]",
        (pick("Package_for_KB3177467", "Package_for_KB2919355"),),
        weight=1,
    ),
    Event(
        "CBS    Appl: detect Parent, Package: Package_for_KB{}~31bf3856ad364e35~amd64~~6.1.1.{}, Parent: Microsoft-Windows-{}~31bf3856ad364e35~amd64~~6.1.7601.{}, Disposition = Detect, VersionComp: EQ, ServiceComp: GE, BuildComp: GE, DistributionComp: GE, RevisionComp: GE, Exist: present",
        (
            num(2000000, 3999999),
            num(0, 9),
            pick("Foundation", "Client-Features-Package", "RDP-WinIP-Package"),
            num(17514, 23505),
        ),
        weight=8,
    ),
    Event(
        "CBS    Appl: Evaluating package applicability for package Package_for_KB{}~31bf3856ad364e35~amd64~~6.1.1.{}, applicable state: {}",
        (num(2000000, 3999999), num(0, 9), pick("Installed", "Absent")),
        weight=6,
    ),
]


def windows_cbs() -> LogVariant:
    def header(r: random.Random, i: int, e: Event) -> str:
        _, d, h, mi, s, _ = _clock(20_000, i, 0.9)
        level = e.level if e.level != "INFO" else "Info"
        return f"2016-09-{28 + d // 28:02d} {h:02d}:{mi:02d}:{s:02d}, {level:<21} "

    return _generate("windows_cbs", 18, 2000, CBS_EVENTS, header)


# --- common formats -------------------------------------------------------------------------------

K8S_EVENTS = [
    Event(
        "reflector.go:{}] Listing and watching *v1.{} from k8s.io/client-go/informers/factory.go:134",
        (num(200, 300), pick("Pod", "Node", "Service", "Endpoints")),
        weight=8,
    ),
    Event(
        "controller.go:{}] Successfully synced '{}/{}'",
        (num(100, 200), pick("default", "kube-system", "prod"), word(8)),
        weight=20,
        burst=4,
    ),
    Event(
        'event.go:{}] Event(v1.ObjectReference{{Kind:"Pod", Namespace:"{}", Name:"{}"}}): type: \'Normal\' reason: \'Scheduled\' Successfully assigned to {}',
        (num(280, 290), pick("default", "prod"), word(10), lambda r: f"node-{r.randint(1, 40)}"),
        weight=6,
    ),
    Event(
        'kubelet.go:{}] SyncLoop (PLEG): "{}", event: &pleg.PodLifecycleEvent{{ID:"{}", Type:"ContainerStarted"}}',
        (num(2100, 2200), word(10), hexs(32, "")),
        weight=6,
    ),
    Event(
        'pod_workers.go:{}] Error syncing pod {}, skipping: failed to "StartContainer" for "{}" with CrashLoopBackOff: "back-off 5m0s restarting failed container"',
        (num(190, 200), hexs(32, ""), pick("api", "worker")),
        level="E",
        weight=2,
    ),
    Event(
        'remote_image.go:{}] PullImage "{}" from image service failed: rpc error: code = Unknown desc = Error response from daemon: manifest unknown',
        (num(100, 120), pick("registry.local/api:v2", "busybox:1.99")),
        level="E",
        weight=1,
    ),
    Event(
        "leaderelection.go:{}] successfully acquired lease kube-system/kube-controller-manager",
        (num(250, 260),),
        weight=1,
    ),
    Event(
        "leaderelection.go:{}] failed to renew lease kube-system/kube-controller-manager: timed out waiting for the condition",
        (num(270, 280),),
        level="E",
        weight=1,
    ),
    Event("server.go:{}] Started kubelet", (num(400, 420),), weight=1),
    Event(
        "kuberuntime_manager.go:{}] Container {} failed liveness probe, will be restarted",
        (num(600, 700), pick("api", "worker")),
        level="W",
        weight=1,
    ),
    Event(
        'trace.go:{}] Trace[{}]: "List etcd3" key:/pods,resourceVersion:,limit:500 (started: {}) (total time: {}ms):',
        (
            num(200, 210),
            num(100000000, 999999999),
            pick("2024-03-04 10:00:01.2", "2024-03-04 10:05:12.9"),
            num(100, 900),
        ),
        level="I",
        weight=2,
    ),
]


def klog() -> LogVariant:
    def header(r: random.Random, i: int, e: Event) -> str:
        mo, d, h, mi, s, ms = _clock(5_000_000, i, 0.7)
        lv = e.level if e.level in ("E", "W") else "I"
        return f"{lv}{mo:02d}{d:02d} {h:02d}:{mi:02d}:{s:02d}.{ms:03d}{r.randint(100, 999)} {r.randint(1, 40000):>7} "

    return _generate("klog", 19, 1500, K8S_EVENTS, header)


LOGFMT_EVENTS = [
    Event(
        'level=info msg="request served" method={} path={} status=200 duration={}ms',
        (pick("GET", "POST"), pick("/api/v1/users", "/api/v1/orders", "/healthz"), num(1, 900)),
        weight=30,
        burst=3,
    ),
    Event(
        'level=info msg="cache hit" key={} ttl={}s', (lambda r: f"user:{r.randint(1, 9999)}", num(10, 3600)), weight=10
    ),
    Event('level=debug msg="cache miss" key={}', (lambda r: f"user:{r.randint(1, 9999)}",), weight=8),
    Event('level=warn msg="slow query" table={} duration={}ms', (pick("users", "orders"), num(500, 5000)), weight=3),
    Event(
        'level=error msg="upstream timeout" upstream={} attempt={}',
        (pick("billing:8080", "auth:9000"), num(1, 3)),
        weight=2,
    ),
    Event(
        'level=error msg="panic recovered" err="runtime error: index out of range [{}] with length {}"',
        (num(1, 9), num(0, 1)),
        weight=1,
    ),
    Event('level=info msg="connection pool resized" size={}', (num(5, 50),), weight=1),
    Event('level=info msg="config reloaded" version={}', (num(100, 200),), weight=1),
    Event('level=warn msg="permission denied" user={} resource={}', (word(5), pick("/admin", "/billing")), weight=1),
]


def logfmt() -> LogVariant:
    def header(r: random.Random, i: int, e: Event) -> str:
        mo, d, h, mi, s, ms = _clock(3_000_000, i, 0.4)
        return f'time="2024-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}.{ms:03d}Z" '

    return _generate("logfmt", 20, 1500, LOGFMT_EVENTS, header)


PYLOG_EVENTS = [
    Event(
        'INFO:uvicorn.access:{} - "GET {} HTTP/1.1" 200',
        (ip("172.18"), pick("/items/1", "/items/2", "/health", "/docs")),
        weight=30,
        burst=3,
    ),
    Event("INFO:app.worker:processed job {} in {} s", (num(1000, 9999), pick("0.12", "0.45", "1.20")), weight=15),
    Event("WARNING:app.worker:job {} retried ({} of 5)", (num(1000, 9999), num(1, 4)), weight=3),
    Event("ERROR:app.worker:job {} failed", (num(1000, 9999),), weight=1),
    Event(
        "DEBUG:urllib3.connectionpool:Starting new HTTPS connection ({}): {}:443",
        (num(1, 5), pick("api.example.com", "s3.amazonaws.com")),
        weight=6,
    ),
    Event(
        'DEBUG:urllib3.connectionpool:https://{}:443 "POST {} HTTP/1.1" {} {}',
        (
            pick("api.example.com", "s3.amazonaws.com"),
            pick("/v1/upload", "/v1/ping"),
            pick("200", "201"),
            num(10, 9000),
        ),
        weight=6,
    ),
    Event(
        "INFO:app.scheduler:next run at {}",
        (lambda r: f"2024-05-0{r.randint(1, 9)} {r.randint(10, 23)}:00:00",),
        weight=2,
    ),
    Event("CRITICAL:app.db:connection lost to {}", (pick("db-primary:5432", "db-replica:5432"),), weight=1),
]


def pylogging() -> LogVariant:
    def header(r: random.Random, i: int, e: Event) -> str:
        return ""

    def extra(r: random.Random, i: int, e: Event, line: str) -> list[str]:
        if not line.startswith("ERROR:app.worker"):
            return []
        return [
            "Traceback (most recent call last):",
            '  File "/srv/app/worker.py", line 88, in run',
            "    result = handler(job)",
            '  File "/srv/app/handlers.py", line 41, in handle',
            '    raise ValueError(f"bad payload {job.id}")',
            f"ValueError: bad payload {r.randint(1000, 9999)}",
        ]

    return _generate("pylogging", 21, 1500, PYLOG_EVENTS, header, extra=extra)


NGINX_EVENTS = [
    Event(
        '"GET {} HTTP/1.1" 200 {} "-" "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"',
        (pick("/", "/index.html", "/static/app.js", "/static/app.css", "/favicon.ico"), num(100, 90000)),
        weight=40,
        burst=3,
    ),
    Event(
        '"POST /api/login HTTP/1.1" {} {} "https://example.com/login" "curl/8.5.0"',
        (pick("200", "401"), num(20, 400)),
        weight=6,
    ),
    Event('"GET /wp-login.php HTTP/1.1" 404 {} "-" "python-requests/2.31"', (num(100, 200),), weight=3),
    Event('"GET /api/items?page={} HTTP/2.0" 200 {} "-" "okhttp/4.12.0"', (num(1, 90), num(100, 9000)), weight=8),
    Event('"GET /admin HTTP/1.1" 403 {} "-" "Mozilla/5.0"', (num(100, 200),), weight=1),
    Event('"GET /api/report HTTP/1.1" 500 {} "-" "okhttp/4.12.0"', (num(100, 200),), weight=1),
]


def nginx() -> LogVariant:
    def header(r: random.Random, i: int, e: Event) -> str:
        _, d, h, mi, s, _ = _clock(1_000_000, i, 0.5)
        return f"{r.randint(1, 223)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)} - - [{d:02d}/Mar/2024:{h:02d}:{mi:02d}:{s:02d} +0000] "

    return _generate("nginx", 22, 1500, NGINX_EVENTS, header)


PG_EVENTS = [
    Event("LOG:  checkpoint starting: time", weight=4),
    Event(
        "LOG:  checkpoint complete: wrote {} buffers ({}%); 0 WAL file(s) added, 0 removed, {} recycled; write={} s, sync={} s, total={} s",
        (
            num(10, 9000),
            pick("0.1", "1.2", "4.0"),
            num(0, 3),
            pick("26.9", "3.1"),
            pick("0.002", "0.010"),
            pick("27.0", "3.2"),
        ),
        weight=4,
    ),
    Event(
        "LOG:  duration: {} ms  statement: SELECT * FROM {} WHERE id = {}",
        (pick("1.203", "55.1", "310.7"), pick("users", "orders"), num(1, 99999)),
        weight=25,
        burst=3,
    ),
    Event("LOG:  connection received: host={} port={}", (ip("172.17"), num(30000, 60000)), weight=10),
    Event(
        "LOG:  connection authorized: user={} database={} application_name={}",
        (pick("app", "report"), pick("shop", "analytics"), pick("psql", "rails")),
        weight=10,
    ),
    Event(
        "LOG:  disconnection: session time: {} user={} database={} host={} port={}",
        (
            pick("0:00:01.203", "0:12:44.810"),
            pick("app", "report"),
            pick("shop", "analytics"),
            ip("172.17"),
            num(30000, 60000),
        ),
        weight=10,
    ),
    Event(
        'ERROR:  duplicate key value violates unique constraint "{}"',
        (pick("users_email_key", "orders_pkey"),),
        weight=2,
    ),
    Event("DETAIL:  Key (email)=({}@example.com) already exists.", (word(6),), weight=2),
    Event("STATEMENT:  INSERT INTO users (email) VALUES ($1)", weight=2),
    Event('FATAL:  password authentication failed for user "{}"', (pick("admin", "postgres"),), weight=1),
    Event("WARNING:  there is no transaction in progress", weight=1),
    Event(
        'LOG:  automatic vacuum of table "{}": index scans: {}',
        (pick("shop.public.orders", "shop.public.users"), num(0, 2)),
        weight=3,
    ),
]


def postgres() -> LogVariant:
    def header(r: random.Random, i: int, e: Event) -> str:
        mo, d, h, mi, s, ms = _clock(7_000_000, i, 1.1)
        return f"2024-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}.{ms:03d} UTC [{r.randint(100, 99999)}] "

    return _generate("postgres", 23, 1500, PG_EVENTS, header)


VARIANTS: dict[str, Callable[[], LogVariant]] = {
    "bgl": bgl,
    "thunderbird": thunderbird,
    "android": android,
    "healthapp": healthapp,
    "proxifier": proxifier,
    "mac": mac,
    "mac_long_tail": mac_long_tail,
    "hpc": hpc,
    "windows_cbs": windows_cbs,
    "klog": klog,
    "logfmt": logfmt,
    "pylogging": pylogging,
    "nginx": nginx,
    "postgres": postgres,
}


def variant(name: str) -> LogVariant:
    """The generated log ``name`` (a key of :data:`VARIANTS`)."""
    return VARIANTS[name]()


# --- judging a compressed log -----------------------------------------------------------------


def template_regex(template: str) -> re.Pattern[str]:
    """A ground-truth template as a regular expression: its literal parts in order, ``<*>``
    standing for anything (loghub's convention)."""
    return re.compile(".*?".join(re.escape(part) for part in template.split("<*>")))


_SUMMARY_RE = re.compile(r"^(\d+)× (.+)$")
_PLACEHOLDER_RE = re.compile(r"<(?:\*|NUM|TS|IP|HEX|ID)>")


def summary_regex(template: str) -> re.Pattern[str]:
    """A template of the compressor's own summary (``412× Failed password for <*> from <IP> …``)
    as a regular expression: literal parts in order, each placeholder standing for anything,
    a space for any run of blanks."""
    parts = [re.escape(p).replace("\\ ", r"\s+") for p in _PLACEHOLDER_RE.split(template)]
    return re.compile(".*?".join(parts))


def represented(error: str, out_lines: list[str]) -> bool:
    """Whether the error line ``error`` is represented in a compressed log's ``out_lines``:
    kept verbatim, or folded as a repeat of its kind: a summary line counts a template that
    matches it, and a line of that template is shown verbatim."""
    if error in out_lines:
        return True
    shown = [ln for ln in out_lines if not _SUMMARY_RE.match(ln)]
    for ln in out_lines:
        m = _SUMMARY_RE.match(ln)
        if m:
            rx = summary_regex(m.group(2))
            if rx.search(error) and any(rx.search(k) for k in shown):
                return True
    return False


@dataclass(frozen=True)
class Retention:
    """How much of a log a compressed text still shows: ground-truth templates found in some
    output line (a kept line or a template summary line), error lines represented
    (:func:`represented`: verbatim, or a shown line of their template and its count), and the
    lists of what was lost."""

    templates: int
    templates_total: int
    errors: int
    errors_total: int
    lost_templates: tuple[str, ...]
    lost_errors: tuple[str, ...]


def retention(output: str, lines: list[str] | tuple[str, ...], templates: list[str] | tuple[str, ...]) -> Retention:
    """Judge ``output`` (a compressed log) against the original ``lines`` and ground-truth
    ``templates``; error lines are those :func:`is_error_word_line` picks."""
    out_lines = [ln.rstrip("\r") for ln in output.split("\n")]
    out_set = set(out_lines)
    lost_t = tuple(t for t in templates if not any(template_regex(t).search(ln) for ln in out_lines))
    errors = [ln for ln in lines if ln.strip() and is_error_word_line(ln)]
    lost_e = tuple(e for e in errors if e.rstrip("\r") not in out_set and not represented(e.rstrip("\r"), out_lines))
    return Retention(
        len(templates) - len(lost_t), len(templates), len(errors) - len(lost_e), len(errors), lost_t, lost_e
    )
