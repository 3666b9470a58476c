//! Where a slice's source query runs when one machine is not enough: an Apache DataFusion Ballista
//! cluster. Ballista runs a plan's SQL — DataFusion's, or Spark's with the dialect's functions
//! ([`codec`]) — with the same DataFusion bf builds, across a scheduler and its workers.
//!
//! - [`Cluster`]: the operator's `BF_CLUSTER=df://HOST:PORT` (or `--cluster`). A plan file never
//!   names a cluster: plans are untrusted input, and a cluster runs what it is sent.
//! - [`serve`]: `bf cluster scheduler` and `bf cluster worker`, Ballista's own processes started
//!   from bf's binary so they carry bf's codecs (how a Delta input crosses the wire) and bf's
//!   object stores, and nothing else of bf.
//! - [`remote`]: the client side. A slice's query is planned in bf as always, run on the cluster,
//!   and its rows stream back into bf's writer; the rehearsal's commits, the comparison, the checks,
//!   publishing and the ledger stay in bf's process.
//!
//! The cluster is a build feature (`cluster`): the demo builds without it, the tests with it.

#[cfg(feature = "cluster")]
pub mod codec;
#[cfg(feature = "cluster")]
pub mod delta;
#[cfg(feature = "cluster")]
pub mod remote;
#[cfg(feature = "cluster")]
pub mod serve;

use std::time::Duration;

use deltalake::datafusion::error::Result as QueryResult;
use deltalake::datafusion::prelude::{DataFrame, SessionContext};
use serde::{Deserialize, Serialize};

/// The setting that names the cluster.
pub const CLUSTER: &str = "BF_CLUSTER";

/// The port a scheduler listens on unless told otherwise (Ballista's).
pub const DEFAULT_PORT: u16 = 50050;

/// A Ballista scheduler to send slices' source queries to: `df://HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub host: String,
    pub port: u16,
}

/// What went wrong reaching or using a cluster: every message names the setting.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "{CLUSTER} (or --cluster): `{given}` is not a cluster address; write one like df://scheduler:50050"
    )]
    Address { given: String },
    #[error(
        "{CLUSTER}={cluster}: the scheduler cannot be reached ({why}). Start one with `bf cluster scheduler --bind \
         {bind}`, or unset {CLUSTER} to run the slices in bf's own process"
    )]
    Unreachable { cluster: String, bind: String, why: String },
    #[error(
        "{CLUSTER}={cluster}: the scheduler has no worker ({said}). Start one with `bf cluster worker --scheduler \
         {address}`, or unset {CLUSTER} to run the slices in bf's own process"
    )]
    NoWorkers { cluster: String, address: String, said: String },
    #[error(
        "{CLUSTER} is set, and this bf was built without the cluster: build it with `cargo build --release --features \
         cluster`, or unset {CLUSTER}"
    )]
    NotBuilt,
    #[error("the cluster: {0}")]
    Serve(String),
}

/// A cluster that answered, ready for slices: where to send them and how many workers it had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reached {
    pub cluster: Cluster,
    pub workers: usize,
}

impl Reached {
    /// What the saved plan records of it.
    pub fn ran_on(&self) -> RanOn {
        RanOn { cluster: self.cluster.to_string(), workers: self.workers }
    }
}

/// Where a plan's slices' source queries ran, as the saved plan and its header say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RanOn {
    /// The scheduler, `df://HOST:PORT`.
    pub cluster: String,
    /// The workers registered with it when the plan started.
    pub workers: usize,
}

impl std::fmt::Display for RanOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "on cluster {}, {}", self.cluster, crate::words::count(self.workers, "worker"))
    }
}

impl Cluster {
    /// `df://HOST[:PORT]`, as Ballista's clients write a scheduler.
    pub fn parse(given: &str) -> Result<Cluster, ClusterError> {
        let url = url::Url::parse(given);
        // An address is never a place for a password, and one put there is not printed back.
        let shown = match &url {
            Ok(url) if !url.username().is_empty() || url.password().is_some() => {
                let mut shown = url.clone();
                let _ = (shown.set_username(""), shown.set_password(None));
                format!("{shown} (its user and password left out here)")
            }
            _ => given.to_owned(),
        };
        let bad = || ClusterError::Address { given: shown.clone() };
        let url = url.map_err(|_| bad())?;
        let host = url.host_str().filter(|h| !h.is_empty()).ok_or_else(bad)?;
        let clean = url.scheme() == "df"
            && url.username().is_empty()
            && url.password().is_none()
            && matches!(url.path(), "" | "/")
            && url.query().is_none()
            && url.fragment().is_none();
        if !clean {
            return Err(bad());
        }
        Ok(Cluster {
            host: host.trim_matches(['[', ']']).to_owned(),
            port: url.port().unwrap_or(DEFAULT_PORT),
        })
    }

    /// `HOST:PORT`, brackets around an IPv6 address.
    pub fn address(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }

    /// The scheduler's gRPC endpoint, as Ballista's client dials it.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address())
    }

    /// Asks the scheduler whether it can run a query (its `/readyz`): reachable, and with at least
    /// one worker. Done before any slice is written, so a cluster that is down fails the command
    /// with the setting named rather than a slice half way.
    pub async fn reach(&self) -> Result<Reached, ClusterError> {
        if !cfg!(feature = "cluster") {
            return Err(ClusterError::NotBuilt);
        }
        let unreachable =
            |why: String| ClusterError::Unreachable { cluster: self.to_string(), bind: self.address(), why };
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .no_proxy()
            .build()
            .map_err(|e| unreachable(e.to_string()))?;
        let response = client
            .get(format!("{}/readyz", self.endpoint()))
            .send()
            .await
            .map_err(|e| unreachable(crate::cluster::cause(&e)))?;
        let status = response.status();
        let said = response.text().await.unwrap_or_default().trim().to_owned();
        if status.is_success()
            && let Some(workers) = said.strip_prefix("ready: ").and_then(|rest| rest.split(' ').next())
            && let Ok(workers) = workers.parse::<usize>()
            && workers > 0
        {
            return Ok(Reached { cluster: self.clone(), workers });
        }
        if status.as_u16() == 503 || said.starts_with("not ready") || said.starts_with("ready: 0") {
            return Err(ClusterError::NoWorkers { cluster: self.to_string(), address: self.address(), said });
        }
        Err(unreachable(format!("it answered {status}, not as a Ballista scheduler does")))
    }
}

impl std::fmt::Display for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "df://{}", self.address())
    }
}

/// A session whose queries `cluster` runs, in `dialect`: what a slice's query is planned in there.
pub fn session(cluster: &Cluster, dialect: crate::dialect::Dialect) -> QueryResult<SessionContext> {
    #[cfg(feature = "cluster")]
    return remote::session(cluster, dialect);
    #[cfg(not(feature = "cluster"))]
    let _ = dialect;
    #[cfg(not(feature = "cluster"))]
    Err(deltalake::datafusion::error::DataFusionError::Plan(format!(
        "{}: {}",
        cluster,
        ClusterError::NotBuilt
    )))
}

/// `rows`, a query of a cluster's [`session`], as rows of `here`, bf's own session: read there,
/// they run on the cluster and stream back.
pub fn rows_here(here: &SessionContext, rows: DataFrame) -> QueryResult<DataFrame> {
    #[cfg(feature = "cluster")]
    return here.read_table(remote::rows_here(rows)?);
    #[cfg(not(feature = "cluster"))]
    {
        let _ = (here, rows);
        Err(deltalake::datafusion::error::DataFusionError::Plan(ClusterError::NotBuilt.to_string()))
    }
}

/// A Delta input as a cluster reads it: the table at `url`, version `version`, whose live files
/// are `files` (path and size), seen with the columns of `schema`.
pub fn delta_input(
    url: url::Url,
    version: u64,
    files: Vec<(String, u64)>,
    schema: deltalake::arrow::datatypes::SchemaRef,
) -> QueryResult<std::sync::Arc<dyn deltalake::datafusion::catalog::TableProvider>> {
    #[cfg(feature = "cluster")]
    return Ok(std::sync::Arc::new(delta::DeltaSource { uri: url.to_string(), version, files, schema }));
    #[cfg(not(feature = "cluster"))]
    {
        let _ = (url, version, files, schema);
        Err(deltalake::datafusion::error::DataFusionError::Plan(ClusterError::NotBuilt.to_string()))
    }
}

/// What to do when `message` (an error bf is about to print) says the cluster could not finish a
/// slice's query; `None` for any other error. Ballista's errors arrive as text.
pub fn hint(message: &str) -> Option<String> {
    let lost =
        ["executors were lost", "no executors remain", "Error connecting to Ballista", "GrpcConnectionError"];
    if !lost.iter().any(|said| message.contains(said)) {
        return None;
    }
    Some(format!(
        "the cluster ({CLUSTER}) lost the workers running this query. Nothing of the slice was written: start workers \
         (`bf cluster worker --scheduler HOST:PORT`) and run the command again, or unset {CLUSTER} to run it here"
    ))
}

/// The innermost cause of an error, which for a refused connection is the one that says so.
fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = error;
    while let Some(next) = inner.source() {
        inner = next;
    }
    inner.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_is_written_as_ballista_clients_write_it() {
        let c = Cluster::parse("df://scheduler:50051").unwrap();
        assert_eq!((c.host.as_str(), c.port), ("scheduler", 50051));
        assert_eq!(c.to_string(), "df://scheduler:50051");
        assert_eq!(Cluster::parse("df://10.0.0.7").unwrap().port, DEFAULT_PORT);
        assert_eq!(Cluster::parse("df://[::1]:7000").unwrap().endpoint(), "http://[::1]:7000");
        for bad in ["http://scheduler:50050", "scheduler:50050", "df://", "df://h:1/x", "df://h:1?a=b"] {
            let err = Cluster::parse(bad).unwrap_err().to_string();
            assert!(err.contains("BF_CLUSTER") && err.contains(bad), "{bad}: {err}");
        }
        let err = Cluster::parse("df://admin:s3cret@h:1").unwrap_err().to_string();
        assert!(
            err.contains("df://h:1 (its user and password left out here)") && !err.contains("s3cret"),
            "{err}"
        );
    }
}
