use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;

/// One edit on `before`: the new text and the level, or the error message.
fn edit(before: &str, old: &str, new: &str, all: bool) -> Result<(String, MatchLevel), String> {
    let doc = Document::from_text(before.to_owned());
    apply_edits(
        &doc,
        &[EditSpec {
            old,
            new,
            replace_all: all,
        }],
    )
    .map(|applied| (applied.text, applied.levels[0]))
    .map_err(|(_, err)| err.to_string())
}

#[track_caller]
fn ok(before: &str, old: &str, new: &str, after: &str, level: MatchLevel) {
    assert_eq!(
        edit(before, old, new, false),
        Ok((after.to_owned(), level)),
        "{before:?}: {old:?} -> {new:?}"
    );
}

#[track_caller]
fn err(before: &str, old: &str, new: &str, needle: &str) {
    let message = edit(before, old, new, false).expect_err("should fail");
    assert!(message.contains(needle), "{message}");
}

#[test]
fn exact_replacements() {
    use MatchLevel::Exact;
    ok(
        "let a = 1;\nlet b = 2;\n",
        "b = 2",
        "b = 3",
        "let a = 1;\nlet b = 3;\n",
        Exact,
    );
    ok(
        "no newline at end",
        "end",
        "the end",
        "no newline at the end",
        Exact,
    );
    ok("x", "x", "", "", Exact);
    // Line endings: LF `old` matches CRLF lines; untouched lines keep theirs.
    ok("a\r\nb\r\nc\r\n", "a\nb", "A\nB", "A\r\nB\r\nc\r\n", Exact);
    ok("a\nb\r\nc\n", "c", "C", "a\nb\r\nC\n", Exact);
    ok("a\r\nb\r\n", "a\n", "a\nnew\n", "a\r\nnew\r\nb\r\n", Exact);
    // BOM kept, and never part of a match.
    ok("\u{feff}hello\n", "hello", "bye", "\u{feff}bye\n", Exact);
    // CRLF written in `old`/`new` by the model works the same.
    ok("a\r\nb\r\n", "a\r\nb", "x\r\ny", "x\r\ny\r\n", Exact);
}

#[test]
fn fallbacks_in_order() {
    // Trailing whitespace: the untouched line keeps its trailing spaces.
    ok(
        "fn a() {   \n    x();\n}\n",
        "fn a() {\n    x();\n}",
        "fn a() {\n    y();\n}",
        "fn a() {   \n    y();\n}\n",
        MatchLevel::TrailingWhitespace,
    );
    // Indentation shift: the replacement is re-indented to the file's.
    ok(
        "class A:\n    def f(self):\n        return 1\n",
        "def f(self):\n    return 1",
        "def f(self):\n    return 2",
        "class A:\n    def f(self):\n        return 2\n",
        MatchLevel::Indentation,
    );
    ok(
        "\t\tif x {\n\t\t\ty()\n\t\t}\n",
        "if x {\n\ty()\n}",
        "if x {\n\tz()\n}",
        "\t\tif x {\n\t\t\tz()\n\t\t}\n",
        MatchLevel::Indentation,
    );
    // Tabs in the file against spaces in `old` are no uniform shift, but each line matches
    // with its own indentation ignored; the changed line takes the file line's.
    ok(
        "\tif x {\n\t\ty()\n\t}\n",
        "if x {\n    y()\n}",
        "if x {\n    z()\n}",
        "\tif x {\n\t\tz()\n\t}\n",
        MatchLevel::Whitespace,
    );
    // Unicode punctuation: curly quotes, dashes, NBSP.
    ok(
        "say(“hi” – now)\n",
        "say(\"hi\" - now)",
        "say(\"bye\")",
        "say(\"bye\")\n",
        MatchLevel::Punctuation,
    );
    ok(
        "a\u{a0}=\u{a0}1\nb\n",
        "a = 1\nb",
        "a = 1\nc",
        "a\u{a0}=\u{a0}1\nc\n",
        MatchLevel::Punctuation,
    );
}

#[test]
fn misses_and_ambiguities_explain_themselves() {
    err(
        "x\ny\nx\n",
        "x",
        "z",
        "matches 2 places (exact match, lines 1, 3)",
    );
    err("aaa", "aa", "b", "matches 2 places");
    err("a\n  b\nc\n", "b\nd", "q", "was not found");
    let message = edit("alpha\nbeta\ngamma\n", "betta\ngamma", "x", false).unwrap_err();
    assert!(
        message.contains("The closest text is at lines 2-3"),
        "{message}"
    );
    assert!(message.contains("-betta\n+beta\n gamma"), "{message}");
    // Fallback with two candidates is refused.
    err(
        "if a:  \n  x\nif a: \n  x\n",
        "if a:\n  x",
        "y",
        "matches 2 places (matched ignoring trailing whitespace, lines 1, 3)",
    );
    err("", "x", "y", "was not found");
}

#[test]
fn whitespace_runs_collapsed_or_widened() {
    use MatchLevel::Whitespace;
    // Inside a line, the match is the text between the first and last non-blank characters.
    ok(
        "const   x    =     5;\n",
        "const x = 5;",
        "const x = 10;",
        "const x = 10;\n",
        Whitespace,
    );
    ok(
        "if\t(  condition\t) {\n",
        "if ( condition ) {",
        "if (c) {",
        "if (c) {\n",
        Whitespace,
    );
    ok(
        "  let a =  f(1,  2); // keep\n",
        "f(1, 2)",
        "f(3, 4)",
        "  let a =  f(3, 4); // keep\n",
        Whitespace,
    );
    // Widened: the model wrote more space than the file has.
    ok(
        "x = [1, 2]\n",
        "x  =  [1,  2]",
        "x = [3]",
        "x = [3]\n",
        Whitespace,
    );
    // Whitespace the model put around a one-line `old_string` is not matched, nor written.
    ok(
        "    a  = 1\n",
        "  a = 1",
        "  a = 2",
        "    a = 2\n",
        Whitespace,
    );
    // Unique only.
    err(
        "a  =  1\nb = a   =  1\n",
        "a = 1",
        "a = 2",
        "matches 2 places",
    );
    // Runs are not removed: `ab` does not match `a b`.
    err("a b\n", "ab", "x", "was not found");
}

#[test]
fn escapes_written_where_the_file_has_the_characters() {
    use MatchLevel::Escapes;
    ok(
        "console.log(\"Hello\nWorld\");\n",
        "console.log(\\\"Hello\\nWorld\\\");",
        "console.log(\"Hi\");",
        "console.log(\"Hi\");\n",
        Escapes,
    );
    ok("a\tb\n", "a\\tb", "a b", "a b\n", Escapes);
    ok("it's\n", "it\\'s", "it is", "it is\n", Escapes);
    ok(
        "C:\\Users\n",
        "C:\\\\Users",
        "D:\\Users",
        "D:\\Users\n",
        Escapes,
    );
    // `new_string` is written as given, escapes and all.
    ok(
        "x = 'a\nb'\n",
        "'a\\nb'",
        "'a\\nc'",
        "x = 'a\\nc'\n",
        Escapes,
    );
    // Literal backslash sequences in the file still match exactly first.
    ok(
        "s = \"a\\nb\"\n",
        "\"a\\nb\"",
        "\"c\"",
        "s = \"c\"\n",
        MatchLevel::Exact,
    );
    err("it's and it's\n", "it\\'s", "x", "matches 2 places");
}

#[test]
fn a_fallback_match_at_the_end_keeps_the_missing_final_newline() {
    // `old` ends with a newline the file lacks at its end: the file still lacks one after.
    ok(
        "a\n  b",
        "a\nb\n",
        "a\nc\n",
        "a\n  c",
        MatchLevel::Whitespace,
    );
    ok(
        "x\ny   ",
        "y\n",
        "z\n",
        "x\nz",
        MatchLevel::TrailingWhitespace,
    );
    ok(
        "x\n    y",
        "  y\n",
        "  z\n",
        "x\n    z",
        MatchLevel::Indentation,
    );
    // With a final newline, nothing changes about it.
    ok(
        "x\ny   \n",
        "y\n",
        "z\n",
        "x\nz\n",
        MatchLevel::TrailingWhitespace,
    );
    // Removing the last line of a file without a final newline keeps it without one.
    ok(
        "a\n  b\n  c",
        "b\nc",
        "b",
        "a\n  b",
        MatchLevel::Indentation,
    );
    // Lines matched without their last break and replaced by nothing leave the breaks around
    // them, as an exact match would.
    ok("a\n  b\n  c", "b\nc", "", "a\n", MatchLevel::Indentation);
}

#[test]
fn a_fuzzy_edit_keeps_each_untouched_line_ending() {
    ok(
        "a  \r\nb\nc  \r\nd\n",
        "a\nb\nc\nd",
        "a\nB\nc\nd",
        "a  \r\nB\nc  \r\nd\n",
        MatchLevel::TrailingWhitespace,
    );
    // An exact edit across lines rewrites only what differs.
    ok(
        "one\r\ntwo\nthree\r\n",
        "one\ntwo\nthree",
        "one\nTWO\nthree",
        "one\r\nTWO\nthree\r\n",
        MatchLevel::Exact,
    );
}

#[test]
fn an_exact_edit_across_lines_keeps_each_line_ending_beside_equal_lines() {
    use MatchLevel::Exact;
    // `x` becomes `y` and one `same` goes: whichever it is, `y` keeps the ending of `x`.
    for old in ["x\nsame\nsame", "x\nsame\nsame\n"] {
        let new = old.replacen("x\nsame", "y", 1);
        ok("x\r\nsame\nsame\r\n", old, &new, "y\r\nsame\r\n", Exact);
    }
    // Each changed line keeps its own ending, not the file's dominant one.
    ok(
        "a\nb\r\nc\r\nd\r\n",
        "a\nb",
        "A\nB",
        "A\nB\r\nc\r\nd\r\n",
        Exact,
    );
    // The same result as a fuzzy match of the same change.
    ok(
        "x  \r\nsame\nsame\r\n",
        "x\nsame\nsame",
        "y\nsame",
        "y\r\nsame\r\n",
        MatchLevel::TrailingWhitespace,
    );
    // Lines joined: the joined line ends as the last of them did, as nothing past `old` changes.
    ok("a b\nc\r\nd\n", "b\nc", "b c", "a b c\r\nd\n", Exact);
    // Occurrences that share a line are changed bytewise.
    assert_eq!(
        edit("a\nb a\nb\r\n", "a\nb", "A\nB", true),
        Ok((String::from("A\nB A\nB\r\n"), Exact))
    );
}

#[test]
fn a_first_and_last_line_anchor_with_another_middle_is_refused() {
    // opencode's block-anchor replacer would apply this; its middle does not match.
    let message = edit(
        "function calculate(a, b) {\n  const temp = a + b;\n  const result = temp * 2;\n  return result;\n}\n",
        "function calculate(a, b) {\n  // different middle content\n  return result;\n}",
        "function calculate(a, b) {\n  return a * b * 2;\n}",
        false,
    )
    .unwrap_err();
    assert!(
        message.contains("was not found") && message.contains("The closest text is at lines"),
        "{message}"
    );
}

#[test]
fn replace_all_and_multiple_edits() {
    assert_eq!(
        edit("x x x", "x", "y", true),
        Ok(("y y y".to_owned(), MatchLevel::Exact))
    );
    let doc = Document::from_text("one\ntwo\n".to_owned());
    let applied = apply_edits(
        &doc,
        &[
            EditSpec {
                old: "one",
                new: "1",
                replace_all: false,
            },
            EditSpec {
                old: "1\ntwo",
                new: "1\n2",
                replace_all: false,
            },
        ],
    )
    .unwrap();
    assert_eq!(applied.text, "1\n2\n");
    let failed = apply_edits(
        &doc,
        &[
            EditSpec {
                old: "one",
                new: "1",
                replace_all: false,
            },
            EditSpec {
                old: "three",
                new: "3",
                replace_all: false,
            },
        ],
    );
    assert_eq!(failed.unwrap_err().0, 1);
}

#[test]
fn decoding_refuses_invalid_utf8_and_names_the_place() {
    let err = Document::decode(b"ok\ncaf\xe9\n".to_vec()).unwrap_err();
    assert_eq!(
        err,
        EncodingError::Utf8 {
            byte: 0xE9,
            offset: 6,
            line: 2
        }
    );
    assert!(err.to_string().contains("will not rewrite it"), "{err}");
}

#[test]
fn writes_keep_the_style_of_the_file_they_replace() {
    let crlf = Document::from_text("\u{feff}a\r\nb\r\n".to_owned());
    assert_eq!(
        in_style_of(&crlf, "x\ny\n").original(),
        "\u{feff}x\r\ny\r\n"
    );
    let lf = Document::from_text("a\n".to_owned());
    assert_eq!(in_style_of(&lf, "x\ny\n").original(), "x\ny\n");
    // A UTF-16 file stays UTF-16, in its byte order, with its BOM and endings.
    let utf16 = Document::decode(b"\xfe\xff\0a\0\r\0\n".to_vec()).unwrap();
    let replaced = in_style_of(&utf16, "x\n");
    assert_eq!(replaced.encoding(), Encoding::Utf16(ByteOrder::Big));
    assert_eq!(&replaced.bytes()[..], b"\xfe\xff\0x\0\r\0\n");
}

/// `text` in UTF-16, little-endian.
fn utf16le(text: &str) -> Vec<u8> {
    text.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

#[test]
fn utf16_files_are_edited_as_text_and_written_back_in_utf16() {
    // As PowerShell writes it: UTF-16LE, a BOM, CRLF.
    let before = utf16le(
        "\u{feff}Windows Registry Editor Version 5.00\r\n\r\n[HKEY_CURRENT_USER\\A]\r\n\"v\"=\"1\"\r\n",
    );
    let doc = Document::decode(before.clone()).unwrap();
    assert_eq!(doc.encoding(), Encoding::Utf16(ByteOrder::Little));
    assert!(doc.has_bom());
    assert_eq!(
        doc.normalized(),
        "Windows Registry Editor Version 5.00\n\n[HKEY_CURRENT_USER\\A]\n\"v\"=\"1\"\n"
    );
    assert_eq!(&doc.bytes()[..], &before[..]);
    let applied = apply_edits(
        &doc,
        &[EditSpec {
            old: "\"v\"=\"1\"",
            new: "\"v\"=\"2\"\n\"w\"=\"\u{e9}\"",
            replace_all: false,
        }],
    )
    .unwrap();
    let after = Document::from_text_in(applied.text, doc.encoding());
    assert_eq!(
        after.bytes().into_owned(),
        utf16le(
            "\u{feff}Windows Registry Editor Version 5.00\r\n\r\n[HKEY_CURRENT_USER\\A]\r\n\"v\"=\"2\"\r\n\"w\"=\"\u{e9}\"\r\n"
        )
    );
}

#[test]
fn decoding_refuses_invalid_utf16_and_utf32_and_names_why() {
    let mut lone = utf16le("\u{feff}ok\r\nx");
    lone.extend_from_slice(&0xDBFFu16.to_le_bytes());
    let err = Document::decode(lone).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the file starts with a UTF-16LE byte-order mark but is not valid UTF-16LE (an unpaired \
         surrogate 0xDBFF, at offset 12, line 2); gimlet will not rewrite it with replacement \
         characters. Fix it with a command, or replace the whole file with `write`"
    );
    assert_eq!(err.encoding(), Encoding::Utf16(ByteOrder::Little));
    let odd = b"\xfe\xff\0a\0".to_vec();
    let err = Document::decode(odd).unwrap_err().to_string();
    assert!(
        err.contains("(an odd number of bytes: the last byte is half a unit, at offset 4, line 1)"),
        "{err}"
    );
    let err = Document::decode(b"\xff\xfe\0\0a\0\0\0".to_vec()).unwrap_err();
    assert_eq!(err, EncodingError::Utf32(Utf32::Le));
    assert!(
        err.to_string()
            .starts_with("the file is UTF-32LE (it starts with the byte-order mark FF FE 00 00)"),
        "{err}"
    );
    assert_eq!(err.encoding(), Encoding::Utf8);
}

fn ending() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("\n"), Just("\r\n")]
}

fn document() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        proptest::collection::vec(("[a-z ]{0,12}", ending()), 0..30),
        any::<bool>(),
    )
        .prop_map(|(bom, lines, final_newline)| {
            let mut text = String::from(if bom { "\u{feff}" } else { "" });
            let count = lines.len();
            for (i, (line, end)) in lines.into_iter().enumerate() {
                text.push_str(&line);
                if i + 1 < count || final_newline {
                    text.push_str(end);
                }
            }
            text
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn decoding_and_an_empty_replace_round_trip(text in document()) {
        let doc = Document::decode(text.clone().into_bytes()).unwrap();
        prop_assert_eq!(doc.replace(&[]), text);
    }

    #[test]
    fn utf16_decodes_and_encodes_back_byte_for_byte(text in document(), big in any::<bool>(), extra in "\\PC{0,8}") {
        let order = if big { ByteOrder::Big } else { ByteOrder::Little };
        let text = format!("\u{feff}{}{extra}", text.trim_start_matches('\u{feff}'));
        let bytes = Encoding::Utf16(order).encode(&text).into_owned();
        let doc = Document::decode(bytes.clone()).unwrap();
        prop_assert_eq!(doc.encoding(), Encoding::Utf16(order));
        prop_assert_eq!(doc.replace(&[]), text);
        prop_assert_eq!(doc.bytes().into_owned(), bytes);
    }

    #[test]
    fn an_exact_edit_changes_only_the_matched_span(text in document(), start in 0usize..400, len in 1usize..20, new in "[A-Z\n]{0,10}") {
        let doc = Document::from_text(text.clone());
        let norm = doc.normalized();
        prop_assume!(norm.len() > 1);
        let start = start % norm.len();
        let end = (start + len).min(norm.len());
        prop_assume!(norm.is_char_boundary(start) && norm.is_char_boundary(end));
        let old = &norm[start..end];
        let overlapping = (0..norm.len()).filter(|&i| norm[i..].starts_with(old)).count();
        prop_assume!(overlapping == 1 && old != new);
        let found = find_replacement(&doc, old, &new, false).unwrap();
        prop_assert_eq!(found.level, MatchLevel::Exact);
        let out = doc.replace(&found.edits);
        let (a, b) = (doc.original_offset(start), doc.original_offset(end));
        prop_assert!(out.starts_with(&text[..a]));
        prop_assert!(out.ends_with(&text[b..]));
    }

    #[test]
    fn replace_all_leaves_no_occurrence(words in proptest::collection::vec("(ab|cd|ef)", 1..40), new in "[XYZ]{0,3}") {
        let text = words.join(" ");
        let doc = Document::from_text(text.clone());
        prop_assume!(text.contains("ab"));
        let applied = apply_edits(&doc, &[EditSpec { old: "ab", new: &new, replace_all: true }]).unwrap();
        prop_assert!(!applied.text.contains("ab"));
        prop_assert_eq!(applied.replacements, text.matches("ab").count());
    }

    #[test]
    fn untouched_lines_keep_their_endings(text in document(), line in 0usize..30) {
        let doc = Document::from_text(text.clone());
        let lines: Vec<&str> = doc.normalized().split('\n').collect();
        let target = lines[line % lines.len()];
        prop_assume!(!target.is_empty() && doc.normalized().matches(target).count() == 1);
        let found = find_replacement(&doc, target, "CHANGED", false).unwrap();
        let out = doc.replace(&found.edits);
        // Same number of CRLF and BOM as before: only the changed line's text differs.
        prop_assert_eq!(out.matches("\r\n").count(), text.matches("\r\n").count());
        prop_assert_eq!(out.starts_with('\u{feff}'), text.starts_with('\u{feff}'));
    }

    #[test]
    fn the_matcher_never_panics(text in "(?s).{0,200}", old in "(?s).{0,40}", new in "(?s).{0,40}", all in any::<bool>()) {
        let doc = Document::from_text(text);
        let _ = find_replacement(&doc, &old, &new, all);
        let _ = apply_edits(&doc, &[EditSpec { old: &old, new: &new, replace_all: all }]);
    }
}
