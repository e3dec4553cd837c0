"""Transport guards: bodies signed over their bytes pass untouched (issue 13, case 6); a gzip bomb
is decoded in slices and refused at the size limit with bounded memory (issue 17, case 5); the
pieces underneath (content decoding, body signatures, raw JSON) on their own."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import brotli
import pytest
import zstandard

from headroom_core.wire import rawjson
from headroom_core.wire.decode import TooLarge, decode_limited, decoder_for
from headroom_core.wire.signed import body_signature
from tests.support.clients import http_client
from tests.support.proxy import ADDON_SCRIPT, REPO_ROOT
from tests.unit.test_request_plan import anthropic_request, github_scenario

LIMIT = 4_000_000


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(
        ADDON_SCRIPT, options={"headroom_max_body_bytes": LIMIT, "headroom_compress_timeout_seconds": 300}
    )


def gzip_bomb(decoded_mib: int) -> bytes:
    """A JSON Messages body that decodes to ``decoded_mib`` MiB: one gzip member per MiB of
    ``A`` (about 1 KB each; RFC 1952 allows members one after another)."""
    member = gzip.compress(b"A" * (1 << 20), compresslevel=9)
    head = gzip.compress(b'{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"')
    return head + member * decoded_mib + gzip.compress(b'"}]}')


# -- content decoding -------------------------------------------------------------------------

PAYLOAD = json.dumps({"messages": [{"role": "user", "content": "é" * 5000 + "x" * 70000}]}).encode()


@pytest.mark.parametrize(
    "coding,encode",
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw DEFLATE, as some servers send it
        ("br", brotli.compress),
        ("zstd", lambda b: zstandard.ZstdCompressor().compress(b)),
        ("gzip, br", lambda b: brotli.compress(gzip.compress(b))),
        ("identity", lambda b: b),
    ],
    ids=["gzip", "x-gzip", "deflate", "raw-deflate", "br", "zstd", "gzip-then-br", "identity"],
)
def test_every_coding_decodes_whole_and_in_pieces(coding, encode):
    data = encode(PAYLOAD)
    assert decode_limited(data, coding, len(PAYLOAD)) == PAYLOAD
    d = decoder_for(coding)
    if d is None:
        return
    out = b"".join(d.feed(data[i : i + 13]) for i in range(0, len(data), 13)) + d.flush()
    assert out == PAYLOAD


def test_gzip_members_one_after_another():
    assert decode_limited(gzip.compress(b"ab") + gzip.compress(b"cd"), "gzip", 10) == b"abcd"


@pytest.mark.parametrize(
    "coding,data", [("gzip", b"not gzip"), ("br", b"\xff\xff\xff\xff"), ("zstd", b"nope"), ("compress", b"x")]
)
def test_corrupt_or_unknown_coding_is_an_error(coding, data):
    with pytest.raises(ValueError):
        decode_limited(data, coding, 1000)


def test_truncated_gzip_is_an_error():
    with pytest.raises(ValueError):
        decode_limited(gzip.compress(PAYLOAD)[:-20], "gzip", len(PAYLOAD))


@pytest.mark.parametrize(
    "coding,encode",
    [
        ("gzip", gzip.compress),
        ("br", brotli.compress),
        ("zstd", lambda b: zstandard.ZstdCompressor().compress(b)),
        ("identity", lambda b: b),
    ],
)
def test_over_the_limit_is_too_large(coding, encode):
    with pytest.raises(TooLarge) as e:
        decode_limited(encode(b"z" * 500_000), coding, 100_000)
    assert e.value.limit == 100_000 and e.value.size > 100_000


def test_gzip_bomb_is_stopped_with_bounded_memory():
    """1 MB of gzip that would decode to 1 GiB, in a fresh interpreter that imports only the
    decoder: refused at the 32 MiB limit, and the process's peak resident memory grows by far
    less than the bomb's size while decoding."""
    code = textwrap.dedent(
        """
        import gzip, resource, sys
        sys.path.insert(0, sys.argv[1])
        from headroom_core.wire.decode import TooLarge, decode_limited
        member = gzip.compress(b"A" * (1 << 20), compresslevel=9)
        body = gzip.compress(b'{"messages":[{"role":"user","content":"') + member * 1024 + gzip.compress(b'"}]}')
        del member
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        try:
            decode_limited(body, "gzip", 32 << 20)
            print("decoded?!")
        except TooLarge as e:
            print(len(body), e.size, before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(REPO_ROOT)], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT
    )
    assert out.returncode == 0, out.stderr
    size, stopped_at, before_mib, peak_mib = map(int, out.stdout.split())
    print(
        f"\ngzip bomb: {size} B encoded (1 GiB decoded), stopped at {stopped_at} B, peak RSS {before_mib} -> {peak_mib} MiB"
    )
    assert size < 1_100_000 and (32 << 20) < stopped_at < (33 << 20)
    assert peak_mib - before_mib < 200  # decoding it in full would need more than 1024


# -- body signatures --------------------------------------------------------------------------

SIGV4 = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20250801/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-headroom-project, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"


@pytest.mark.parametrize(
    "headers,path,scheme",
    [
        ({"authorization": SIGV4, "x-amz-content-sha256": "a" * 64}, "/v1/messages", "AWS SigV4"),
        (
            {"authorization": SIGV4},
            "/model/anthropic.claude/invoke",
            "AWS SigV4",
        ),  # botocore signs the payload without the header
        ({"authorization": "AWS4-ECDSA-P256-SHA256 Credential=x, SignedHeaders=host, Signature=y"}, "/x", "AWS SigV4a"),
        (
            {},
            "/v1/messages?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=abc&X-Amz-SignedHeaders=host",
            "AWS SigV4 (presigned URL)",
        ),
        ({"authorization": SIGV4, "x-amz-content-sha256": "UNSIGNED-PAYLOAD"}, "/v1/messages", None),
        ({"authorization": SIGV4, "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER"}, "/v1/messages", None),
        ({"authorization": "Bearer sk-ant-xyz"}, "/v1/messages", None),
        ({"x-api-key": "k", "x-amz-content-sha256": "a" * 64}, "/v1/messages", None),
    ],
)
def test_body_signature(headers, path, scheme):
    sig = body_signature(headers, path)
    assert (sig.scheme if sig else None) == scheme
    if sig and "Credential=AKIDEXAMPLE" in headers.get("authorization", ""):
        assert sig.signed_headers == {"content-type", "host", "x-amz-date", "x-headroom-project"}


# -- raw JSON ---------------------------------------------------------------------------------


def test_rawjson_writes_any_parsed_string_and_keeps_raw_values():
    value = json.loads('{"s": "\\ud83d", "t": "é\\u2028", "n": 1}')
    text = rawjson.dumps({**value, "big": rawjson.Raw("1e400"), "f": rawjson.Raw("0.10000000000000000000001")})
    text.encode("utf-8")
    assert text == '{"s":"\\ud83d","t":"é\u2028","n":1,"big":1e400,"f":0.10000000000000000000001}'
    assert json.loads(text)["s"] == "\ud83d"
    with pytest.raises(ValueError):
        rawjson.dumps(float("inf"))


def test_rawjson_members_and_edits_keep_every_other_byte():
    text = '{"type": "content_block_delta", "index": 3 ,"delta":{"type":"text_delta","text":"\\ud83d"},"n":1e400}'
    m = rawjson.members(text)
    assert [(k, v.text) for k, v in m.items()] == [
        ("type", '"content_block_delta"'),
        ("index", "3"),
        ("delta", '{"type":"text_delta","text":"\\ud83d"}'),
        ("n", "1e400"),
    ]
    assert (
        rawjson.with_member(text, "index", 0)
        == '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\\ud83d"},"n":1e400}'
    )
    for bad in ('{"a":1', "[1]", '{"a":1} x', ""):
        with pytest.raises(ValueError):
            rawjson.members(bad)


def test_append_to_array_keeps_the_prefix_byte_for_byte():
    request = '{"model": "m",\n "messages": [ {"role": "user", "content": "\\ud83d 1e400"} ] , "stream": true}'
    out = rawjson.append_to_array(
        request, "messages", [{"role": "assistant", "content": rawjson.Raw('[{"type":"text","text":"x"}]')}]
    )
    i = request.index("} ]")
    assert out[: i + 1] == request[: i + 1] and json.loads(out)["messages"][-1]["content"][0]["text"] == "x"
    assert rawjson.append_to_array('{"messages":[]}', "messages", [1, 2]) == '{"messages":[1,2]}'


# -- end to end through mitmdump --------------------------------------------------------------


def test_signed_body_passes_byte_identical(upstream, proxy):
    """A SigV4-signed Messages request whose tool output the proxy would otherwise compress:
    the upstream gets exactly the client's bytes, including a signed ``x-headroom-*`` header;
    an unsigned-payload request with the same body is compressed (the contrast)."""
    request = anthropic_request(github_scenario("paginate-issues.json"))
    body = json.dumps(request).encode()
    # Bedrock's InvokeModel body: the model is in the path, the API version in the body
    invoke = json.dumps(
        {**{k: v for k, v in request.items() if k != "model"}, "anthropic_version": "bedrock-2023-05-31"}
    ).encode()

    def signed_headers(b: bytes) -> dict:
        return {
            "authorization": SIGV4,
            "x-amz-date": "20250801T000000Z",
            "x-amz-content-sha256": hashlib.sha256(b).hexdigest(),
            "x-headroom-project": "signed",
            "content-type": "application/json",
        }

    signed = signed_headers(body)
    with http_client(proxy) as c:
        for path, b in (("/v1/messages", body), ("/model/anthropic.claude-sonnet-4/invoke", invoke)):
            r = c.post(upstream.url + path, content=b, headers=signed_headers(b))
            assert r.status_code == 200, r.text
            got = upstream.last
            assert got.body == b and got.path == path
            assert got.header("x-headroom-project") == "signed" and got.header("authorization") == SIGV4
        r = c.post(
            upstream.url + "/v1/messages", content=body, headers={**signed, "x-amz-content-sha256": "UNSIGNED-PAYLOAD"}
        )
        assert r.status_code == 200 and len(upstream.last.body) < len(body)
        assert upstream.last.header("x-headroom-project") is None  # not signed: removed as always
    assert "body signed (AWS SigV4)" in proxy.log_text()


@pytest.mark.parametrize("path,shape", [("/v1/messages", "anthropic"), ("/v1/chat/completions", "openai")])
def test_gzip_bomb_gets_413_before_it_is_decoded(upstream, proxy, path, shape):
    bomb = gzip_bomb(1024)
    with http_client(proxy) as c:
        r = c.post(
            upstream.url + path, content=bomb, headers={"content-encoding": "gzip", "content-type": "application/json"}
        )
    assert r.status_code == 413
    err = r.json()
    if shape == "anthropic":
        assert err["type"] == "error" and err["error"]["type"] == "request_too_large"
    else:
        assert err["error"]["code"] == "request_too_large"
    assert "max_body_bytes" in json.dumps(err)
    assert upstream.requests == []  # never forwarded
    peak = _peak_rss_mib(proxy)
    print(f"\nmitmdump peak RSS after a 1 GiB gzip bomb: {peak} MiB")
    assert peak < 2048  # decoding it in full reached 2.6-3.3 GiB


def _peak_rss_mib(proxy) -> int:
    status = Path(f"/proc/{proxy.process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) // 1024
