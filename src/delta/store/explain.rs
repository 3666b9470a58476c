//! Store errors as people can act on them: one line naming the likely cause and fix (a missing
//! bucket, a denied request, a wrong region, an endpoint that does not answer), and request URLs
//! with their queries removed, since a query can carry a signature. Words only: it reaches no store.

use url::Url;

use super::location::Kind;

/// `text` with the query and the password of every URL in it removed: a store's request URL can
/// carry a signature (an Azure SAS token, a presigned S3 URL), an endpoint a password
/// (`https://user:secret@minio`), and errors quote both.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start =
            rest[..at].rfind(|c: char| c.is_whitespace() || c == '(' || c == '"').map_or(0, |i| i + 1);
        let end = at
            + rest[at..].find(|c: char| c.is_whitespace() || c == ')' || c == '"').unwrap_or(rest.len() - at);
        let url = &without_password(&rest[start..end]);
        out.push_str(&rest[..start]);
        match url.find('?') {
            Some(query) => {
                out.push_str(&url[..query]);
                out.push_str("?…");
            }
            None => out.push_str(url),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A URL's text with the password of its `user:password@` part written `***`.
fn without_password(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else { return url.to_owned() };
    let authority_end = url[scheme_end..].find(['/', '?', '#']).map_or(url.len(), |i| scheme_end + i);
    let authority = &url[scheme_end..authority_end];
    match authority.rfind('@').and_then(|at| authority[..at].find(':').map(|colon| (colon, at))) {
        Some((colon, at)) => {
            format!("{}{}:***{}", &url[..scheme_end], &authority[..colon], &url[scheme_end + at..])
        }
        None => url.to_owned(),
    }
}

/// An error and its causes, in one line.
pub(super) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let more = next.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = next.source();
    }
    text
}

/// The likely cause and fix of a store error, when it is one people meet: a missing bucket, a
/// denied request, a wrong region, an endpoint that does not answer.
pub fn explain(url: &Url, error: &dyn std::error::Error) -> Option<String> {
    let text = chain(error);
    let lower = text.to_ascii_lowercase();
    let bucket = url.host_str().unwrap_or_default();
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    if Kind::of(url).is_none_or(|k| k == Kind::Local) {
        return None;
    }
    if has(&["url scheme is not allowed"]) {
        return Some(
            "the endpoint is plain http, which is refused unless told: set `allow_http = true` in [storage] \
             (or AWS_ALLOW_HTTP=true) for a local or private server"
                .to_owned(),
        );
    }
    if has(&["loading credentials", "no credentials", "missingcredentials"]) {
        return Some(
            "no credentials found: set them where the cloud's tools look (AWS_PROFILE or AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, `az login` or AZURE_STORAGE_ACCOUNT_KEY, GOOGLE_APPLICATION_CREDENTIALS), and \
             `endpoint` in [storage] or AWS_ENDPOINT_URL for a store that is not the cloud's own"
                .to_owned(),
        );
    }
    if has(&[
        "nosuchbucket",
        "bucket does not exist",
        "containernotfound",
        "container does not exist",
        "bucket not found",
    ]) {
        Some(format!("the bucket `{bucket}` does not exist: check its name in the plan, or create it"))
    } else if has(&[
        "permanentredirect",
        "authorizationheadermalformed",
        "wrong region",
        "incorrect region",
        "status: 301",
    ]) {
        Some(format!(
            "the bucket `{bucket}` is in another region: set `region` in [storage] or AWS_REGION ({})",
            first_line(&text)
        ))
    } else if has(&[
        "accessdenied",
        "access denied",
        "invalidaccesskeyid",
        "signaturedoesnotmatch",
        "authorizationfailure",
        "authenticationfailed",
        "forbidden",
        "status: 403",
        "status: 401",
        "unauthenticated",
        "permission denied",
    ]) {
        Some(format!(
            "access denied: check the credentials in the environment (AWS_PROFILE or AWS_ACCESS_KEY_ID, \
             AZURE_STORAGE_ACCOUNT_KEY or `az login`, GOOGLE_APPLICATION_CREDENTIALS) and that they may read \
             and write here ({})",
            first_line(&text)
        ))
    } else if has(&[
        "connection refused",
        "error sending request",
        "dns error",
        "timed out",
        "tcp connect",
        "connect error",
    ]) {
        Some(format!(
            "the store does not answer: check `endpoint` in [storage] (or AWS_ENDPOINT_URL, AZURE_STORAGE_ENDPOINT, \
             GOOGLE_BASE_URL) and the network ({})",
            first_line(&text)
        ))
    } else {
        None
    }
}

/// The first line of a message, bounded: store errors can carry whole XML bodies.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(240) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}
