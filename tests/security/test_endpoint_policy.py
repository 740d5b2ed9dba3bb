"""The endpoint policy holds on the address actually connected to.

A resolver we control stands in for DNS (no real lookup happens), and every
socket the HTTP stack opens is recorded: a name that answers the policy's
check with a loopback address and the connection with a public one (DNS
rebinding) must never get a socket, on any path.
"""
import ipaddress

import httpcore._backends.sync as sync_backend
import pytest
from fake_server import FakeServer, Script

from engine import Workbench, WorkbenchError
from engine.errors import NarratorError, TurnFailed
from engine.providers import Prompt, endpoints
from engine.providers import window as windows
from engine.providers.connection import check_connection
from engine.providers.embedders import OpenAIEmbedder
from engine.providers.endpoints import EndpointRefused, rejection_reason
from engine.providers.http import make_client, read_json
from engine.providers.openai import OpenAINarrator
from engine.settings import Settings

PUBLIC = "93.184.216.34"


@pytest.fixture
def sockets(monkeypatch):
    """Every address a socket is opened to, by the HTTP stack."""
    opened = []
    real = sync_backend.socket.create_connection

    def recording(address, *args, **kwargs):
        opened.append(address[0])
        return real(address, *args, **kwargs)

    monkeypatch.setattr(sync_backend.socket, "create_connection", recording)
    return opened


@pytest.fixture
def server():
    windows.cache_clear()
    with FakeServer(Script(kind="ollama", loaded={"story-model": 4096})) as s:
        yield s


def loopback_only(opened):
    return all(ipaddress.ip_address(a).is_loopback for a in opened)


def paths(base, client):
    """Every way the workbench reaches a server, each with this client."""
    native = windows.native_base(base)
    prompt = Prompt("You narrate.", "> You open the door.")
    return {
        "chat": lambda: list(OpenAINarrator(base, "story-model", client=client).execute(prompt)),
        "completion": lambda: list(OpenAINarrator(base, "story-model", api_mode="completion",
                                                  client=client).execute(prompt)),
        "embeddings": lambda: OpenAIEmbedder(base, "embed-model", client=client).embed(["a door"]),
        "/api/ps": lambda: read_json(client, "GET", f"{native}/api/ps"),
        "/api/show": lambda: read_json(client, "POST", f"{native}/api/show", json={"model": "story-model"}),
        "/props": lambda: read_json(client, "GET", f"{native}/props"),
        "/v1/models": lambda: read_json(client, "GET", f"{base}/models"),
        "/tokenize": lambda: read_json(client, "POST", f"{native}/tokenize", json={"content": "x"}),
    }


@pytest.mark.parametrize("path", ["chat", "completion", "embeddings", "/api/ps", "/api/show", "/props",
                                  "/v1/models", "/tokenize"])
@pytest.mark.parametrize("answer", [[PUBLIC], ["127.0.0.1", PUBLIC], ["169.254.169.254"]])
def test_a_rebinding_name_never_reaches_an_unapproved_address(monkeypatch, sockets, server, path, answer):
    base = f"http://model-box.lan:{server.port}/v1"
    monkeypatch.setattr(endpoints, "resolve", lambda host: ["127.0.0.1"])  # what any check sees
    assert rejection_reason(base) is None
    client = make_client(resolver=lambda host: answer)  # what the connection sees
    with pytest.raises((EndpointRefused, NarratorError), match="can't be used"):
        paths(base, client)[path]()
    assert sockets == [] and server.requests == []


def test_window_probe_and_connection_test_refuse_a_rebinding_name(monkeypatch, sockets, server):
    base = f"http://model-box.lan:{server.port}/v1"
    monkeypatch.setattr(endpoints, "resolve", lambda host: ["127.0.0.1"])
    client = make_client(resolver=lambda host: [PUBLIC])
    window = windows.probe(client, base, "story-model")
    assert window.tokens is None and "not allowed" in window.detail
    report = check_connection(Settings(narrator="endpoint", endpoint_url=base, model="story-model"), client=client)
    assert not report.reachable and PUBLIC in report.detail
    assert sockets == [] and server.requests == []


def test_an_approved_name_connects_to_the_checked_address_and_keeps_its_host(sockets, server):
    base = f"http://model-box.lan:{server.port}/v1"
    client = make_client(resolver=lambda host: ["127.0.0.1"])
    for name, call in paths(base, client).items():
        if name != "embeddings":
            call()
    assert sockets and loopback_only(sockets)
    assert set(server.hosts) == {f"model-box.lan:{server.port}"}


def test_a_workbench_turn_is_refused_when_its_name_starts_resolving_to_a_public_address(
        monkeypatch, sockets, server, db_path):
    answers = {"now": ["127.0.0.1"]}
    monkeypatch.setattr(endpoints, "resolve", lambda host: answers["now"])
    wb = Workbench.open(db_path, background=False)
    wb.configure(endpoint=f"http://model-box.lan:{server.port}/v1", model="story-model", embedder="none",
                 memory_enabled=False, auto_summarize=False)
    camp = wb.new_campaign("Quay", opening="Start.")
    assert camp.act("open the door").text == "The door opens."
    answers["now"] = [PUBLIC]
    with pytest.raises(TurnFailed, match=f"model-box.lan resolves to {PUBLIC}"):
        camp.act("open the door")
    assert loopback_only(sockets)


@pytest.mark.parametrize("address", ["169.254.169.254", "169.254.170.2", "100.100.100.200", "[fd00:ec2::254]",
                                     "[::ffff:169.254.169.254]"])
def test_cloud_metadata_addresses_are_refused_with_their_own_reason(address, db_path):
    assert "cloud metadata service" in rejection_reason(f"http://{address}/v1")
    wb = Workbench.open(db_path)
    with pytest.raises(WorkbenchError, match="cloud metadata service"):
        wb.configure(endpoint=f"http://{address}/v1", model="m")
    assert wb.settings.endpoint_url == ""


def test_link_local_and_overlay_addresses_that_are_not_metadata_stay_allowed():
    for url in ("http://169.254.10.20:11434/v1", "http://100.101.1.2:11434/v1", "http://[fe80::1]:8080/v1"):
        assert rejection_reason(url) is None


@pytest.mark.parametrize("url", ["http://0177.0.0.1:{port}/v1", "http://１２７.0.0.1:{port}/v1",
                                 "http://127.0.0.１:{port}/v1"])
def test_an_address_the_http_client_cannot_parse_is_refused_at_configure(url, db_path):
    wb = Workbench.open(db_path)
    with pytest.raises(WorkbenchError, match="that endpoint can't be used: .*(HTTP client can use|plain ASCII)"):
        wb.configure(endpoint=url.format(port=11434), model="m")
    assert wb.settings.endpoint_url == ""
