//! `web_fetch`: one page over http(s), HTML turned into Markdown (or text), with caps on time,
//! size and redirects, and no way into the local network (see [`crate::web`]).

use std::borrow::Cow;
use std::sync::OnceLock;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::context::{ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::permission::Access;
use crate::tool::Tool;
use crate::vocab::{JsonObject, ToolFlags, ToolOutput};
use crate::web::{check_ip, client, host_ip, refusal};

const DESCRIPTION: &str = include_str!("web_fetch.md");

const DEFAULT_TIMEOUT_S: u64 = 30;
const MAX_TIMEOUT_S: u64 = 120;
const DEFAULT_MAX_BYTES: u64 = 5 * 1024 * 1024;
const MAX_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Redirects followed at most.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// What the page becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FetchFormat {
    /// HTML converted to Markdown.
    #[default]
    Markdown,
    /// The text of the page only.
    Text,
    /// The raw page.
    Html,
}

/// Arguments of `web_fetch`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebFetchArgs {
    /// The URL, `http://` or `https://`.
    pub url: String,
    /// `markdown` (default), `text` or `html`.
    pub format: Option<FetchFormat>,
    /// Seconds for the whole fetch (default 30, at most 120).
    pub timeout_s: Option<u64>,
    /// Bytes of the body read at most (default 5242880, at most 10485760).
    pub max_bytes: Option<u64>,
}

/// The `web_fetch` tool.
#[derive(Debug, Default)]
pub struct WebFetchTool {
    client: OnceLock<Result<reqwest::Client, String>>,
}

impl WebFetchTool {
    fn client(&self, env: &ToolEnv) -> Result<&reqwest::Client, ToolError> {
        self.client
            .get_or_init(|| client(env.settings().web_fetch.allow_local))
            .as_ref()
            .map_err(|e| ToolError::failed(e.clone()))
    }
}

fn parse_url(text: &str) -> Result<reqwest::Url, ToolError> {
    let url = reqwest::Url::parse(text.trim()).map_err(|e| {
        ToolError::invalid(format!(
            "`{text}` is not a valid URL ({e}); give a full URL such as https://example.com/page"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::invalid(format!(
            "`{}` URLs cannot be fetched; only http:// and https:// (read local files with `read`)",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ToolError::invalid(format!("`{text}` has no host")));
    }
    Ok(url)
}

/// Refuses a URL whose host is a local address literal (unless local fetches are allowed).
fn check_literal(url: &reqwest::Url, allow_local: bool) -> Result<(), ToolError> {
    if allow_local {
        return Ok(());
    }
    if let Some(ip) = host_ip(url)
        && let Some(why) = check_ip(ip)
    {
        return Err(ToolError::PermissionDenied(refusal(
            url.host_str().unwrap_or_default(),
            why,
        )));
    }
    Ok(())
}

impl Tool for WebFetchTool {
    type Args = WebFetchArgs;
    const NAME: &'static str = "web_fetch";
    const TITLE: &'static str = "Fetch a web page";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&WebFetchArgs>) -> ToolFlags {
        ToolFlags {
            open_world: true,
            ..ToolFlags::READ_ONLY
        }
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<FetchResult>())
    }

    async fn validate(
        &self,
        args: WebFetchArgs,
        ctx: &ToolContext,
    ) -> Result<WebFetchArgs, ToolError> {
        let url = parse_url(&args.url)?;
        check_literal(&url, ctx.env().settings().web_fetch.allow_local)?;
        match args.timeout_s {
            Some(0) => return Err(ToolError::invalid("`timeout_s` must be at least 1")),
            Some(t) if t > MAX_TIMEOUT_S => {
                return Err(ToolError::invalid(format!(
                    "`timeout_s` is {t}; {MAX_TIMEOUT_S} seconds at most"
                )));
            }
            _ => {}
        }
        match args.max_bytes {
            Some(0) => Err(ToolError::invalid("`max_bytes` must be at least 1")),
            Some(n) if n > MAX_MAX_BYTES => Err(ToolError::invalid(format!(
                "`max_bytes` is {n}; {MAX_MAX_BYTES} at most"
            ))),
            _ => Ok(WebFetchArgs {
                url: url.to_string(),
                ..args
            }),
        }
    }

    async fn accesses(
        &self,
        args: &WebFetchArgs,
        _ctx: &ToolContext,
    ) -> Result<Vec<Access>, ToolError> {
        let url = parse_url(&args.url)?;
        Ok(vec![Access::Network {
            host: url.host_str().unwrap_or_default().to_owned(),
        }])
    }

    async fn execute(
        &self,
        args: WebFetchArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let client = self.client(ctx.env())?;
        let allow_local = ctx.env().settings().web_fetch.allow_local;
        let timeout = Duration::from_secs(args.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S));
        let max_bytes = args.max_bytes.unwrap_or(DEFAULT_MAX_BYTES);
        let deadline = Instant::now() + timeout;
        let format = args.format.unwrap_or_default();
        let first = parse_url(&args.url)?;
        let fetch = async {
            let mut url = first.clone();
            for _ in 0..=MAX_REDIRECTS {
                check_literal(&url, allow_local)?;
                ctx.progress_message(format!("fetching {url}"));
                let response = client
                    .get(url.clone())
                    .send()
                    .await
                    .map_err(|e| request_error(&url, &e))?;
                let status = response.status();
                if status.is_redirection()
                    && let Some(location) = response.headers().get(reqwest::header::LOCATION)
                {
                    let next = location
                        .to_str()
                        .ok()
                        .and_then(|l| url.join(l).ok())
                        .ok_or_else(|| {
                            ToolError::failed(format!("{url} redirects to an invalid location"))
                        })?;
                    if !matches!(next.scheme(), "http" | "https") {
                        return Err(ToolError::failed(format!(
                            "{url} redirects to `{next}`, which is not http(s); not followed"
                        )));
                    }
                    if next.host_str() != first.host_str() {
                        return Ok(cross_host_redirect(&url, &next, status.as_u16()));
                    }
                    url = next;
                    continue;
                }
                return read_page(response, url, max_bytes, format, ctx).await;
            }
            Err(ToolError::failed(format!(
                "{first} redirected more than {MAX_REDIRECTS} times; stopped (a redirect loop?)"
            )))
        };
        tokio::select! {
            biased;
            () = ctx.cancellation().cancelled() => Err(ToolError::Cancelled),
            () = tokio::time::sleep_until(deadline) => Err(ToolError::failed(format!(
                "fetching {first} took longer than {} s and was stopped; try again later, or with a larger `timeout_s`",
                timeout.as_secs()
            ))),
            result = fetch => result,
        }
    }
}

fn request_error(url: &reqwest::Url, err: &reqwest::Error) -> ToolError {
    // The resolver's refusal is the most useful part of the chain.
    let mut source: Option<&dyn std::error::Error> = Some(err);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::PermissionDenied
        {
            return ToolError::PermissionDenied(io.to_string());
        }
        source = e.source();
    }
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(e) = source {
        message.push_str(&format!(": {e}"));
        source = e.source();
    }
    ToolError::failed(format!("cannot fetch {url}: {message}"))
}

/// The structured result of `web_fetch`: a page, or a redirect to another host.
#[derive(Debug, Clone, Serialize, JsonSchema)]
struct FetchResult {
    /// The URL fetched last (after redirects).
    url: String,
    /// The HTTP status.
    status: u16,
    /// The `Content-Type` the server sent (lowercase; empty when none); absent for a redirect.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    content_type: Option<String>,
    /// Bytes of the body read.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    bytes: Option<usize>,
    /// The body was longer than `max_bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    truncated: Option<bool>,
    /// A redirect to another host, not followed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    redirect: Option<String>,
}

fn cross_host_redirect(from: &reqwest::Url, to: &reqwest::Url, status: u16) -> ToolOutput {
    ToolOutput::text(format!(
        "{from} redirects (HTTP {status}) to another host: {to}\n\
         It was not followed. To read it, call web_fetch again with that URL."
    ))
    .with_title(from.to_string())
    .with_structured_of(&FetchResult {
        url: from.to_string(),
        status,
        content_type: None,
        bytes: None,
        truncated: None,
        redirect: Some(to.to_string()),
    })
}

/// Reads the body (up to `max_bytes`) and converts it.
async fn read_page(
    mut response: reqwest::Response,
    url: reqwest::Url,
    max_bytes: u64,
    format: FetchFormat,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let status = response.status();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let mut body: Vec<u8> = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| request_error(&url, &e))?
    {
        let room = usize::try_from(max_bytes).unwrap_or(usize::MAX) - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let kind = kind_of(&content_type, &body);
    if kind == Kind::Binary {
        return Err(ToolError::failed(format!(
            "{url} is `{content_type}` ({} bytes read), not text; web_fetch reads HTML and text only",
            body.len()
        )));
    }
    let bytes = body.len();
    let text = ctx
        .blocking(move |_| {
            let text = String::from_utf8_lossy(&body).into_owned();
            Ok(match (kind, format) {
                (Kind::Html, FetchFormat::Markdown) => html_to_markdown(&text),
                (Kind::Html, FetchFormat::Text) => html_to_text(&text),
                _ => text,
            })
        })
        .await?;
    let mut shown = String::new();
    if !status.is_success() {
        shown.push_str(&format!("HTTP {status} from {url}\n\n"));
    }
    shown.push_str(text.trim());
    if truncated {
        shown.push_str(&format!(
            "\n\n[The page is longer than max_bytes ({max_bytes}); only its first {bytes} bytes were read]"
        ));
    }
    let mut output = ToolOutput::text(shown)
        .with_title(url.to_string())
        .with_structured_of(&FetchResult {
            url: url.to_string(),
            status: status.as_u16(),
            content_type: Some(content_type),
            bytes: Some(bytes),
            truncated: Some(truncated),
            redirect: None,
        });
    output.is_error = !status.is_success();
    Ok(output)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Binary,
}

fn kind_of(content_type: &str, body: &[u8]) -> Kind {
    let mime = content_type.split(';').next().unwrap_or_default().trim();
    match mime {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        m if m.starts_with("text/")
            || m.ends_with("+json")
            || m.ends_with("+xml")
            || matches!(
                m,
                "application/json"
                    | "application/xml"
                    | "application/javascript"
                    | "application/x-javascript"
            ) =>
        {
            Kind::Text
        }
        "" | "application/octet-stream" => {
            let head = String::from_utf8_lossy(&body[..body.len().min(1024)]).to_ascii_lowercase();
            if head.contains("<html") || head.contains("<!doctype html") {
                Kind::Html
            } else if std::str::from_utf8(&body[..body.len().min(4096)]).is_ok()
                && !body.contains(&0)
            {
                Kind::Text
            } else {
                Kind::Binary
            }
        }
        _ => Kind::Binary,
    }
}

/// Tags whose content is never text for the model.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "iframe", "head",
];

fn html_to_markdown(html: &str) -> String {
    htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .build()
        .convert(html)
        .unwrap_or_else(|_| html.to_owned())
}

fn html_to_text(html: &str) -> String {
    use htmd::element_handler::{HandlerResult, Handlers};
    let inline = |handlers: &dyn Handlers, element: htmd::Element<'_>| -> Option<HandlerResult> {
        Some(handlers.walk_children(element.node))
    };
    let block = |handlers: &dyn Handlers, element: htmd::Element<'_>| -> Option<HandlerResult> {
        let inner = handlers.walk_children(element.node);
        Some(HandlerResult {
            content: format!("\n\n{}\n\n", inner.content.trim()),
            markdown_translated: inner.markdown_translated,
        })
    };
    htmd::HtmlToMarkdown::builder()
        .skip_tags([SKIPPED, &["img"]].concat())
        .add_handler(
            vec![
                "a", "strong", "b", "em", "i", "code", "u", "s", "del", "mark", "span",
            ],
            inline,
        )
        .add_handler(
            vec!["h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote"],
            block,
        )
        .build()
        .convert(html)
        .unwrap_or_else(|_| html.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<!doctype html><html><head><title>T</title><style>p{}</style></head>
        <body><h1>Title</h1><script>alert(1)</script>
        <p>Some <b>bold</b> text and a <a href="https://example.com/x">link</a>.</p>
        <ul><li>one</li><li>two</li></ul></body></html>"#;

    #[test]
    fn html_becomes_markdown_or_text() {
        insta::assert_snapshot!(html_to_markdown(PAGE), @r"
        # Title

        Some **bold** text and a [link](https://example.com/x).

        *   one
        *   two
        ");
        let text = html_to_text(PAGE);
        assert!(text.contains("Title"), "{text}");
        assert!(text.contains("Some bold text and a link."), "{text}");
        assert!(!text.contains("alert"), "{text}");
        assert!(!text.contains("**") && !text.contains("]("), "{text}");
    }

    #[test]
    fn content_kinds() {
        assert_eq!(kind_of("text/html; charset=utf-8", b""), Kind::Html);
        assert_eq!(kind_of("application/json", b"{}"), Kind::Text);
        assert_eq!(kind_of("image/png", b"\x89PNG"), Kind::Binary);
        assert_eq!(kind_of("", b"<!DOCTYPE html><html>"), Kind::Html);
        assert_eq!(kind_of("", b"\x00\x01\x02"), Kind::Binary);
    }

    #[test]
    fn only_http_urls_and_no_local_literals() {
        assert!(parse_url("file:///etc/passwd").is_err());
        assert!(parse_url("not a url").is_err());
        let url = parse_url("http://0x7f.1:8080/").unwrap();
        let err = check_literal(&url, false).unwrap_err().to_string();
        assert!(err.contains("loopback"), "{err}");
        assert!(check_literal(&url, true).is_ok());
    }
}
