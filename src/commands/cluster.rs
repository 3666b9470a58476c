//! `bf cluster scheduler` and `bf cluster worker`: a Ballista cluster for slices' source queries
//! (`BF_CLUSTER`), started from bf's binary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use bf::cluster::{Cluster, ClusterError, Reached};

/// Run a Ballista scheduler or worker, for slices whose source query outgrows one machine.
///
/// `bf plan` and `bf apply --recompute` with `BF_CLUSTER=df://HOST:PORT` (or `--cluster`) run each
/// slice's source query on the cluster and stream its rows back; everything else stays in bf.
/// Every node must read the plans' inputs at the same paths (a shared folder, or object stores
/// with the same settings in each one's environment). The scheduler's port is plaintext and
/// unauthenticated, as Ballista's is: bind it where only bf and the workers reach it.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Run a scheduler until interrupted. Prints the address bf and the workers reach it by.
    Scheduler {
        /// Where to listen (port 0: a free one, printed).
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:50050")]
        bind: SocketAddr,
        /// The host name workers and bf reach this scheduler by, when not the bound address.
        #[arg(long, value_name = "HOST")]
        advertise: Option<String>,
    },
    /// Run a worker for a scheduler until interrupted. It takes two ports: the one bound (the rows
    /// it sends) and the next (its tasks).
    Worker {
        /// The scheduler to join.
        #[arg(long, value_name = "HOST:PORT")]
        scheduler: String,
        /// Where to listen (port 0: two free ones).
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:50051")]
        bind: SocketAddr,
        /// The host name the scheduler and bf reach this worker by, when not the bound address.
        #[arg(long, value_name = "HOST")]
        advertise: Option<String>,
        /// Where its shuffle files go (default: a temporary folder, removed when it stops).
        #[arg(long, value_name = "DIR")]
        work_dir: Option<PathBuf>,
    },
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    serve(args.command).await?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "cluster")]
async fn serve(command: Command) -> Result<(), ClusterError> {
    use bf::cluster::serve;
    match command {
        Command::Scheduler { bind, advertise } => {
            serve::scheduler(bind, advertise, |cluster| {
                println!(
                    "bf cluster scheduler: listening on {cluster}; start workers with `bf cluster worker --scheduler {}`, \
                     and run slices there with BF_CLUSTER={cluster}",
                    cluster.address()
                );
            })
            .await
        }
        Command::Worker { scheduler, bind, advertise, work_dir } => {
            let cluster = Cluster::parse(&format!("df://{}", scheduler.trim_start_matches("df://")))
                .map_err(|_| ClusterError::Serve(format!("--scheduler `{scheduler}` is not HOST:PORT")))?;
            let ports = serve::WorkerPorts::for_bind(bind)?;
            let memory = bf::delta::memory::limit().map_err(ClusterError::Serve)?;
            println!(
                "bf cluster worker: serving on {}:{} (tasks on port {}) for {cluster}",
                ports.host, ports.flight, ports.tasks
            );
            serve::worker(&cluster, ports, advertise, work_dir, memory).await
        }
    }
}

#[cfg(not(feature = "cluster"))]
async fn serve(_command: Command) -> Result<(), ClusterError> {
    Err(ClusterError::NotBuilt)
}

/// Where slices' source queries run: `--cluster`, or the operator's `BF_CLUSTER`.
#[derive(Debug, Clone, clap::Args)]
pub struct On {
    /// Run the slices' source queries on this Ballista cluster (`bf cluster scheduler`) and stream
    /// their rows back; the rehearsal, the comparison, checks and commits stay here.
    #[arg(long, value_name = "df://HOST:PORT", env = "BF_CLUSTER")]
    cluster: Option<String>,
}

impl On {
    /// The cluster named, asked whether it can run slices now: before anything is written, so
    /// that a cluster that is down or has no worker fails the command with the setting named.
    pub async fn reach(&self) -> Result<Option<Reached>, ClusterError> {
        match self.cluster.as_deref().map(str::trim).filter(|c| !c.is_empty()) {
            Some(given) => Ok(Some(Cluster::parse(given)?.reach().await?)),
            None => Ok(None),
        }
    }
}
