//! The inspector's API and its page, over HTTP: runs listed a page at a time with filters, a
//! run's timeline as of any entry, the tools, and `/ui` on the run API's terms (the `Host` and
//! `Origin` rules; on a keyed server, a sign-in whose cookie stands in for the key, and changes
//! only with the `X-Eve-UI` header). The page itself is driven in a real browser by the `browser`
//! test binary (`tests/browser/inspector.rs`).

use eve_tests::http::{Seen, Served, serve, serve_with};
use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A refund to approve.
#[derive(Deserialize, JsonSchema)]
pub struct Refund {
    /// In dollars.
    pub amount: u32,
}

/// Asks a person to approve a refund, then pays it.
#[workflow_tool]
pub async fn inspected_refund(input: Refund, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let question = Ask::confirmation(format!("Refund ${}?", input.amount)).option("yes", "Approve").option("no", "No");
    if !ctx.ask(question).await.chose("yes") {
        return Ok("declined".into());
    }
    Ok(pay_refund(input.amount).await?)
}

/// Pays it.
#[step]
pub async fn pay_refund(amount: u32) -> Result<String, StepError> {
    Ok(format!("refunded ${amount}"))
}

/// Finishes at once.
#[workflow_tool]
pub async fn inspected_echo(input: Refund) -> Result<u32, ToolError> {
    Ok(input.amount)
}

/// Starts `count` runs of `tool` and waits until each has parked or finished; returns their ids.
async fn start(served: &Served, tool: &str, count: u32) -> Vec<String> {
    let mut ids = Vec::new();
    for amount in 0..count {
        let run = served.runtime.start(tool, json!({ "amount": amount })).await.unwrap();
        if tool == "inspected_refund" {
            run.parked().await.unwrap();
        } else {
            run.outcome().await.unwrap();
        }
        ids.push(run.id().to_string());
    }
    ids
}

async fn get(served: &Served, path: &str) -> Seen {
    Seen::of(served.client.get(served.url(path)).send().await.unwrap()).await
}

fn ids(page: &Value) -> Vec<String> {
    page["runs"].as_array().unwrap().iter().map(|run| run["runId"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn runs_are_listed_newest_first_a_page_at_a_time_with_filters() {
    let served = serve().await;
    let parked = start(&served, "inspected_refund", 3).await;
    let done = start(&served, "inspected_echo", 2).await;
    let newest_first: Vec<String> = parked.iter().chain(&done).rev().cloned().collect();

    let page = get(&served, "/v1/runs").await;
    assert_eq!(page.status, 200);
    let page = page.json();
    assert_eq!(ids(&page), newest_first);
    assert_eq!(page["next"], Value::Null, "one page holds them all");
    let row = &page["runs"][4];
    assert_eq!((row["tool"].as_str(), row["status"].as_str()), (Some("inspected_refund"), Some("parked")));
    assert!(row.get("state").is_none(), "one word for where a run stands: {row}");
    assert_eq!(row["parked"], true);
    assert!(row["createdAt"].as_str().unwrap().ends_with('Z'), "ISO 8601: {row}");

    // Pages of two, each `next` leading to the one after, none repeated or skipped.
    let mut seen = Vec::new();
    let mut path = "/v1/runs?limit=2".to_owned();
    loop {
        let page = get(&served, &path).await.json();
        seen.extend(ids(&page));
        let Some(next) = page["next"].as_str() else { break };
        path = format!("/v1/runs?limit=2&before={next}");
    }
    assert_eq!(seen, newest_first);

    let by = |query: &'static str| {
        let served = &served;
        async move { ids(&get(served, &format!("/v1/runs?{query}")).await.json()) }
    };
    let parked_newest: Vec<String> = parked.iter().rev().cloned().collect();
    assert_eq!(by("status=parked").await, parked_newest);
    assert_eq!(by("status=active").await, parked_newest);
    assert!(by("status=running").await.is_empty());
    assert_eq!(by("status=completed").await, done.iter().rev().cloned().collect::<Vec<_>>());
    assert_eq!(by("tool=inspected_echo").await, done.iter().rev().cloned().collect::<Vec<_>>());
    assert_eq!(by("tool=inspected_echo&status=parked").await, Vec::<String>::new());
    assert_eq!(by("status=&tool=").await, newest_first, "empty filters are no filters (the page's `All`)");
}

#[tokio::test]
async fn a_bad_listing_query_is_refused_naming_what_to_send() {
    let served = serve().await;
    for (query, status, field, says) in [
        ("status=sleeping", 422, "status", "use active, parked, running, completed, failed or cancelled"),
        ("limit=0", 422, "limit", "from 1 to 200"),
        ("limit=201", 422, "limit", "from 1 to 200"),
        ("limit=ten", 422, "limit", "not `ten`"),
        ("before=yesterday", 422, "before", "the `next` of an earlier page"),
        ("order=oldest", 400, "", "the parameters are `status`, `tool`, `before` and `limit`"),
    ] {
        let seen = get(&served, &format!("/v1/runs?{query}")).await;
        assert_eq!(seen.status, status, "{query}");
        let (message, named) = seen.error();
        assert!(message.contains(says), "{query}: {message}");
        if !field.is_empty() {
            assert_eq!(named, field, "{query}");
        }
    }
}

#[tokio::test]
async fn a_timeline_shows_the_run_as_of_any_entry() {
    let served = serve().await;
    let run = start(&served, "inspected_refund", 1).await.remove(0);

    let now = get(&served, &format!("/v1/runs/{run}/timeline")).await;
    assert_eq!(now.status, 200);
    let now = now.json();
    assert_eq!((now["run"]["runId"].as_str(), now["run"]["status"].as_str()), (Some(run.as_str()), Some("parked")));
    assert_eq!(now["timeline"]["status"], "parked");
    assert_eq!(now["timeline"]["ops"][0]["kind"], "ask");
    assert_eq!(now["timeline"]["ops"][0]["state"], "open");
    let entries = now["timeline"]["entries"].as_u64().unwrap();
    assert_eq!(now["journal"].as_array().unwrap().len() as u64, entries);

    let then = get(&served, &format!("/v1/runs/{run}/timeline?at=0")).await.json();
    assert_eq!(then["timeline"]["at"], 0);
    assert_eq!(then["timeline"]["ops"], json!([]), "nothing was asked for at entry 0");
    assert_eq!(then["journal"].as_array().unwrap().len(), 1);

    let past = get(&served, &format!("/v1/runs/{run}/timeline?at={entries}")).await;
    assert_eq!(past.status, 422);
    let (message, field) = past.error();
    assert!(
        message.contains(&format!("has {entries} journal entries")) && message.contains("give `at` one of them"),
        "{message}"
    );
    assert_eq!(field, "at");
    assert_eq!(get(&served, &format!("/v1/runs/{run}/timeline?at=last")).await.status, 422);

    // Answered, the run pays: the step's duration is its attempt's, measured on a monotonic clock.
    served.runtime.answer(&run.parse().unwrap(), "ask-0", eve_tools::Answer::option("yes")).await.unwrap();
    served.runtime.handle(run.parse().unwrap()).outcome().await.unwrap();
    let done = get(&served, &format!("/v1/runs/{run}/timeline")).await.json();
    let step = &done["timeline"]["ops"][1];
    assert_eq!((step["kind"].as_str(), step["name"].as_str()), (Some("step"), Some("pay_refund")), "{done}");
    assert!(step["tookMs"].is_u64(), "a finished step says how long it took: {step}");
    assert_eq!(done["run"]["status"], "completed");
    assert_eq!(get(&served, "/v1/runs/no-such-run/timeline").await.status, 404);
}

#[tokio::test]
async fn the_tools_are_listed_from_the_manifest() {
    let served = serve().await;
    let tools = get(&served, "/v1/tools").await.json();
    let refund = tools["tools"].as_array().unwrap().iter().find(|tool| tool["name"] == "inspected_refund");
    let refund = refund.unwrap_or_else(|| panic!("the tool is listed: {tools}"));
    assert_eq!(refund["description"], "Asks a person to approve a refund, then pays it.");
}

#[tokio::test]
async fn without_a_key_the_page_is_served_on_loopback_names_only_under_its_policy() {
    let served = serve().await;
    for (path, content_type) in [("/ui", "text/html"), ("/ui/app.js", "text/javascript"), ("/ui/app.css", "text/css")] {
        let seen = get(&served, path).await;
        assert_eq!(seen.status, 200, "{path}");
        assert!(seen.header("content-type").unwrap().starts_with(content_type), "{path}");
        let policy = seen.header("content-security-policy").unwrap_or_else(|| panic!("{path} has a policy"));
        assert!(policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"), "{policy}");
        // Under `no-referrer` a browser posts the sign-in form with `Origin: null`, which is refused.
        assert_eq!(seen.header("referrer-policy"), Some("same-origin"), "{path}");
    }
    let page = String::from_utf8(get(&served, "/ui").await.body).unwrap();
    assert!(page.contains("<script src=\"/ui/app.js\"") && !page.contains("<script>"), "no inline script");

    let rebound = served.client.get(served.url("/ui")).header("host", "evil.example").send().await.unwrap();
    assert_eq!(rebound.status(), 403, "a page reached through DNS rebinding is refused, as `/v1` is");
    let framed = served.client.post(served.url("/ui/sign-in")).header("origin", "http://evil.example").send().await;
    assert_eq!(framed.unwrap().status(), 403, "so is a form posted from another site");
}

#[tokio::test]
async fn with_a_key_the_page_signs_in_and_its_cookie_stands_in_for_the_key() {
    let served = serve_with(|runtime| runtime, |server| server.api_key("sesame")).await;
    let run = start(&served, "inspected_refund", 1).await.remove(0);

    let form = get(&served, "/ui").await;
    assert_eq!(form.status, 200);
    let form = String::from_utf8(form.body).unwrap();
    assert!(form.contains("name=\"key\"") && !form.contains("app.js"), "the sign-in form, not the inspector");
    assert_eq!(get(&served, "/v1/runs").await.status, 401, "no key, no cookie");

    let wrong = served.client.post(served.url("/ui/sign-in")).form(&[("key", "open sesame")]).send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.text().await.unwrap().contains("not the server's API key"));
    assert_eq!(get(&served, "/v1/runs").await.status, 401, "a wrong key signs nobody in");

    let client = reqwest::Client::builder().no_proxy().cookie_store(true).redirect(reqwest::redirect::Policy::none());
    let client = client.build().unwrap();
    let right = client.post(served.url("/ui/sign-in")).form(&[("key", "sesame")]).send().await.unwrap();
    assert_eq!(right.status(), 303);
    assert_eq!(right.headers()["location"], "/ui");
    let cookie = right.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.starts_with("eve-inspector=") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(!cookie.contains("sesame"), "the cookie is a token of its own, not the key");

    let page = client.get(served.url("/ui")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("/ui/app.js"), "signed in, the inspector itself");
    let listed: Value = client.get(served.url("/v1/runs")).send().await.unwrap().json().await.unwrap();
    assert_eq!(ids(&listed), [run.as_str()], "the cookie reads the run API");

    let cancel = served.url(&format!("/v1/runs/{run}/cancel"));
    let bare = client.post(&cancel).json(&json!({})).send().await.unwrap();
    assert_eq!(bare.status(), 403, "a change needs the inspector's header besides the cookie");
    assert!(bare.text().await.unwrap().contains("X-Eve-UI"));
    let foreign = client.post(&cancel).header("x-eve-ui", "1").header("origin", "http://evil.example");
    assert_eq!(foreign.json(&json!({})).send().await.unwrap().status(), 403, "and the page's own origin");
    let from_page = client.post(&cancel).header("x-eve-ui", "1").json(&json!({ "reason": "from the inspector" }));
    assert_eq!(from_page.send().await.unwrap().status(), 202);
    let outcome = served.runtime.handle(run.parse().unwrap()).outcome().await.unwrap();
    assert_eq!(outcome, eve_tools::RunOutcome::Cancelled);

    let out = client.post(served.url("/ui/sign-out")).send().await.unwrap();
    assert_eq!(out.status(), 303);
    assert_eq!(client.get(served.url("/v1/runs")).send().await.unwrap().status(), 401, "signed out");
}

/// Workers on one store share the runtime's secret key: a sign-in on one is a sign-in on all of
/// them (nothing is kept on the server that issued it), and on no other server.
#[tokio::test]
async fn a_sign_in_holds_on_every_server_with_the_same_secret_key() {
    let key = eve_tools::secret::SecretKey::generate();
    let with_key = |key: eve_tools::secret::SecretKey| {
        serve_with(move |runtime| runtime.secret_key(key), |server| server.api_key("sesame"))
    };
    let first = with_key(key.clone()).await;
    let (second, stranger) = (with_key(key).await, with_key(eve_tools::secret::SecretKey::generate()).await);
    let client = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let signed = client.post(first.url("/ui/sign-in")).form(&[("key", "sesame")]).send().await.unwrap();
    let set = signed.headers()["set-cookie"].to_str().unwrap();
    let cookie = set.split(';').next().unwrap().to_owned();
    let status = |served: &Served, cookie: String| {
        let request = client.get(served.url("/v1/runs")).header("cookie", cookie);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status(&first, cookie.clone()).await, 200);
    assert_eq!(status(&second, cookie.clone()).await, 200, "another worker with the same secret key");
    assert_eq!(status(&stranger, cookie.clone()).await, 401, "a server with another secret key");
    let (name, value) = cookie.split_once('=').unwrap();
    let tampered = format!("{name}=1{value}");
    assert_eq!(status(&first, tampered).await, 401, "a cookie whose expiry was pushed back");
}

/// A person who opens the server's address, or `/ui/`, lands on the inspector.
#[tokio::test]
async fn the_root_and_ui_slash_lead_to_the_inspector() {
    let served = serve().await;
    let client = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    for path in ["/", "/ui/"] {
        let response = client.get(served.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 307, "{path}");
        assert_eq!(response.headers()["location"], "/ui", "{path}");
    }
    let page = served.client.get(served.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200, "followed, the redirect shows the inspector's page");
    assert!(page.text().await.unwrap().contains("<html"), "an HTML page");
}
