"""A small OpenAI-compatible chat server for a local Hugging Face model (standard library HTTP, transformers).

For tests, examples and a laptop: anything that speaks OpenAI's chat API (llm-gym's ``openai`` backend, verifiers'
``vf-eval``, an OpenAI SDK) can evaluate a local model through it. It serves ``GET /v1/models`` and
``POST /v1/chat/completions`` (plain JSON, or server-sent events with ``"stream": true``), one request at a time,
greedy at temperature 0 and sampled otherwise. For real throughput use ``vllm serve``.

    python -m llm_gym.lm.openai_server --model smollm2-135m --port 8000
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch

from llm_gym.lm.models import load_causal_lm


class ChatModel:
    """A causal LM and its tokenizer, answering chat messages."""

    def __init__(self, model: str, name: str | None = None) -> None:
        self.model, self.tokenizer = load_causal_lm(model, dtype="float32")
        self.name = name or model
        self.lock = threading.Lock()

    def complete(self, messages: list[dict[str, Any]], max_tokens: int, temperature: float, seed: int | None) -> dict:
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        sample = temperature > 0
        with self.lock, torch.no_grad():
            if seed is not None:
                torch.manual_seed(seed)
            out = self.model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=max_tokens,
                do_sample=sample,
                temperature=temperature if sample else None,
                top_p=None,
                top_k=None,
                eos_token_id=self.tokenizer.eos_token_id,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        new = out[0, len(ids) :].tolist()
        stopped = bool(new) and new[-1] == self.tokenizer.eos_token_id
        return {
            "text": self.tokenizer.decode(new, skip_special_tokens=True),
            "finish_reason": "stop" if stopped else "length",
            "usage": {"prompt_tokens": len(ids), "completion_tokens": len(new), "total_tokens": len(ids) + len(new)},
        }


def make_handler(chat: ChatModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet: a test's output stays readable
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": chat.name, "object": "model", "owned_by": "local"}]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            except ValueError:
                self._json(400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}})
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            messages = [{"role": m["role"], "content": _text(m.get("content"))} for m in body.get("messages", [])]
            max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 64)
            temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
            answer = chat.complete(messages, max_tokens, temperature, body.get("seed"))
            ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
            if body.get("stream"):
                self._stream(ident, created, answer, bool((body.get("stream_options") or {}).get("include_usage")))
                return
            message = {"role": "assistant", "content": answer["text"]}
            choice = {"index": 0, "message": message, "finish_reason": answer["finish_reason"], "logprobs": None}
            self._json(
                200,
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": created,
                    "model": chat.name,
                    "choices": [choice],
                    "usage": answer["usage"],
                },
            )

        def _stream(self, ident: str, created: int, answer: dict, usage: bool) -> None:
            base = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": chat.name}
            chunks = [
                {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": answer["text"]}}]},
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": answer["finish_reason"]}]},
            ]
            if usage:
                chunks.append({**base, "choices": [], "usage": answer["usage"]})
            data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _json(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _text(content: Any) -> str:
    """A message's content as text (OpenAI's list-of-parts form joined)."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def start_server(model: str, host: str = "127.0.0.1", port: int = 0, name: str | None = None) -> ThreadingHTTPServer:
    """Serve ``model`` in a background thread; ``server.server_address`` has the port. ``server.shutdown()`` stops."""
    httpd = ThreadingHTTPServer((host, port), make_handler(ChatModel(model, name)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="smollm2-135m, an HF id or a local directory")
    parser.add_argument("--name", default=None, help="the model name clients ask for (default: --model)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    httpd = ThreadingHTTPServer((args.host, args.port), make_handler(ChatModel(args.model, args.name)))
    print(f"OpenAI-compatible server for {args.model} on http://{args.host}:{httpd.server_address[1]}/v1", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


if __name__ == "__main__":
    main()
