"""A loopback server with the second stage's two server shapes: `/rerank`
(llama.cpp `--reranking` and vLLM take Jina's body; Text Embeddings Inference
takes `texts` and refuses the rest with 422) and `/v1/embeddings`. Real
sockets, real HTTP; its scores come from the topic double, so they mean
something."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from knowledge_doubles import TopicEmbedder


class StageServer:
    """`shape` is "llamacpp", "vllm" or "tei" (what /rerank accepts and answers)."""

    def __init__(self, shape: str = "llamacpp"):
        self.shape = shape
        self.requests: list[tuple[str, dict]] = []
        self.embedder = TopicEmbedder("server-topic")
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.requests.append((self.path, body))
                status, payload = server.route(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def scores(self, query: str, documents: list[str]) -> list[float]:
        vectors = self.embedder.embed([query, *documents])
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        return [float(v @ vectors[0]) for v in vectors[1:]]

    def route(self, path: str, body: dict):
        if path in ("/rerank", "/v1/rerank"):
            if self.shape == "tei":
                if "texts" not in body or "documents" in body:
                    return 422, {"error": "Failed to deserialize the JSON body: missing field `texts`"}
                scores = self.scores(body["query"], body["texts"])
                ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
                return 200, [{"index": i, "score": scores[i]} for i in ranked]
            scores = self.scores(body["query"], body["documents"])
            ranked = sorted(range(len(scores)), key=lambda i: -scores[i])[: body.get("top_n") or len(scores)]
            results = [{"index": i, "relevance_score": scores[i]} for i in ranked]
            if self.shape == "vllm":
                for r in results:
                    r["document"] = {"text": body["documents"][r["index"]]}
                return 200, {"id": "rerank-1", "model": body.get("model"), "results": results,
                             "usage": {"total_tokens": 10}}
            return 200, {"model": body.get("model"), "object": "list", "results": results}
        if path == "/v1/embeddings":
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            rows = self.embedder.embed(texts)
            return 200, {"object": "list", "model": body.get("model"),
                         "data": [{"index": i, "embedding": [float(x) for x in row]} for i, row in enumerate(rows)]}
        return 404, {"error": f"no route {path}"}
