//! Arguments: JSON -> a tool's typed arguments, with errors that name the field, and the
//! coercion of commonly mistyped values (stage 1 of the pipeline; the registry parses with it).

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses `input` as `A`. The error says which field was wrong, what was expected and what
/// was given, e.g. ``field `offset`: invalid type: string "ten", expected a non-negative integer``.
pub(crate) fn parse_args<A: DeserializeOwned>(tool: &str, input: Value) -> Result<A, String> {
    let input = match input {
        Value::Null => Value::Object(serde_json::Map::new()),
        Value::Object(_) => input,
        other => {
            return Err(format!(
                "the arguments must be a JSON object such as {{\"path\": \"src/main.rs\"}}, got {}",
                kind_of(&other)
            ));
        }
    };
    serde_path_to_error::deserialize::<_, A>(input).map_err(|err| describe(tool, err))
}

/// `input` with the values a model commonly mistypes converted to the type `schema` wants,
/// or `None` when nothing needed converting. The pipeline tries this when arguments do not
/// parse as given (and only then): models often quote a number or a boolean (`"offset":
/// "10"`, `"multiline": "true"`), write a whole number as `10.0`, send an array or object as
/// a JSON string, or one string where a list of strings is wanted. Nothing is converted
/// where the schema also accepts a string.
pub(crate) fn coerced(input: &Value, schema: &Value) -> Option<Value> {
    let mut value = input.clone();
    coerce(&mut value, schema).then_some(value)
}

fn describe(tool: &str, err: serde_path_to_error::Error<serde_json::Error>) -> String {
    let path = err.path().to_string();
    let inner = plain_type_names(&err.into_inner().to_string());
    let hint = format!("see the input schema of `{tool}` in tools/list");
    if path == "." || path.is_empty() {
        format!("{inner}; {hint}")
    } else {
        format!("field `{path}`: {inner}; {hint}")
    }
}

/// serde names Rust types (`expected usize`); a model or a user knows JSON's.
fn plain_type_names(message: &str) -> String {
    const NAMES: [(&str, &str); 11] = [
        ("usize", "a non-negative integer"),
        ("u64", "a non-negative integer"),
        ("u32", "a non-negative integer (at most 4294967295)"),
        ("u16", "a non-negative integer (at most 65535)"),
        ("u8", "a non-negative integer (at most 255)"),
        ("isize", "an integer"),
        ("i64", "an integer"),
        ("i32", "an integer"),
        ("f64", "a number"),
        ("f32", "a number"),
        ("bool", "a boolean"),
    ];
    let Some(at) = message.rfind("expected ") else {
        return message.to_owned();
    };
    let (head, tail) = message.split_at(at + "expected ".len());
    let word_end = tail
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(tail.len());
    match NAMES.iter().find(|(rust, _)| *rust == &tail[..word_end]) {
        Some((_, plain)) => format!("{head}{plain}{}", &tail[word_end..]),
        None => message.to_owned(),
    }
}

/// Converts, in place, the values in `value` that `schema` wants as another JSON type and that
/// say that type unambiguously: `"10"` or `10.0` where an integer is wanted, `"2.5"` for a
/// number, `"true"`/`"false"` for a boolean, a string holding a JSON array or object for one,
/// and a lone string where a list of strings is wanted. Nothing is converted where the schema
/// also accepts a string. Returns whether anything changed.
fn coerce(value: &mut Value, schema: &Value) -> bool {
    let types = schema_types(schema);
    let wants = |t: &str| types.contains(&t);
    let mut changed = false;
    let converted = match value {
        Value::String(text) if !wants("string") => from_string(text.trim(), &wants).or_else(|| {
            // One string where a list of strings is wanted: a list of one.
            let items = schema.get("items").map(schema_types).unwrap_or_default();
            (wants("array") && items.contains(&"string"))
                .then(|| Value::Array(vec![Value::String(text.clone())]))
        }),
        Value::Number(number)
            if wants("integer") && !wants("number") && !number.is_i64() && !number.is_u64() =>
        {
            number.as_f64().and_then(whole_number)
        }
        _ => None,
    };
    if let Some(converted) = converted {
        *value = converted;
        changed = true;
    }
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (key, field) in map.iter_mut() {
                    if let Some(field_schema) = properties.get(key) {
                        changed |= coerce(field, field_schema);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    changed |= coerce(item, item_schema);
                }
            }
        }
        _ => {}
    }
    changed
}

fn schema_types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn from_string(text: &str, wants: &dyn Fn(&str) -> bool) -> Option<Value> {
    if wants("integer") {
        if let Ok(n) = text.parse::<i64>() {
            return Some(Value::from(n));
        }
        if let Ok(n) = text.parse::<u64>() {
            return Some(Value::from(n));
        }
    }
    if wants("number")
        && let Some(n) = text.parse::<f64>().ok().filter(|n| n.is_finite())
    {
        return serde_json::Number::from_f64(n).map(Value::Number);
    }
    if wants("integer")
        && let Some(whole) = text.parse::<f64>().ok().and_then(whole_number)
    {
        return Some(whole);
    }
    if wants("boolean") {
        match text {
            "true" => return Some(Value::Bool(true)),
            "false" => return Some(Value::Bool(false)),
            _ => {}
        }
    }
    if (wants("array") && text.starts_with('[')) || (wants("object") && text.starts_with('{')) {
        return serde_json::from_str::<Value>(text)
            .ok()
            .filter(|v| (v.is_array() && wants("array")) || (v.is_object() && wants("object")));
    }
    None
}

/// `n` as a JSON integer when it is a whole number that an `i64` or a `u64` holds exactly.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss,
    reason = "range-checked just before; a whole f64 in range converts exactly"
)]
fn whole_number(n: f64) -> Option<Value> {
    if n.fract() != 0.0 || !n.is_finite() {
        return None;
    }
    if n >= 0.0 && n < u64::MAX as f64 {
        Some(Value::from(n as u64))
    } else if n < 0.0 && n >= i64::MIN as f64 {
        Some(Value::from(n as i64))
    } else {
        None
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Args {
        path: String,
        offset: Option<usize>,
        edits: Option<Vec<Edit>>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Edit {
        old: String,
    }

    #[derive(Debug, Deserialize, PartialEq, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Loose {
        tags: Option<Vec<String>>,
        count: Option<u32>,
        delta: Option<i64>,
        ratio: Option<f64>,
        flag: Option<bool>,
        name: Option<String>,
        items: Option<Vec<Item>>,
        choice: Option<Choice>,
    }

    #[derive(Debug, Deserialize, PartialEq, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Item {
        size: u64,
        done: bool,
    }

    #[derive(Debug, Deserialize, PartialEq, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Choice {
        One,
        Two,
    }

    /// As the pipeline does it: parse, and on failure parse the converted input if any.
    fn loose(input: Value) -> Result<Loose, String> {
        let kept = input.clone();
        parse_args::<Loose>("demo", input).or_else(|first| {
            let schema = Value::Object(crate::schema::input_schema::<Loose>());
            match coerced(&kept, &schema) {
                Some(converted) => parse_args::<Loose>("demo", converted),
                None => Err(first),
            }
        })
    }

    fn parse(input: Value) -> Result<Args, String> {
        parse_args::<Args>("demo", input)
    }

    #[test]
    fn good_arguments_parse() {
        let args = parse(json!({"path": "a", "offset": 3})).unwrap();
        assert_eq!(
            args,
            Args {
                path: "a".into(),
                offset: Some(3),
                edits: None
            }
        );
    }

    #[test]
    fn wrong_type_names_field_expected_and_given() {
        let err = parse(json!({"path": "a", "offset": "ten"})).unwrap_err();
        assert!(
            err.starts_with("field `offset`: invalid type: string \"ten\""),
            "{err}"
        );
        assert!(err.contains("expected a non-negative integer;"), "{err}");
        let err = parse(json!({"path": "a", "offset": -1})).unwrap_err();
        assert!(
            err.starts_with(
                "field `offset`: invalid value: integer `-1`, expected a non-negative integer;"
            ),
            "{err}"
        );
    }

    #[test]
    fn rust_type_names_become_json_ones() {
        assert_eq!(
            plain_type_names("invalid type: string \"x\", expected u32"),
            "invalid type: string \"x\", expected a non-negative integer (at most 4294967295)"
        );
        assert_eq!(
            plain_type_names("invalid type: null, expected f64 here"),
            "invalid type: null, expected a number here"
        );
        // Only whole words, only after "expected".
        assert_eq!(
            plain_type_names("invalid type: string \"u8\", expected u8x"),
            "invalid type: string \"u8\", expected u8x"
        );
        assert_eq!(
            plain_type_names("missing field `usize`"),
            "missing field `usize`"
        );
    }

    #[test]
    fn quoted_numbers_and_booleans_are_taken_where_the_schema_wants_them() {
        let args = loose(json!({
            "count": "7", "delta": " -3 ", "ratio": "2.5", "flag": "true",
            "items": [{"size": "10", "done": "false"}],
        }))
        .unwrap();
        assert_eq!(args.count, Some(7));
        assert_eq!(args.delta, Some(-3));
        assert_eq!(args.ratio, Some(2.5));
        assert_eq!(args.flag, Some(true));
        assert_eq!(
            args.items,
            Some(vec![Item {
                size: 10,
                done: false
            }])
        );
    }

    #[test]
    fn whole_floats_become_integers_and_fractions_do_not() {
        assert_eq!(loose(json!({"count": 5.0})).unwrap().count, Some(5));
        assert_eq!(loose(json!({"delta": "-4.0"})).unwrap().delta, Some(-4));
        let err = loose(json!({"count": 5.5})).unwrap_err();
        assert!(
            err.starts_with("field `count`: invalid type: floating point `5.5`"),
            "{err}"
        );
    }

    #[test]
    fn a_json_string_is_taken_where_an_array_is_wanted() {
        let args = loose(json!({"items": "[{\"size\": 1, \"done\": true}]"})).unwrap();
        assert_eq!(
            args.items,
            Some(vec![Item {
                size: 1,
                done: true
            }])
        );
        assert_eq!(
            loose(json!({"tags": "target"})).unwrap().tags,
            Some(vec![String::from("target")])
        );
        assert_eq!(
            loose(json!({"tags": "[\"a\", \"b\"]"})).unwrap().tags,
            Some(vec![String::from("a"), String::from("b")])
        );
        let err = loose(json!({"items": "[not json"})).unwrap_err();
        assert!(
            err.starts_with("field `items`: invalid type: string"),
            "{err}"
        );
    }

    #[test]
    fn strings_stay_strings_and_nonsense_still_fails() {
        // A string field keeps a numeric-looking value as it is.
        assert_eq!(
            loose(json!({"name": "42"})).unwrap().name.as_deref(),
            Some("42")
        );
        assert_eq!(
            loose(json!({"choice": "two"})).unwrap().choice,
            Some(Choice::Two)
        );
        for (input, start) in [
            (
                json!({"count": "seven"}),
                "field `count`: invalid type: string \"seven\"",
            ),
            (
                json!({"flag": "yes"}),
                "field `flag`: invalid type: string \"yes\"",
            ),
            (
                json!({"count": "-1"}),
                "field `count`: invalid value: integer `-1`",
            ),
            (
                json!({"count": "1", "nope": 1}),
                "field `nope`: unknown field `nope`",
            ),
        ] {
            let err = loose(input).unwrap_err();
            assert!(err.starts_with(start), "{err}");
        }
    }

    #[test]
    fn nested_field_path_is_named() {
        let err = parse(json!({"path": "a", "edits": [{"old": "x"}, {"old": 1}]})).unwrap_err();
        assert!(err.starts_with("field `edits[1].old`"), "{err}");
    }

    #[test]
    fn missing_and_unknown_fields_are_named() {
        let err = parse(json!({})).unwrap_err();
        assert!(err.starts_with("missing field `path`"), "{err}");
        let err = parse(json!({"path": "a", "file_path": "b"})).unwrap_err();
        assert!(
            err.contains("unknown field `file_path`, expected one of"),
            "{err}"
        );
    }

    #[test]
    fn non_object_arguments_are_refused_and_null_is_empty() {
        let err = parse(json!([1])).unwrap_err();
        assert!(
            err.contains("must be a JSON object") && err.contains("an array"),
            "{err}"
        );
        assert!(
            parse(Value::Null)
                .unwrap_err()
                .contains("missing field `path`")
        );
    }
}
