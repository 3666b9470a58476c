//! `bf cluster scheduler` and `bf cluster worker`: Ballista's scheduler and executor, run from bf's
//! binary. They are Ballista's processes, configured for slices: a worker that stops answering is
//! given up on in seconds rather than minutes (its tasks rerun on the others), and each worker's
//! memory is bounded by `BF_MEMORY_LIMIT` where the operator set it.
//!
//! Neither holds credentials of its own: what a worker reads, it reads with its environment's
//! store settings, as bf does. Their gRPC is plaintext and unauthenticated, as Ballista's is: bind
//! them to an address only bf and the workers reach (docs/CLUSTER.md).

use std::net::SocketAddr;
use std::sync::Arc;

use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use deltalake::datafusion::error::Result as QueryResult;
use deltalake::datafusion::execution::SessionStateBuilder;
use deltalake::datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use deltalake::datafusion::execution::runtime_env::RuntimeEnvBuilder;
use object_store::ObjectStore;
use url::Url;

use super::codec::codecs;
use super::{Cluster, ClusterError};

/// How often a worker tells the scheduler it is alive, and how long the scheduler waits before
/// it gives a silent worker's tasks to the others. Ballista's defaults (60 s and 180 s) leave a
/// killed worker's slice waiting three minutes.
const HEARTBEAT_SECONDS: u64 = 3;
const WORKER_TIMEOUT_SECONDS: u64 = 15;

/// Runs a scheduler on `bind` (port 0: one the system picks) until interrupted. `advertise` is
/// the host workers and bf reach it by, where that is not the bound address. `ready` is told the
/// address once it listens.
pub async fn scheduler(
    bind: SocketAddr,
    advertise: Option<String>,
    ready: impl FnOnce(&Cluster),
) -> Result<(), ClusterError> {
    let serve = |e: &dyn std::fmt::Display| ClusterError::Serve(format!("the scheduler on {bind}: {e}"));
    let listener = tokio::net::TcpListener::bind(bind).await.map_err(|e| serve(&e))?;
    let bound = listener.local_addr().map_err(|e| serve(&e))?;
    let (logical, physical) = codecs();
    let config = SchedulerConfig {
        bind_host: bound.ip().to_string(),
        bind_port: bound.port(),
        external_host: advertise.clone().unwrap_or_else(|| bound.ip().to_string()),
        executor_timeout_seconds: WORKER_TIMEOUT_SECONDS,
        expire_dead_executor_interval_seconds: HEARTBEAT_SECONDS,
        // A job with no worker left fails after this long rather than waiting for one.
        no_executors_grace_period_seconds: WORKER_TIMEOUT_SECONDS,
        // Results are fetched from the workers through the scheduler: bf needs to reach it alone.
        enable_embedded_flight_proxy: true,
        override_logical_codec: Some(logical),
        override_physical_codec: Some(physical),
        // The scheduler lists an input's files and reads their footers: it reads the stores too.
        override_session_builder: Some(Arc::new(|config| {
            let state = ballista_core::utils::default_session_builder(config)?;
            let runtime =
                RuntimeEnvBuilder::new().with_object_store_registry(NodeStores::shared()).build()?;
            Ok(SessionStateBuilder::new_from_existing(state).with_runtime_env(Arc::new(runtime)).build())
        })),
        ..SchedulerConfig::default()
    };
    config.validate().map_err(|e| serve(&e))?;
    let cluster = BallistaCluster::new_from_config(&config).await.map_err(|e| serve(&e))?;
    let scheduler = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::new(config))
        .await
        .map_err(|e| serve(&e))?;
    ready(&Cluster { host: advertise.unwrap_or_else(|| bound.ip().to_string()), port: bound.port() });
    tokio::select! {
        served = start_grpc_service_with_listener(listener, scheduler) => served.map_err(|e| serve(&e)),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// Where a worker listens: Arrow Flight (the rows it sends) on `port`, its task service on
/// `port + 1`.
#[derive(Debug, Clone)]
pub struct WorkerPorts {
    pub host: String,
    pub flight: u16,
    pub tasks: u16,
}

impl WorkerPorts {
    /// `bind` as given; port 0 takes two ports the system has free.
    pub fn for_bind(bind: SocketAddr) -> Result<WorkerPorts, ClusterError> {
        let host = bind.ip().to_string();
        if bind.port() != 0 {
            let tasks = bind.port().checked_add(1).ok_or_else(|| {
                ClusterError::Serve(format!("a worker takes two ports, {} and the one after it", bind.port()))
            })?;
            return Ok(WorkerPorts { host, flight: bind.port(), tasks });
        }
        let free = || -> Result<u16, ClusterError> {
            let socket = std::net::TcpListener::bind((bind.ip(), 0))
                .map_err(|e| ClusterError::Serve(format!("no free port on {}: {e}", bind.ip())))?;
            Ok(socket.local_addr().map_err(|e| ClusterError::Serve(e.to_string()))?.port())
        };
        // Both taken before either is let go, so they differ.
        let (flight, tasks) = (free()?, free()?);
        Ok(WorkerPorts { host, flight, tasks })
    }
}

/// Runs a worker for the scheduler `scheduler` until interrupted or told to stop by it. Its
/// shuffle files go to `work_dir` (a fresh temporary folder by default).
pub async fn worker(
    scheduler: &Cluster,
    ports: WorkerPorts,
    advertise: Option<String>,
    work_dir: Option<std::path::PathBuf>,
    memory: Option<u64>,
) -> Result<(), ClusterError> {
    let serve = |e: &dyn std::fmt::Display| ClusterError::Serve(format!("the worker on {}: {e}", ports.host));
    // Kept alive for the worker's life: a temporary folder is removed when dropped.
    let temporary = match work_dir {
        Some(_) => None,
        None => Some(tempfile::tempdir().map_err(|e| serve(&e))?),
    };
    let work_dir = work_dir.or_else(|| temporary.as_ref().map(|t| t.path().to_path_buf()));
    let spill = work_dir.clone().unwrap_or_else(std::env::temp_dir);
    let stores = NodeStores::shared();
    let (logical, physical) = codecs();
    let config = ExecutorProcessConfig {
        bind_host: ports.host.clone(),
        external_host: Some(advertise.unwrap_or_else(|| ports.host.clone())),
        port: ports.flight,
        grpc_port: ports.tasks,
        scheduler_host: scheduler.host.clone(),
        scheduler_port: scheduler.port,
        // A worker started beside its scheduler waits for it rather than failing at once.
        scheduler_connect_timeout_seconds: 30,
        executor_heartbeat_interval_seconds: HEARTBEAT_SECONDS,
        work_dir: work_dir.map(|d| d.display().to_string()),
        memory_pool_size: memory,
        override_logical_codec: Some(logical),
        override_physical_codec: Some(physical),
        // Called for every task: the stores are made once and shared.
        override_runtime_producer: Some(Arc::new(move |_| {
            let runtime = RuntimeEnvBuilder::new()
                .with_temp_file_path(spill.clone())
                .with_object_store_registry(stores.clone());
            Ok(Arc::new(runtime.build()?))
        })),
        ..ExecutorProcessConfig::default()
    };
    start_executor_process(Arc::new(config)).await.map_err(|e| serve(&e))
}

/// The stores a scheduler or a worker reads a plan's inputs in: local files, and buckets reached
/// with the node's own environment (`AWS_*`, `AZURE_*`, `GOOGLE_*`), as bf reaches them. No
/// credential ever travels with a query.
#[derive(Debug)]
struct NodeStores {
    registered: DefaultObjectStoreRegistry,
    stores: crate::delta::store::Stores,
}

impl NodeStores {
    fn shared() -> Arc<dyn ObjectStoreRegistry> {
        Arc::new(NodeStores { registered: DefaultObjectStoreRegistry::new(), stores: Default::default() })
    }
}

impl ObjectStoreRegistry for NodeStores {
    fn register_store(&self, url: &Url, store: Arc<dyn ObjectStore>) -> Option<Arc<dyn ObjectStore>> {
        self.registered.register_store(url, store)
    }

    fn get_store(&self, url: &Url) -> QueryResult<Arc<dyn ObjectStore>> {
        if let Ok(store) = self.registered.get_store(url) {
            return Ok(store);
        }
        let (store, _) = self
            .stores
            .object_store(url)
            .map_err(|e| deltalake::datafusion::error::DataFusionError::Execution(e.problem))?;
        Ok(store)
    }
}
