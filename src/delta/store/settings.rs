//! The plan's `[storage]` settings over the environment: the options each store's client reads
//! under its own names, and whether commits to a table are safe given what the settings say of the
//! store. Settings only: no secret is ever one of them (credentials come from where each cloud keeps
//! them), and nothing here reaches a store.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use url::Url;

use super::location::Kind;

/// How bf reaches tables and files in object stores.
///
/// A plan is reviewed, saved and shown, so it holds no secret: credentials come from where each
/// cloud keeps them (the environment, the AWS profile / SSO / instance chain, the Azure CLI or a
/// managed identity, Google's application default credentials). Every setting here can also come
/// from the environment variable named with it; a setting written here wins over the environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Storage {
    /// S3: the buckets' region, e.g. `"eu-west-1"` (`AWS_REGION`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The store's endpoint, for stores other than the cloud's own: MinIO, Ceph, R2, a local server
    /// (`AWS_ENDPOINT_URL`, `AZURE_STORAGE_ENDPOINT`, `GOOGLE_BASE_URL`), e.g. `"http://127.0.0.1:9000"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Allow an `http://` endpoint (`AWS_ALLOW_HTTP`, `AZURE_ALLOW_HTTP`, `GOOGLE_ALLOW_HTTP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_http: Option<bool>,
    /// S3: address buckets as `bucket.endpoint` rather than `endpoint/bucket`
    /// (`AWS_VIRTUAL_HOSTED_STYLE_REQUEST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_hosted_style_request: Option<bool>,
    /// S3: `"etag"` says the store refuses to create an object that exists (`If-None-Match`), as AWS
    /// S3, MinIO and R2 do, so two writers committing the same version cannot both succeed
    /// (`AWS_CONDITIONAL_PUT`). `"disabled"` turns it off, and deltalake cannot commit without it:
    /// bf refuses to write then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditional_put: Option<ConditionalPut>,
    /// S3 without `conditional_put = "etag"`: `true` declares that nothing else writes these tables
    /// while bf applies or rolls back, the only case in which commits to a store that may not honour
    /// `If-None-Match` are safe. Without either, bf refuses to write to S3.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub s3_single_writer: bool,
    /// Azure: the storage account, when the URI does not name it (`AZURE_STORAGE_ACCOUNT_NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_name: Option<String>,
    /// Azure: use the Azurite emulator on 127.0.0.1 (`AZURE_STORAGE_USE_EMULATOR`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_emulator: Option<bool>,
    /// Send requests unsigned, for public buckets and emulators (`AWS_SKIP_SIGNATURE`,
    /// `AZURE_SKIP_SIGNATURE`, `GOOGLE_SKIP_SIGNATURE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_signature: Option<bool>,
    /// How many times a failed request is retried (deltalake's default: 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// How long a request is retried before bf gives up and stops, e.g. `"30s"` or `"3m"`
    /// (deltalake's default: 3 minutes). A slice that gives up is not committed; `bf apply` resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_timeout: Option<String>,
}

impl Storage {
    pub(crate) fn is_default(&self) -> bool {
        *self == Storage::default()
    }

    /// The settings under the names `url`'s store reads ([`super::Stores::options`]); GCS's are
    /// completed from the environment here because deltalake's GCS store reads only credentials there.
    pub(super) fn options(&self, url: &Url) -> HashMap<String, String> {
        let s = self;
        let text = |v: &Option<String>| v.clone();
        let flag = |v: &Option<bool>| v.map(|b| b.to_string());
        let env = |name: &str| std::env::var(name).ok();
        let pairs: Vec<(&str, Option<String>)> = match Kind::of(url) {
            Some(Kind::S3) => vec![
                ("aws_region", text(&s.region)),
                ("aws_endpoint", text(&s.endpoint)),
                ("aws_allow_http", flag(&s.allow_http)),
                ("aws_virtual_hosted_style_request", flag(&s.virtual_hosted_style_request)),
                ("aws_skip_signature", flag(&s.skip_signature)),
                (
                    "aws_conditional_put",
                    s.conditional_put.map(|c| match c {
                        ConditionalPut::Etag => "etag".to_owned(),
                        ConditionalPut::Disabled => "disabled".to_owned(),
                    }),
                ),
            ],
            Some(Kind::Azure) => vec![
                ("azure_storage_account_name", text(&s.account_name)),
                ("azure_storage_endpoint", text(&s.endpoint)),
                ("azure_storage_use_emulator", flag(&s.use_emulator)),
                ("azure_allow_http", flag(&s.allow_http)),
                ("azure_skip_signature", flag(&s.skip_signature)),
            ],
            // deltalake's GCS store reads only credentials from the environment; bf reads the
            // rest, so that the environment alone reaches GCS as it reaches S3 and Azure.
            Some(Kind::Gcs) => vec![
                ("google_base_url", text(&s.endpoint).or_else(|| env("GOOGLE_BASE_URL"))),
                ("google_allow_http", flag(&s.allow_http).or_else(|| env("GOOGLE_ALLOW_HTTP"))),
                ("google_skip_signature", flag(&s.skip_signature).or_else(|| env("GOOGLE_SKIP_SIGNATURE"))),
            ],
            Some(Kind::Local) | None => vec![],
        };
        let retries = [
            ("max_retries", s.max_retries.map(|n| n.to_string())),
            ("retry_timeout", s.retry_timeout.clone()),
        ];
        let mut options: HashMap<String, String> =
            pairs.into_iter().chain(retries).filter_map(|(k, v)| Some((k.to_owned(), v?))).collect();
        // A catalog's credentials for this table win over the environment's.
        options.extend(super::lent::borrowed(url).unwrap_or_default());
        options
    }

    /// How commits to `url` are kept from overwriting each other ([`super::Stores::commits`]): the
    /// setting, else `AWS_CONDITIONAL_PUT`, else what the plan declares about other writers.
    pub(super) fn commits(&self, url: &Url) -> Commits {
        if Kind::of(url) != Some(Kind::S3) {
            return Commits::Atomic;
        }
        let conditional_put = self.conditional_put.or_else(|| {
            match std::env::var("AWS_CONDITIONAL_PUT").ok()?.trim().to_ascii_lowercase().as_str() {
                "etag" => Some(ConditionalPut::Etag),
                "disabled" => Some(ConditionalPut::Disabled),
                _ => None,
            }
        });
        match conditional_put {
            Some(ConditionalPut::Etag) => Commits::ConditionalPut,
            Some(ConditionalPut::Disabled) => Commits::Impossible,
            None if self.s3_single_writer => Commits::SingleWriter,
            None => Commits::Unsafe,
        }
    }
}

/// See [`Storage::conditional_put`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConditionalPut {
    /// The store honours `If-None-Match: *` on create.
    Etag,
    /// No conditional put.
    Disabled,
}

/// How commits to a table are kept from overwriting each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commits {
    /// The store creates an object only if it is absent (local files, Azure, GCS).
    Atomic,
    /// S3 with `If-None-Match` honoured, as the plan or the environment says.
    ConditionalPut,
    /// S3 not said to honour it, which the plan declares safe: nothing else writes the table.
    SingleWriter,
    /// S3 not said to honour it: two writers of the same version could both succeed.
    Unsafe,
    /// S3 with conditional put disabled: deltalake's commits need it, so none can be made.
    Impossible,
}

/// bf refuses to commit to S3 without a safe commit: the message says the ways to give it one.
#[derive(Debug, thiserror::Error)]
pub enum UnsafeCommits {
    #[error(
        "{location}: no safe commit is configured for S3, so two writers could both commit the same version \
         and one would silently overwrite the other; set `conditional_put = \"etag\"` in [storage] (or \
         AWS_CONDITIONAL_PUT=etag) if the store refuses to overwrite on `If-None-Match` (AWS S3, MinIO, R2 \
         do), or declare `s3_single_writer = true` in [storage] if nothing else ever writes this table \
         (deltalake 1.x no longer offers the DynamoDB lock)"
    )]
    NotSaid { location: String },
    #[error(
        "{location}: conditional put is disabled (`conditional_put = \"disabled\"` or AWS_CONDITIONAL_PUT), \
         and deltalake commits to S3 only with it: nothing could be committed; remove the setting, or set \
         it to \"etag\""
    )]
    Disabled { location: String },
    #[error(
        "{location}: `s3_single_writer = true` promises that one writer commits at a time, and {several} \
         would be several: two of bf's own commits could take the same version and one silently overwrite \
         the other. Apply with `parallel = 1` in one `bf apply`, or set `conditional_put = \"etag\"` in \
         [storage] if the store honours `If-None-Match`"
    )]
    SingleWriterInParallel { location: String, several: String },
}
