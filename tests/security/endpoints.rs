//! A plan's connection settings send the runner's credentials nowhere the operator has not
//! listed: a listener on 127.0.0.1 counts what reaches it.

use super::*;

/// A server on 127.0.0.1 that counts the connections it is offered.
struct Listener {
    port: u16,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Listener {
    fn start() -> Listener {
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        socket.set_nonblocking(true).unwrap();
        let port = socket.local_addr().unwrap().port();
        let (connections, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (counted, stopping) = (connections.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                match socket.accept() {
                    Ok(_) => {
                        counted.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        });
        Listener { port, connections, stop }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn connections(&self) -> usize {
        std::thread::sleep(std::time::Duration::from_millis(50));
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plans_endpoint_receives_nothing_unless_the_operator_allows_it() {
    let checkout = Checkout::new().await;
    let listener = Listener::start();
    let endpoint = listener.endpoint();
    // The runner's credentials, which the plan's endpoint would receive.
    let credentials = [
        ("AWS_ACCESS_KEY_ID", "AKIAFAKEKEYID"),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
        ("AWS_SESSION_TOKEN", SECRET),
        ("AWS_REGION", "us-east-1"),
        ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
        ("AZURE_STORAGE_ACCOUNT_KEY", "a2V5"),
    ];
    let on_store = |t: String, table: &str, storage: &str| {
        format!(
            "{}\n[storage]\n{storage}\nmax_retries = 0\nretry_timeout = \"1s\"\n",
            t.replace("../warehouse/orders", table)
        )
    };
    let attacks = [
        (
            "s3",
            "s3://lake/orders",
            format!("endpoint = \"{endpoint}\"\nallow_http = true"),
            20,
            "endpoint is not one the operator allows",
        ),
        (
            "unsigned",
            "s3://lake/orders",
            format!("endpoint = \"{endpoint}\"\nskip_signature = true"),
            20,
            "endpoint is not one the operator allows",
        ),
        (
            "azure",
            "az://lake/orders",
            format!("endpoint = \"{endpoint}\"\nuse_emulator = true\nallow_http = true"),
            20,
            "endpoint is not one the operator allows",
        ),
        (
            "http",
            "s3://lake/orders",
            "allow_http = true".to_owned(),
            20,
            "`allow_http = true` changes how bf connects",
        ),
        (
            "emulator",
            "az://lake/orders",
            "use_emulator = true".to_owned(),
            20,
            "`use_emulator = true` changes how bf connects",
        ),
        (
            "unsigned alone",
            "s3://lake/orders",
            "skip_signature = true".to_owned(),
            20,
            "`skip_signature = true` changes how bf connects",
        ),
    ];
    for (name, table, storage, line, expect) in attacks {
        let plan = checkout.plan(&format!("{name}.toml"), |t| on_store(t, table, &storage));
        for verb in ["validate", "plan"] {
            let output = checkout.bf_with(&[verb, &plan.display().to_string()], &credentials);
            refused_at(&checkout, &output, &plan, line, expect);
        }
    }
    // A setting that names a place is part of a request's URL: S3's host is built from the region,
    // Azure's from the account. Holding `@host/`, it would send the credentials there, with the
    // store locations limited as well.
    let host = endpoint.trim_start_matches("http://");
    let named = [
        ("region", "s3://lake/orders", format!("region = \"x@{host}/\""), "the region is not a region name"),
        (
            "account",
            "az://lake/orders",
            format!("account_name = \"x@{host}/\""),
            "the account is not a storage account name",
        ),
        (
            "virtual",
            "s3://lake/orders",
            "virtual_hosted_style_request = true".to_owned(),
            "`virtual_hosted_style_request = true` changes how bf connects",
        ),
    ];
    let limited: Vec<(&str, &str)> =
        credentials.iter().copied().chain([("BF_ALLOWED_LOCATIONS", "s3://lake/,az://lake/")]).collect();
    for (name, table, storage, expect) in named {
        let plan = checkout.plan(&format!("{name}.toml"), |t| on_store(t, table, &storage));
        for verb in ["validate", "plan"] {
            let output = checkout.bf_with(&[verb, &plan.display().to_string()], &limited);
            refused_at(&checkout, &output, &plan, 20, expect);
        }
    }
    assert_eq!(listener.connections(), 0, "a request reached the plan's endpoint");
    // The listener counts what reaches it: a zero above means nothing did.
    drop(std::net::TcpStream::connect(("127.0.0.1", listener.port)).unwrap());
    crate::common::wait_for("the listener to count a connection", || listener.connections() == 1);

    // The operator may allow it; `bf validate` still sends nothing.
    let plan = checkout.plan("allowed.toml", |t| {
        on_store(t, "s3://lake/orders", &format!("endpoint = \"{endpoint}/\"\nallow_http = true"))
    });
    let allowed = [("BF_ALLOWED_ENDPOINTS", endpoint.as_str())];
    let output = checkout.bf_with(&["validate", &plan.display().to_string()], &allowed);
    assert!(output.status.success(), "{}", said(&output));
    assert_eq!(listener.connections(), 1, "validate sent nothing");
    // Endpoints the operator lists, none of them the plan's: refused, the allowed ones named.
    let others = [("BF_ALLOWED_ENDPOINTS", "http://127.0.0.1:1/, https://s3.internal.example:9000")];
    let output = checkout.bf_with(&["validate", &plan.display().to_string()], &others);
    refused_at(&checkout, &output, &plan, 20, "endpoint is not one the operator allows");
    let listed = "; allowed: http://127.0.0.1:1, https://s3.internal.example:9000";
    assert!(said(&output).contains(listed), "{}", said(&output));

    // Store locations may be limited: the target outside the allowed prefixes is refused.
    let plan = checkout.plan("bucket.toml", |t| t.replace("../warehouse/orders", "s3://other-lake/orders"));
    let limited = [("BF_ALLOWED_LOCATIONS", "s3://lake/, gs://lake/")];
    let output = checkout.bf_with(&["plan", &plan.display().to_string()], &limited);
    refused_at(&checkout, &output, &plan, 4, "is not under a location the operator allows");
    let listed = "`s3://other-lake/orders` is not under a location the operator allows (BF_ALLOWED_LOCATIONS: \
                  s3://lake/, gs://lake/)";
    assert!(said(&output).contains(listed), "{}", said(&output));
    // On Azure the account `[storage]` names receives the runner's token: it must be one allowed.
    let plan = checkout.plan("account.toml", |t| {
        t.replace("../warehouse/orders", "az://lake/orders") + "\n[storage]\naccount_name = \"elsewhere\"\n"
    });
    let azure = [("BF_ALLOWED_LOCATIONS", "az://lake/, abfss://lake@acct.dfs.core.windows.net/")];
    // A bucket whose name begins with the account's is not the account either.
    let bucket = [(
        "BF_ALLOWED_LOCATIONS",
        "az://lake/, abfss://lake@acct.dfs.core.windows.net/, s3://elsewhere.lake/",
    )];
    for allowed in [&azure, &bucket] {
        let output = checkout.bf_with(&["plan", &plan.display().to_string()], allowed);
        let expect = "the storage account `elsewhere` is not in a location the operator allows";
        refused_at(&checkout, &output, &plan, 20, expect);
    }
    // The account an allowed Azure location names may be the plan's.
    let plan = checkout.plan("allowed_account.toml", |t| {
        t.replace("../warehouse/orders", "az://lake/orders") + "\n[storage]\naccount_name = \"acct\"\n"
    });
    let output = checkout.bf_with(&["validate", &plan.display().to_string()], &azure);
    assert!(output.status.success(), "{}", said(&output));
    let plan =
        checkout.plan("in_bucket.toml", |t| t.replace("../warehouse/orders", "s3a://lake/silver/orders"));
    let output = checkout.bf_with(&["validate", &plan.display().to_string()], &limited);
    assert!(output.status.success(), "{}", said(&output));
}

/// A saved plan is a file in a state folder, which a checkout can hold: one planted there, its text
/// given an endpoint and its target a bucket, must not make the commands that read it without
/// applying it — `bf status`, `bf clean`, `bf rollback` — send the runner's credentials to that
/// endpoint. Each refuses, naming the setting; the listener counts no connection.
#[tokio::test(flavor = "multi_thread")]
async fn a_planted_saved_plans_endpoint_receives_nothing_from_status_clean_or_rollback() {
    let checkout = Checkout::new().await;
    let listener = Listener::start();
    let endpoint = listener.endpoint();
    let plan = checkout.plan("march.toml", |t| t);
    let output = checkout.bf(&["plan", &plan.display().to_string(), "-q"]);
    assert!(output.status.success(), "{}", said(&output));
    let saved = checkout.repo().join(".bf/plan.json");
    let mut planted: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let text = planted["plan_file"]["text"].as_str().unwrap().to_owned();
    planted["plan_file"]["text"] = format!(
        "{}\n[storage]\nendpoint = \"{endpoint}\"\nallow_http = true\nmax_retries = 0\nretry_timeout = \"1s\"\n",
        text.replace("../warehouse/orders", "s3://lake/orders")
    )
    .into();
    planted["target"]["uri"] = "s3://lake/orders".into();
    planted["rehearsal"]["uri"] = "s3://lake/orders__rehearsal".into();
    std::fs::write(&saved, planted.to_string()).unwrap();
    std::fs::write(checkout.repo().join(".bf/rehearsals"), "s3://lake/orders__rehearsal\n").unwrap();
    let credentials = [
        ("AWS_ACCESS_KEY_ID", "AKIAFAKEKEYID"),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
        ("AWS_SESSION_TOKEN", SECRET),
        ("AWS_REGION", "us-east-1"),
    ];
    for args in [&["status"][..], &["clean", "--dry-run"], &["clean"], &["rollback", "--auto-approve"]] {
        let output = checkout.bf_with(args, &credentials);
        let text = said(&output);
        assert_ne!(output.status.code(), Some(0), "{args:?}: {text}");
        assert!(
            text.contains("the saved plan's [storage] settings are not the operator's to use")
                && text.contains("`storage.endpoint`"),
            "{args:?}: {text}"
        );
        assert!(!text.contains(SECRET), "{args:?}: {text}");
    }
    assert_eq!(listener.connections(), 0, "a request reached the planted plan's endpoint");
    drop(std::net::TcpStream::connect(("127.0.0.1", listener.port)).unwrap());
    crate::common::wait_for("the listener to count a connection", || listener.connections() == 1);
}
