#!/usr/bin/env python3
"""A model-API stub for driving MCP hosts without a model.

Speaks enough of three APIs for a host to run a conversation:
  - Anthropic Messages:  POST /v1/messages (SSE when "stream" is true), /v1/messages/count_tokens
  - OpenAI Responses:    POST /v1/responses (SSE), GET /v1/models
  - Gemini:              POST /v1beta/models/<m>:streamGenerateContent (SSE), :generateContent,
                         :countTokens; GET /v1beta/models

Each main request (one that offers gimlet's tools) is answered with the next call of the plan:
the n-th call when the conversation already holds n tool results, so retries and side requests
do not move it on. After the last call it answers with plain text. Side requests (titles,
summaries, checks: no gimlet tools offered) get plain text, or a JSON value fitting the asked
schema. Every request is appended to the record file as one JSON line.

  stub.py --plan calls.json --record requests.jsonl --port-file port
Only the standard library; binds 127.0.0.1 only.
"""

import argparse
import gzip
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"seq": 0}
ARGS = None
PLAN = []
FINAL_TEXT = "All scripted gimlet calls are done."
SIDE_TEXT = "gimlet hosts check"


def record(entry):
    with LOCK:
        STATE["seq"] += 1
        entry["seq"] = STATE["seq"]
        with open(ARGS.record, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")


def call_id(prefix, index):
    return f"{prefix}{index:02d}"


# ---------------------------------------------------------------------------------------------
# Which of the offered tools is gimlet's `tool`.


def tool_names(node, namespace=None):
    """The function tools anywhere in a request's tool list, as (namespace, name) pairs: Codex
    groups an MCP server's tools in a namespace (`mcp__gimlet`) and calls them by both."""
    found = []
    if isinstance(node, list):
        for item in node:
            found.extend(tool_names(item, namespace))
    elif isinstance(node, dict):
        if node.get("type") == "namespace":
            return tool_names(node.get("tools", []), node.get("name"))
        if isinstance(node.get("name"), str):
            found.append((namespace, node["name"]))
        for key in ("tools", "functionDeclarations", "function_declarations", "function"):
            if key in node:
                found.extend(tool_names(node[key], namespace))
    return found


def find_tool(names, tool):
    """gimlet's `tool` among the offered ones: `gimlet`, separators, then the name (so that
    `mcp__gimlet__write` is `write` and `mcp__gimlet__todo_write` is not)."""
    pattern = re.compile(r"gimlet[^a-zA-Z0-9]+" + re.escape(tool) + r"$")
    for namespace, name in names:
        if pattern.search(f"{namespace}.{name}" if namespace else name):
            return namespace, name
    return None


def full_name(found):
    namespace, name = found
    return f"{namespace}.{name}" if namespace else name


def offers_gimlet(names):
    return any("gimlet" in (namespace or "") + name for namespace, name in names)


# ---------------------------------------------------------------------------------------------
# Answers that fit a JSON schema (Gemini's side requests ask for JSON).


def fit_schema(schema):
    if not isinstance(schema, dict):
        return SIDE_TEXT
    if "enum" in schema and schema["enum"]:
        # A "who speaks next" check: the user, so that the host stops.
        for v in schema["enum"]:
            if v == "user":
                return v
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    kind = (kind or "").lower()
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: fit_schema(v) for k, v in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return SIDE_TEXT


# ---------------------------------------------------------------------------------------------
# Anthropic Messages.


def anthropic_count(body):
    n = 0
    for msg in body.get("messages", []):
        content = msg.get("content")
        if isinstance(content, list):
            n += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return n


def anthropic_message(blocks, stop):
    return {
        "id": f"msg_stub_{STATE['seq']}",
        "type": "message",
        "role": "assistant",
        "model": "claude-stub",
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 10},
    }


def anthropic_sse(blocks, stop):
    start = anthropic_message([], None)
    start["usage"] = {"input_tokens": 100, "output_tokens": 1}
    events = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(blocks):
        if block["type"] == "tool_use":
            opening = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events.append(("content_block_start",
                       {"type": "content_block_start", "index": i, "content_block": opening}))
        events.append(("content_block_delta",
                       {"type": "content_block_delta", "index": i, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 10}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def anthropic(handler, body):
    names = tool_names(body.get("tools", []))
    if not offers_gimlet(names):
        blocks, stop, reply = [{"type": "text", "text": SIDE_TEXT}], "end_turn", "side"
    else:
        n = anthropic_count(body)
        if n < len(PLAN):
            step = PLAN[n]
            name = find_tool(names, step["tool"])
            if name is None:
                text = f"gimlet's {step['tool']} tool was not offered"
                blocks, stop, reply = [{"type": "text", "text": text}], "end_turn", "missing"
            else:
                blocks = [{"type": "tool_use", "id": call_id("toolu_gimlet_", n),
                           "name": full_name(name), "input": step["args"]}]
                stop, reply = "tool_use", f"call {n} {step['label']} as {full_name(name)}"
        else:
            blocks, stop, reply = [{"type": "text", "text": FINAL_TEXT}], "end_turn", "final"
    record({"api": "anthropic", "path": handler.path, "reply": reply, "body": body})
    if body.get("stream"):
        handler.send_sse([(e, d) for e, d in anthropic_sse(blocks, stop)])
    else:
        handler.send_json(anthropic_message(blocks, stop))


# ---------------------------------------------------------------------------------------------
# OpenAI Responses.


def responses_count(body):
    items = body.get("input", [])
    if not isinstance(items, list):
        return 0
    return sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")


def responses(handler, body):
    names = tool_names(body.get("tools", []))
    n = responses_count(body)
    if not offers_gimlet(names):
        items, reply = [text_item(SIDE_TEXT)], "side"
    elif n < len(PLAN):
        step = PLAN[n]
        name = find_tool(names, step["tool"])
        if name is None:
            items, reply = [text_item(f"gimlet's {step['tool']} tool was not offered")], "missing"
        else:
            namespace, short = name
            item = {"type": "function_call", "id": f"fc_gimlet_{n:02d}",
                    "call_id": call_id("call_gimlet_", n), "name": short,
                    "arguments": json.dumps(step["args"]), "status": "completed"}
            if namespace:
                item["namespace"] = namespace
            items, reply = [item], f"call {n} {step['label']} as {full_name(name)}"
    else:
        items, reply = [text_item(FINAL_TEXT)], "final"
    record({"api": "responses", "path": handler.path, "reply": reply, "body": body})
    rid = f"resp_stub_{STATE['seq']}"
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 110}
    events = [("response.created", {"type": "response.created",
                                    "response": {"id": rid, "status": "in_progress"}})]
    for i, item in enumerate(items):
        events.append(("response.output_item.added", {"type": "response.output_item.added",
                                                       "output_index": i, "item": item}))
        events.append(("response.output_item.done", {"type": "response.output_item.done",
                                                      "output_index": i, "item": item}))
    events.append(("response.completed", {"type": "response.completed",
                                          "response": {"id": rid, "status": "completed",
                                                       "output": items, "usage": usage}}))
    if body.get("stream", True):
        handler.send_sse(events)
    else:
        handler.send_json({"id": rid, "object": "response", "status": "completed",
                           "output": items, "usage": usage})


def text_item(text):
    return {"type": "message", "id": f"msg_stub_{STATE['seq']}", "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


# ---------------------------------------------------------------------------------------------
# Gemini.


def gemini_count(body):
    n = 0
    for content in body.get("contents", []):
        for part in content.get("parts", []) or []:
            if isinstance(part, dict) and "functionResponse" in part:
                n += 1
    return n


def gemini(handler, body, method):
    names = tool_names(body.get("tools", []))
    config = body.get("generationConfig", {}) or {}
    if not offers_gimlet(names):
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if schema or config.get("responseMimeType") == "application/json":
            text = json.dumps(fit_schema(schema))
        else:
            text = SIDE_TEXT
        parts, reply = [{"text": text}], "side"
    else:
        n = gemini_count(body)
        if n < len(PLAN):
            step = PLAN[n]
            name = find_tool(names, step["tool"])
            if name is None:
                parts = [{"text": f"gimlet's {step['tool']} tool was not offered"}]
                reply = "missing"
            else:
                parts = [{"functionCall": {"id": call_id("call_gimlet_", n),
                                           "name": full_name(name), "args": step["args"]}}]
                reply = f"call {n} {step['label']} as {full_name(name)}"
        else:
            parts, reply = [{"text": FINAL_TEXT}], "final"
    record({"api": "gemini", "path": handler.path, "reply": reply, "body": body})
    answer = {
        "candidates": [{"content": {"role": "model", "parts": parts},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10,
                          "totalTokenCount": 110},
        "modelVersion": "gemini-stub",
        "responseId": f"resp_stub_{STATE['seq']}",
    }
    if method == "streamGenerateContent":
        handler.send_sse([(None, answer)])
    else:
        handler.send_json(answer)


# ---------------------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("stub: " + (fmt % args) + "\n")

    def send_json(self, value, status=200):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events):
        chunks = []
        for event, data in events:
            head = f"event: {event}\n" if event else ""
            chunks.append(f"{head}data: {json.dumps(data)}\n\n")
        data = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        encoding = self.headers.get("Content-Encoding")
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding:
            return {"_undecodable": f"{encoding} body", "_bytes": len(raw)}
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def do_GET(self):
        path = self.path.split("?")[0]
        record({"api": "get", "path": self.path, "reply": "list", "body": None})
        if path.endswith("/models") and path.startswith("/v1beta"):
            self.send_json({"models": []})
        elif path.endswith("/models"):
            self.send_json({"object": "list", "data": [], "models": []})
        else:
            self.send_json({"error": {"message": f"no such path {path}"}}, 404)

    def do_POST(self):
        path = self.path.split("?")[0]
        body = self.read_body()
        try:
            if path.endswith("/messages/count_tokens"):
                record({"api": "anthropic", "path": self.path, "reply": "count", "body": body})
                self.send_json({"input_tokens": 100})
            elif path.endswith("/messages"):
                anthropic(self, body)
            elif path.endswith("/responses"):
                responses(self, body)
            elif ":" in path and path.startswith("/v1"):
                method = path.rsplit(":", 1)[1]
                if method == "countTokens":
                    record({"api": "gemini", "path": self.path, "reply": "count", "body": body})
                    self.send_json({"totalTokens": 100})
                elif method in ("generateContent", "streamGenerateContent"):
                    gemini(self, body, method)
                else:
                    record({"api": "gemini", "path": self.path, "reply": "404", "body": body})
                    self.send_json({"error": {"code": 404, "message": "not stubbed"}}, 404)
            else:
                record({"api": "unknown", "path": self.path, "reply": "404", "body": body})
                self.send_json({"error": {"message": f"no such path {path}"}}, 404)
        except BrokenPipeError:
            pass


def main():
    global ARGS, PLAN
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--port-file", required=True)
    ARGS = parser.parse_args()
    with open(ARGS.plan, encoding="utf-8") as f:
        PLAN = json.load(f)["calls"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
