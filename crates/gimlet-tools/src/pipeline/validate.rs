//! Stage 1: JSON arguments -> typed arguments, with errors that name the field.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses `input` as `A`. The error says which field was wrong, what was expected and what
/// was given, e.g. ``offset: invalid type: string "ten", expected usize``.
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
    serde_path_to_error::deserialize::<_, A>(input).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        let hint = format!("see the input schema of `{tool}` in tools/list");
        if path == "." || path.is_empty() {
            format!("{inner}; {hint}")
        } else {
            format!("field `{path}`: {inner}; {hint}")
        }
    })
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
        assert!(err.contains("expected usize"), "{err}");
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
