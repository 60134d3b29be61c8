//! `[lab.object_store] credentials_command`: a program (argv, no shell) that prints the
//! bucket's credentials, as AWS's `credential_process` JSON (`AccessKeyId`,
//! `SecretAccessKey`, `SessionToken`, `Expiration`) or `AWS_ACCESS_KEY_ID=…` lines. Run
//! when first needed and again when what it gave expires (an hour when it says nothing).
//! What it prints is never shown, stored or logged.

use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::aws::AwsCredential;

use super::raw_files_error::RawFilesError;

/// How long the command may take (it may ask a keyring or an SSO session).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long credentials without an `Expiration` are used before the command runs again.
const UNDATED_FOR: Duration = Duration::from_secs(3600);
/// Credentials are renewed this long before they expire.
const EARLY: Duration = Duration::from_secs(120);

pub struct CommandCredentials {
    argv: Vec<String>,
    cached: tokio::sync::Mutex<Option<(Arc<AwsCredential>, Instant)>>,
}

/// Shows the program only: its arguments may name a secret's place.
impl std::fmt::Debug for CommandCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CommandCredentials({})", self.argv[0])
    }
}

impl CommandCredentials {
    /// `argv` is not empty (the lab file's reading refuses an empty command).
    pub fn new(argv: Vec<String>) -> CommandCredentials {
        CommandCredentials { argv, cached: tokio::sync::Mutex::new(None) }
    }

    async fn run(&self) -> Result<(AwsCredential, Duration), RawFilesError> {
        let program = self.argv[0].clone();
        let fail = |detail: String| RawFilesError::Credentials { program: program.clone(), detail };
        let child = tokio::process::Command::new(&program)
            .args(&self.argv[1..])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail(format!("cannot start: {e}")))?;
        let out = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| fail(format!("gave no answer within {} s", COMMAND_TIMEOUT.as_secs())))?
            .map_err(|e| fail(e.to_string()))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(fail(format!("failed ({}): {}", out.status, err.lines().next().unwrap_or("").trim())));
        }
        let text = String::from_utf8(out.stdout).map_err(|_| fail("printed no text".into()))?;
        parse(&text).ok_or_else(|| {
            fail("printed neither credential_process JSON (AccessKeyId, SecretAccessKey) nor AWS_ACCESS_KEY_ID= and AWS_SECRET_ACCESS_KEY= lines".into())
        })
    }
}

#[async_trait::async_trait]
impl object_store::CredentialProvider for CommandCredentials {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        let mut cached = self.cached.lock().await;
        if let Some((c, until)) = cached.as_ref()
            && Instant::now() < *until
        {
            return Ok(c.clone());
        }
        let (c, valid) = self
            .run()
            .await
            .map_err(|e| object_store::Error::Unauthenticated { path: String::new(), source: Box::new(e) })?;
        let c = Arc::new(c);
        *cached = Some((c.clone(), Instant::now() + valid.saturating_sub(EARLY)));
        Ok(c)
    }
}

/// The credentials in `text`, and how long they are good for.
fn parse(text: &str) -> Option<(AwsCredential, Duration)> {
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(text.trim()) {
        let field = |k: &str| json.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let valid = field("Expiration")
            .and_then(|e| chrono::DateTime::parse_from_rfc3339(&e).ok())
            .map(|e| (e.with_timezone(&chrono::Utc) - chrono::Utc::now()).to_std().unwrap_or(Duration::ZERO))
            .unwrap_or(UNDATED_FOR);
        let c = AwsCredential {
            key_id: field("AccessKeyId")?,
            secret_key: field("SecretAccessKey")?,
            token: field("SessionToken"),
        };
        return Some((c, valid));
    }
    let mut c = AwsCredential { key_id: String::new(), secret_key: String::new(), token: None };
    for line in text.lines() {
        let line = line.trim().trim_start_matches("export ");
        match line.split_once('=') {
            Some(("AWS_ACCESS_KEY_ID", v)) => c.key_id = v.trim_matches('"').to_string(),
            Some(("AWS_SECRET_ACCESS_KEY", v)) => c.secret_key = v.trim_matches('"').to_string(),
            Some(("AWS_SESSION_TOKEN", v)) => c.token = Some(v.trim_matches('"').to_string()),
            _ => {}
        }
    }
    (!c.key_id.is_empty() && !c.secret_key.is_empty()).then_some((c, UNDATED_FOR))
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::CredentialProvider;

    #[test]
    fn credential_process_json_and_key_value_lines_are_read() {
        let (c, valid) = parse(
            r#"{"Version": 1, "AccessKeyId": "AKID", "SecretAccessKey": "s3cr3t", "SessionToken": "tok",
                "Expiration": "2999-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!((c.key_id.as_str(), c.secret_key.as_str(), c.token.as_deref()), ("AKID", "s3cr3t", Some("tok")));
        assert!(valid > UNDATED_FOR);
        let (c, valid) = parse("export AWS_ACCESS_KEY_ID=AKID\nAWS_SECRET_ACCESS_KEY=\"s3cr3t\"\n").unwrap();
        assert_eq!((c.key_id.as_str(), c.secret_key.as_str(), c.token), ("AKID", "s3cr3t", None));
        assert_eq!(valid, UNDATED_FOR);
        assert!(parse("{\"AccessKeyId\": \"AKID\"}").is_none(), "no secret");
        assert!(parse("AKID s3cr3t").is_none());
    }

    #[tokio::test]
    async fn the_command_runs_once_while_its_credentials_last_and_its_output_is_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("runs");
        let script =
            format!("echo run >> {}; echo AWS_ACCESS_KEY_ID=AKID; echo AWS_SECRET_ACCESS_KEY=s3cr3t", count.display());
        let p = CommandCredentials::new(vec!["sh".into(), "-c".into(), script]);
        for _ in 0..3 {
            assert_eq!(p.get_credential().await.unwrap().secret_key, "s3cr3t");
        }
        assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 1);

        let bad = CommandCredentials::new(vec!["sh".into(), "-c".into(), "echo s3cr3t; echo oops >&2; exit 3".into()]);
        let e = bad.get_credential().await.unwrap_err().to_string();
        assert!(e.contains("failed (exit status: 3): oops") && !e.contains("s3cr3t"), "{e}");
        let e = CommandCredentials::new(vec!["sh".into(), "-c".into(), "echo s3cr3t".into()]).run().await.unwrap_err();
        assert!(!e.to_string().contains("s3cr3t"), "{e}");
        assert!(format!("{bad:?}") == "CommandCredentials(sh)");
    }
}
