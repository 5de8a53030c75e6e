#!/usr/bin/env python3
"""Checks what each host gave the model for each scripted call, and prints the table.

  check.py WORK HOST...     (WORK/HOST holds requests.jsonl, reference.json, host.status)

For every call it takes the tool result the host forwarded (the first request that carries it),
checks it against the call's expectations in plan.py, and measures it:
  given   bytes of the result as the host put it in the request: the text of Claude's
          tool_result blocks, Codex's function_call_output, Gemini's functionResponse output
          (after the request's own JSON encoding is undone, so escapes inside it count)
  framing bytes the host adds around every result on its own (Codex's "Wall time: ... Output:"
          header, Gemini's <untrusted_context> tags, or the sentence and JSON around an error
          result); not gimlet's doing
  text    bytes of the text content gimlet returned for the same call (a bare MCP client,
          reference.json)
  ratio   (given - framing) / text
Exits 1 if any payload was not seen, 2 if the records are missing.
"""

import json
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plan  # noqa: E402

RATIO_LIMIT = 1.15
CODEX_HEADER = re.compile(r"^Wall time: [0-9.]+ seconds\nOutput:\n?")
GEMINI_TAGS = re.compile(r"<untrusted_context>\n|\n</untrusted_context>\n?")
# Gemini CLI reports a result with isError as this sentence around the whole result as JSON.
GEMINI_ERROR = re.compile(
    r"^MCP tool '[^']*' reported tool error for function call: .* with response: (\[.*\])$", re.S)


def call_index(ident):
    match = re.search(r"gimlet_(\d+)$", ident or "")
    return int(match.group(1)) if match else None


# ---------------------------------------------------------------------------------------------
# The forwarded results, per API: {index: {"pieces": [str], "is_error": bool|None, "raw": obj}}.


def from_anthropic(body, found):
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            index = call_index(block.get("tool_use_id"))
            if index is None or index in found:
                continue
            inner = block.get("content")
            if isinstance(inner, str):
                pieces = [inner]
            else:
                pieces = [b["text"] if b.get("type") == "text" else json.dumps(b)
                          for b in inner or []]
            found[index] = {"pieces": pieces, "is_error": block.get("is_error"), "raw": block}


def from_responses(body, found):
    for item in body.get("input", []) if isinstance(body.get("input"), list) else []:
        if not isinstance(item, dict) or item.get("type") != "function_call_output":
            continue
        index = call_index(item.get("call_id"))
        if index is None or index in found:
            continue
        output = item.get("output")
        if isinstance(output, str):
            pieces = [output]
        elif isinstance(output, list):
            pieces = [o["text"] if o.get("type") in ("input_text", "output_text") else json.dumps(o)
                      for o in output]
        else:
            pieces = [json.dumps(output)]
        found[index] = {"pieces": pieces, "is_error": None, "raw": item}


def from_gemini(body, found):
    order = 0
    for content in body.get("contents", []):
        for part in content.get("parts", []) or []:
            response = part.get("functionResponse") if isinstance(part, dict) else None
            if response is None:
                continue
            index = call_index(response.get("id"))
            if index is None:
                index = order
            order += 1
            if index in found:
                continue
            value = response.get("response")
            if isinstance(value, dict) and len(value) == 1 and isinstance(
                    next(iter(value.values())), str):
                key, text = next(iter(value.items()))
                pieces, is_error = [text], key == "error"
            else:
                pieces, is_error = [json.dumps(value, ensure_ascii=False)], None
            found[index] = {"pieces": pieces, "is_error": is_error, "raw": part}


EXTRACT = {"anthropic": from_anthropic, "responses": from_responses, "gemini": from_gemini}


def forwarded(records):
    found = {}
    for entry in records:
        extract = EXTRACT.get(entry.get("api"))
        body = entry.get("body")
        if extract and isinstance(body, dict) and entry.get("reply") not in ("side", "count"):
            extract(body, found)
    return found


# ---------------------------------------------------------------------------------------------


def framing_bytes(api, pieces):
    total = 0
    for i, piece in enumerate(pieces):
        if api == "responses" and i == 0:
            match = CODEX_HEADER.match(piece)
            if match:
                total += len(match.group(0).encode())
        if api == "gemini":
            error = GEMINI_ERROR.match(piece)
            if error:
                try:
                    inner = json.loads(error.group(1))
                except ValueError:
                    continue
                texts = [o["text"] for o in objects(inner)
                         if o.get("type") == "text" and isinstance(o.get("text"), str)]
                total += len(piece.encode()) - sum(len(t.encode()) for t in texts)
            else:
                total += sum(len(m.group(0).encode()) for m in GEMINI_TAGS.finditer(piece))
    return total


def string_leaves(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from string_leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from string_leaves(v)


def strip_framing(api, piece):
    if api == "responses":
        return CODEX_HEADER.sub("", piece)
    if api == "gemini":
        return GEMINI_TAGS.sub("", piece)
    return piece


def parsed_pieces(api, pieces):
    """The pieces of a result that are JSON (once the host's framing is off), parsed."""
    values = []
    for piece in pieces:
        try:
            values.append(json.loads(strip_framing(api, piece)))
        except ValueError:
            pass
    return values


def candidates(api, pieces):
    """The texts to look for a payload in: the result as sent, and the strings inside it when
    (a piece of) it is JSON, e.g. a structuredContent that carries the text in a field."""
    texts = ["\n".join(pieces)]
    for value in parsed_pieces(api, pieces):
        texts.extend(string_leaves(value))
    return texts


def objects(value):
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from objects(v)
    elif isinstance(value, list):
        for v in value:
            yield from objects(v)


def json_match(values, fields):
    """Whether an object in the parsed result has every field, matching its pattern whole."""
    for value in values:
        for obj in objects(value):
            if all(key in obj and re.fullmatch(pattern, obj[key] if isinstance(obj[key], str)
                                               else json.dumps(obj[key]))
                   for key, pattern in fields.items()):
                return True
    return False


def whole_page(api, pieces):
    """Whether a page of numbered lines reached the model whole: every line from 1 to the last
    one gimlet's notice says it shows. A host that cuts the middle out of a long result (Codex
    keeps the head and the tail) leaves a gap the model cannot see from the notice."""
    for text in candidates(api, pieces):
        notice = re.search(r"showing lines 1-(\d+) of", text)
        if not notice:
            continue
        shown = {int(n) for n in re.findall(r"^\s*(\d+)\t", text, re.M)}
        return all(n in shown for n in range(1, int(notice.group(1)) + 1))
    return False


def seen_how(api, pieces, expectation):
    """"text" when the payload is in the result's text (or a string field of it), "json" when
    only its structured form is there, None when it is not there at all."""
    pattern = expectation[1]
    if any(re.search(pattern, t, re.M) for t in candidates(api, pieces)):
        return "text"
    if len(expectation) > 2 and json_match(parsed_pieces(api, pieces), expectation[2]):
        return "json"
    return None


def text_bytes(result):
    if not result:
        return 0
    return sum(len(c.get("text", "").encode()) for c in result.get("content", [])
               if c.get("type") == "text")


def excerpt(text, width):
    flat = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
    return flat if len(flat) <= width else flat[:width - 3] + "..."


def load_records(path):
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            records.append(json.loads(line))
    return records


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    work, hosts = sys.argv[1], sys.argv[2:]
    rows, problems, excerpts = [], [], []
    missing_payload = False
    for host in hosts:
        hdir = os.path.join(work, host)
        try:
            records = load_records(os.path.join(hdir, "requests.jsonl"))
        except OSError:
            problems.append(f"{host}: no requests were recorded (the host never reached the stub)")
            missing_payload = True
            records = []
        try:
            with open(os.path.join(hdir, "reference.json"), encoding="utf-8") as f:
                reference = json.load(f)["results"]
        except (OSError, ValueError, KeyError):
            problems.append(f"{host}: the reference run (a bare MCP client) did not finish; "
                            f"see {os.path.join(hdir, 'reference.log')}")
            reference = [None] * len(plan.CALLS)
        try:
            with open(os.path.join(hdir, "host.status")) as f:
                status = int(f.read().strip() or 0)
        except (OSError, ValueError):
            status = None
        if status:
            what = "timed out" if status == 124 else f"exited with status {status}"
            problems.append(f"{host}: the host {what}; see {os.path.join(hdir, 'host.err')}")
        for entry in records:
            if entry.get("reply") == "missing":
                problems.append(f"{host}: request {entry['seq']}: a gimlet tool was not offered "
                                "to the model (see requests.jsonl)")
        if records and not any(str(r.get("reply", "")).startswith("call") for r in records):
            problems.append(f"{host}: no request to the model offered gimlet's tools (did the "
                            "server connect? see setup.log and host.out with --keep)")
        api = next((r["api"] for r in records if r.get("api") in EXTRACT), None)
        results = forwarded(records)
        for index, call in enumerate(plan.CALLS):
            ref = reference[index] if index < len(reference) else None
            ref_result = (ref or {}).get("result")
            text = text_bytes(ref_result)
            structured = (ref_result or {}).get("structuredContent")
            got = results.get(index)
            if got is None:
                rows.append((host, call["label"], "NOT SENT", None, None, text, None))
                if records:
                    problems.append(f"{host}/{call['label']}: the host sent the model no result "
                                    "for this call")
                missing_payload = True
                continue
            how = {e[0]: seen_how(api, got["pieces"], e) for e in call["expect"]}
            if call.get("whole_page"):
                how["every line of the page"] = "text" if whole_page(api, got["pieces"]) else None
            absent = [name for name, h in how.items() if h is None]
            given = sum(len(p.encode()) for p in got["pieces"])
            framing = framing_bytes(api, got["pieces"])
            ratio = (given - framing) / text if text else None
            if absent:
                seen = "NOT SEEN"
            elif "json" in how.values():
                seen = "seen (json)"
            else:
                seen = "seen"
            if absent:
                missing_payload = True
                problems.append(f"{host}/{call['label']}: not given to the model: "
                                + ", ".join(absent))
            rows.append((host, call["label"], seen, given, framing, text, ratio))
            flag = " (isError)" if got.get("is_error") else ""
            note = ""
            if structured is not None:
                size = len(json.dumps(structured, separators=(",", ":")).encode())
                note = f"  [gimlet's structuredContent: {size} B]"
            shown = excerpt("\n".join(got["pieces"]), 110)
            excerpts.append(f"{host:<12} {call['label']:<9}{flag} {shown}{note}")

    header = ("host", "transport", "tool", "payload", "given B", "framing B", "text B", "ratio")
    widths = (8, 9, 9, 12, 8, 9, 7, 6)
    left = 4

    def row(cells):
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    print(row(header))
    print("-" * len(row(header)))
    for host, label, seen, given, framing, text, ratio in rows:
        name, _, transport = host.partition("-")
        print(row([name, transport or "stdio", label, seen,
                   "-" if given is None else str(given),
                   "-" if framing is None else str(framing),
                   str(text),
                   "-" if ratio is None else f"{ratio:.2f}" + ("*" if ratio > RATIO_LIMIT else " ")]))
    print(f"(ratio = (given - framing) / text; * over {RATIO_LIMIT})")
    print()
    print("What each host gave the model (start of each result):")
    for line in excerpts:
        print("  " + line)
    if problems:
        print()
        for p in problems:
            print("  - " + p)
    sys.exit(1 if missing_payload else 0)


if __name__ == "__main__":
    main()
