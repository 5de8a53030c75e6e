//! The audit log (`--audit-log FILE`): one JSON line per call, written by a background thread.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use regex::Regex;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::util::MutexExt as _;

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
    /// Opens (appending to, creating if needed) a file. It is private to the user (0600):
    /// what was called and with what can be telling even with credentials redacted. A file
    /// that exists with wider permissions is narrowed.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        // On Windows the file inherits the folder's access list: the user's own data folder
        // is private to them.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = file.metadata()?;
            if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
                file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            }
        }
        Ok(Self {
            file: std::sync::Mutex::new(file),
        })
    }

    /// Writes a record. Blocking: call it off the async runtime.
    pub fn record(&self, record: &AuditRecord) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        let mut file = self.file.locked();
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

/// Credentials in free text: each pattern, and what replaces its match. The order matters:
/// whole blocks (private keys, JWTs) first, then values after a telling name or flag, then
/// tokens known by their shape anywhere.
const SECRET_PATTERNS: &[(&str, &str)] = &[
    // A private key block (PEM, OpenSSH), also when cut short.
    (
        r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
        "-----BEGIN ${1}PRIVATE KEY-----[redacted]-----END ${1}PRIVATE KEY-----",
    ),
    // A JSON Web Token: base64url header and payload (both `{"...` so `eyJ`), signature.
    (
        r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",
        "[redacted]",
    ),
    // The password in a URL's userinfo: `https://user:password@host`.
    (
        r"\b([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\x22]+:)[^/\s@'\x22]+@",
        "${1}[redacted]@",
    ),
    // Header values: `Authorization: ...`, `X-Api-Key: ...`, `Cookie: ...`.
    (
        r"(?i)\b((?:proxy-)?authorization|x-[a-z0-9-]*(?:api-?key|token|auth|secret|password)[a-z0-9-]*|api-?key|cookie)(\s*:\s*)[^'\x22\n]+",
        "${1}${2}[redacted]",
    ),
    (
        r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}",
        "${1} [redacted]",
    ),
    // `--password x`, `--password=x`, `--token x`, `--api-key=x`, `--secret x`.
    (
        r"(?i)(--?(?:password|passwd|pass|token|api-?key|secret|access-token|auth-token|client-secret)(?:=|\s+))('[^']*'|\x22[^\x22]*\x22|\S+)",
        "${1}[redacted]",
    ),
    // The MySQL family's `-pPASSWORD` (only there: `-p` means other things elsewhere).
    (
        r"(?i)\b((?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb|mariadb-dump)\b[^\n;|&]*?\s-p)[^\s'\x22]+",
        "${1}[redacted]",
    ),
    (r"(?i)\b(sshpass\b[^\n;|&]*?\s-p\s*)\S+", "${1}[redacted]"),
    // `curl -u user:password`, `--user`, `--proxy-user`.
    (
        r"(?i)((?:^|\s)(?:-u|--user|--proxy-user|-U)(?:\s+|=)['\x22]?[^\s:'\x22]+:)[^\s'\x22]+",
        "${1}[redacted]",
    ),
    // `aws configure set aws_secret_access_key V` and other `configure set` of a secret.
    (
        r"(?i)\b((?:aws_secret_access_key|aws_session_token|secret_access_key|session_token)\s+|configure\s+set\s+\S*(?:secret|token|password|key)\S*\s+)('[^']*'|\x22[^\x22]*\x22|\S+)",
        "${1}[redacted]",
    ),
    // NAME=value where NAME looks like a credential (env assignments, .env lines).
    (
        r"(?i)\b([A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL)[A-Z0-9_]*)\s*[=:]\s*('[^']*'|\x22[^\x22]*\x22|\S+)",
        "${1}=[redacted]",
    ),
    // Tokens known by their shape.
    (
        concat!(
            r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}",
            r"|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}",
            r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}",
            r"|AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,}",
            r"|(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|glpat-[0-9A-Za-z_-]{20,}",
            r"|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_-]{50,}|hf_[A-Za-z0-9]{30,}",
            r"|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}|tvly-[A-Za-z0-9_-]{20,}",
            r"|do[opr]_v1_[a-f0-9]{64})\b"
        ),
        "[redacted]",
    ),
];

fn secret_patterns() -> &'static [(Regex, &'static str)] {
    static PATTERNS: std::sync::OnceLock<Vec<(Regex, &'static str)>> = std::sync::OnceLock::new();
    PATTERNS.get_or_init(|| {
        SECRET_PATTERNS
            .iter()
            .filter_map(|(pattern, replacement)| {
                Regex::new(pattern).ok().map(|r| (r, *replacement))
            })
            .collect()
    })
}

/// Arguments with credentials replaced by `[redacted]`: values of credential-named keys, and
/// credential-looking parts of strings (a table of patterns: private keys, JWTs, URL
/// passwords, auth headers, password flags, `NAME=value`, known token formats).
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

    /// (text, what must go, what must stay)
    const REDACTION_CASES: &[(&str, &str, &str)] = &[
        (
            "curl -u alice:s3cretpw https://x",
            "s3cretpw",
            "curl -u alice:",
        ),
        ("curl --user alice:s3cretpw https://x", "s3cretpw", "alice:"),
        (
            "git clone https://bob:pa55word@example.com/r.git",
            "pa55word",
            "https://bob:[redacted]@example.com/r.git",
        ),
        (
            "mysql -uroot -ph1ddenpw shop",
            "h1ddenpw",
            "mysql -uroot -p",
        ),
        (
            "mysqldump -u root -pS3cr3t db",
            "S3cr3t",
            "mysqldump -u root -p",
        ),
        (
            "psql --password hunter2",
            "hunter2",
            "--password [redacted]",
        ),
        ("app --password=hunter2 --verbose", "hunter2", "--verbose"),
        ("gh auth login --token abc123def", "abc123def", "--token"),
        (
            "aws configure set aws_secret_access_key V3rySecretAwsKey",
            "V3rySecretAwsKey",
            "aws configure set aws_secret_access_key",
        ),
        (
            "export AWS_SECRET_ACCESS_KEY=V3ry",
            "V3ry",
            "AWS_SECRET_ACCESS_KEY=",
        ),
        (
            "curl -H 'X-Api-Key: k3yk3yk3y' x",
            "k3yk3yk3y",
            "X-Api-Key: ",
        ),
        (
            "curl -H \"Authorization: Bearer abc.def.ghi\" x",
            "abc.def.ghi",
            "Authorization",
        ),
        ("curl -H 'Cookie: session=abcdef' x", "abcdef", "Cookie"),
        (
            "echo eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
            "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
            "echo [redacted]",
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
            "BEGIN OPENSSH PRIVATE KEY",
        ),
        (
            "cat <<EOF\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA75",
            "MIIEowIBAAKCAQEA75",
            "cat <<EOF",
        ),
        ("sshpass -p pw123456 ssh host", "pw123456", "ssh host"),
        (
            "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123 gh",
            "ghp_abc",
            "gh",
        ),
        (
            "use ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "ghp_abc",
            "use ",
        ),
        (
            "key AKIAIOSFODNN7EXAMPLE here",
            "AKIAIOSFODNN7EXAMPLE",
            "here",
        ),
        (
            "OPENAI sk-proj-abcdefghijklmnopqrstuvwx",
            "sk-proj-abc",
            "OPENAI",
        ),
        (
            "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
            "sk-ant-api03",
            "",
        ),
        (
            "AIzaSyA1234567890abcdefghijklmnopqrstuv",
            "AIzaSyA12345",
            "",
        ),
        ("sk_live_abcdefghijklmnop1234", "sk_live_abcdef", ""),
        ("glpat-abcdefghijklmnopqrstu", "glpat-abcdef", ""),
        ("tvly-abcdefghijklmnopqrstuvwx", "tvly-abcdef", ""),
        ("hf_abcdefghijklmnopqrstuvwxyz123456", "hf_abcdefgh", ""),
        ("xoxb-1234567890-abcdefghij", "xoxb-123", ""),
    ];

    #[test]
    fn redaction_table() {
        let cases = REDACTION_CASES;
        for (text, secret, kept) in cases {
            let redacted = redact(&Value::String((*text).to_owned()));
            let redacted = redacted.as_str().unwrap();
            assert!(
                !redacted.contains(secret),
                "{secret} stayed in {redacted:?}"
            );
            assert!(redacted.contains(kept), "{kept:?} went from {redacted:?}");
            assert!(redacted.contains("[redacted]"), "{redacted:?}");
        }
        // Ordinary commands stay as they are.
        for text in [
            "cargo test --release -p gimlet-tools",
            "mkdir -p build && ls -la /tmp",
            "git commit -m 'fix the token parser'",
            "curl https://example.com/api",
            "sort -u names.txt",
            "grep -rn password_hash src/",
        ] {
            assert_eq!(redact(&json!(text)), json!(text), "{text}");
        }
    }

    #[test]
    fn the_log_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        AuditLog::open(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        let wide = dir.path().join("wide.jsonl");
        std::fs::write(&wide, "").unwrap();
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o644)).unwrap();
        AuditLog::open(&wide).unwrap();
        assert_eq!(mode(&wide), 0o600, "an existing log is narrowed");
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
