#!/usr/bin/env python3
"""The fixture project, the scripted tool calls, and what each call's result must show.

  plan.py fixture DIR     write the fixture project into DIR (created if missing)
  plan.py calls FILE      write the calls as JSON (for the stub and the reference client)

Each expectation is a name, a regular expression that must match the result the model was given
(its text, or a string inside it when the host sent JSON: a field of structuredContent, say), and
optionally the same information as JSON: an object somewhere in the result whose fields match
(each value, as JSON text for non-strings, must match its pattern whole). Markers
are made so that they appear only in tool results, never in the calls' arguments: the bash
marker is put together by printf, the grep line's file name is not in the pattern.
"""

import json
import os
import sys

BIG_LINES = 3000

FILES = {
    "notes.txt": "first line of the notes\nthe READ_MARK_q7Zx line\nthird line\n",
    "src/main.rs": 'fn main() {\n    println!("hello");\n    // GREP_NEEDLE_k3 lives here\n}\n',
    "ls_dir_h8/inner_file_p4.txt": "inside\n",
}

# One call per model turn, in this order. `label` names the row of the table.
CALLS = [
    {
        "label": "read",
        "tool": "read",
        "args": {"path": "notes.txt"},
        "expect": [
            ("numbered line", r"^\s+2\tthe READ_MARK_q7Zx line$"),
            ("footer", r"notes\.txt: lines 1-3 of 3, hash [0-9a-f]{16}"),
        ],
    },
    {
        "label": "grep",
        "tool": "grep",
        "args": {"pattern": "GREP_NEEDLE_k3", "output_mode": "content"},
        "expect": [
            ("match line", r"src/main\.rs:3:\s*// GREP_NEEDLE_k3 lives here",
             {"path": r"src/main\.rs", "line": "3", "text": r"\s*// GREP_NEEDLE_k3 lives here"}),
        ],
    },
    {
        "label": "ls",
        "tool": "ls",
        "args": {},
        "expect": [
            ("notes.txt", r"notes\.txt"),
            ("src/", r"src/"),
            ("main.rs", r"main\.rs"),
            ("ls_dir_h8/", r"ls_dir_h8/"),
            ("inner_file_p4.txt", r"inner_file_p4\.txt"),
        ],
    },
    {
        "label": "bash",
        "tool": "bash",
        # No shell arithmetic or substitution: gimlet asks before running those.
        "args": {"command": "printf 'BASH_MARK_%s\\n' 42; exit 3"},
        "expect": [
            ("output", r"BASH_MARK_42"),
            ("exit status", r"exit code 3", {"exit_code": "3"}),
        ],
    },
    {
        "label": "write",
        "tool": "write",
        "args": {"path": "out_w9/created_w9.txt", "content": "written by the model\n"},
        "expect": [
            ("confirmation", r"Created `out_w9/created_w9\.txt` \(1 lines?, 21 bytes\)",
             {"path": r"out_w9/created_w9\.txt", "created": "true"}),
        ],
    },
    {
        "label": "edit",
        "tool": "edit",
        "args": {"path": "notes.txt", "old_string": "third line", "new_string": "third line EDITED_e5"},
        "expect": [
            ("confirmation", r"Edited `notes\.txt`: 1 replacement",
             {"path": r"notes\.txt", "replacements": "1"}),
            ("diff -", r"^-\s+3\s+third line$"),
            ("diff +", r"^\+\s+3\s+third line EDITED_e5$"),
        ],
    },
    # Checkpoints (on by default on Linux): a command's change is listed beside the file
    # tools' and undone like theirs.
    {
        "label": "sed",
        "tool": "bash",
        "args": {"command": "sed -i 's/first line/first LINE/' notes.txt"},
        "expect": [("exit status", r"exit code 0", {"exit_code": "0"})],
    },
    {
        "label": "checkpts",
        "tool": "checkpoints",
        "args": {},
        "expect": [
            ("sed's change", r"M notes\.txt \+1 -1"),
            ("the write", r"A out_w9/created_w9\.txt \+1 -0"),
        ],
    },
    {
        "label": "undo sed",
        "tool": "undo",
        "args": {},
        "expect": [("undone", r"`notes\.txt` restored, undoing `bash`")],
    },
    {
        "label": "read big",
        "tool": "read",
        "args": {"path": "big.log"},
        # The page the notice announces must arrive whole, not with its middle cut by the host.
        "whole_page": True,
        "expect": [
            ("first line", r"^\s+1\tbig line 0001 .* BIG_FIRST_r2$"),
            ("truncation notice", rf"Output truncated: showing lines 1-\d+ of {BIG_LINES}"),
            ("hint", r"Use offset=\d+ to continue"),
        ],
    },
    {
        "label": "error",
        "tool": "read",
        "args": {"path": "missing_z3.txt"},
        # The marker tells the model it is an error where a host drops isError (issue 38).
        "expect": [("error text", r"Error \(read\): `missing_z3\.txt` does not exist")],
    },
]


def big_log():
    lines = [f"big line {n:04d} of the fixture, padded to be long enough" for n in range(1, BIG_LINES + 1)]
    lines[0] += " BIG_FIRST_r2"
    return "\n".join(lines) + "\n"


def write_fixture(root):
    files = dict(FILES)
    files["big.log"] = big_log()
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("fixture", "calls"):
        sys.exit(__doc__)
    if sys.argv[1] == "fixture":
        write_fixture(sys.argv[2])
    else:
        calls = [{"label": c["label"], "tool": c["tool"], "args": c["args"]} for c in CALLS]
        with open(sys.argv[2], "w", encoding="utf-8") as f:
            json.dump({"calls": calls}, f, indent=1)


if __name__ == "__main__":
    main()
