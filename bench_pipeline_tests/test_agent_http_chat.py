"""The http-chat agent through its real client (kept-alive http.client connections; httpx
behind a proxy) against a scripted server on 127.0.0.1."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import time

import pytest

from bench_pipeline.agents import http_chat
from bench_pipeline.agents.base import BUDGET, COMPLETED, ERROR, make_agent
from bench_pipeline.agents.http_chat import HttpChatAgent
from bench_pipeline.agents.tls import shared_ssl_context
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.model import FrozenText, Turn
from bench_pipeline.workspace.process import scrubbed_env
from bench_pipeline_tests.http_fakes import Recorded, Reply, ScriptedServer
from bench_pipeline_tests.test_agent_support import make_request, make_spec, make_task

KEY = "sk-chat-SECRET-abcdef123456"


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setattr(HttpChatAgent, "RETRY_BASE_DELAY", 0.01)


def chat_reply(text: str, prompt_tokens=100, completion_tokens=10, cached=None) -> Reply:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return Reply(
        200,
        {
            "id": "c1",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        },
    )


TURNS = (Turn("What is 2+2?"), Turn("Multiply that by 10."), Turn("Now halve it."))
ANSWERS = ["4", "40", "20"]


def scenario_handler(rec: Recorded) -> Reply:
    """Answers turn N only if the request carries turns 1..N-1 with our earlier answers."""
    time.sleep(0.05)
    msgs = rec.body["messages"]
    users = [m["content"] for m in msgs if m["role"] == "user"]
    assistants = [m["content"] for m in msgs if m["role"] == "assistant"]
    n = len(users)
    expected_users = [t.user for t in TURNS[:n]]
    if users != expected_users or assistants != ANSWERS[: n - 1] or msgs[-1]["role"] != "user":
        return Reply(400, {"error": f"conversation lost: {msgs}"})
    return chat_reply(ANSWERS[n - 1], prompt_tokens=100 * n, completion_tokens=5, cached=50)


def test_three_turn_scenario_sends_history_and_records_turns(tmp_path):
    with ScriptedServer(handler=scenario_handler) as server:
        spec = make_spec(
            "http-chat", url=server.url + "/v1", model="gpt-test", api_key_env="CHAT_KEY",
            env=("CHAT_KEY",), system_prompt=FrozenText("p.md", "Be brief.", "h"),
        )  # fmt: skip
        task = make_task(text=True, prompt="What is 2+2?", turns=TURNS)
        req = make_request(
            tmp_path, spec, task=task, env=scrubbed_env(extra={"CHAT_KEY": KEY}), secrets=(KEY,)
        )
        result = make_agent(spec).run(req)
    assert result.status == COMPLETED, result.error
    assert result.answer == "20"
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 3
    for r in server.requests:
        assert r.body["model"] == "gpt-test"
        assert r.body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert {k.lower(): v for k, v in r.headers.items()}["authorization"] == f"Bearer {KEY}"
    assert len(server.requests[2].body["messages"]) == 6  # system + 3 users + 2 answers
    assert [t["response"] for t in result.turns] == ANSWERS
    assert [t["user"] for t in result.turns] == [t.user for t in TURNS]
    assert all(t["latency_ms"] >= 50 for t in result.turns)
    assert [t["prompt_tokens"] for t in result.turns] == [100, 200, 300]
    # turn 2: 150 uncached * 1.25 + 50 cached * 0.125 + 5 * 10 per million
    assert result.turns[1]["cost_usd"] == pytest.approx((187.5 + 6.25 + 50) / 1e6)
    total = sum(t["cost_usd"] for t in result.turns)
    assert result.usage.cost_usd == pytest.approx(total)
    assert result.usage.input_tokens == 450 and result.usage.cache_read_tokens == 150
    assert KEY not in req.transcript.path.read_text()


def test_single_prompt_unpriced_model_and_second_attempt(tmp_path):
    replies = [chat_reply("first"), chat_reply("second")]
    state: dict = {}
    with ScriptedServer(replies=replies) as server:
        spec = make_spec("http-chat", url=server.url, model="unpriced")
        agent = make_agent(spec)
        r1 = agent.run(make_request(tmp_path, spec, state=state))
        r2 = agent.run(make_request(tmp_path, spec, state=state, prompt="AC-1 failed", attempt=2))
    assert r1.status == r2.status == COMPLETED
    assert len(r1.turns) == 1 and r1.answer == "first"
    assert r1.usage.cost_usd is None and "unpriced" in r1.usage.cost_unknown_reason
    assert r1.turns[0]["cost_usd"] is None
    assert server.requests[1].body["messages"] == [
        {"role": "user", "content": "Do the thing."},
        {"role": "assistant", "content": "first"},
        {"role": "user", "content": "AC-1 failed"},
    ]
    assert "authorization" not in {k.lower() for k in server.requests[0].headers}


def test_retries_then_success_and_budget(tmp_path):
    limited = Reply(429, {"error": "slow down"})
    with ScriptedServer(replies=[limited, Reply(503, "x"), chat_reply("4"), chat_reply("x")]) as s:
        # turn 1 costs 100*1.25 + 10*10 = 225 micro-dollars > budget
        spec = make_spec("http-chat", url=s.url, model="gpt-test", budget_usd=0.0001)
        task = make_task(text=True, turns=TURNS)
        result = make_agent(spec).run(make_request(tmp_path, spec, task=task))
        assert len(s.requests) == 3
    assert result.status == BUDGET and result.retries == 2
    assert len(result.turns) == 1 and result.turns[0]["retries"] == 2


def test_client_error_is_not_retried(tmp_path):
    with ScriptedServer(replies=[Reply(401, {"error": "bad key"}), chat_reply("no")]) as s:
        spec = make_spec("http-chat", url=s.url, model="gpt-test")
        result = make_agent(spec).run(make_request(tmp_path, spec))
        assert len(s.requests) == 1
    assert result.status == ERROR and "HTTP 401" in result.error
    assert result.usage.cost_usd is None


def test_preflight():
    with pytest.raises(BenchInputError, match="url"):
        HttpChatAgent(make_spec("http-chat")).preflight({})
    spec = make_spec("http-chat", url="http://127.0.0.1:9", api_key_env="K", env=("K",))
    with pytest.raises(BenchInputError, match="K is not set"):
        HttpChatAgent(spec).preflight({})
    HttpChatAgent(spec).preflight({"K": "v"})


def test_connections_are_kept_alive_and_a_closed_one_is_replaced(tmp_path):
    """Cases reuse one connection; one the server closed (announced, or silently while it
    idled) is replaced without resending or losing a request."""
    replies = [chat_reply("a"), chat_reply("b"), chat_reply("c", completion_tokens=3)]
    replies[1].headers["connection"] = "close"
    with ScriptedServer(replies=[*replies, chat_reply("d")], idle_timeout=0.5) as s:
        spec = make_spec("http-chat", url=s.url, model="gpt-test")
        agent = make_agent(spec)
        answers = [agent.run(make_request(tmp_path, spec)).answer for _ in range(3)]
        assert answers == ["a", "b", "c"] and s.connections == 2  # the close forced a new one
        deadline = time.monotonic() + 60
        while s.closed < 2 and time.monotonic() < deadline:  # the idle one times out
            time.sleep(0.05)
        assert s.closed == 2
        result = agent.run(make_request(tmp_path, spec))
        assert result.status == COMPLETED and result.answer == "d" and result.retries == 0
        assert len(s.requests) == 4 and s.connections == 3


def test_refused_connection_is_retried_then_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(HttpChatAgent, "MAX_RETRIES", 1)  # one retry shows it; eight add ~2.5 s
    with ScriptedServer() as s:
        url = s.url
    spec = make_spec("http-chat", url=url, model="gpt-test")  # nothing listens there now
    result = make_agent(spec).run(make_request(tmp_path, spec))
    assert result.status == ERROR and "retries failed" in result.error
    assert "ConnectionRefusedError" in result.error


def test_a_proxy_from_the_environment_carries_the_request(tmp_path, monkeypatch):
    with ScriptedServer(replies=[chat_reply("via proxy")]) as proxy:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        # port 9 (discard): nothing answers there; only the proxy can
        spec = make_spec("http-chat", url="http://127.0.0.1:9/v1", model="gpt-test")
        result = make_agent(spec).run(make_request(tmp_path, spec))
    assert result.status == COMPLETED and result.answer == "via proxy"
    assert [r.path for r in proxy.requests] == ["http://127.0.0.1:9/v1/chat/completions"]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl program")
def test_https_endpoint_is_verified_and_kept_alive(tmp_path, monkeypatch):
    """TLS through the process's shared context: a certificate it does not trust is a transport
    failure; once its CA is trusted, two cases go over one verified connection."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    # The agent's context as the process builds it, but this test's own: trusting the test's CA
    # must not outlive the test (the process shares one context between every client).
    trusted = shared_ssl_context.__wrapped__()
    monkeypatch.setattr(http_chat, "shared_ssl_context", lambda: trusted)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    with ScriptedServer(replies=[chat_reply("one"), chat_reply("two")]) as s:
        s._httpd.socket = tls.wrap_socket(s._httpd.socket, server_side=True)
        spec = make_spec("http-chat", url=s.url.replace("http:", "https:"), model="gpt-test")
        agent = make_agent(spec)
        monkeypatch.setattr(HttpChatAgent, "MAX_RETRIES", 0)
        refused = agent.run(make_request(tmp_path, spec))
        assert refused.status == ERROR and "CERTIFICATE_VERIFY_FAILED" in refused.error
        assert s.requests == []
        trusted.load_verify_locations(cert)  # trust the test's CA from now on
        answers = [agent.run(make_request(tmp_path, spec)).answer for _ in range(2)]
    # one connection served both (the refused handshake never reached a request handler)
    assert answers == ["one", "two"] and s.connections == 1
