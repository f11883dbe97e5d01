"""Play the model by hand: a loopback OpenAI-compatible chat-completions server that a person answers.

Each chat-completion request codling sends is written, as the model would read it, to a numbered file
``DIR/requests/NNNN.txt`` (the raw body goes next to it as ``NNNN.json``); the server then waits for the answer
file ``DIR/answers/NNNN.json`` and replies with it, streamed (server-sent events) or not, as the request asks.
An answer file holds a text, tool calls, or both::

    {"text": "The root cause is ..."}
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "src/x.py"}},
                    {"name": "search", "arguments": {"pattern": "foo"}}]}
    {"text": "Reading it.", "tool_calls": [...]}

Write the answer to a temporary name and rename it, or just write it: the server waits until it parses as
JSON. ``{"error": "message", "status": 500}`` answers with an HTTP error instead.

The request file shows the system message, the tools (their definitions the first time a tool set is seen,
then only their names), every message with its role, tool calls and tool results in full, each message's
token count, and the token count of the whole request (``codling.llm.tokens.count_tokens`` over its JSON).
``--window N`` rejects a request over N tokens with OpenAI's ``context_length_exceeded`` error ("This
model's maximum context length is N tokens. ..."); the rejection is written as ``NNNN.txt`` too.

Usage::

    .venv/bin/python scripts/play_model.py --port 8765 --dir /tmp/play --window 16000

    # a 16k window for the model in the catalog ($CODLING_HOME/models.json):
    mkdir -p /tmp/play/home && echo '{"models": {"openai-chat:play-model": {"context_limit": 16000,
        "max_output_tokens": 4096, "thinking": false, "images": false}}}' > /tmp/play/home/models.json

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=x CODLING_MODEL=openai-chat:play-model \\
        CODLING_HOME=/tmp/play/home codling run --mode yolo --cwd /tmp/play/repo "The tests fail, find out why."

    # then, for each new DIR/requests/NNNN.txt: read it and write DIR/answers/NNNN.json

Standard library only, plus codling's token counter (falls back to len/4 when codling isn't importable).
Development tool: it polls the answers directory.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

try:
    from codling.llm.tokens import count_tokens
except ImportError:  # pragma: no cover - run outside the venv

    def count_tokens(text: str) -> int:
        return len(text) // 4


MODEL = "play-model"
_lock = threading.Lock()
_state: dict[str, Any] = {"next": 1, "seen_tools": set()}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                if part.get("type") == "text":
                    parts.append(part.get("text", ""))
                else:
                    parts.append(f"[{part.get('type')} part]")
        return "\n".join(parts)
    return json.dumps(content)


def render(body: dict[str, Any], number: int, total_tokens: int) -> str:
    """The request as the model reads it."""
    out: list[str] = []
    out.append(f"=== request {number:04d}: {total_tokens} tokens (whole request JSON) ===")
    extras = {k: v for k, v in body.items() if k not in ("messages", "tools")}
    out.append(f"params: {json.dumps(extras)}")
    tools = body.get("tools") or []
    names = [t.get("function", {}).get("name", "?") for t in tools]
    key = json.dumps(tools, sort_keys=True)
    tools_tokens = count_tokens(json.dumps(tools))
    if not tools:
        out.append("--- tools: none")
    elif key in _state["seen_tools"]:
        out.append(f"--- tools ({len(tools)}, {tools_tokens} tokens, definitions as before): {', '.join(names)}")
    else:
        _state["seen_tools"].add(key)
        out.append(f"--- tools ({len(tools)}, {tools_tokens} tokens), definitions:")
        for tool in tools:
            fn = tool.get("function", {})
            out.append(f"* {fn.get('name')}: {fn.get('description', '')}")
            out.append(f"  parameters: {json.dumps(fn.get('parameters', {}))}")
    for i, message in enumerate(body.get("messages") or []):
        role = message.get("role")
        tokens = count_tokens(json.dumps(message))
        head = f"--- [{i}] {role} ({tokens} tokens)"
        if role == "tool":
            head += f" tool_call_id={message.get('tool_call_id')}"
        out.append(head)
        text = _text(message.get("content"))
        if text:
            out.append(text)
        for key_ in ("reasoning_content", "reasoning"):
            if message.get(key_):
                out.append(f"<{key_}>{message[key_]}</{key_}>")
        for call in message.get("tool_calls") or []:
            fn = call.get("function", {})
            out.append(f">>> tool call {call.get('id')}: {fn.get('name')}({fn.get('arguments')})")
    out.append(f"=== end of request {number:04d} ===")
    return "\n".join(out) + "\n"


def _chunk(completion_id: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    directory: Path
    window: int | None
    poll: float

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, status: int, message: str, code: str | None = None) -> None:
        error_type = "invalid_request_error" if status < 500 else "server_error"
        self._json(status, {"error": {"message": message, "type": error_type, "param": None, "code": code}})

    def do_GET(self) -> None:
        if self.path.split("?")[0].rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "play"}]})
        else:
            self._error(404, f"Unknown request URL: GET {self.path}", "unknown_url")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self.path.split("?")[0].endswith("/chat/completions"):
            self._error(404, f"Unknown request URL: POST {self.path}", "unknown_url")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._error(400, "The request body is not JSON.")
            return
        with _lock:
            number = _state["next"]
            _state["next"] += 1
            whole = json.dumps(body, ensure_ascii=False)
            total = count_tokens(whole)
            requests = self.directory / "requests"
            (requests / f"{number:04d}.json").write_text(whole, encoding="utf-8")
            text = render(body, number, total)
        if self.window is not None and total > self.window:
            message = (
                f"This model's maximum context length is {self.window} tokens. However, your messages resulted "
                f"in {total} tokens. Please reduce the length of the messages."
            )
            (requests / f"{number:04d}.txt").write_text(text + f"\n!!! REJECTED: {message}\n", encoding="utf-8")
            print(f"[play] {number:04d}: {total} tokens, rejected (window {self.window})", flush=True)
            self._error(400, message, "context_length_exceeded")
            return
        (requests / f"{number:04d}.txt").write_text(text, encoding="utf-8")
        print(f"[play] {number:04d}: {total} tokens, waiting for answers/{number:04d}.json", flush=True)
        answer = self._wait(self.directory / "answers" / f"{number:04d}.json")
        if "error" in answer:
            self._error(int(answer.get("status", 500)), str(answer["error"]))
            return
        self._reply(body, answer, number, total)

    def _wait(self, path: Path) -> dict[str, Any]:
        while True:
            if path.exists():
                try:
                    answer = json.loads(path.read_text(encoding="utf-8"))
                    if isinstance(answer, dict):
                        return answer
                except ValueError:
                    pass  # still being written
            time.sleep(self.poll)

    def _reply(self, body: dict[str, Any], answer: dict[str, Any], number: int, prompt_tokens: int) -> None:
        text = answer.get("text")
        calls: list[dict[str, Any]] = [
            {
                "id": f"call_{number}_{i}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": call["arguments"]
                    if isinstance(call.get("arguments"), str)
                    else json.dumps(call.get("arguments", {})),
                },
            }
            for i, call in enumerate(answer.get("tool_calls") or [])
        ]
        finish = "tool_calls" if calls else "stop"
        completion_tokens = count_tokens(json.dumps(answer))
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        completion_id = f"chatcmpl-play-{number}"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
            if calls:
                message["tool_calls"] = calls
            self._json(
                200,
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": MODEL,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                    "usage": usage,
                },
            )
            return
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunks = [_chunk(completion_id, {"role": "assistant", "content": ""})]
        if text:
            chunks += [_chunk(completion_id, {"content": text[i : i + 200]}) for i in range(0, len(text), 200)]
        for index, call in enumerate(calls):
            fn = call["function"]
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": fn["name"], "arguments": ""},
            }
            chunks.append(_chunk(completion_id, {"tool_calls": [head]}))
            chunks.append(
                _chunk(completion_id, {"tool_calls": [{"index": index, "function": {"arguments": fn["arguments"]}}]})
            )
        chunks.append(_chunk(completion_id, {}, finish))
        if include_usage:
            for chunk in chunks:
                chunk["usage"] = None
            chunks.append(
                {
                    "id": completion_id,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": MODEL,
                    "choices": [],
                    "usage": usage,
                }
            )
        for chunk in chunks:
            self._send_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        self._send_chunk(b"data: [DONE]\n\n")
        self._send_chunk(b"")

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/play"))
    parser.add_argument("--window", type=int, default=None, help="reject requests over this many tokens")
    parser.add_argument("--poll", type=float, default=0.3, help="seconds between looks for an answer file")
    args = parser.parse_args(argv)
    for sub in ("requests", "answers"):
        (args.dir / sub).mkdir(parents=True, exist_ok=True)
    existing = sorted((args.dir / "requests").glob("[0-9][0-9][0-9][0-9].txt"))
    _state["next"] = int(existing[-1].stem) + 1 if existing else 1  # a restarted server carries on numbering
    Handler.directory = args.dir
    Handler.window = args.window
    Handler.poll = args.poll
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"[play] serving http://127.0.0.1:{args.port}/v1, requests in {args.dir / 'requests'}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
