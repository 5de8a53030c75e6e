//! `web_search`: a web search through the Tavily API, offered only when `TAVILY_API_KEY` is set.

use std::borrow::Cow;
use std::sync::OnceLock;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::context::{ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::permission::Access;
use crate::tool::Tool;
use crate::vocab::{JsonObject, ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("web_search.md");

/// Tavily's API.
pub(super) const DEFAULT_ENDPOINT: &str = "https://api.tavily.com";
/// The variable that holds the API key.
pub(super) const API_KEY_VAR: &str = "TAVILY_API_KEY";
const DEFAULT_RESULTS: u8 = 5;
const MAX_RESULTS: u8 = 20;
const TIMEOUT: Duration = Duration::from_secs(30);

/// Arguments of `web_search`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSearchArgs {
    /// What to search for.
    pub query: String,
    /// How many results (default 5, at most 20).
    pub max_results: Option<u8>,
}

/// The `web_search` tool.
#[derive(Debug, Default)]
pub struct WebSearchTool {
    client: OnceLock<Result<reqwest::Client, String>>,
}

fn endpoint(env: &ToolEnv) -> String {
    env.settings()
        .web_search
        .endpoint
        .clone()
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned())
}

fn api_key() -> Option<String> {
    std::env::var(API_KEY_VAR)
        .ok()
        .filter(|k| !k.trim().is_empty())
}

/// The structured result of `web_search`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
struct SearchResult {
    /// The query, as searched.
    query: String,
    /// The hits, best first.
    results: Vec<SearchHit>,
}

/// One hit.
#[derive(Debug, Clone, Serialize, JsonSchema)]
struct SearchHit {
    /// The page's title.
    title: String,
    /// The page's URL.
    url: String,
    /// An excerpt of the page, as the search service gives it.
    content: String,
}

/// One result as Tavily returns it.
#[derive(Debug, Deserialize)]
struct Hit {
    #[serde(default)]
    title: String,
    url: String,
    #[serde(default)]
    content: String,
}

impl Tool for WebSearchTool {
    type Args = WebSearchArgs;
    const NAME: &'static str = "web_search";
    const TITLE: &'static str = "Search the web";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn enabled(&self, _env: &ToolEnv) -> bool {
        api_key().is_some()
    }

    fn flags(&self, _args: Option<&WebSearchArgs>) -> ToolFlags {
        ToolFlags {
            open_world: true,
            ..ToolFlags::READ_ONLY
        }
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<SearchResult>())
    }

    async fn validate(
        &self,
        mut args: WebSearchArgs,
        _ctx: &ToolContext,
    ) -> Result<WebSearchArgs, ToolError> {
        args.query = args.query.trim().to_string();
        if args.query.is_empty() {
            return Err(ToolError::invalid(
                "`query` is empty; say what to search for",
            ));
        }
        match args.max_results {
            Some(0) => Err(ToolError::invalid("`max_results` must be at least 1")),
            Some(n) if n > MAX_RESULTS => Err(ToolError::invalid(format!(
                "`max_results` is {n}; {MAX_RESULTS} at most"
            ))),
            _ => Ok(args),
        }
    }

    async fn accesses(
        &self,
        _args: &WebSearchArgs,
        ctx: &ToolContext,
    ) -> Result<Vec<Access>, ToolError> {
        let endpoint = endpoint(ctx.env());
        let host = reqwest::Url::parse(&endpoint)
            .ok()
            .and_then(|u| u.host_str().map(ToOwned::to_owned))
            .unwrap_or(endpoint);
        Ok(vec![Access::Network { host }])
    }

    async fn execute(
        &self,
        args: WebSearchArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let key = api_key().ok_or_else(|| {
            ToolError::failed(format!(
                "{API_KEY_VAR} is not set; web search is unavailable"
            ))
        })?;
        // The endpoint is the user's setting, not the model's: it is not held to the SSRF rules.
        let client = self
            .client
            .get_or_init(|| crate::web::client(true))
            .as_ref()
            .map_err(|e| ToolError::failed(e.clone()))?;
        let url = format!("{}/search", endpoint(ctx.env()).trim_end_matches('/'));
        let max_results = args.max_results.unwrap_or(DEFAULT_RESULTS);
        let request = client
            .post(&url)
            .bearer_auth(key)
            .timeout(TIMEOUT)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(json!({"query": args.query, "max_results": max_results}).to_string())
            .send();
        let response = tokio::select! {
            biased;
            () = ctx.cancellation().cancelled() => return Err(ToolError::Cancelled),
            response = request => response,
        }
        .map_err(|e| {
            ToolError::failed(format!(
                "the search service at {url} cannot be reached: {e}"
            ))
        })?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|e| ToolError::failed(format!("reading the search results failed: {e}")))?;
        if !status.is_success() {
            let hint = match status.as_u16() {
                401 | 403 => "; check TAVILY_API_KEY",
                429 | 432 | 433 => "; the search quota is used up, try later",
                _ => "",
            };
            return Err(ToolError::failed(format!(
                "the search service answered HTTP {status}{hint}: {}",
                body.chars().take(300).collect::<String>()
            )));
        }
        let value: Value = serde_json::from_str(&body).map_err(|e| {
            ToolError::failed(format!(
                "the search service sent something other than JSON: {e}"
            ))
        })?;
        let hits: Vec<Hit> =
            serde_json::from_value(value.get("results").cloned().unwrap_or(Value::Null)).map_err(
                |e| ToolError::failed(format!("the search results have an unexpected shape: {e}")),
            )?;
        let hits: Vec<Hit> = hits.into_iter().take(usize::from(max_results)).collect();
        let mut text = if hits.is_empty() {
            format!("No results for \"{}\".", args.query)
        } else {
            format!("{} result(s) for \"{}\":\n", hits.len(), args.query)
        };
        for (i, hit) in hits.iter().enumerate() {
            let excerpt: String = hit.content.split_whitespace().collect::<Vec<_>>().join(" ");
            let excerpt: String = excerpt.chars().take(500).collect();
            text.push_str(&format!(
                "\n{}. {}\n   {}\n   {}\n",
                i + 1,
                hit.title.trim(),
                hit.url,
                excerpt
            ));
        }
        let results: Vec<SearchHit> = hits
            .into_iter()
            .map(|h| SearchHit {
                title: h.title,
                url: h.url,
                content: h.content,
            })
            .collect();
        Ok(ToolOutput::text(text.trim_end().to_owned())
            .with_title(args.query.clone())
            .with_structured_of(&SearchResult {
                query: args.query,
                results,
            }))
    }
}
