//! An object store's URL as users give it (`--artifacts URL`): which kind
//! of store it names, how it is shown (never with a secret), and the
//! options its client takes from the environment or a credentials file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The kinds of store a URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A folder on this machine (`file:///srv/weir/artifacts`, or a plain
    /// absolute path).
    Folder(PathBuf),
    /// S3 or an S3-compatible store (`s3://bucket/prefix`).
    S3,
    /// Google Cloud Storage (`gs://bucket/prefix`).
    Gcs,
    /// Azure Blob Storage (`az://container/prefix`, `abfs://…`).
    Azure,
}

/// A parsed store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUrl {
    /// What it names.
    pub kind: Kind,
    /// The URL as given, for the client (may hold a user name).
    pub url: url::Url,
    /// The URL as shown in logs, errors, the API and the UI: without a
    /// user, password, query or fragment.
    pub shown: String,
}

/// The prefixes of the environment variables a store's client reads.
const ENV_PREFIXES: [&str; 3] = ["AWS_", "GOOGLE_", "AZURE_"];

impl StoreUrl {
    /// Parses `text`: `s3://`, `gs://`, `az://`, `abfs://`, `file://` or
    /// an absolute path. The error names the URL (shown without secrets).
    pub fn parse(text: &str) -> Result<StoreUrl, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the object store URL is empty".into());
        }
        if text.starts_with('/') {
            let path = PathBuf::from(text);
            let url = url::Url::from_directory_path(&path)
                .map_err(|()| format!("{text:?} is not a folder path"))?;
            return Ok(StoreUrl {
                shown: format!("file://{}", path.display()),
                kind: Kind::Folder(path),
                url,
            });
        }
        let url = url::Url::parse(text).map_err(|e| {
            format!(
                "{:?} is not an object store URL ({e}): give s3://BUCKET[/PREFIX], gs://BUCKET, az://CONTAINER or file:///FOLDER",
                redact_text(text)
            )
        })?;
        let mut clean = url.clone();
        let _ = clean.set_username("");
        let _ = clean.set_password(None);
        clean.set_query(None);
        clean.set_fragment(None);
        let shown = clean.to_string();
        let kind = match url.scheme() {
            "file" => {
                let path = url
                    .to_file_path()
                    .map_err(|()| format!("{shown} does not name a local folder"))?;
                Kind::Folder(path)
            }
            "s3" | "s3a" => Kind::S3,
            "gs" => Kind::Gcs,
            "az" | "adl" | "azure" | "abfs" | "abfss" => Kind::Azure,
            other => {
                return Err(format!(
                    "{shown}: the scheme {other:?} is not one of s3, gs, az, abfs, file"
                ))
            }
        };
        if !matches!(kind, Kind::Folder(_)) && url.host_str().is_none_or(str::is_empty) {
            return Err(format!("{shown} names no bucket"));
        }
        Ok(StoreUrl { kind, url, shown })
    }

    /// Whether it is a folder on this machine.
    pub fn folder(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Folder(p) => Some(p),
            _ => None,
        }
    }
}

/// A URL-like text with anything between `://` and `@` cut out, for an
/// error about a text that did not parse.
fn redact_text(text: &str) -> String {
    match (text.find("://"), text.rfind('@')) {
        (Some(s), Some(a)) if a > s => format!("{}://…@{}", &text[..s], &text[a + 1..]),
        _ => text.to_string(),
    }
}

/// The client options: the store variables of the environment
/// (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, `GOOGLE_SERVICE_ACCOUNT`,
/// `AZURE_STORAGE_ACCOUNT_KEY`, …), then those of `file` (lines
/// `NAME=VALUE`, `#` comments; the variables' names) over them. Keys are
/// lowercased, as the object store's builders read them.
pub fn options(
    env: impl IntoIterator<Item = (String, String)>,
    file: Option<&Path>,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (k, v) in env {
        if ENV_PREFIXES.iter().any(|p| k.starts_with(p)) {
            out.insert(k.to_ascii_lowercase(), v);
        }
    }
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the credentials file {}: {e}", path.display()))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let line = line.strip_prefix("export ").unwrap_or(line);
            let Some((k, v)) = line.split_once('=') else {
                return Err(format!(
                    "{}:{}: not NAME=VALUE (the value is not shown)",
                    path.display(),
                    i + 1
                ));
            };
            let v = v.trim().trim_matches('"');
            out.insert(k.trim().to_ascii_lowercase(), v.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_secrets() {
        let u = StoreUrl::parse("s3://key:secret@bucket/prefix?token=x").unwrap();
        assert_eq!(u.kind, Kind::S3);
        assert!(!u.shown.contains("secret") && !u.shown.contains("token"));
        assert!(u.shown.starts_with("s3://bucket/prefix"), "{}", u.shown);
        let f = StoreUrl::parse("/srv/weir/art").unwrap();
        assert_eq!(f.folder(), Some(Path::new("/srv/weir/art")));
        let f = StoreUrl::parse("file:///srv/x").unwrap();
        assert_eq!(f.folder(), Some(Path::new("/srv/x")));
        let e = StoreUrl::parse("ftp://u:pw@host/x").unwrap_err();
        assert!(e.contains("ftp") && !e.contains("pw"), "{e}");
        let e = StoreUrl::parse("not a url :pw@").unwrap_err();
        assert!(e.contains("not an object store URL"), "{e}");
        assert!(StoreUrl::parse("s3:///prefix").is_err());
    }

    #[test]
    fn options_come_from_the_environment_then_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("creds");
        std::fs::write(
            &file,
            "# keys\nAWS_SECRET_ACCESS_KEY=\"from-file\"\nexport AWS_REGION=eu-west-1\n",
        )
        .unwrap();
        let env = vec![
            ("AWS_SECRET_ACCESS_KEY".to_string(), "from-env".to_string()),
            ("AWS_ACCESS_KEY_ID".to_string(), "id".to_string()),
            ("HOME".to_string(), "/root".to_string()),
        ];
        let o = options(env, Some(&file)).unwrap();
        assert_eq!(o["aws_secret_access_key"], "from-file");
        assert_eq!(o["aws_access_key_id"], "id");
        assert_eq!(o["aws_region"], "eu-west-1");
        assert!(!o.contains_key("home"));
        std::fs::write(&file, "AWS_SECRET_ACCESS_KEY\n").unwrap();
        let e = options(Vec::new(), Some(&file)).unwrap_err();
        assert!(e.contains(":1:"), "{e}");
    }
}
