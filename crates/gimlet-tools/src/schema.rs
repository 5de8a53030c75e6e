//! JSON schemas for tool arguments and results, in the shape MCP clients handle best.
//!
//! schemars emits `$defs` + `$ref` for nested types and `["string", "null"]` for `Option`;
//! several clients mishandle both. [`input_schema`] inlines every subschema, drops `null` from
//! optional fields (they are simply not `required`), and removes the root title and `$schema`.
//! [`output_schema`] describes a result type the same way, but as it is serialized: a field
//! that is always there is `required`, `null` included where it may be `null`.

use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, Transform};
use schemars::{JsonSchema, Schema};
use serde_json::Value;

use crate::vocab::JsonObject;

/// The input schema of `T`: root `type: object`, no `$ref`, optional fields without `null`.
///
/// # Panics
/// If `T`'s schema is not an object schema: argument types are structs, so this is a bug in
/// the tool, caught by the `tools/list` snapshot test.
pub fn input_schema<T: JsonSchema>() -> JsonObject {
    let settings = SchemaSettings::draft2020_12().with_transform(RecursiveTransform(drop_null));
    let mut obj = object_schema::<T>(settings);
    if !obj.contains_key("properties") {
        obj.insert("properties".into(), Value::Object(JsonObject::new()));
    }
    assert_eq!(
        obj.get("type").and_then(Value::as_str),
        Some("object"),
        "tool arguments must be a struct (JSON object)"
    );
    obj
}

/// The output schema of `T`, a tool's structured result (see
/// [`crate::ToolOutput::with_structured_of`]): root `type: object`, no `$ref`, as the value is
/// serialized. A field is `required` unless it has `skip_serializing_if`; an `Option` field
/// without it is required and nullable (`type: [T, "null"]`, which the MCP layer makes
/// portable). Number formats are dropped, doc lines joined and documented constants listed as
/// an `enum`, as in [`input_schema`].
///
/// ```
/// use gimlet_tools::ToolOutput;
/// use serde_json::json;
///
/// /// The structured result of `line_stats`.
/// #[derive(serde::Serialize, schemars::JsonSchema)]
/// struct LineStatsResult {
///     /// Lines in the text.
///     lines: usize,
///     /// The longest line, or null when the text is empty.
///     longest: Option<String>,
/// }
///
/// let schema = gimlet_tools::schema::output_schema::<LineStatsResult>();
/// assert_eq!(schema["required"], json!(["lines", "longest"]));
/// assert_eq!(schema["properties"]["longest"]["type"], json!(["string", "null"]));
/// let stats = LineStatsResult { lines: 0, longest: None };
/// let output = ToolOutput::text("0 lines").with_structured_of(&stats);
/// assert_eq!(output.structured, Some(json!({"lines": 0, "longest": null})));
/// ```
///
/// # Panics
/// If `T`'s schema is not an object schema: results are structs, so this is a bug in the tool,
/// caught by the tools' output tests.
pub fn output_schema<T: JsonSchema>() -> JsonObject {
    let settings = SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(RecursiveTransform(tidy_output));
    let obj = object_schema::<T>(settings);
    assert_eq!(
        obj.get("type").and_then(Value::as_str),
        Some("object"),
        "a structured result must be a struct (JSON object)"
    );
    obj
}

/// Makes a schema portable to clients that map tool schemas onto a single-`type` dialect (the
/// `OpenAPI` subset behind Gemini function declarations, some validators): a `type` array such
/// as `["string", "null"]` becomes `anyOf` branches of one `type` each, everywhere in the
/// schema. Equivalent in JSON Schema; the MCP Inspector's `--strict` check warns about the
/// array form. For schemas gimlet did not write itself (plugin tools) as well as its own.
pub fn make_portable(schema: &mut JsonObject) {
    if let Some(Value::Array(types)) = schema.get("type") {
        let branches: Vec<Value> = types
            .iter()
            .map(|t| serde_json::json!({"type": t}))
            .collect();
        schema.remove("type");
        if branches.len() == 1 {
            if let Some(Value::Object(only)) = branches.into_iter().next() {
                schema.extend(only);
            }
        } else {
            schema.insert("anyOf".into(), Value::Array(branches));
        }
    }
    for value in schema.values_mut() {
        match value {
            Value::Object(inner) => make_portable(inner),
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(inner) = item {
                        make_portable(inner);
                    }
                }
            }
            _ => {}
        }
    }
}

fn object_schema<T: JsonSchema>(mut settings: SchemaSettings) -> JsonObject {
    settings.inline_subschemas = true;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let Value::Object(mut obj) = schema.to_value() else {
        return JsonObject::new();
    };
    for key in ["$schema", "title", "$defs", "description"] {
        obj.remove(key);
    }
    obj
}

/// `type: ["T", "null"]` -> `type: "T"`; `anyOf: [X, {type: null}]` -> X; a `oneOf` of
/// documented constants -> a plain `enum`, the constants' docs folded into the description.
fn drop_null(schema: &mut Schema) {
    tidy(schema);
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types[0].clone();
            schema.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(enum_values)) = schema.get_mut("enum") {
        enum_values.retain(|v| !v.is_null());
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(options)) = schema.get_mut(key) else {
            continue;
        };
        options.retain(|o| o.get("type").and_then(Value::as_str) != Some("null"));
        if options.len() == 1 {
            let Value::Object(only) = options.remove(0) else {
                continue;
            };
            schema.remove(key);
            for (k, v) in only {
                // The field's own description wins over its type's.
                if !schema.as_object().is_some_and(|o| o.contains_key(&k)) {
                    schema.insert(k, v);
                }
            }
            // The merged-in schema may itself carry a nullable type or constants.
            let mut again = RecursiveTransform(drop_null);
            again.transform(schema);
        }
    }
    constants_to_enum(schema);
}

/// For results, where `null` is a value: only [`tidy`] and [`constants_to_enum`].
fn tidy_output(schema: &mut Schema) {
    tidy(schema);
    constants_to_enum(schema);
}

/// Drops Rust-specific number formats (`uint`, `int64` ...) that JSON Schema does not define
/// and strict clients refuse, and joins the lines of wrapped doc comments.
fn tidy(schema: &mut Schema) {
    let rust_format = schema
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| {
            ["int", "uint", "float", "double"]
                .iter()
                .any(|prefix| f.starts_with(prefix))
        });
    if rust_format {
        schema.remove("format");
    }
    if let Some(Value::String(description)) = schema.get_mut("description") {
        let joined = description
            .split("\n\n")
            .map(|paragraph| {
                paragraph
                    .split('\n')
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        *description = joined;
    }
}

fn constants_to_enum(schema: &mut Schema) {
    let Some(Value::Array(options)) = schema.get("oneOf") else {
        return;
    };
    let Some(constants) = options
        .iter()
        .map(|o| {
            Some((
                o.get("const")?.as_str()?.to_owned(),
                o.get("description").and_then(Value::as_str),
            ))
        })
        .collect::<Option<Vec<_>>>()
    else {
        return;
    };
    let documented: Vec<String> = constants
        .iter()
        .filter_map(|(value, doc)| doc.map(|doc| format!("`{value}`: {doc}")))
        .collect();
    let values: Vec<Value> = constants
        .iter()
        .map(|(v, _)| Value::String(v.clone()))
        .collect();
    schema.remove("oneOf");
    schema.insert("type".into(), Value::String("string".into()));
    schema.insert("enum".into(), Value::Array(values));
    if !documented.is_empty() {
        let base = schema
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim_end()
            .to_owned();
        let joined = documented.join("; ");
        let description = if base.is_empty() {
            joined
        } else {
            format!("{base} ({joined})")
        };
        schema.insert("description".into(), Value::String(description));
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// A choice.
    #[derive(Deserialize, serde::Serialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        /// First.
        One,
        /// Second.
        Two,
    }

    /// An inner object.
    #[derive(Deserialize, serde::Serialize, JsonSchema)]
    struct Inner {
        /// The text.
        text: String,
    }

    /// Arguments.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "only the schema is under test")]
    struct Args {
        /// A required path.
        path: String,
        /// An optional count.
        count: Option<u32>,
        /// An optional mode.
        mode: Option<Mode>,
        /// Nested items.
        items: Vec<Inner>,
        /// A doc comment
        /// over two lines.
        wrapped: bool,
    }

    #[test]
    fn schema_is_an_inlined_object_without_nulls() {
        let schema = Value::Object(input_schema::<Args>());
        let text = schema.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert!(!text.contains("null"), "{text}");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["path", "items", "wrapped"]));
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(
            schema["properties"]["path"]["description"],
            "A required path."
        );
        assert_eq!(schema["properties"]["count"]["type"], "integer");
        assert_eq!(schema["properties"]["mode"]["enum"], json!(["one", "two"]));
        assert_eq!(schema["properties"]["mode"]["type"], "string");
        assert_eq!(
            schema["properties"]["mode"]["description"],
            "An optional mode. (`one`: First.; `two`: Second.)"
        );
        assert_eq!(
            schema["properties"]["items"]["items"]["properties"]["text"]["type"],
            "string"
        );
        assert!(schema.get("title").is_none() && schema.get("$schema").is_none());
        assert!(schema.get("description").is_none());
        assert!(
            schema["properties"]["count"].get("format").is_none(),
            "{text}"
        );
        assert_eq!(
            schema["properties"]["wrapped"]["description"],
            "A doc comment over two lines."
        );
    }

    /// A result.
    #[derive(serde::Serialize, JsonSchema)]
    struct Output {
        /// Always there, `null` when unknown.
        hash: Option<String>,
        /// There in some results only.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schemars(with = "Vec<Inner>")]
        extra: Option<Vec<Inner>>,
        /// What happened.
        mode: Mode,
        /// A count.
        count: u64,
        /// A doc comment
        /// over two lines.
        wrapped: bool,
    }

    #[test]
    fn output_schema_describes_the_value_as_serialized() {
        let schema = Value::Object(output_schema::<Output>());
        let text = schema.to_string();
        assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
        assert!(schema.get("title").is_none() && schema.get("$schema").is_none());
        assert!(schema.get("description").is_none());
        assert_eq!(schema["type"], "object");
        // `extra` is skipped when `None`: not required, and never `null`.
        assert_eq!(
            schema["required"],
            json!(["hash", "mode", "count", "wrapped"])
        );
        let properties = &schema["properties"];
        assert_eq!(properties["hash"]["type"], json!(["string", "null"]));
        assert_eq!(
            properties["hash"]["description"],
            "Always there, `null` when unknown."
        );
        assert_eq!(properties["extra"]["type"], "array");
        assert_eq!(
            properties["extra"]["items"]["properties"]["text"]["type"],
            "string"
        );
        assert_eq!(properties["mode"]["type"], "string");
        assert_eq!(properties["mode"]["enum"], json!(["one", "two"]));
        assert_eq!(
            properties["mode"]["description"],
            "What happened. (`one`: First.; `two`: Second.)"
        );
        assert_eq!(properties["count"]["type"], "integer");
        assert!(properties["count"].get("format").is_none(), "{text}");
        assert_eq!(
            properties["wrapped"]["description"],
            "A doc comment over two lines."
        );

        // The value keeps `null` where the schema says so, and leaves `extra` out.
        let value = serde_json::to_value(Output {
            hash: None,
            extra: None,
            mode: Mode::Two,
            count: 3,
            wrapped: false,
        })
        .unwrap();
        assert_eq!(
            value,
            json!({"hash": null, "mode": "two", "count": 3, "wrapped": false})
        );
        let validator = jsonschema::validator_for(&schema).unwrap();
        assert!(validator.is_valid(&value));
        assert!(!validator.is_valid(&json!({"mode": "two", "count": 3, "wrapped": false})));
    }

    #[test]
    fn type_arrays_become_any_of_branches_everywhere() {
        let Value::Object(mut schema) = json!({
            "type": "object",
            "properties": {
                "code": {"type": ["integer", "null"], "description": "d"},
                "one": {"type": ["string"]},
                "list": {"type": "array", "items": {"type": ["string", "null"]}},
                "choice": {"anyOf": [{"type": ["number", "boolean"]}]},
                "type": {"type": "string"},
            },
        }) else {
            unreachable!()
        };
        make_portable(&mut schema);
        assert_eq!(
            Value::Object(schema),
            json!({
                "type": "object",
                "properties": {
                    "code": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "d"},
                    "one": {"type": "string"},
                    "list": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                    "choice": {"anyOf": [{"anyOf": [{"type": "number"}, {"type": "boolean"}]}]},
                    "type": {"type": "string"},
                },
            })
        );
    }

    #[test]
    fn empty_struct_gets_empty_properties() {
        /// Nothing.
        #[derive(Deserialize, JsonSchema)]
        struct Empty {}
        let schema = input_schema::<Empty>();
        assert_eq!(schema.get("properties"), Some(&json!({})));
    }
}
