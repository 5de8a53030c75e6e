//! Words: quote removal, and the code a word runs while bash expands it.
//!
//! `brush-parser` splits a word into pieces (plain text, quoted text, `$'...'`, parameter
//! expansions, substitutions, arithmetic). Quote removal keeps what the quotes held;
//! expansions keep their source text (`$HOME`, `$(pwd)`), since their value is only known when
//! the command runs. The code inside command substitutions (also those nested in `${x:-$(..)}`
//! and `$(( $(..) ))`) is handed back to be parsed in turn.

use brush_parser::ParserOptions;
use brush_parser::word::{self, WordPiece, WordPieceWithSource};

/// A word after quote removal.
#[derive(Debug, Clone, Default)]
pub(super) struct Word {
    /// The text with quotes removed; expansions keep their source text.
    pub(super) text: String,
    /// The word as written.
    pub(super) raw: String,
    /// It holds an expansion whose value is only known when it runs.
    pub(super) dynamic: bool,
    /// It holds an unquoted brace expansion (`{a,b}`, `{1..3}`), which makes several words.
    pub(super) braces: bool,
}

impl Word {
    /// A word taken as it is written (a process substitution).
    pub(super) fn opaque(raw: &str) -> Self {
        Self {
            text: raw.to_owned(),
            raw: raw.to_owned(),
            dynamic: true,
            braces: false,
        }
    }
}

/// What expanding a word runs, or hides.
#[derive(Debug, Default)]
pub(super) struct Expansion {
    /// The code of each command substitution, in order.
    pub(super) code: Vec<String>,
    /// Text that looks like code but that the word parser took as text (`a<(cmd)`), or a
    /// parameter expansion holding code it could not read.
    pub(super) hidden: Vec<String>,
}

/// Parses one word as written (`raw`): its text after quote removal, and what it runs.
pub(super) fn word(
    raw: &str,
    options: &ParserOptions,
) -> Result<(Word, Expansion), brush_parser::WordParseError> {
    let pieces = word::parse(raw, options)?;
    let mut out = Word {
        raw: raw.to_owned(),
        ..Word::default()
    };
    let mut expansion = Expansion::default();
    pieces_into(raw, &pieces, false, options, &mut out, &mut expansion);
    Ok((out, expansion))
}

/// The substitutions of an unquoted here-document body, and whether it expands anything.
pub(super) fn heredoc(
    body: &str,
    options: &ParserOptions,
) -> Result<(bool, Expansion), brush_parser::WordParseError> {
    let pieces = word::parse_heredoc(body, options)?;
    let mut out = Word::default();
    let mut expansion = Expansion::default();
    // Quotes in a here-document are text, so nothing in it is "unquoted" code either.
    pieces_into(body, &pieces, true, options, &mut out, &mut expansion);
    Ok((out.dynamic, expansion))
}

fn pieces_into(
    raw: &str,
    pieces: &[WordPieceWithSource],
    quoted: bool,
    options: &ParserOptions,
    out: &mut Word,
    expansion: &mut Expansion,
) {
    for piece in pieces {
        let source = raw.get(piece.start_index..piece.end_index).unwrap_or("");
        match &piece.piece {
            WordPiece::Text(text) => {
                if !quoted {
                    unquoted_text(text, out, expansion);
                }
                out.text.push_str(text);
            }
            WordPiece::SingleQuotedText(text) => out.text.push_str(text),
            WordPiece::AnsiCQuotedText(text) => out.text.push_str(&ansi_c(text)),
            WordPiece::EscapeSequence(escaped) => {
                // `\x` is `x`; a backslash before a newline joins the lines.
                let mut chars = escaped.chars();
                chars.next();
                let rest = chars.as_str();
                if rest != "\n" {
                    out.text.push_str(rest);
                }
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                pieces_into(raw, inner, true, options, out, expansion);
            }
            WordPiece::TildeExpansion(_) => out.text.push_str(source),
            WordPiece::ParameterExpansion(_) => {
                out.dynamic = true;
                out.text.push_str(source);
                parameter(source, options, expansion);
            }
            WordPiece::CommandSubstitution(code)
            | WordPiece::BackquotedCommandSubstitution(code) => {
                out.dynamic = true;
                out.text.push_str(source);
                expansion.code.push(code.clone());
            }
            WordPiece::ArithmeticExpression(expr) => {
                out.dynamic = true;
                out.text.push_str(source);
                arithmetic(&expr.value, options, expansion);
            }
        }
    }
}

/// Unquoted text: brace expansion makes several words of one, and text the word parser left
/// alone but bash would run (`a<(cmd)`) is reported as hidden.
fn unquoted_text(text: &str, out: &mut Word, expansion: &mut Expansion) {
    if let Some(open) = text.find('{')
        && text[open..].contains('}')
        && (text[open..].contains(',') || text[open..].contains(".."))
    {
        out.braces = true;
    }
    if ["<(", ">(", "$(", "`"]
        .iter()
        .any(|code| text.contains(code))
    {
        expansion.hidden.push(text.to_owned());
    }
}

/// `${name:-$(cmd)}`, `${a[$(cmd)]}`: the operands of a parameter expansion are words too.
fn parameter(source: &str, options: &ParserOptions, expansion: &mut Expansion) {
    let inner = source
        .strip_prefix("${")
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or("");
    if inner.is_empty() {
        return;
    }
    match word::parse(inner, options) {
        Ok(pieces) => {
            let mut scratch = Word::default();
            pieces_into(inner, &pieces, false, options, &mut scratch, expansion);
        }
        Err(_) if could_run(inner) => expansion.hidden.push(source.to_owned()),
        Err(_) => {}
    }
}

/// `$(( $(wc -l < f) + 1 ))`: bash expands substitutions inside arithmetic first.
fn arithmetic(expr: &str, options: &ParserOptions, expansion: &mut Expansion) {
    if !could_run(expr) {
        return;
    }
    match word::parse(expr, options) {
        Ok(pieces) => {
            let mut scratch = Word::default();
            pieces_into(expr, &pieces, false, options, &mut scratch, expansion);
        }
        Err(_) => expansion.hidden.push(expr.to_owned()),
    }
}

/// Whether text may hold a substitution.
fn could_run(text: &str) -> bool {
    ["$(", "`", "<(", ">("]
        .iter()
        .any(|code| text.contains(code))
}

/// The value of `$'...'`: C escapes decoded, as bash does.
pub(super) fn ansi_c(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(escape) = chars.next() else {
            out.push('\\');
            break;
        };
        let simple = match escape {
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(escape),
            _ => None,
        };
        if let Some(decoded) = simple {
            out.push(decoded);
            continue;
        }
        let (radix, max) = match escape {
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            '0'..='7' => (8, 2),
            'c' => {
                // `\cX`: the control character of X.
                if let Some(x) = chars
                    .next()
                    .and_then(|x| char::from_u32(u32::from(x) & 0x1f))
                {
                    out.push(x);
                }
                continue;
            }
            other => {
                out.push('\\');
                out.push(other);
                continue;
            }
        };
        let mut value = if radix == 8 {
            escape.to_digit(8).unwrap_or(0)
        } else {
            0
        };
        let mut digits = 0;
        while digits < max
            && let Some(d) = chars.peek().and_then(|d| d.to_digit(radix))
        {
            value = value * radix + d;
            chars.next();
            digits += 1;
        }
        if radix == 16 && digits == 0 {
            out.push('\\');
            out.push(escape);
        } else if radix == 8 || escape == 'x' {
            // Octal and `\xHH` give bytes; only ASCII stays one character here.
            out.push(char::from(u8::try_from(value & 0xff).unwrap_or(b'?')));
        } else if let Some(decoded) = char::from_u32(value) {
            out.push(decoded);
        }
    }
    out
}
