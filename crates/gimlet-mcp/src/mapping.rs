//! Library types <-> MCP types, in one place.
//!
//! A [`ToolSpec`] becomes an rmcp `Tool` (annotations from the flags); a [`ToolOutput`]
//! becomes a `CallToolResult`; a [`ToolError`] becomes a `CallToolResult` with
//! `isError: true`, because the model can act on it. Only a call that cannot be routed (an
//! unknown tool) is a JSON-RPC error.

use std::sync::Arc;

use base64::Engine as _;
use gimlet_tools::pipeline::CallError;
use gimlet_tools::{Content, ToolError, ToolOutput, ToolSpec};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, CustomRequest, MetaObject,
    ReadResourceRequestParams, Resource, Tool, ToolAnnotations,
};
use serde_json::{Value, json};

/// The MCP form of a tool.
pub(crate) fn tool(spec: &ToolSpec) -> Tool {
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
    let mut tool = Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        Arc::new(spec.input_schema.clone()),
    )
    .with_title(spec.title.clone())
    .with_annotations(annotations);
    if let Some(schema) = &spec.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(schema.clone()));
    }
    tool
}

/// A successful call.
pub(crate) fn success(output: ToolOutput) -> CallToolResult {
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
    result.structured_content = output.structured;
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

/// A failed call the model can act on.
pub(crate) fn failure(err: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(err.to_string())])
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
        let read = serde_json::to_value(tool(&spec(ToolFlags::READ_ONLY))).unwrap();
        assert_eq!(
            read["annotations"],
            json!({"title": "T", "readOnlyHint": true, "openWorldHint": false})
        );
        let write = serde_json::to_value(tool(&spec(ToolFlags::MUTATING))).unwrap();
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
        let ok = success(ToolOutput::text("hi").with_structured(json!({"n": 1})));
        assert_eq!(ok.is_error, Some(false));
        assert_eq!(ok.structured_content, Some(json!({"n": 1})));
        let image = success(ToolOutput {
            content: vec![Content::Image {
                data: vec![1, 2, 3],
                mime_type: "image/png".into(),
            }],
            ..ToolOutput::default()
        });
        let value = serde_json::to_value(&image.content[0]).unwrap();
        assert_eq!(
            value,
            json!({"type": "image", "data": "AQID", "mimeType": "image/png"})
        );
        let err = failure(&ToolError::invalid("bad"));
        assert_eq!(err.is_error, Some(true));
        assert_eq!(
            serde_json::to_value(&err.content[0]).unwrap()["text"],
            "bad"
        );
    }
}
