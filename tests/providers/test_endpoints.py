"""Only this machine and the reader's LAN: refused before any connection."""
import socket

import httpx
import pytest

from engine import Workbench, WorkbenchError
from engine.errors import NarratorError
from engine.providers import Prompt, endpoints
from engine.providers.embedders import OpenAIEmbedder
from engine.providers.endpoints import rejection_reason
from engine.providers.http import PolicyTransport
from engine.providers.openai import OpenAINarrator


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:11434/v1", "http://localhost:8080/v1", "http://[::1]:8000/v1",
    "http://192.168.1.20:11434/v1", "http://10.0.0.5:8000/v1", "http://172.20.1.1/v1",
    "http://100.101.1.2:11434/v1",
])
def test_local_and_lan_addresses_are_allowed(url):
    assert rejection_reason(url) is None


@pytest.mark.parametrize("url, words", [
    ("http://8.8.8.8:11434/v1", "not this machine or a private network"),
    ("https://1.1.1.1/v1", "not this machine or a private network"),
    ("ftp://127.0.0.1/v1", "http:// or https://"),
    ("http:///v1", "no host"),
])
def test_public_and_malformed_addresses_are_refused(url, words):
    assert words in rejection_reason(url)


def test_a_cloud_api_name_is_refused_without_connecting(monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [(2, 1, 6, "", ("104.18.7.192", 0))])
    assert "not this machine" in rejection_reason("https://api.openai.com/v1")


def never_called():
    calls = []

    def handler(request):
        calls.append(request)
        return httpx.Response(200, json={})

    return calls, httpx.Client(transport=PolicyTransport(httpx.MockTransport(handler)))


def test_refused_before_any_connection_for_narrator_and_embedder():
    calls, client = never_called()
    with pytest.raises(NarratorError, match="can't be used"):
        list(OpenAINarrator("http://8.8.8.8:11434/v1", "m", client=client).execute(Prompt("s", "t")))
    with pytest.raises(NarratorError, match="can't be used"):
        OpenAIEmbedder("http://8.8.8.8:11434/v1", "m", client=client).embed(["x"])
    assert calls == []


def test_a_name_that_starts_resolving_elsewhere_is_refused_at_request_time(monkeypatch):
    answers = iter([[(2, 1, 6, "", ("192.168.1.9", 0))], [(2, 1, 6, "", ("93.184.216.34", 0))]])
    monkeypatch.setattr(endpoints.socket, "getaddrinfo", lambda *a, **k: next(answers))
    assert rejection_reason("http://inference.lan:11434/v1") is None  # when configured
    calls, client = never_called()
    with pytest.raises(NarratorError, match="93.184.216.34"):
        list(OpenAINarrator("http://inference.lan:11434/v1", "m", client=client).execute(Prompt("s", "t")))
    assert calls == []


def test_configure_refuses_a_public_endpoint_and_keeps_settings(db_path):
    wb = Workbench.open(db_path)
    with pytest.raises(WorkbenchError, match="can't be used"):
        wb.configure(endpoint="http://8.8.8.8:11434/v1", model="llama3")
    assert wb.settings.narrator == "local" and wb.settings.endpoint_url == ""
    assert Workbench.open(db_path).settings.endpoint_url == ""
