//! Servers the tests start on 127.0.0.1 and stop when dropped: moto's S3 (and Glue), Azurite's
//! Blob service, and a Unity Catalog REST server. Each test gets its own server on a free port, so tests run in
//! parallel and nothing outlives them. Their packages come from PyPI and npm, installed once per
//! machine into `~/.cache` (as the benchmark's venv is), and nothing else is reached.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The Python packages of the stores' tests: the S3 server, the GCS emulator, and the Python
/// `deltalake` package that reads what bf wrote without bf's code.
const PYTHON_PACKAGES: [&str; 4] =
    ["moto[server]==5.2.5", "azure-storage-blob==12.26.0", "deltalake==1.6.6", "pyarrow==26.0.1"];

/// Azurite, the Azure Storage emulator, from npm.
const AZURITE: &str = "azurite@3.35.0";

/// A server process, killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    /// What the server printed: its request log.
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// An S3 API server (moto) on a free loopback port.
pub fn s3() -> Server {
    moto(&[])
}

/// An S3 API server that checks credentials, and knows none: every request is denied (403).
pub fn s3_denying() -> Server {
    moto(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")])
}

fn moto(env: &[(&str, &str)]) -> Server {
    let bin = python_venv().join("moto_server");
    let dir = tempfile::tempdir().unwrap();
    start(dir, |port| {
        let mut command = Command::new(&bin);
        command.args(["-H", "127.0.0.1", "-p", &port.to_string()]).envs(env.iter().copied());
        command
    })
}

/// An Azure Blob server (Azurite) on a free loopback port, its data in a temp dir.
pub fn azurite() -> Server {
    let bin = azurite_install().join("node_modules/.bin/azurite-blob");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    start(dir, |port| {
        let mut command = Command::new(&bin);
        command
            .args([
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                &port.to_string(),
                "--skipApiVersionCheck",
                "--loose",
            ])
            .arg("--location")
            .arg(&data)
            .arg("--debug")
            .arg(data.with_file_name("debug.log"));
        command
    })
}

fn start(dir: tempfile::TempDir, command: impl Fn(u16) -> Command) -> Server {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    start_on(dir, port, command)
}

/// Starts the server and waits (at most 60 s) until its port answers.
fn start_on(dir: tempfile::TempDir, port: u16, command: impl Fn(u16) -> Command) -> Server {
    let log = dir.path().join("server.log");
    let out = std::fs::File::create(&log).unwrap();
    // Run in the server's temp dir: whatever it writes (moto's request recording) stays there.
    let child = command(port)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("the server starts");
    let mut server = Server { child, port, log, _dir: dir };
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!(
                "the server exited ({status}): {}",
                std::fs::read_to_string(&server.log).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "the server on port {port} did not answer within 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    server
}

/// Creates a bucket on the S3 server (with boto3, which moto brings: the server wants signed
/// requests, as S3 does).
pub fn create_bucket(server: &Server, bucket: &str) {
    python(&format!("import boto3; boto3.client('s3').create_bucket(Bucket='{bucket}')"), &s3_env(server));
}

/// The environment a `bf` (or Python) process needs to reach the S3 server, and nothing more:
/// credentials the server accepts, its endpoint, and conditional put.
pub fn s3_env(server: &Server) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", server.endpoint()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", "bf-test-key-id".into()),
        ("AWS_SECRET_ACCESS_KEY", "bf-test-secret-never-printed".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_CONDITIONAL_PUT", "etag".into()),
    ]
}

/// Azurite's well-known development account key: public, but a credential all the same, which bf
/// must never print.
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// The environment that reaches the Azurite server: the emulator's account, its endpoint.
pub fn azurite_env(server: &Server) -> Vec<(&'static str, String)> {
    vec![
        ("AZURE_STORAGE_USE_EMULATOR", "true".into()),
        ("AZURITE_BLOB_STORAGE_URL", server.endpoint()),
        ("AZURE_STORAGE_ACCOUNT_NAME", "devstoreaccount1".into()),
        ("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY.into()),
    ]
}

/// Creates a container on the Azurite server (with Azure's Python SDK: requests are signed).
pub fn create_container(server: &Server, container: &str) {
    python(
        &format!(
            "from azure.storage.blob import BlobServiceClient\n\
             import os\n\
             conn = ('DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=' + os.environ['AZURE_STORAGE_ACCOUNT_KEY']\n\
                     + ';BlobEndpoint=' + os.environ['AZURITE_BLOB_STORAGE_URL'] + '/devstoreaccount1;')\n\
             BlobServiceClient.from_connection_string(conn).create_container('{container}')\n"
        ),
        &azurite_env(server),
    );
}

/// The venv with the stores' Python packages, made once per machine.
pub fn python_venv() -> PathBuf {
    super::python_venv(
        "BF_STORE_VENV",
        "bf-store-venv",
        "import moto, azure.storage.blob, deltalake, pyarrow",
        &PYTHON_PACKAGES,
    )
}

/// Azurite installed from npm, once per machine.
fn azurite_install() -> PathBuf {
    static MADE: Mutex<()> = Mutex::new(());
    let _once = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = super::cache_dir("BF_AZURITE_DIR", "bf-azurite");
    if !dir.join("node_modules/.bin/azurite-blob").exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let installed = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", AZURITE])
            .current_dir(&dir)
            .status()
            .unwrap();
        assert!(installed.success(), "npm install {AZURITE}");
    }
    dir
}

/// The rows of the Delta table at `uri` on the days `first..=last`, at `version` or the latest,
/// read by the Python `deltalake` package with the `AWS_*` settings of `env`: one sorted JSON text
/// per row.
pub fn rows_by_day(
    uri: &str,
    version: Option<u64>,
    first: &str,
    last: &str,
    env: &[(&str, String)],
) -> Vec<String> {
    let script = format!(
        r#"
import datetime, json, os
from deltalake import DeltaTable
import pyarrow.dataset as ds
options = {{k: v for k, v in os.environ.items() if k.startswith("AWS_")}}
t = DeltaTable("{uri}", version={version}, storage_options=options)
day = ds.field("order_date")
rows = t.to_pyarrow_dataset().to_table(
    filter=(day >= datetime.date.fromisoformat("{first}")) & (day <= datetime.date.fromisoformat("{last}"))
).to_pylist()
for row in sorted(json.dumps(r, default=str, sort_keys=True) for r in rows):
    print(row)
"#,
        version = version.map_or("None".to_owned(), |v| v.to_string()),
    );
    python(&script, env).lines().map(str::to_owned).collect()
}

/// Runs a Python snippet in the stores' venv with `env`, returning its stdout; fails the test if
/// the snippet fails.
pub fn python(script: &str, env: &[(&str, String)]) -> String {
    // Leave without the interpreter's teardown: the `deltalake` package's runtime threads have
    // aborted it there ("terminate called without an active exception") after all was printed.
    let script = format!("{script}\nimport os, sys\nsys.stdout.flush()\nsys.stderr.flush()\nos._exit(0)\n");
    let output = Command::new(python_venv().join("python"))
        .args(["-c", &script])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The table's rows as the Python `deltalake` package reads them through its SQL reader (its
/// `QueryBuilder`, which reads column-mapped tables by their logical names): each row's `columns`
/// (comma-separated) joined by `|`, sorted. A reader that is not bf's.
pub fn python_sql_rows(table: &std::path::Path, columns: &str) -> Vec<String> {
    let out = python(
        &format!(
            "import deltalake, pyarrow as pa\n\
             q = deltalake.QueryBuilder().register('t', deltalake.DeltaTable({:?}))\n\
             t = pa.table(q.execute('SELECT {columns} FROM t')).to_pylist()\n\
             rows = sorted('|'.join(str(r[c]) for c in {:?}.split(',')) for r in t)\nprint('\\n'.join(rows))\n",
            table.to_str().unwrap(),
            columns
        ),
        &[],
    );
    out.lines().map(str::to_owned).collect()
}

/// A TCP relay on a free loopback port to a server, which a test can take down and bring back:
/// an outage of the store's endpoint without losing what the server holds (moto keeps buckets in
/// memory, so stopping it would lose them).
pub struct Relay {
    pub port: u16,
    down: std::sync::Arc<std::sync::atomic::AtomicBool>,
    closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<Mutex<Vec<TcpStream>>>,
}

impl Drop for Relay {
    /// Ends the relay's accept loop: it sees `closed` on the next connection, which this makes.
    fn drop(&mut self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.down();
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

impl Relay {
    pub fn to(server: &Server) -> Relay {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let target = server.port;
        let down = Arc::new(AtomicBool::new(false));
        let closed = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (relay_down, relay_closed, relay_open) = (down.clone(), closed.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if relay_closed.load(Ordering::SeqCst) {
                    return;
                }
                if relay_down.load(Ordering::SeqCst) {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                let Ok(upstream) = TcpStream::connect(("127.0.0.1", target)) else { continue };
                let mut streams = relay_open.lock().unwrap();
                streams.push(client.try_clone().unwrap());
                streams.push(upstream.try_clone().unwrap());
                for (mut from, mut to) in
                    [(client.try_clone().unwrap(), upstream.try_clone().unwrap()), (upstream, client)]
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Relay { port, down, closed, open }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every connection through the relay is cut, and new ones are refused, until [`Relay::up`].
    pub fn down(&self) {
        self.down.store(true, std::sync::atomic::Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    pub fn up(&self) {
        self.down.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Unity Catalog's REST server: olai-uc-server from crates.io (the reference server is Java, outside
/// the registries reachable here), built once per machine with `cargo install` (about 15 minutes;
/// `.ci/run` builds it as a step of its own) into `~/.cache/bf-uc-server` (`BF_UC_SERVER_DIR`).
const UC_SERVER: [&str; 3] = ["olai-uc-server", "--version", "0.0.11"];

/// A Unity Catalog server on a free loopback port, its catalog in memory, which may register
/// tables under `lake` (a folder that exists): a credential and an external location for it, the
/// catalog `main` and its schema `sales` are made before it is returned.
pub fn unity_catalog(lake: &std::path::Path) -> Server {
    let lake = lake.canonicalize().unwrap();
    let server = uc_server(&lake, "");
    let url = |path: &std::path::Path| format!("file://{}", path.display());
    // The server asks a cloud credential of every external location, even a local one.
    uc_call(
        &server,
        "POST",
        "credentials",
        &serde_json::json!({
            "name": "lake", "purpose": "STORAGE", "skip_validation": true,
            "aws_iam_role": {"role_arn": "arn:aws:iam::123456789012:role/bf-test"},
        }),
    );
    uc_call(
        &server,
        "POST",
        "external-locations",
        &serde_json::json!({
            "name": "lake", "url": url(&lake), "credential_name": "lake",
        }),
    );
    uc_call(
        &server,
        "POST",
        "catalogs",
        &serde_json::json!({
            "name": "main", "storage_root": url(&lake.join("_uc_main")),
        }),
    );
    uc_call(&server, "POST", "schemas", &serde_json::json!({"name": "sales", "catalog_name": "main"}));
    server
}

/// A Unity Catalog server that authenticates no request (it expects a proxy's user header, which
/// no client sends): every call is refused with 401.
pub fn unity_catalog_denying() -> Server {
    let lake = tempfile::tempdir().unwrap();
    uc_server(&lake.path().canonicalize().unwrap(), "auth:\n  mode: reverse-proxy\n")
}

fn uc_server(lake: &std::path::Path, settings: &str) -> Server {
    let bin = uc_server_install().join("bin/uc-server");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("uc.yaml");
    start(dir, |port| {
        // Without `encryption`, the server seals its secrets with a built-in development key:
        // enough for a catalog that lives as long as the test.
        let yaml = format!(
            "host: 127.0.0.1\nport: {port}\nbackend:\n  engine: sqlite\n  path: \":memory:\"\n\
             local_storage:\n  allowed-roots:\n    - {}\n{settings}",
            lake.display()
        );
        std::fs::write(&config, yaml).unwrap();
        let mut command = Command::new(&bin);
        command.args(["serve", "--no-ui", "-c"]).arg(&config).env_remove("UC_SERVER_CONFIG");
        command
    })
}

/// Registers `main.sales.{name}` as an EXTERNAL table of `format` (`DELTA`, `PARQUET`) at `location`.
pub fn uc_register(
    server: &Server,
    name: &str,
    location: &std::path::Path,
    format: &str,
) -> serde_json::Value {
    uc_call(
        server,
        "POST",
        "tables",
        &serde_json::json!({
            "name": name, "catalog_name": "main", "schema_name": "sales", "table_type": "EXTERNAL",
            "data_source_format": format, "storage_location": format!("file://{}", location.display()),
        }),
    )
}

/// One call to the server's REST API (`/api/2.1/unity-catalog/{path}`) from Python's standard
/// library, not bf's client; fails the test on an error status.
pub fn uc_call(server: &Server, method: &str, path: &str, body: &serde_json::Value) -> serde_json::Value {
    let script = format!(
        r#"
import json, os, urllib.request
body = None if os.environ["BF_UC_BODY"] == "null" else os.environ["BF_UC_BODY"].encode()
request = urllib.request.Request("{}/api/2.1/unity-catalog/{path}", data=body, method="{method}",
                                 headers={{"content-type": "application/json"}})
print(urllib.request.urlopen(request, timeout=30).read().decode() or "null")
"#,
        server.endpoint(),
    );
    serde_json::from_str(&python(&script, &[("BF_UC_BODY", body.to_string())])).unwrap()
}

/// olai-uc-server installed with `cargo install`, once per machine.
fn uc_server_install() -> PathBuf {
    static MADE: Mutex<()> = Mutex::new(());
    let _once = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = super::cache_dir("BF_UC_SERVER_DIR", "bf-uc-server");
    if !dir.join("bin/uc-server").exists() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let installed = Command::new(cargo)
            .args(["install", "--quiet", "--locked", "--features", "bin", "--root"])
            .arg(&dir)
            .args(UC_SERVER)
            // Its own temporary target dir: never the one bf's tests were built in.
            .env_remove("CARGO_TARGET_DIR")
            .status()
            .unwrap();
        assert!(installed.success(), "cargo install {}", UC_SERVER.join(" "));
    }
    dir
}
