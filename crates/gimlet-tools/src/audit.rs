//! The audit log (`--audit-log FILE`): one JSON line per call, written by a background thread.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use regex::Regex;
use serde::Serialize;
use serde_json::{Map, Value};

/// Who or what decided a call's permission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// `allow` or `deny`.
    pub verdict: &'static str,
    /// `mode default`, `rule deny bash rm*`, `session grant`, `user (once)`, `hook` ...
    pub by: String,
}

/// One audit line.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord {
    /// RFC 3339, UTC.
    pub time: String,
    /// The session.
    pub session: String,
    /// The call.
    pub call: String,
    /// The tool.
    pub tool: String,
    /// The arguments, credentials redacted.
    pub arguments: Value,
    /// The permission decision, if the call got that far.
    pub decision: Option<Decision>,
    /// How long the call took.
    pub duration_ms: u64,
    /// `ok` or the error's kind (`permission_denied`, `stale` ...).
    pub outcome: String,
    /// The error message, for failures.
    pub error: Option<String>,
    /// Whether the output was truncated.
    pub truncated: bool,
    /// The first 64 bits of the SHA-256 of the output text.
    pub output_hash: Option<String>,
}

/// An open audit log. Each record is one `write` of one line to a file opened for appending,
/// so lines from concurrent calls never interleave, and a line is on disk before the call's
/// result goes back.
#[derive(Debug)]
pub struct AuditLog {
    file: std::sync::Mutex<std::fs::File>,
}

impl AuditLog {
    /// Opens (appending to, creating if needed) a file.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self {
            file: std::sync::Mutex::new(file),
        })
    }

    /// Writes a record. Blocking: call it off the async runtime.
    pub fn record(&self, record: &AuditRecord) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        file.write_all(&line)
    }
}

/// The time as RFC 3339 UTC with milliseconds.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Keys whose values are credentials.
fn secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace(['-', '_'], "");
    [
        "token",
        "secret",
        "password",
        "passwd",
        "apikey",
        "authorization",
        "credential",
        "privatekey",
    ]
    .iter()
    .any(|word| key.contains(word))
}

fn secret_patterns() -> &'static [(Regex, &'static str)] {
    static PATTERNS: std::sync::OnceLock<Vec<(Regex, &'static str)>> = std::sync::OnceLock::new();
    PATTERNS.get_or_init(|| {
        [
            // NAME=value where NAME looks like a credential (env assignments, .env lines).
            (r"(?i)\b([A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL)[A-Z0-9_]*)\s*[=:]\s*('[^']*'|\x22[^\x22]*\x22|\S+)", "$1=[redacted]"),
            (r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}", "$1 [redacted]"),
            (r"(?i)(--?(?:password|token|api-key|secret)[= ])\S+", "$1[redacted]"),
            (r"\b(gh[pousr]_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|xox[bpas]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b", "[redacted]"),
        ]
        .into_iter()
        .filter_map(|(pattern, replacement)| Regex::new(pattern).ok().map(|r| (r, replacement)))
        .collect()
    })
}

/// Arguments with credentials replaced by `[redacted]`: values of credential-named keys, and
/// credential-looking parts of strings (`API_KEY=...`, `Bearer ...`, `--password x`, tokens).
pub fn redact(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, v) in map {
                let redacted = if secret_key(key) && !v.is_null() {
                    Value::String(String::from("[redacted]"))
                } else {
                    redact(v)
                };
                out.insert(key.clone(), redacted);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        Value::String(text) => {
            let mut text = text.clone();
            for (pattern, replacement) in secret_patterns() {
                text = pattern.replace_all(&text, *replacement).into_owned();
            }
            Value::String(text)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn credentials_are_redacted() {
        let args = json!({
            "command": "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123 curl -H 'Authorization: Bearer abcdefghijklmnop' --password hunter2 https://x",
            "api_key": "k-123",
            "nested": [{"Password": "p"}, "DB_PASSWORD=\"s3cret\" ./run"],
            "path": "src/main.rs",
        });
        let redacted = redact(&args);
        let text = redacted.to_string();
        for secret in [
            "ghp_abc",
            "abcdefghijklmnop",
            "hunter2",
            "k-123",
            "s3cret",
            "\"p\"",
        ] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert_eq!(redacted["path"], "src/main.rs");
        assert_eq!(redacted["api_key"], "[redacted]");
        assert!(
            text.contains("GITHUB_TOKEN=[redacted]") && text.contains("--password [redacted]"),
            "{text}"
        );
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(1_795_834_800_123)),
            "2026-11-28T03:00:00.123Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn records_are_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let record = AuditRecord {
            time: rfc3339(SystemTime::now()),
            session: "s".into(),
            call: "1".into(),
            tool: "read".into(),
            arguments: json!({"path": "a"}),
            decision: Some(Decision {
                verdict: "allow",
                by: "mode default".into(),
            }),
            duration_ms: 3,
            outcome: "ok".into(),
            error: None,
            truncated: false,
            output_hash: Some("00".into()),
        };
        log.record(&record).unwrap();
        log.record(&record).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["decision"]["by"], "mode default");
    }
}
