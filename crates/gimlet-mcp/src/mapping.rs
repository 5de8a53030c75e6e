//! Library types <-> MCP types, in one place.
//!
//! A [`ToolSpec`] becomes an rmcp `Tool` (annotations from the flags); a [`ToolOutput`]
//! becomes a `CallToolResult`; a [`ToolError`] becomes a `CallToolResult` with
//! `isError: true`, because the model can act on it. Only a call that cannot be routed (an
//! unknown tool) is a JSON-RPC error. The text of an error result (the library's, see
//! [`gimlet_tools::error_marker`]) starts with `Error (<tool>):`, for hosts that forward the
//! text without the flag.
//!
//! What the model sees: Claude Code, Codex and VS Code hand the model only
//! `JSON.stringify(structuredContent)` when a result has one, and drop the text; Gemini CLI and
//! others hand it the text. So a result carries its payload in the text content, and by default
//! no `structuredContent` (and tools no `outputSchema`): every host shows the same thing, with
//! no escaping. [`Shape::Structured`] (`[output] structured = true`) adds the structured value
//! for clients that read it, with the text repeated in it as `text`, so that a host showing
//! only the structured part still gives the model the whole payload.

use std::sync::Arc;

use base64::Engine as _;
use gimlet_tools::pipeline::CallError;
use gimlet_tools::schema::make_portable;
use gimlet_tools::{Content, ToolError, ToolOutput, ToolSpec};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, CustomRequest, MetaObject,
    ReadResourceRequestParams, Resource, Tool, ToolAnnotations,
};
use serde_json::{Value, json};

/// Whether results carry `structuredContent` beside their text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shape {
    /// Text content only; no `outputSchema`. What every host shows the model whole.
    #[default]
    Text,
    /// Text content, and `structuredContent` (with the text as `text`) for tools with an
    /// output schema.
    Structured,
}

/// The property a structured result repeats its text in.
const TEXT_FIELD: &str = "text";

/// The MCP form of a tool.
pub(crate) fn tool(spec: &ToolSpec, shape: Shape) -> Tool {
    let flags = spec.flags;
    // For a read-only tool `destructiveHint` and `idempotentHint` are meaningless; MCP says
    // to leave them out. Otherwise they say what holds for every input.
    let mut annotations = ToolAnnotations::new()
        .read_only(flags.read_only)
        .open_world(flags.open_world);
    if !flags.read_only {
        annotations = annotations
            .destructive(flags.destructive)
            .idempotent(flags.idempotent);
    }
    annotations.title = Some(spec.title.clone());
    let mut input_schema = spec.input_schema.clone();
    make_portable(&mut input_schema);
    let mut tool = Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        Arc::new(input_schema),
    )
    .with_title(spec.title.clone())
    .with_annotations(annotations);
    if let (Shape::Structured, Some(schema)) = (shape, &spec.output_schema) {
        let mut schema = with_text_property(schema.clone());
        make_portable(&mut schema);
        tool = tool.with_raw_output_schema(Arc::new(schema));
    }
    tool
}

/// An output schema with the `text` property every structured result carries.
fn with_text_property(
    mut schema: serde_json::Map<String, Value>,
) -> serde_json::Map<String, Value> {
    let properties = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Value::Object(properties) = properties {
        properties.insert(
            TEXT_FIELD.into(),
            json!({"type": "string", "description": "The result as the text content shows it"}),
        );
    }
    let required = schema
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(required) = required
        && !required.iter().any(|r| r == TEXT_FIELD)
    {
        required.push(Value::String(TEXT_FIELD.into()));
    }
    schema
}

/// A successful call.
pub(crate) fn success(mut output: ToolOutput, shape: Shape) -> CallToolResult {
    let structured = match (shape, output.structured.take()) {
        (Shape::Structured, Some(Value::Object(mut fields))) => {
            fields.insert(TEXT_FIELD.into(), Value::String(output.joined_text()));
            Some(Value::Object(fields))
        }
        (Shape::Structured, other) => other,
        (Shape::Text, _) => None,
    };
    let mut blocks = Vec::with_capacity(output.content.len());
    for content in output.content {
        blocks.push(match content {
            Content::Text(text) => ContentBlock::text(text),
            // The pipeline turns long texts into text; keep the head if one slips through.
            Content::Long(long) => ContentBlock::text(long.head),
            Content::Image { data, mime_type } => ContentBlock::image(
                base64::engine::general_purpose::STANDARD.encode(data),
                mime_type,
            ),
            Content::ResourceLink { uri, name, size } => {
                let mut resource = Resource::new(uri, name).with_mime_type("text/plain");
                if let Some(size) = size {
                    resource = resource.with_size(size);
                }
                ContentBlock::resource_link(resource)
            }
        });
    }
    let mut result = if output.is_error {
        CallToolResult::error(blocks)
    } else {
        CallToolResult::success(blocks)
    };
    result.structured_content = structured;
    if !output.metadata.is_empty() || output.title.is_some() || output.truncated.is_some() {
        let mut meta = serde_json::Map::new();
        if let Some(title) = output.title {
            meta.insert("gimlet/title".into(), Value::String(title));
        }
        if let Some(truncation) = &output.truncated {
            meta.insert(
                "gimlet/truncated".into(),
                json!({
                    "total_lines": truncation.cut.total_lines,
                    "total_bytes": truncation.cut.total_bytes,
                    "uri": truncation.spill.as_ref().map(gimlet_tools::spill::SpillFile::uri),
                }),
            );
        }
        if !output.metadata.is_empty() {
            meta.insert("gimlet/metadata".into(), Value::Object(output.metadata));
        }
        result = result.with_meta(Some(MetaObject(meta)));
    }
    result
}

/// A failed call the model can act on: `isError`, and the text the library gives the error
/// ([`ToolError::to_output`]: `Error (<tool>): ` and the message).
pub(crate) fn failure(tool: &str, err: &ToolError) -> CallToolResult {
    success(err.to_output(tool), Shape::Text)
}

/// Methods of the MCP client requests. rmcp hands a request for one of them over as a custom
/// request when its params do not fit the method's shape.
const MCP_METHODS: [&str; 13] = [
    "initialize",
    "ping",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "tools/call",
    "tools/list",
];

/// What is wrong with params when serde names nothing more precise.
const UNFIT: &str = "they do not have the shape the MCP schema gives";

/// The answer to a request rmcp could not match to a known shape. A known method whose params
/// do not fit is Invalid params, saying what is wrong, not Method not found: the method
/// exists, the request is what must change.
pub(crate) fn unmatched_request(request: &CustomRequest) -> ErrorData {
    let method = request.method.as_str();
    let problem = match method {
        "tools/call" => params_problem::<CallToolRequestParams>(request),
        "resources/read" => params_problem::<ReadResourceRequestParams>(request),
        _ if MCP_METHODS.contains(&method) => String::from(UNFIT),
        // rmcp's own answer: the method as the message.
        _ => {
            return ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                method.to_owned(),
                None,
            );
        }
    };
    ErrorData::invalid_params(
        format!("invalid params for `{method}`: {problem}; see the MCP schema for `{method}`"),
        None,
    )
}

/// What serde says is wrong with a request's params as `P`.
fn params_problem<P: serde::de::DeserializeOwned>(request: &CustomRequest) -> String {
    match request.params_as::<P>() {
        Err(err) => err.to_string(),
        Ok(None) => String::from("`params` is missing"),
        Ok(Some(_)) => String::from(UNFIT),
    }
}

/// A call that could not be routed.
pub(crate) fn call_error(err: &CallError) -> ErrorData {
    match err {
        CallError::UnknownTool { .. } => ErrorData::invalid_params(err.to_string(), None),
    }
}

#[cfg(test)]
mod tests {
    use gimlet_tools::{ToolFlags, ToolOutput};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn spec(flags: ToolFlags) -> ToolSpec {
        ToolSpec {
            name: "t".into(),
            title: "T".into(),
            description: "d".into(),
            input_schema: json!({"type": "object", "properties": {}})
                .as_object()
                .unwrap()
                .clone(),
            output_schema: None,
            flags,
            instructions: None,
        }
    }

    #[test]
    fn annotations_come_from_the_flags() {
        let read = serde_json::to_value(tool(&spec(ToolFlags::READ_ONLY), Shape::Text)).unwrap();
        assert_eq!(
            read["annotations"],
            json!({"title": "T", "readOnlyHint": true, "openWorldHint": false})
        );
        let write = serde_json::to_value(tool(&spec(ToolFlags::MUTATING), Shape::Text)).unwrap();
        assert_eq!(
            write["annotations"],
            json!({"title": "T", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": false})
        );
        assert_eq!(write["title"], "T");
    }

    #[test]
    fn a_known_method_with_unfit_params_is_invalid_params_and_an_unknown_one_not_found() {
        let missing = unmatched_request(&CustomRequest::new("tools/call", None));
        assert_eq!(missing.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert_eq!(
            missing.message,
            "invalid params for `tools/call`: `params` is missing; see the MCP schema for \
             `tools/call`"
        );
        let list = unmatched_request(&CustomRequest::new("tools/list", Some(json!([1]))));
        assert_eq!(list.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(
            list.message
                .starts_with("invalid params for `tools/list`: they do not")
        );
        let unknown = unmatched_request(&CustomRequest::new("x/y", None));
        assert_eq!(unknown.code, rmcp::model::ErrorCode::METHOD_NOT_FOUND);
        assert_eq!(unknown.message, "x/y");
    }

    #[test]
    fn outputs_and_errors_map_to_results() {
        let ok = success(
            ToolOutput::text("hi").with_structured(json!({"n": 1})),
            Shape::Text,
        );
        assert_eq!(ok.is_error, Some(false));
        assert_eq!(ok.structured_content, None);
        let image = success(
            ToolOutput {
                content: vec![Content::Image {
                    data: vec![1, 2, 3],
                    mime_type: "image/png".into(),
                }],
                ..ToolOutput::default()
            },
            Shape::Text,
        );
        let value = serde_json::to_value(&image.content[0]).unwrap();
        assert_eq!(
            value,
            json!({"type": "image", "data": "AQID", "mimeType": "image/png"})
        );
        let err = failure("t", &ToolError::invalid("bad"));
        assert_eq!(err.structured_content, None);
        assert_eq!(err.is_error, Some(true));
        assert_eq!(
            serde_json::to_value(&err.content[0]).unwrap()["text"],
            "Error (t): bad"
        );
    }

    /// A read-only tool whose results have one field, `n`.
    fn spec_with_output_schema() -> ToolSpec {
        let mut spec = spec(ToolFlags::READ_ONLY);
        spec.output_schema = Some(
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
                .as_object()
                .unwrap()
                .clone(),
        );
        spec
    }

    #[test]
    fn by_default_results_are_text_only_and_tools_have_no_output_schema() {
        let with_schema = spec_with_output_schema();
        let listed = serde_json::to_value(tool(&with_schema, Shape::Text)).unwrap();
        assert_eq!(listed.get("outputSchema"), None);
        let output = ToolOutput::text("line 1\nline 2").with_structured(json!({"n": 2}));
        let result = serde_json::to_value(success(output, Shape::Text)).unwrap();
        assert_eq!(result.get("structuredContent"), None);
        assert_eq!(result["content"][0]["text"], "line 1\nline 2");
    }

    #[test]
    fn structured_results_repeat_the_text_and_their_schema_requires_it() {
        let with_schema = spec_with_output_schema();
        let listed = serde_json::to_value(tool(&with_schema, Shape::Structured)).unwrap();
        assert_eq!(
            listed["outputSchema"],
            json!({
                "type": "object",
                "properties": {
                    "n": {"type": "integer"},
                    "text": {"type": "string", "description": "The result as the text content shows it"},
                },
                "required": ["n", "text"],
            })
        );
        let output = ToolOutput {
            content: vec![
                Content::Text("body".into()),
                Content::Text("[exit code 0]".into()),
            ],
            structured: Some(json!({"n": 2})),
            ..ToolOutput::default()
        };
        let result = success(output, Shape::Structured);
        assert_eq!(
            result.structured_content,
            Some(json!({"n": 2, "text": "body\n[exit code 0]"}))
        );
        // A tool without structured data stays text-only.
        let plain = success(ToolOutput::text("x"), Shape::Structured);
        assert_eq!(plain.structured_content, None);
    }
}
