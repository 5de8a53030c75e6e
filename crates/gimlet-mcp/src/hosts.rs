//! What gimlet knows about the hosts that run it, where they differ in what they show the model.

/// How many bytes of one tool result a host shows its model whole, where that is less than
/// gimlet's default limit; what is over, the host cuts out of the middle, and the model would
/// page on from the wrong place. Known by the client's `clientInfo.name`.
///
/// - Codex (`codex-mcp-client`, 0.169): keeps about 12,000 bytes of a tool's text, the head and
///   the tail, with `…N tokens truncated…` between (measured with `scripts/hosts.sh`, a page
///   of 12,000 bytes passes whole, 13,000 does not). 11 KiB leaves room for its header.
///
/// Claude Code shows up to 50,000 characters (gimlet's 45 KiB default fits) and Gemini CLI
/// all of it.
pub(crate) fn result_budget(client_name: &str) -> Option<usize> {
    match client_name {
        "codex-mcp-client" => Some(11 * 1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::result_budget;

    #[test]
    fn codex_gets_pages_it_shows_whole() {
        assert_eq!(result_budget("codex-mcp-client"), Some(11 * 1024));
        assert_eq!(result_budget("claude-code"), None);
        assert_eq!(result_budget("gemini-cli-mcp-client"), None);
    }
}
