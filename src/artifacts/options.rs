//! `--artifacts URL` and its companions, as `run`, `serve` and `worker`
//! take them, and the store they open (probed before anything runs).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;

use super::{ArtifactStore, Shared};
use crate::cli::Failure;
use crate::objects::Objects;

/// The artifact store's flags.
#[derive(Debug, Clone, Default, Args)]
pub struct ArtifactArgs {
    /// Where nodes' artifacts are kept: s3://BUCKET[/PREFIX] (S3 or an
    /// S3-compatible store: AWS_ENDPOINT_URL), gs://BUCKET, az://CONTAINER
    /// or file:///FOLDER. Default: DATA/artifacts; a replicated engine
    /// needs a store every member and worker reaches. Credentials come
    /// from the AWS_*, GOOGLE_* and AZURE_* variables or
    /// --artifacts-credentials.
    #[arg(long, value_name = "URL")]
    pub artifacts: Option<String>,
    /// A file of NAME=VALUE lines (AWS_ACCESS_KEY_ID=…) for the artifact
    /// store, over the environment's.
    #[arg(long, value_name = "FILE", requires = "artifacts")]
    pub artifacts_credentials: Option<PathBuf>,
    /// How long an artifact that no record references is kept before the
    /// collector deletes it (covers uploads whose record is on its way).
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub artifacts_grace: String,
}

/// Where a process without `--artifacts` keeps them.
pub enum Default<'a> {
    /// A folder of its data directory (a single engine).
    Folder(&'a Path),
    /// None: nodes with artifacts fail, saying this.
    Missing(&'a str),
}

impl ArtifactArgs {
    /// The grace, in ms.
    pub fn grace_ms(&self) -> Result<u64, Failure> {
        crate::definition::parse_duration_ms(&self.artifacts_grace)
            .map_err(|e| Failure::input(format!("--artifacts-grace: {e}")))
    }

    /// Opens the store, probing a URL by writing, reading and deleting an
    /// object as `who`. A URL that does not parse or a credentials file
    /// that cannot be read is refused as input (exit 2); a store that
    /// does not answer, or refuses the credentials, as an I/O error
    /// (exit 3), naming the URL (never a secret).
    pub async fn open(&self, default: Default<'_>, who: &str) -> Result<Shared, Failure> {
        let grace_ms = self.grace_ms()?;
        let objects = match (&self.artifacts, default) {
            (Some(url), _) => {
                let objects = Objects::open(url, self.artifacts_credentials.as_deref())
                    .map_err(|e| Failure::input(format!("--artifacts: {e}")))?;
                objects.probe(who).await.map_err(|e| {
                    Failure::store(format!(
                        "--artifacts: the store does not take a probe object: {e}"
                    ))
                })?;
                tracing::info!(store = %objects.shown(), "artifact store checked");
                objects
            }
            (None, Default::Folder(dir)) => Objects::folder(dir).map_err(Failure::store)?,
            (None, Default::Missing(why)) => {
                return Ok(Arc::new(ArtifactStore::Missing(why.to_string())))
            }
        };
        Ok(Arc::new(ArtifactStore::Store { objects, grace_ms }))
    }
}
