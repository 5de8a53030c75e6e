//! UTF-16 files with a byte-order mark through every tool that reads or changes text: shown by
//! `read` and `grep`, changed by `edit`, `multi_edit`, `write` and `apply_patch`, restored by
//! `undo`, always written back in their own byte order with their BOM and line endings. Each
//! test runs both byte orders.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::fs::ContentHash;
use crate::testutil::TestWorkspace;

/// A UTF-16 byte order (the fixtures are made with the standard library, not with the code
/// under test).
#[derive(Debug, Clone, Copy)]
enum Order {
    Le,
    Be,
}

const ORDERS: [Order; 2] = [Order::Le, Order::Be];

/// `text` in UTF-16 in `order`, after its BOM.
fn utf16(order: Order, text: &str) -> Vec<u8> {
    "\u{feff}"
        .encode_utf16()
        .chain(text.encode_utf16())
        .flat_map(|unit| match order {
            Order::Le => unit.to_le_bytes(),
            Order::Be => unit.to_be_bytes(),
        })
        .collect()
}

/// The name `read` gives the encoding.
fn name(order: Order) -> &'static str {
    match order {
        Order::Le => "UTF-16LE",
        Order::Be => "UTF-16BE",
    }
}

/// A registry file as `reg export` and PowerShell write it: UTF-16, CRLF.
const REG: &str = "Windows Registry Editor Version 5.00\r\n\r\n[HKEY_CURRENT_USER\\Software\\Demo]\r\n\"Name\"=\"caf\u{e9} \u{1f600}\"\r\n\"Count\"=dword:00000001\r\n";

#[tokio::test]
async fn read_shows_utf16_text_without_its_bom_and_names_the_encoding() {
    let ws = TestWorkspace::new();
    for order in ORDERS {
        let bytes = utf16(order, REG);
        let path = ws.write("demo.reg", &bytes);
        let out = ws.call("read", json!({"path": "demo.reg"})).await.unwrap();
        let hash = ContentHash::of(&bytes);
        assert_eq!(
            out.joined_text(),
            format!(
                "     1\tWindows Registry Editor Version 5.00\n     2\t\n     3\t[HKEY_CURRENT_USER\\Software\\Demo]\n     4\t\"Name\"=\"caf\u{e9} \u{1f600}\"\n     5\t\"Count\"=dword:00000001\n\n[demo.reg: lines 1-5 of 5, {}, hash {hash}]",
                name(order)
            )
        );
        // The hash and size are the file's bytes on disk, as for UTF-8, and the session
        // remembers them for the edit tools' freshness check.
        let structured = out.structured.unwrap();
        assert_eq!(structured["hash"], hash.to_string());
        assert_eq!(structured["bytes"], bytes.len());
        assert_eq!(structured["encoding"], name(order));
        let stamp = ws.session.files().get(&path).unwrap();
        assert_eq!((stamp.hash, stamp.size), (hash, bytes.len() as u64));
    }
    // An empty one (only its BOM) says so.
    ws.write("empty.txt", b"\xff\xfe");
    assert_eq!(
        ws.text("read", json!({"path": "empty.txt"})).await,
        format!(
            "[empty.txt: empty UTF-16LE file (2 bytes: its byte-order mark), hash {}]",
            ContentHash::of(b"\xff\xfe")
        )
    );
}

#[tokio::test]
async fn read_pages_through_a_utf16_file_larger_than_its_first_read() {
    let ws = TestWorkspace::new();
    let body: String = (1..=3000).map(|i| format!("line {i}\r\n")).collect();
    for order in ORDERS {
        let bytes = utf16(order, &body);
        assert!(bytes.len() > 8192 * 4);
        ws.write("big.txt", &bytes);
        let text = ws
            .text(
                "read",
                json!({"path": "big.txt", "offset": 2999, "limit": 5}),
            )
            .await;
        assert_eq!(
            text,
            format!(
                "  2999\tline 2999\n  3000\tline 3000\n\n[big.txt: lines 2999-3000 of 3000, {}, hash {}]",
                name(order),
                ContentHash::of(&bytes)
            )
        );
    }
}

#[tokio::test]
async fn read_shows_invalid_utf16_with_a_note_and_refuses_what_is_not_text() {
    let ws = TestWorkspace::new();
    // A lone high surrogate before "x", on line 2.
    let mut lone = utf16(Order::Le, "ok\r\n");
    lone.extend_from_slice(&0xD801u16.to_le_bytes());
    lone.extend_from_slice(b"x\0");
    ws.write("lone.txt", &lone);
    let text = ws.text("read", json!({"path": "lone.txt"})).await;
    assert!(
        text.starts_with("     1\tok\n     2\t\u{fffd}x\n"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "[note: the file is not valid UTF-16LE (first fault: an unpaired surrogate 0xD801 \
             at offset 10); it is shown as U+FFFD, and the edit tools will refuse this file]"
        ),
        "{text}"
    );
    ws.write("odd.txt", b"\xfe\xff\0a\0");
    let text = ws.text("read", json!({"path": "odd.txt"})).await;
    assert!(text.starts_with("     1\ta\u{fffd}\n"), "{text}");
    assert!(text.contains("odd number of bytes"), "{text}");
    // UTF-32 is named and refused.
    ws.write("wide.txt", b"\xff\xfe\0\0a\0\0\0");
    let err = ws.error("read", json!({"path": "wide.txt"})).await;
    assert!(
        err.starts_with("`wide.txt`: the file is UTF-32LE (it starts with the byte-order mark FF FE 00 00); gimlet reads and edits UTF-8 and UTF-16 text only"),
        "{err}"
    );
    ws.write("wide-be.txt", b"\0\0\xfe\xff\0\0\0a");
    let err = ws.error("read", json!({"path": "wide-be.txt"})).await;
    assert!(err.contains("the file is UTF-32BE"), "{err}");
    // Binary data behind a UTF-16 BOM decodes to NUL characters: still binary.
    ws.write("blob.bin", b"\xff\xfe\0\x01\0\0\0\0");
    let err = ws.error("read", json!({"path": "blob.bin"})).await;
    assert!(
        err.starts_with("`blob.bin` is a binary file (it starts with a UTF-16LE byte-order mark, but decodes to NUL characters"),
        "{err}"
    );
}

#[tokio::test]
async fn utf16_without_a_bom_stays_binary_for_every_tool() {
    let ws = TestWorkspace::new();
    let bytes: Vec<u8> = "a\r\nb\r\n"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    let path = ws.write("nobom.txt", &bytes);
    let err = ws.error("read", json!({"path": "nobom.txt"})).await;
    assert!(err.contains("binary file (it contains NUL bytes"), "{err}");
    let err = ws
        .error(
            "edit",
            json!({"path": "nobom.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert!(err.contains("has not been read in this session"), "{err}");
    let update = "*** Begin Patch\n*** Update File: nobom.txt\n-a\n+b\n*** End Patch\n";
    let err = ws.error("apply_patch", json!({ "patch": update })).await;
    assert!(err.contains("Nothing was changed"), "{err}");
    let grep = ws
        .text("grep", json!({"pattern": "a", "path": "nobom.txt"}))
        .await;
    assert!(grep.starts_with("No matches for `a`"), "{grep}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[tokio::test]
async fn edit_keeps_the_byte_order_bom_and_crlf_and_undo_restores_every_byte() {
    for order in ORDERS {
        let ws = TestWorkspace::new();
        let before = utf16(order, REG);
        let path = ws.write("demo.reg", &before);
        ws.text("read", json!({"path": "demo.reg"})).await;
        let out = ws
            .call(
                "edit",
                json!({
                    "path": "demo.reg",
                    "old_string": "\"Count\"=dword:00000001",
                    "new_string": "\"Count\"=dword:00000002\n\"Caf\u{e9}\"=\"\u{1f600}\"",
                }),
            )
            .await
            .unwrap();
        let after = utf16(
            order,
            &REG.replace(
                "\"Count\"=dword:00000001\r\n",
                "\"Count\"=dword:00000002\r\n\"Caf\u{e9}\"=\"\u{1f600}\"\r\n",
            ),
        );
        assert_eq!(std::fs::read(&path).unwrap(), after);
        // The diff is of the text; the new hash is the bytes' on disk, and a read agrees.
        let text = out.joined_text();
        assert!(
            text.contains("-     5  \"Count\"=dword:00000001\n+     5  \"Count\"=dword:00000002\n+     6  \"Caf\u{e9}\"=\"\u{1f600}\""),
            "{text}"
        );
        let hash = ContentHash::of(&after).to_string();
        assert_eq!(out.structured.unwrap()["hash"], hash);
        assert!(
            ws.text("read", json!({"path": "demo.reg"}))
                .await
                .contains(&format!("hash {hash}]"))
        );
        // The session's own write keeps its view fresh: a second edit needs no read.
        ws.call(
            "edit",
            json!({"path": "demo.reg", "old_string": "Demo", "new_string": "Demo2"}),
        )
        .await
        .unwrap();
        let undone = ws.text("undo", json!({"path": "demo.reg"})).await;
        assert!(
            undone.contains("-     3  [HKEY_CURRENT_USER\\Software\\Demo2]"),
            "{undone}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), after);
        let undone = ws.text("undo", json!({"path": "demo.reg"})).await;
        assert!(
            undone.contains("+     5  \"Count\"=dword:00000001"),
            "{undone}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "{}", name(order));
    }
}

#[tokio::test]
async fn a_read_hash_of_a_utf16_file_is_the_expected_hash_edits_take() {
    let ws = TestWorkspace::new();
    let bytes = utf16(Order::Le, "one\r\ntwo\r\n");
    let path = ws.write("a.txt", &bytes);
    let hash = ContentHash::of(&bytes).to_string();
    // No read in this session: the hash alone is the guard.
    ws.call(
        "edit",
        json!({"path": "a.txt", "old_string": "two", "new_string": "2", "expected_hash": hash}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        utf16(Order::Le, "one\r\n2\r\n")
    );
}

#[tokio::test]
async fn multi_edit_changes_utf16_files_all_or_nothing() {
    for order in ORDERS {
        let ws = TestWorkspace::new();
        let before = utf16(order, "alpha\r\nbeta\r\ngamma\r\n");
        let path = ws.write("m.txt", &before);
        ws.text("read", json!({"path": "m.txt"})).await;
        let err = ws
            .error(
                "multi_edit",
                json!({"path": "m.txt", "edits": [
                    {"old_string": "alpha", "new_string": "A"},
                    {"old_string": "delta", "new_string": "D"},
                ]}),
            )
            .await;
        assert!(
            err.starts_with("edit 2 of 2: `old_string` was not found"),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);
        ws.call(
            "multi_edit",
            json!({"path": "m.txt", "edits": [
                {"old_string": "alpha", "new_string": "A"},
                {"old_string": "A\nbeta", "new_string": "A\nB\nb\u{e9}ta"},
                {"old_string": "a", "new_string": "4", "replace_all": true},
            ]}),
        )
        .await
        .unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            utf16(order, "A\r\nB\r\nb\u{e9}t4\r\ng4mm4\r\n")
        );
    }
}

#[tokio::test]
async fn write_over_a_utf16_file_keeps_it_utf16_and_a_new_file_is_utf8() {
    for order in ORDERS {
        let ws = TestWorkspace::new();
        let path = ws.write("w.txt", utf16(order, "old\r\n"));
        ws.text("read", json!({"path": "w.txt"})).await;
        let out = ws
            .text("write", json!({"path": "w.txt", "content": "new\nlines\n"}))
            .await;
        let after = utf16(order, "new\r\nlines\r\n");
        assert!(
            out.starts_with(&format!(
                "Replaced `w.txt` (2 lines, {} bytes; +2 -1 lines).",
                after.len()
            )),
            "{out}"
        );
        assert!(
            out.contains("-     1  old\n+     1  new\n+     2  lines"),
            "{out}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), after);
        // The same text again is the same bytes: nothing is written.
        let same = ws
            .text("write", json!({"path": "w.txt", "content": "new\nlines\n"}))
            .await;
        assert!(same.contains("already has this content"), "{same}");
        ws.text("undo", json!({})).await;
        assert_eq!(std::fs::read(&path).unwrap(), utf16(order, "old\r\n"));
    }
    // A file that announces UTF-16 but does not decode is replaced whole, in UTF-16.
    let ws = TestWorkspace::new();
    let path = ws.write("bad.txt", b"\xff\xfe\x00\xd8a\0");
    ws.text("read", json!({"path": "bad.txt"})).await;
    ws.text("write", json!({"path": "bad.txt", "content": "fixed\n"}))
        .await;
    assert_eq!(std::fs::read(&path).unwrap(), utf16(Order::Le, "fixed\n"));
    // There is no way to ask for UTF-16 in a new file: it is UTF-8.
    let path = ws.root().join("new.txt");
    ws.text("write", json!({"path": "new.txt", "content": "n\n"}))
        .await;
    assert_eq!(std::fs::read(&path).unwrap(), b"n\n");
}

#[tokio::test]
async fn apply_patch_updates_replaces_and_moves_utf16_files_in_their_encoding() {
    for order in ORDERS {
        let ws = TestWorkspace::new();
        let a = ws.write("a.txt", utf16(order, "one\r\ntwo\r\nthree\r\n"));
        let b = ws.write("b.txt", utf16(order, "bee\r\n"));
        ws.write("c.txt", utf16(order, "sea\r\n"));
        ws.text("read", json!({"path": "b.txt"})).await;
        let patch = "*** Begin Patch\n*** Update File: a.txt\n one\n-two\n+2\n+2\u{bd}\n three\n*** Add File: b.txt\n+B\n*** Update File: c.txt\n*** Move to: d/c.txt\n@@\n-sea\n+SEA\n*** End Patch\n";
        let out = ws
            .call("apply_patch", json!({ "patch": patch }))
            .await
            .unwrap();
        let a_after = utf16(order, "one\r\n2\r\n2\u{bd}\r\nthree\r\n");
        let b_after = utf16(order, "B\r\n");
        let c_after = utf16(order, "SEA\r\n");
        assert_eq!(std::fs::read(&a).unwrap(), a_after);
        assert_eq!(std::fs::read(&b).unwrap(), b_after);
        assert!(!ws.root().join("c.txt").exists());
        assert_eq!(std::fs::read(ws.root().join("d/c.txt")).unwrap(), c_after);
        let text = out.joined_text();
        assert!(text.contains("M a.txt (+2 -1)\nM b.txt (replaced whole) (+1 -1)\nR c.txt -> d/c.txt (+0 -0)\nA d/c.txt (+1 -0)\n"), "{text}");
        // The hashes reported are those of the bytes written.
        let files = &out.structured.unwrap()["files"];
        assert_eq!(files[0]["hash"], ContentHash::of(&a_after).to_string());
        assert_eq!(files[1]["hash"], ContentHash::of(&b_after).to_string());
        ws.text("undo", json!({})).await;
        assert_eq!(
            std::fs::read(&a).unwrap(),
            utf16(order, "one\r\ntwo\r\nthree\r\n")
        );
        assert_eq!(std::fs::read(&b).unwrap(), utf16(order, "bee\r\n"));
        assert_eq!(
            std::fs::read(ws.root().join("c.txt")).unwrap(),
            utf16(order, "sea\r\n")
        );
    }
}

#[tokio::test]
async fn the_edit_tools_refuse_invalid_utf16_and_leave_it_alone() {
    let ws = TestWorkspace::new();
    let mut lone = utf16(Order::Le, "ok\r\n");
    lone.extend_from_slice(&0xDC00u16.to_le_bytes());
    let odd = b"\xfe\xff\0o\0k\0".to_vec();
    for (file, bytes, why) in [
        (
            "lone.txt",
            &lone,
            "(an unpaired surrogate 0xDC00, at offset 10, line 2)",
        ),
        (
            "odd.txt",
            &odd,
            "(an odd number of bytes: the last byte is half a unit, at offset 6, line 1)",
        ),
    ] {
        let path = ws.write(file, bytes);
        ws.text("read", json!({"path": file})).await;
        let err = ws
            .error(
                "edit",
                json!({"path": file, "old_string": "ok", "new_string": "OK"}),
            )
            .await;
        assert!(
            err.contains("but is not valid UTF-16")
                && err.contains(why)
                && err.contains("will not rewrite it"),
            "{err}"
        );
        let err = ws
            .error(
                "multi_edit",
                json!({"path": file, "edits": [{"old_string": "ok", "new_string": "OK"}]}),
            )
            .await;
        assert!(err.contains(why), "{err}");
        let update = format!("*** Begin Patch\n*** Update File: {file}\n-ok\n+OK\n*** End Patch\n");
        let err = ws.error("apply_patch", json!({ "patch": update })).await;
        assert!(err.contains(why), "{err}");
        assert_eq!(&std::fs::read(&path).unwrap(), bytes);
    }
    // UTF-32: named and refused.
    let path = ws.write("wide.txt", b"\xff\xfe\0\0o\0\0\0");
    let hash = ContentHash::of(&std::fs::read(&path).unwrap()).to_string();
    let err = ws
        .error(
            "edit",
            json!({"path": "wide.txt", "old_string": "o", "new_string": "O", "expected_hash": hash}),
        )
        .await;
    assert!(err.contains("the file is UTF-32LE"), "{err}");
}

#[tokio::test]
async fn grep_searches_utf16_files_as_text() {
    for order in ORDERS {
        let ws = TestWorkspace::new();
        ws.write("demo.reg", utf16(order, REG));
        ws.write("plain.txt", "no match here\n");
        let files = ws.text("grep", json!({"pattern": "dword"})).await;
        assert!(files.starts_with("demo.reg\n"), "{files}");
        let content = ws
            .text(
                "grep",
                json!({"pattern": "caf\u{e9}", "output_mode": "content", "context": 1}),
            )
            .await;
        assert!(
            content.starts_with("demo.reg-3-[HKEY_CURRENT_USER\\Software\\Demo]\ndemo.reg:4:\"Name\"=\"caf\u{e9} \u{1f600}\"\ndemo.reg-5-\"Count\"=dword:00000001\n"),
            "{content}"
        );
        let multiline = ws
            .text(
                "grep",
                json!({"pattern": "Demo\\]\\r?\\n\"Name", "multiline": true, "output_mode": "count"}),
            )
            .await;
        assert!(multiline.starts_with("demo.reg:1\n"), "{multiline}");
    }
}
