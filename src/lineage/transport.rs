//! Where events go: the standard OpenLineage client settings, read from the environment alone
//! (`OPENLINEAGE_URL`, `OPENLINEAGE_ENDPOINT`, `OPENLINEAGE_API_KEY`; or `OPENLINEAGE_CONFIG`
//! naming an `openlineage.yml` with an `http`, `file` or `console` transport;
//! `OPENLINEAGE_DISABLED=true` turns them off). Never from a plan file or the working directory:
//! a plan is untrusted input, and a checkout's `openlineage.yml` could send a backfill's facts
//! anywhere.
//!
//! Emitting never fails a backfill. Events go out in order on a task beside the apply; once one
//! cannot be delivered, it and every later one are saved in the state dir (`lineage/`), in order,
//! for `bf lineage resend`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::mpsc;

use super::event::RunEvent;

/// How long the endpoint may take to answer one event.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The endpoint `OPENLINEAGE_URL` is posted to when `OPENLINEAGE_ENDPOINT` names none, as the
/// OpenLineage clients default.
const DEFAULT_ENDPOINT: &str = "api/v1/lineage";

/// Where events are delivered.
#[derive(Clone)]
pub enum Transport {
    /// POSTed, one event per request, with the API key as a bearer token.
    Http { url: url::Url, api_key: Option<String>, timeout: Duration },
    /// Appended to one file, one event per line; or (`append: false`) each to a file of its own
    /// beside it, `<path>-<time>.json`, as the Python client writes them.
    File { path: PathBuf, append: bool },
    /// Printed on stderr, one event per line.
    Console,
}

impl std::fmt::Debug for Transport {
    /// Never the API key, nor a URL's credentials or query.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Transport {
    /// The transport in words, for a message: the URL without credentials or query.
    pub fn describe(&self) -> String {
        match self {
            Transport::Http { url, .. } => {
                let mut shown = url.clone();
                let _ = shown.set_username("");
                let _ = shown.set_password(None);
                shown.set_query(None);
                format!("the OpenLineage endpoint {shown}")
            }
            Transport::File { path, .. } => format!("the OpenLineage file {}", path.display()),
            Transport::Console => "the console".to_owned(),
        }
    }

    /// The transport the environment configures: `None` when it configures none (or disables it).
    pub fn from_env() -> Result<Option<Transport>, SettingsError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if var("OPENLINEAGE_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        if let Some(config) = var("OPENLINEAGE_CONFIG") {
            return Transport::from_file(Path::new(config.trim())).map(Some);
        }
        let Some(url) = var("OPENLINEAGE_URL") else { return Ok(None) };
        let endpoint = var("OPENLINEAGE_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        Ok(Some(http(&url, &endpoint, var("OPENLINEAGE_API_KEY"), None, "OPENLINEAGE_URL")?))
    }

    /// An `openlineage.yml`'s transport.
    fn from_file(path: &Path) -> Result<Transport, SettingsError> {
        let invalid = |problem: String| SettingsError { place: path.display().to_string(), problem };
        let text = std::fs::read_to_string(path).map_err(|e| invalid(e.to_string()))?;
        // The file's text is never echoed: it may hold an API key.
        let file: ConfigFile = serde_yaml_ng::from_str(&text).map_err(|e| invalid(location_only(&e)))?;
        let transport = file.transport.ok_or_else(|| invalid("it has no `transport`".to_owned()))?;
        match transport.kind.as_str() {
            "http" => {
                let url =
                    transport.url.ok_or_else(|| invalid("its http transport has no `url`".to_owned()))?;
                let endpoint = transport.endpoint.unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
                let api_key = match transport.auth {
                    Some(Auth { kind, api_key }) if kind == "api_key" => api_key,
                    Some(Auth { kind, .. }) => {
                        return Err(invalid(format!(
                            "its auth type `{kind}` is not supported: use `api_key`"
                        )));
                    }
                    None => None,
                };
                let api_key = api_key.or_else(|| std::env::var("OPENLINEAGE_API_KEY").ok());
                http(&url, &endpoint, api_key, transport.timeout, "`transport.url`")
                    .map_err(|e| invalid(e.problem))
            }
            "file" => {
                let path = transport
                    .log_file_path
                    .ok_or_else(|| invalid("its file transport has no `log_file_path`".to_owned()))?;
                Ok(Transport::File { path, append: transport.append.unwrap_or(false) })
            }
            "console" => Ok(Transport::Console),
            other => Err(invalid(format!(
                "its transport type `{other}` is not one bf sends to: use `http`, `file` or `console`"
            ))),
        }
    }

    /// Delivers one event; an error never holds the URL's credentials or query, nor the API key.
    async fn send(&self, event: &RunEvent, client: &reqwest::Client) -> Result<(), String> {
        let body = serde_json::to_string(event).expect("an event serializes");
        match self {
            Transport::Http { url, api_key, timeout } => {
                let mut request = client
                    .post(url.clone())
                    .timeout(*timeout)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body);
                if let Some(key) = api_key {
                    request = request.bearer_auth(key);
                }
                let response = request.send().await.map_err(|e| e.without_url().to_string())?;
                let status = response.status();
                if status.is_success() { Ok(()) } else { Err(format!("it answered {status}")) }
            }
            Transport::File { path, append: true } => append_line(path, &body).map_err(|e| e.to_string()),
            Transport::File { path, append: false } => {
                let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S%.6f");
                let mut file = path.as_os_str().to_owned();
                file.push(format!("-{stamp}.json"));
                std::fs::write(PathBuf::from(file), body).map_err(|e| e.to_string())
            }
            Transport::Console => {
                use std::io::Write;
                writeln!(std::io::stderr(), "{body}").map_err(|e| e.to_string())
            }
        }
    }
}

/// `url` joined with `endpoint` as the clients join them.
fn http(
    url: &str,
    endpoint: &str,
    api_key: Option<String>,
    timeout: Option<f64>,
    named: &str,
) -> Result<Transport, SettingsError> {
    let invalid = |problem: String| SettingsError { place: named.to_owned(), problem };
    let base = url::Url::parse(url.trim()).map_err(|e| invalid(format!("not a URL ({e})")))?;
    if !matches!(base.scheme(), "http" | "https") {
        return Err(invalid(format!("`{}` is not an http(s) URL", base.scheme())));
    }
    let url = base
        .join(endpoint.trim())
        .map_err(|e| invalid(format!("the endpoint cannot be joined to it ({e})")))?;
    let timeout = timeout.filter(|t| *t > 0.0).map_or(TIMEOUT, Duration::from_secs_f64);
    Ok(Transport::Http { url, api_key: api_key.map(|k| k.trim().to_owned()), timeout })
}

/// A YAML error's place in the file, without the text around it.
fn location_only(error: &serde_yaml_ng::Error) -> String {
    match error.location() {
        Some(at) => format!("it is not valid YAML at line {}, column {}", at.line(), at.column()),
        None => "it is not a valid openlineage.yml".to_owned(),
    }
}

fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    writeln!(file, "{line}")
}

#[derive(Deserialize)]
struct ConfigFile {
    transport: Option<TransportConfig>,
}

#[derive(Deserialize)]
struct TransportConfig {
    #[serde(rename = "type")]
    kind: String,
    url: Option<String>,
    endpoint: Option<String>,
    timeout: Option<f64>,
    auth: Option<Auth>,
    log_file_path: Option<PathBuf>,
    append: Option<bool>,
}

#[derive(Deserialize)]
struct Auth {
    #[serde(rename = "type")]
    kind: String,
    #[serde(rename = "apiKey", alias = "api_key")]
    api_key: Option<String>,
}

/// OpenLineage settings bf cannot use; `place` names the variable or file.
#[derive(Debug, thiserror::Error)]
#[error("the OpenLineage settings in {place} cannot be used: {problem}")]
pub struct SettingsError {
    pub place: String,
    pub problem: String,
}

/// Sends events in order on a task of its own, so the apply never waits on the endpoint; what
/// cannot be delivered is saved to the spool folder.
pub struct Emitter {
    queue: Option<mpsc::UnboundedSender<RunEvent>>,
    task: Option<tokio::task::JoinHandle<Delivery>>,
}

/// What became of an emitter's events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Where they went (the transport in words), when one is configured.
    pub to: Option<String>,
    pub sent: usize,
    /// Saved for `bf lineage resend`, and why the first of them was not delivered.
    pub saved: usize,
    pub spool: Option<PathBuf>,
    pub problem: Option<String>,
}

impl Emitter {
    /// Emits nothing: no OpenLineage settings.
    pub fn off() -> Emitter {
        Emitter { queue: None, task: None }
    }

    /// Delivers to `transport`, or saves everything to `spool` when the settings could not be
    /// used (`Err`, whose message says why).
    pub fn start(transport: Result<Transport, String>, spool: PathBuf) -> Emitter {
        let (queue, mut events) = mpsc::unbounded_channel::<RunEvent>();
        let task = tokio::spawn(async move {
            let (mut transport, mut delivery) = match transport {
                Ok(transport) => {
                    let to = transport.describe();
                    (Some(transport), Delivery { to: Some(to), ..Delivery::default() })
                }
                Err(problem) => (None, Delivery { problem: Some(problem), ..Delivery::default() }),
            };
            let client = reqwest::Client::new();
            let mut spooled = Spool::new(spool);
            while let Some(event) = events.recv().await {
                if let Some(to) = &transport {
                    match to.send(&event, &client).await {
                        Ok(()) => {
                            delivery.sent += 1;
                            continue;
                        }
                        // Later events wait behind this one: order matters to lineage tools.
                        Err(why) => {
                            delivery.problem =
                                Some(format!("{} did not take an event: {why}", to.describe()));
                            transport = None;
                        }
                    }
                }
                match spooled.save(&event) {
                    Ok(()) => {
                        delivery.saved += 1;
                        delivery.spool = Some(spooled.dir.clone());
                    }
                    Err(e) => {
                        let lost = format!("an event could not be saved in {}: {e}", spooled.dir.display());
                        delivery.problem = Some(match delivery.problem.take() {
                            Some(first) => format!("{first}; {lost}"),
                            None => lost,
                        });
                    }
                }
            }
            delivery
        });
        Emitter { queue: Some(queue), task: Some(task) }
    }

    /// From the environment: off without settings, saving everything when they cannot be used.
    pub fn from_env(spool: PathBuf) -> Emitter {
        match Transport::from_env() {
            Ok(None) => Emitter::off(),
            Ok(Some(transport)) => Emitter::start(Ok(transport), spool),
            Err(e) => Emitter::start(Err(e.to_string()), spool),
        }
    }

    pub fn is_on(&self) -> bool {
        self.queue.is_some()
    }

    /// Queues `event`; never waits, never fails.
    pub fn emit(&self, event: RunEvent) {
        if let Some(queue) = &self.queue {
            let _ = queue.send(event);
        }
    }

    /// Waits until every event queued is delivered or saved.
    pub async fn finish(mut self) -> Delivery {
        drop(self.queue.take());
        match self.task.take() {
            Some(task) => task.await.unwrap_or_else(|e| Delivery {
                problem: Some(format!("the lineage task stopped: {e}")),
                ..Delivery::default()
            }),
            None => Delivery::default(),
        }
    }
}

/// Events saved to send later: one file each, named so that their order is their names' order.
struct Spool {
    dir: PathBuf,
    count: usize,
}

impl Spool {
    fn new(dir: PathBuf) -> Spool {
        Spool { dir, count: 0 }
    }

    fn save(&mut self, event: &RunEvent) -> std::io::Result<()> {
        let state_dir = self.dir.parent().unwrap_or(Path::new("."));
        crate::rehearse::own_files::refuse_linked_state_dir(state_dir)?;
        self.count += 1;
        let name = format!(
            "{}-{:06}-{}-{:?}.json",
            chrono::Utc::now().format("%Y%m%dT%H%M%S%.6fZ"),
            self.count,
            event.run.run_id,
            event.event_type
        )
        .to_lowercase();
        let body = serde_json::to_string_pretty(event).expect("an event serializes");
        // Written whole, then named (a crash never leaves half an event to resend), through the
        // write gate: a `lineage` folder a checkout made a link sends nothing outside.
        let gate = crate::write_gate::WriteGate::within([state_dir]);
        gate.write_file(&self.dir.join(name), body.as_bytes(), crate::write_gate::Readers::Owner)
    }
}

/// What `bf lineage resend` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resent {
    pub to: String,
    pub sent: usize,
    /// Left in the spool: the first could not be delivered, and why.
    pub left: usize,
    pub problem: Option<String>,
}

/// The saved events in `spool`, in the order they were emitted.
pub fn saved(spool: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(spool) {
        Ok(entries) => entries
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.starts_with('.')))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    files.sort();
    Ok(files)
}

/// Sends the saved events in order, each removed once delivered; stops at the first that is not.
pub async fn resend(transport: &Transport, spool: &Path) -> Result<Resent, ResendError> {
    let files = saved(spool).map_err(|e| ResendError::Spool(spool.display().to_string(), e.to_string()))?;
    let client = reqwest::Client::new();
    let mut resent = Resent { to: transport.describe(), sent: 0, left: files.len(), problem: None };
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| ResendError::Spool(file.display().to_string(), e.to_string()))?;
        let event: RunEvent = serde_json::from_str(&text)
            .map_err(|e| ResendError::Spool(file.display().to_string(), format!("not a saved event: {e}")))?;
        match transport.send(&event, &client).await {
            Ok(()) => {
                std::fs::remove_file(&file)
                    .map_err(|e| ResendError::Spool(file.display().to_string(), e.to_string()))?;
                resent.sent += 1;
                resent.left -= 1;
            }
            Err(why) => {
                resent.problem = Some(format!("{} did not take an event: {why}", transport.describe()));
                break;
            }
        }
    }
    Ok(resent)
}

#[derive(Debug, thiserror::Error)]
pub enum ResendError {
    #[error("the saved events cannot be read: {0}: {1}")]
    Spool(String, String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_joins_the_url_as_the_clients_join_it() {
        let Transport::Http { url, .. } =
            http("http://127.0.0.1:5000", "api/v1/lineage", None, None, "x").unwrap()
        else {
            panic!("an http transport")
        };
        assert_eq!(url.as_str(), "http://127.0.0.1:5000/api/v1/lineage");
        assert!(http("ftp://host", "x", None, None, "x").is_err());
    }

    #[test]
    fn a_transport_is_described_without_its_secrets() {
        let transport = http(
            "https://user:pw@lineage.example/?token=s3cret",
            "api/v1/lineage",
            Some("key".into()),
            None,
            "x",
        )
        .unwrap();
        let shown = format!("{transport:?}");
        assert!(!shown.contains("pw") && !shown.contains("s3cret") && !shown.contains("key"), "{shown}");
    }
}
