"""A small OpenAI / Ollama / llama.cpp-compatible server on loopback.

Real sockets and real HTTP, so provider tests exercise what users run:
SSE streams with usage, reasoning deltas, /api/ps, /api/show, /api/generate,
/props, /v1/models, /v1/embeddings, and scripted failures.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Script:
    kind: str = "ollama"                 # "ollama" | "llamacpp" | "vllm" | "plain"
    reply: list[str] = field(default_factory=lambda: ["The ", "door ", "opens."])
    reasoning: list[str] = field(default_factory=list)
    usage: dict | None = field(default_factory=lambda: {"prompt_tokens": 120, "completion_tokens": 3})
    models: list[str] = field(default_factory=lambda: ["story-model"])
    loaded: dict[str, int] = field(default_factory=dict)      # Ollama /api/ps: model -> context_length
    num_ctx: int | None = None                                # Ollama /api/show parameters
    arch_ctx: int | None = 32768                              # Ollama model_info ceiling
    load_sets: int | None = None                              # /api/generate loads the model at this window
    props_ctx: int | None = 8192                              # llama.cpp /props
    max_model_len: int | None = 16384                         # vLLM /v1/models
    fail: dict[str, int] = field(default_factory=dict)        # path -> HTTP status
    drop_after: int | None = None                             # close the stream after n chunks
    embed_dim: int = 8
    delay: float = 0.0                                        # seconds before any answer


class FakeServer:
    def __init__(self, script: Script | None = None):
        self.script = script or Script()
        self.requests: list[tuple[str, str, dict | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _body(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                return json.loads(raw) if raw else None

            def _json(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")  # so a stopped server is really gone
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            def do_GET(self):
                server.requests.append(("GET", self.path, None))
                server.route(self, "GET", self.path, None)

            def do_POST(self):
                body = self._body()
                server.requests.append(("POST", self.path, body))
                server.route(self, "POST", self.path, body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def paths(self) -> list[str]:
        return [p for _, p, _ in self.requests]

    # ------------------------------------------------------------ routes
    def route(self, h, method, path, body):
        s = self.script
        if s.delay:
            import time
            time.sleep(s.delay)
        if path in s.fail:
            return h._json(s.fail[path], {"error": {"message": f"scripted failure on {path}"}})
        ollama = s.kind == "ollama"
        if path == "/api/ps" and ollama:
            return h._json(200, {"models": [{"name": m, "model": m, "context_length": n} for m, n in s.loaded.items()]})
        if path == "/api/show" and ollama:
            params = f"temperature 0.7\nnum_ctx {s.num_ctx}\n" if s.num_ctx else "temperature 0.7\n"
            info = {"general.architecture": "qwen2"}
            if s.arch_ctx:
                info["qwen2.context_length"] = s.arch_ctx
            return h._json(200, {"parameters": params, "model_info": info})
        if path == "/api/generate" and ollama:
            if s.load_sets:
                s.loaded[body["model"]] = s.load_sets
            return h._json(200, {"model": body["model"], "response": "", "done": True, "done_reason": "load"})
        if path == "/props" and s.kind == "llamacpp":
            return h._json(200, {"default_generation_settings": {"n_ctx": s.props_ctx}})
        if path == "/v1/models":
            entries = [{"id": m, "object": "model"} for m in s.models]
            if s.kind == "vllm":
                for e in entries:
                    e["max_model_len"] = s.max_model_len
            return h._json(200, {"object": "list", "data": entries})
        if path == "/v1/embeddings":
            return self.embeddings(h, body)
        if path in ("/v1/chat/completions", "/v1/completions"):
            return self.stream(h, body, chat=path.endswith("chat/completions"))
        return h._json(404, {"error": {"message": f"no route {method} {path}"}})

    def embeddings(self, h, body):
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dim = self.script.embed_dim
        data = []
        for i, text in enumerate(texts):
            vec = [0.0] * dim
            for word in text.lower().split():  # bag of words: related texts share directions
                vec[sum(map(ord, word)) % dim] += 1.0
            data.append({"object": "embedding", "index": i, "embedding": vec})
        data.reverse()  # servers may answer out of order; clients must sort by index
        return h._json(200, {"object": "list", "data": data, "model": body["model"]})

    def stream(self, h, body, chat):
        s = self.script
        if body.get("model") not in s.models:
            return h._json(404, {"error": {"message": f"model '{body.get('model')}' not found"}})
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()

        def send(payload):
            h.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            h.wfile.flush()

        sent = 0
        for piece in s.reasoning:
            send({"choices": [{"index": 0, "delta": {"reasoning_content": piece}}]})
        for piece in s.reply:
            if s.drop_after is not None and sent >= s.drop_after:
                h.wfile.write(b"data: {\"choices\": [{\"delta\": {\"content\": \"trunc")
                h.wfile.flush()
                h.close_connection = True
                return
            choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            send({"choices": [choice]})
            sent += 1
        if s.usage is not None and (body.get("stream_options") or {}).get("include_usage"):
            send({"choices": [], "usage": s.usage})
        h.wfile.write(b"data: [DONE]\n\n")
        h.wfile.flush()
        h.close_connection = True
