//! Sign-in inside steps with an OAuth 2.0 provider, end to end against a fake OAuth server.
//!
//! `who_am_i` runs `prepare` (no auth), then `read_me`, which gets a token with
//! `ctx.get_token(&FAKE)` and calls the fake server's `/api/me` with it. A run without a token
//! parks on its sign-in; following the published URL and completing the callback retries only
//! `read_me`.
//!
//! At the edges: a published sign-in URL works at once (`url_race`), and a restart right after a
//! sign-in, with a token store that forgets, asks for a new sign-in (`restart_after_sign_in`).

use std::time::Duration;

use eve_tests::oauth_server::{FakeOAuth, Redirect, browser, no_redirects, open_sign_in_link, provider_url};
use eve_tests::{World, executed, executions};
use eve_tools::prelude::*;
use eve_tools::secret::SecretKey;
use eve_tools::{
    AccessToken, Entry, Error, FileTokenStore, ManualClock, Op, Phase, Principal, RunEvent, RunFailure, RunHandle,
    RunId, RunOutcome, StartOptions, TokenSet, TokenStore, http,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::broadcast;

const FAKE: Provider = Provider::new("fake");

/// Where the fake server is.
#[derive(Deserialize, JsonSchema)]
pub struct Api {
    api: String,
}

/// Who `/api/me` says the token belongs to, and which token it was.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct Me {
    user: String,
    serial: u64,
}

#[step]
async fn prepare(ctx: &StepCtx, api: String) -> Result<String, StepError> {
    executed(ctx, "prepare");
    Ok(format!("{api}/api/me"))
}

#[step(backoff = "1s")]
async fn read_me(ctx: &StepCtx, url: String) -> Result<Me, StepError> {
    executed(ctx, "read_me");
    let token = ctx.get_token(&FAKE).await?;
    let response = reqwest::Client::new().get(&url).bearer_auth(token.expose_secret()).send().await?;
    match response.status().as_u16() {
        200 => Ok(serde_json::from_slice(&response.bytes().await?)?),
        401 => Err(ctx.require_auth(&FAKE).await),
        status => Err(StepError::msg(format!("/api/me answered {status}"))),
    }
}

/// Prepares, then asks the API who signed in.
#[workflow_tool]
pub async fn who_am_i(input: Api, ctx: &WorkflowCtx) -> Result<Me, ToolError> {
    let url = prepare(ctx, input.api).await?;
    Ok(read_me(ctx, url).await?)
}

const PUBLIC_URL: &str = "https://agent.example";

/// A world, a fake OAuth server, and a runtime with the fake registered as `fake`.
struct Setup {
    world: World,
    fake: FakeOAuth,
    runtime: Runtime,
    events: broadcast::Receiver<RunEvent>,
}

impl Setup {
    async fn new() -> Setup {
        let world = World::in_memory();
        let fake = FakeOAuth::start("CANARY0auth").await;
        let provider = fake.provider("fake", world.clock.clone()).build().unwrap();
        let runtime = world.builder(16).auth_provider("fake", provider).public_url(PUBLIC_URL).build().unwrap();
        let events = runtime.events();
        Setup { world, fake, runtime, events }
    }

    async fn start(&self, principal: &str) -> RunHandle {
        let input = json!({ "api": self.fake.base() });
        self.runtime.start_with("who_am_i", input, StartOptions::new().principal(principal)).await.unwrap()
    }

    /// Starts a run as `principal` and returns it parked with its sign-in URL.
    async fn parked_on_sign_in(&mut self, principal: &str) -> (RunHandle, String) {
        let run = self.start(principal).await;
        assert_eq!(run.parked().await.unwrap(), Phase::Parked);
        let urls = sign_in_urls(&mut self.events, run.id());
        assert_eq!(urls.len(), 1, "one authorization.required");
        (run, urls.into_iter().next().unwrap())
    }

    /// Signs in as `login` at `url` and completes the callback through the runtime's API.
    async fn sign_in(&self, url: &str, login: &str) -> RunId {
        let redirect = self.fake.follow(&provider_url(&self.runtime, url).await, login).await;
        self.runtime.complete_authorization("fake", &redirect.state, &redirect.code).await.unwrap()
    }
}

/// The sign-in URLs published for `run` since the last call.
fn sign_in_urls(events: &mut broadcast::Receiver<RunEvent>, run: &RunId) -> Vec<String> {
    std::iter::from_fn(|| events.try_recv().ok())
        .filter_map(|event| match event {
            RunEvent::AuthorizationRequired { run: of, url, provider, .. } if of == *run => {
                assert_eq!(provider, "fake");
                Some(url)
            }
            _ => None,
        })
        .collect()
}

fn me(user: &str, serial: u64) -> RunOutcome {
    RunOutcome::Completed(json!({ "user": user, "serial": serial }))
}

/// The journal of `run` as JSON text, and its sign-in entries.
async fn journal(runtime: &Runtime, run: &RunId) -> (String, Vec<Entry>) {
    let entries = runtime.journal(run).await.unwrap().entries;
    let text = serde_json::to_string(&entries).unwrap();
    let sign_ins = entries
        .into_iter()
        .filter(|entry| matches!(entry, Entry::AuthRequired { .. } | Entry::AuthCompleted { .. }))
        .collect();
    (text, sign_ins)
}

#[tokio::test]
async fn a_sign_in_parks_the_run_then_retries_only_the_interrupted_step() {
    let mut setup = Setup::new().await;
    let (run, url) = setup.parked_on_sign_in("ada").await;
    assert!(url.starts_with(&format!("{PUBLIC_URL}/.well-known/workflow/v1/auth/fake/start?state=")), "{url}");
    assert_eq!((executions(run.id(), "prepare"), executions(run.id(), "read_me")), (vec![1], vec![1]));

    let at_provider = provider_url(&setup.runtime, &url).await;
    assert!(at_provider.starts_with(&format!("{}/authorize?", setup.fake.base())), "{at_provider}");
    let redirect = setup.fake.follow(&at_provider, "ada").await;
    assert_eq!(redirect.callback, format!("{PUBLIC_URL}/.well-known/workflow/v1/auth/fake/callback"));
    let completed = setup.runtime.complete_authorization("fake", &redirect.state, &redirect.code).await.unwrap();
    assert_eq!(&completed, run.id());

    assert_eq!(run.outcome().await.unwrap(), me("ada", 1));
    assert_eq!(executions(run.id(), "prepare"), [1], "the earlier step is not rerun");
    assert_eq!(executions(run.id(), "read_me"), [1, 1], "the interrupted attempt runs again, not counted as a failure");
    assert_eq!(setup.fake.exchanges(), 1);
    let (text, sign_ins) = journal(&setup.runtime, run.id()).await;
    assert!(matches!(
        sign_ins.as_slice(),
        [Entry::AuthRequired { op: Op(1), provider, attempt: 1, .. }, Entry::AuthCompleted { op: Op(1) }]
            if provider == "fake"
    ));
    assert!(!text.contains("CANARY0auth"), "no token or code in the journal: {text}");
    let completed = std::iter::from_fn(|| setup.events.try_recv().ok())
        .filter(|event| matches!(event, RunEvent::AuthorizationCompleted { run: of, .. } if of == run.id()))
        .count();
    assert_eq!(completed, 1);
}

#[tokio::test]
async fn a_token_rejected_right_after_sign_in_fails_the_step_without_a_second_prompt() {
    let mut setup = Setup::new().await;
    setup.fake.reject_tokens(true);
    let (run, url) = setup.parked_on_sign_in("ada").await;
    setup.sign_in(&url, "ada").await;

    let RunOutcome::Failed(RunFailure::Tool { message }) = run.outcome().await.unwrap() else {
        panic!("the run fails")
    };
    assert!(message.contains("`fake` rejected the token right after sign-in"), "{message}");
    assert!(sign_in_urls(&mut setup.events, run.id()).is_empty(), "no second authorization.required");
    assert_eq!(executions(run.id(), "read_me"), [1, 1], "the failure is fatal: no further attempt");
    assert_eq!(setup.fake.exchanges(), 1);
}

#[tokio::test]
async fn a_callback_with_a_wrong_state_or_for_another_provider_is_refused_and_changes_nothing() {
    let world = World::in_memory();
    let fake = FakeOAuth::start("CANARY0auth").await;
    let runtime = world
        .builder(16)
        .auth_provider("fake", fake.provider("fake", world.clock.clone()).build().unwrap())
        .auth_provider("other", fake.provider("other", world.clock.clone()).build().unwrap())
        .build()
        .unwrap();
    let mut events = runtime.events();
    let run = runtime.start("who_am_i", json!({ "api": fake.base() })).await.unwrap();
    run.parked().await.unwrap();
    let url = sign_in_urls(&mut events, run.id()).pop().unwrap();
    let redirect = fake.follow(&provider_url(&runtime, &url).await, "ada").await;
    let before = runtime.journal(run.id()).await.unwrap().entries;

    let mut tampered = redirect.state.clone();
    tampered.replace_range(..1, if tampered.starts_with('A') { "B" } else { "A" });
    for (provider, state) in [
        ("fake", "not-a-state"),
        ("fake", tampered.as_str()),
        ("fake", ""),
        ("other", redirect.state.as_str()),
        ("unregistered", redirect.state.as_str()),
    ] {
        let refused = runtime.complete_authorization(provider, state, &redirect.code).await;
        assert!(matches!(refused, Err(Error::UnknownCallback)), "{provider}: {refused:?}");
    }
    assert_eq!(runtime.journal(run.id()).await.unwrap().entries, before, "the journal is unchanged");
    assert_eq!(fake.exchanges(), 0, "the code was not spent");
    assert_eq!(runtime.handle(run.id().clone()).parked().await.unwrap(), Phase::Parked);

    runtime.complete_authorization("fake", &redirect.state, &redirect.code).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), me("ada", 1));
}

#[tokio::test]
async fn a_duplicate_callback_is_refused() {
    let setup = Setup::new().await;
    let mut events = setup.runtime.events();
    let run = setup.start("ada").await;
    run.parked().await.unwrap();
    let url = provider_url(&setup.runtime, &sign_in_urls(&mut events, run.id()).pop().unwrap()).await;
    let redirect = setup.fake.follow(&url, "ada").await;
    let runtime = &setup.runtime;

    runtime.complete_authorization("fake", &redirect.state, &redirect.code).await.unwrap();
    let again = runtime.complete_authorization("fake", &redirect.state, &redirect.code).await;
    assert!(matches!(again, Err(Error::UnknownCallback)), "while the run takes the first: {again:?}");
    assert_eq!(run.outcome().await.unwrap(), me("ada", 1));
    let second = setup.fake.follow(&url, "ada").await;
    let late = runtime.complete_authorization("fake", &second.state, &second.code).await;
    assert!(matches!(late, Err(Error::UnknownCallback)), "a fresh code for a finished sign-in: {late:?}");
    assert_eq!(setup.fake.exchanges(), 1, "only the first callback exchanged its code");
    let (_, sign_ins) = journal(runtime, run.id()).await;
    assert_eq!(sign_ins.len(), 2, "one AuthRequired, one AuthCompleted");
}

#[tokio::test]
async fn tokens_resolve_under_the_principal_that_started_the_run() {
    let mut setup = Setup::new().await;
    let (alice, alice_url) = setup.parked_on_sign_in("alice").await;
    let (bob, bob_url) = setup.parked_on_sign_in("bob").await;
    setup.sign_in(&bob_url, "bob").await;
    setup.sign_in(&alice_url, "alice").await;
    assert_eq!(bob.outcome().await.unwrap(), me("bob", 1));
    assert_eq!(alice.outcome().await.unwrap(), me("alice", 2));

    let again = setup.start("alice").await;
    assert_eq!(again.outcome().await.unwrap(), me("alice", 2), "alice's token, without a new sign-in");
    assert!(sign_in_urls(&mut setup.events, again.id()).is_empty());
    assert_eq!(setup.fake.exchanges(), 2);
}

#[tokio::test]
async fn an_expired_token_is_refreshed_and_a_refused_refresh_asks_for_a_new_sign_in() {
    let mut setup = Setup::new().await;
    setup.fake.expiring_tokens(3600);
    let (first, url) = setup.parked_on_sign_in("ada").await;
    setup.sign_in(&url, "ada").await;
    assert_eq!(first.outcome().await.unwrap(), me("ada", 1));

    setup.world.clock.advance(Duration::from_secs(3600));
    let refreshed = setup.start("ada").await;
    assert_eq!(refreshed.outcome().await.unwrap(), me("ada", 2), "a new token, without a sign-in");
    assert!(sign_in_urls(&mut setup.events, refreshed.id()).is_empty());
    assert_eq!((setup.fake.exchanges(), setup.fake.refreshes()), (1, 1));

    setup.fake.refuse_refresh();
    setup.world.clock.advance(Duration::from_secs(3600));
    let (third, url) = setup.parked_on_sign_in("ada").await;
    setup.sign_in(&url, "ada").await;
    assert_eq!(third.outcome().await.unwrap(), me("ada", 3));
    assert_eq!((setup.fake.exchanges(), setup.fake.refreshes()), (2, 1));
}

#[tokio::test]
async fn a_sign_in_survives_a_restart_while_the_run_is_parked() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(eve_tests::START);
    let fake = FakeOAuth::start("CANARY0auth").await;
    let process = |clock: &ManualClock| {
        let provider = fake.provider("fake", clock.clone()).build().unwrap();
        let builder = Runtime::builder().data_dir(dir.path()).clock(clock.clone()).public_url(PUBLIC_URL);
        builder.auth_provider("fake", provider).build().unwrap()
    };

    let first = process(&clock);
    let mut events = first.events();
    let run = first.start_with("who_am_i", json!({ "api": fake.base() }), StartOptions::new().principal("ada"));
    let run = run.await.unwrap();
    run.parked().await.unwrap();
    let url = sign_in_urls(&mut events, run.id()).pop().unwrap();
    let id = run.id().clone();
    drop((events, run));
    first.shutdown().await;

    let second = process(&clock);
    let mut events = second.events();
    assert_eq!(second.recover().await.unwrap(), 1);
    let run = second.handle(id.clone());
    assert_eq!(run.parked().await.unwrap(), Phase::Parked);
    assert_eq!(sign_in_urls(&mut events, &id), vec![url.clone()], "the same URL is published again");

    let redirect = fake.follow(&provider_url(&second, &url).await, "ada").await;
    second.complete_authorization("fake", &redirect.state, &redirect.code).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), me("ada", 1));
    assert_eq!(executions(&id, "prepare"), [1], "not rerun after the restart");
    assert_eq!(executions(&id, "read_me"), [1, 1]);
    assert_eq!(fake.exchanges(), 1);
}

#[tokio::test]
async fn tokens_in_a_file_token_store_outlive_a_restart_and_are_never_in_the_clear() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(eve_tests::START);
    let fake = FakeOAuth::start("CANARYfile").await;
    let process = || {
        let key = SecretKey::load_or_create(&dir.path().join("eve.key")).unwrap();
        let tokens = FileTokenStore::open(dir.path().join("tokens/fake"), "fake", &key).unwrap();
        let provider = fake.provider("fake", clock.clone()).token_store(tokens).build().unwrap();
        let builder = Runtime::builder().data_dir(dir.path()).clock(clock.clone()).public_url(PUBLIC_URL);
        builder.auth_provider("fake", provider).build().unwrap()
    };
    let input = || json!({ "api": fake.base() });

    let first = process();
    let mut events = first.events();
    let run = first.start_with("who_am_i", input(), StartOptions::new().principal("ada")).await.unwrap();
    run.parked().await.unwrap();
    let url = sign_in_urls(&mut events, run.id()).pop().unwrap();
    let redirect = fake.follow(&provider_url(&first, &url).await, "ada").await;
    first.complete_authorization("fake", &redirect.state, &redirect.code).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), me("ada", 1));
    drop((events, run));
    first.shutdown().await;

    let second = process();
    let mut events = second.events();
    let run = second.start_with("who_am_i", input(), StartOptions::new().principal("ada")).await.unwrap();
    let phase = run.parked().await.unwrap();
    assert_eq!(phase, Phase::Finished(me("ada", 1)), "ada's token from before the restart is used");
    assert!(sign_in_urls(&mut events, run.id()).is_empty(), "no second sign-in");
    assert_eq!(fake.exchanges(), 1);
    let grace = second.start_with("who_am_i", input(), StartOptions::new().principal("grace")).await.unwrap();
    assert_eq!(grace.parked().await.unwrap(), Phase::Parked, "another person still signs in for herself");
    second.shutdown().await;

    let mut files = vec![dir.path().to_path_buf()];
    let mut checked = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|entry| entry.unwrap().path()));
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let found = bytes.windows(b"CANARYfile".len()).any(|window| window == b"CANARYfile");
        assert!(!found, "{} holds a token or code in the clear", path.display());
        checked += 1;
    }
    assert!(checked >= 3, "the key, the database and a token file were checked ({checked} files)");
}

#[tokio::test]
async fn the_callback_works_over_http_and_a_used_or_unknown_callback_gets_an_empty_404() {
    let world = World::in_memory();
    let fake = FakeOAuth::start("CANARY0auth").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let public_url = format!("http://{}", listener.local_addr().unwrap());
    let provider = fake.provider("fake", world.clock.clone()).build().unwrap();
    let runtime = world.builder(16).auth_provider("fake", provider).public_url(&public_url).build().unwrap();
    let server = http::Server::new(runtime.clone()).serve(listener).unwrap();
    let mut events = runtime.events();
    let run = runtime.start("who_am_i", json!({ "api": fake.base() })).await.unwrap();
    run.parked().await.unwrap();
    let url = sign_in_urls(&mut events, run.id()).pop().unwrap();
    let browser = browser();
    let redirect = fake.follow(&open_sign_in_link(&browser, &url).await, "ada").await;
    assert!(redirect.location.starts_with(&format!("{public_url}/.well-known/workflow/v1/auth/fake/callback?")));
    let get = |url: String| {
        let browser = browser.clone();
        async move {
            let response = browser.get(url).send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };

    let wrong_state = redirect.location.replace(&redirect.state, "not-the-state");
    assert_eq!(get(wrong_state).await, (404, String::new()));
    let other_provider = redirect.location.replace("/auth/fake/", "/auth/other/");
    assert_eq!(get(other_provider).await, (404, String::new()));
    assert_eq!(fake.exchanges(), 0);

    let (status, page) = get(redirect.location.clone()).await;
    assert_eq!(status, 200);
    assert!(!page.contains("CANARY0auth"), "the page shows no code");
    assert_eq!(run.outcome().await.unwrap(), me("ada", 1));
    assert_eq!(get(redirect.location.clone()).await, (404, String::new()), "a used callback");
    assert_eq!(fake.exchanges(), 1);
    server.shutdown().await;
}

/// A runtime with the fake registered as `fake`, served over loopback HTTP at its public URL.
struct OverHttp {
    fake: FakeOAuth,
    runtime: Runtime,
    server: http::ServerHandle,
    public_url: String,
    events: broadcast::Receiver<RunEvent>,
    _world: World,
}

impl OverHttp {
    async fn new() -> OverHttp {
        let world = World::in_memory();
        let fake = FakeOAuth::start("CANARY0auth").await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let public_url = format!("http://{}", listener.local_addr().unwrap());
        let provider = fake.provider("fake", world.clock.clone()).build().unwrap();
        let runtime = world.builder(16).auth_provider("fake", provider).public_url(&public_url).build().unwrap();
        let server = http::Server::new(runtime.clone()).serve(listener).unwrap();
        let events = runtime.events();
        OverHttp { fake, runtime, server, public_url, events, _world: world }
    }

    /// Starts a run as `principal` and returns it parked with the sign-in link it published.
    async fn parked_on_sign_in(&mut self, principal: &str) -> (RunHandle, String) {
        let input = json!({ "api": self.fake.base() });
        let run = self.runtime.start_with("who_am_i", input, StartOptions::new().principal(principal)).await.unwrap();
        assert_eq!(run.parked().await.unwrap(), Phase::Parked);
        let link = sign_in_urls(&mut self.events, run.id()).pop().expect("the run published a sign-in link");
        (run, link)
    }

    /// Opens `link` in `browser` and signs in at the provider as `login`; returns where the
    /// provider sends the browser back to, without going there.
    async fn sign_in_at_provider(&self, browser: &reqwest::Client, link: &str, login: &str) -> Redirect {
        let at_provider =
            if link.starts_with(self.fake.base()) { link.to_owned() } else { open_sign_in_link(browser, link).await };
        self.fake.follow(&at_provider, login).await
    }
}

/// Opens `url` in `browser`: the status and the body.
async fn open(browser: &reqwest::Client, url: &str) -> (u16, String) {
    let response = browser.get(url).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn a_callback_from_a_browser_that_did_not_open_the_sign_in_link_is_refused() {
    let mut over = OverHttp::new().await;
    let (run, link) = over.parked_on_sign_in("ada").await;

    // Mallory opens Ada's link in her own browser and signs in at the provider as herself, then
    // gets Ada's browser to open the callback (a link or an image on a page Ada visits), so that
    // Ada's run would act with Mallory's account.
    let mallory = browser();
    let forged = over.sign_in_at_provider(&mallory, &link, "mallory").await;
    let ada = browser();
    assert_eq!(open(&ada, &forged.location).await, (404, String::new()), "the callback is refused");
    assert_eq!(open(&no_redirects(), &forged.location).await, (404, String::new()), "and so is a bare request");
    assert_eq!(over.fake.exchanges(), 0, "Mallory's code was not exchanged");
    assert_eq!(over.runtime.handle(run.id().clone()).parked().await.unwrap(), Phase::Parked);

    // Ada signs in from her own browser, through the same link.
    let redirect = over.sign_in_at_provider(&ada, &link, "ada").await;
    assert_eq!(open(&ada, &redirect.location).await.0, 200);
    assert_eq!(run.outcome().await.unwrap(), me("ada", 1));
    assert_eq!(over.fake.exchanges(), 1);
    over.server.shutdown().await;
}

#[tokio::test]
async fn the_sign_in_link_sets_a_cookie_for_its_callback_then_sends_the_browser_to_the_provider() {
    let mut over = OverHttp::new().await;
    let (run, link) = over.parked_on_sign_in("ada").await;
    let start = format!("{}/.well-known/workflow/v1/auth/fake/start?state=", over.public_url);
    assert!(link.starts_with(&start), "the run publishes the runtime's own sign-in link: {link}");

    let ada = browser();
    let opened = ada.get(&link).send().await.unwrap();
    assert_eq!(opened.status(), 303);
    let location = opened.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with(&format!("{}/authorize?", over.fake.base())), "{location}");
    let cookie = opened.headers()["set-cookie"].to_str().unwrap().to_owned();
    let state = link.rsplit("state=").next().unwrap();
    for attribute in ["HttpOnly", "SameSite=Lax", "Max-Age=600", "Path=/.well-known/workflow/v1/auth/fake/callback"] {
        assert!(cookie.split("; ").any(|part| part == attribute), "{attribute} in {cookie}");
    }
    assert!(!cookie.contains(state), "the cookie is derived from the state, not the state: {cookie}");
    assert!(!cookie.contains("Secure"), "a plain-HTTP public URL cannot keep a secure cookie: {cookie}");
    assert_eq!(opened.headers()["cache-control"], "no-store");

    let redirect = over.fake.follow(&location, "ada").await;
    let back = ada.get(&redirect.location).send().await.unwrap();
    assert_eq!(back.status(), 200);
    let cleared = back.headers()["set-cookie"].to_str().unwrap();
    assert!(cleared.contains("Max-Age=0"), "the cookie is cleared once it served: {cleared}");
    assert_eq!(run.outcome().await.unwrap(), me("ada", 1));

    // A browser that follows every redirect, as a person's does, signs in with one click.
    let (grace_run, link) = over.parked_on_sign_in("grace").await;
    let clicking = reqwest::Client::builder().cookie_store(true).no_proxy().build().unwrap();
    let (status, page) = open(&clicking, &link).await;
    assert_eq!((status, page.contains("Signed in; you can close this tab")), (200, true));
    assert_eq!(grace_run.outcome().await.unwrap(), me("user", 2), "signed in as the fake's default user");

    // A link whose sign-in is over, or that never was, opens nothing.
    for dead in [link.clone(), link.replace("state=", "state=x"), link.replace("/fake/", "/other/")] {
        assert_eq!(open(&browser(), &dead).await, (404, String::new()), "{dead}");
    }
    over.server.shutdown().await;
}

#[tokio::test]
async fn two_sign_ins_started_in_one_browser_both_complete() {
    let mut over = OverHttp::new().await;
    let (first, first_link) = over.parked_on_sign_in("ada").await;
    let (second, second_link) = over.parked_on_sign_in("grace").await;
    let shared = browser();
    let first_redirect = over.sign_in_at_provider(&shared, &first_link, "ada").await;
    let second_redirect = over.sign_in_at_provider(&shared, &second_link, "grace").await;

    assert_eq!(open(&shared, &second_redirect.location).await.0, 200);
    assert_eq!(open(&shared, &first_redirect.location).await.0, 200, "the second link kept the first's cookie");
    assert_eq!(second.outcome().await.unwrap(), me("grace", 1));
    assert_eq!(first.outcome().await.unwrap(), me("ada", 2));
    over.server.shutdown().await;
}

#[tokio::test]
async fn a_token_file_moved_to_another_providers_folder_does_not_open() {
    let dir = tempfile::tempdir().unwrap();
    let key = SecretKey::load_or_create(&dir.path().join("eve.key")).unwrap();
    let (github_dir, gitlab_dir) = (dir.path().join("tokens/github"), dir.path().join("tokens/gitlab"));
    let github = FileTokenStore::open(&github_dir, "github", &key).unwrap();
    let gitlab = FileTokenStore::open(&gitlab_dir, "gitlab", &key).unwrap();
    let ada = Principal::new("ada");
    github.save(&ada, TokenSet::new(AccessToken::new("github-token"))).await.unwrap();

    let file = std::fs::read_dir(&github_dir).unwrap().next().unwrap().unwrap().path();
    std::fs::copy(&file, gitlab_dir.join(file.file_name().unwrap())).unwrap();
    let moved = gitlab.load(&ada).await.map(|tokens| tokens.map(|tokens| tokens.access_token().expose_secret().len()));
    let message = moved.expect_err("GitHub's token must not open as GitLab's").to_string();
    assert!(message.contains("moved") && message.contains("signs in again"), "{message}");
    assert!(!message.contains("github-token"), "{message}");
    let kept = github.load(&ada).await.unwrap().expect("the token still opens where it was saved");
    assert_eq!(kept.access_token().expose_secret(), "github-token");
}

/// A sign-in URL is published only once its `AuthRequired` entry is durable, so a callback that
/// follows the published URL at once is accepted, never refused as unknown.
mod url_race {
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;
    use eve_tests::START;
    use eve_tests::oauth_server::{FakeOAuth, provider_url};
    use eve_tools::prelude::*;
    use eve_tools::secret::{SecretKey, TokenHash};
    use eve_tools::store::*;
    use eve_tools::{Entry, ManualClock, RunEvent, RunId, Timestamp};
    use serde_json::json;
    use tokio::sync::Semaphore;

    const FAKE: Provider = Provider::new("fake");

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    pub struct Input {}

    #[step]
    async fn needs_token(ctx: &StepCtx) -> Result<(), StepError> {
        ctx.get_token(&FAKE).await?;
        Ok(())
    }

    /// Needs a sign-in.
    #[workflow_tool]
    pub async fn race(_input: Input, ctx: &WorkflowCtx) -> Result<(), ToolError> {
        Ok(needs_token(ctx).await?)
    }

    /// A memory store whose appends of `AuthRequired` wait until the test lets them through.
    struct Gated {
        inner: MemoryStore,
        gate: Arc<Semaphore>,
        /// Released once an `AuthRequired` append has started waiting at the gate.
        held: Arc<Semaphore>,
    }

    #[async_trait]
    impl Store for Gated {
        async fn create_run(&self, run: NewRun, owner: &WorkerId) -> Result<Created, StoreError> {
            self.inner.create_run(run, owner).await
        }
        async fn claim(
            &self,
            run: &RunId,
            owner: &WorkerId,
            lease: Duration,
            now: Timestamp,
            from: u64,
        ) -> Result<Claimed, StoreError> {
            self.inner.claim(run, owner, lease, now, from).await
        }
        async fn release(&self, run: &RunId, fence: Fence) -> Result<(), StoreError> {
            self.inner.release(run, fence).await
        }
        fn append<'a>(&'a self, run: &'a RunId, fence: Fence, append: &'a mut Append) -> Commit<'a> {
            if !append.entries.iter().any(|entry| matches!(entry, Entry::AuthRequired { .. })) {
                return self.inner.append(run, fence, append);
            }
            Commit::pending(async move {
                self.held.add_permits(1);
                let _permit = self.gate.acquire().await.unwrap();
                self.inner.append(run, fence, append).await
            })
        }
        async fn park(&self, run: &RunId, fence: Fence, next_seq: u64) -> Result<(), StoreError> {
            self.inner.park(run, fence, next_seq).await
        }

        async fn recovery(&self) -> Result<Recovery, StoreError> {
            self.inner.recovery().await
        }

        fn continue_as_new<'a>(
            &'a self,
            run: &'a RunId,
            fence: Fence,
            started: &'a mut Option<Entry>,
            keep_inbox: bool,
        ) -> Commit<'a> {
            self.inner.continue_as_new(run, fence, started, keep_inbox)
        }

        async fn deliver(
            &self,
            target: Target,
            id: Option<&str>,
            delivery: DeliveryPayload,
        ) -> Result<Delivered, StoreError> {
            self.inner.deliver(target, id, delivery).await
        }
        async fn inbox(&self, run: &RunId) -> Result<Vec<InboxItem>, StoreError> {
            self.inner.inbox(run).await
        }
        async fn find_hook(&self, token: &TokenHash) -> Result<Option<HookRow>, StoreError> {
            self.inner.find_hook(token).await
        }
        async fn timers(&self) -> Result<Vec<TimerRow>, StoreError> {
            self.inner.timers().await
        }
        async fn read(
            &self,
            run: &RunId,
            at: eve_tools::journal::Position,
            limit: usize,
        ) -> Result<Option<eve_tools::store::JournalPage>, StoreError> {
            self.inner.read(run, at, limit).await
        }
        async fn watch(&self, run: &RunId) -> Result<Option<eve_tools::store::Watch>, StoreError> {
            self.inner.watch(run).await
        }
        async fn load(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
            self.inner.load(run).await
        }
        async fn list_runs(&self, query: &RunQuery) -> Result<RunPage, StoreError> {
            self.inner.list_runs(query).await
        }
        fn max_entry_bytes(&self) -> Option<usize> {
            self.inner.max_entry_bytes()
        }

        fn is_durable(&self) -> bool {
            false
        }
    }

    #[tokio::test]
    async fn a_published_sign_in_url_works_at_once() {
        let clock = ManualClock::new(START);
        let fake = FakeOAuth::start("CANARYrace").await;
        let (gate, held) = (Arc::new(Semaphore::new(0)), Arc::new(Semaphore::new(0)));
        let runtime = Runtime::builder()
            .store(Gated { inner: MemoryStore::new(), gate: gate.clone(), held: held.clone() })
            .clock(clock.clone())
            .secret_key(SecretKey::generate())
            .auth_provider("fake", fake.provider("fake", clock).build().unwrap())
            .build()
            .unwrap();
        let mut events = runtime.events();
        let run = runtime.start("race", json!({})).await.unwrap();
        // While `AuthRequired` is not yet durable, no sign-in URL may have been published.
        held.acquire().await.unwrap().forget();
        let published_early = std::iter::from_fn(|| events.try_recv().ok())
            .any(|event| matches!(event, RunEvent::AuthorizationRequired { .. }));
        assert!(!published_early, "the sign-in URL was published before its callback could be accepted");
        gate.add_permits(1);
        let url = loop {
            if let RunEvent::AuthorizationRequired { url, .. } = events.recv().await.unwrap() {
                break url;
            }
        };
        // Published means durable: the callback is accepted at once.
        let redirect = fake.follow(&provider_url(&runtime, &url).await, "ada").await;
        let callback = runtime.complete_authorization("fake", &redirect.state, &redirect.code).await;
        assert!(callback.is_ok(), "the published URL's callback was refused: {callback:?}");
        run.outcome().await.unwrap();
    }
}

/// A restart after `AuthCompleted` was journaled, with a token store that does not survive
/// restarts, asks for a new sign-in instead of failing the step as rejected right after sign-in.
mod restart_after_sign_in {
    use std::sync::atomic::{AtomicBool, Ordering};

    use eve_tests::World;
    use eve_tests::oauth_server::{FakeOAuth, provider_url};
    use eve_tools::prelude::*;
    use eve_tools::{Phase, RunEvent, RunOutcome};
    use serde_json::json;
    use tokio::sync::Semaphore;

    const FAKE: Provider = Provider::new("fake");
    static FIRST_PROCESS: AtomicBool = AtomicBool::new(true);
    static NEVER: Semaphore = Semaphore::const_new(0);

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    pub struct Input {}

    #[step]
    async fn use_token(ctx: &StepCtx) -> Result<String, StepError> {
        ctx.get_token(&FAKE).await?;
        if FIRST_PROCESS.load(Ordering::SeqCst) {
            let _hang = NEVER.acquire().await; // the first process "crashes" while this attempt runs
        }
        Ok("used".to_owned())
    }

    /// Needs a sign-in.
    #[workflow_tool]
    pub async fn restart_after_sign_in(_input: Input, ctx: &WorkflowCtx) -> Result<String, ToolError> {
        Ok(use_token(ctx).await?)
    }

    #[tokio::test]
    async fn a_restart_right_after_sign_in_asks_for_a_new_sign_in_instead_of_failing() {
        let world = World::in_memory();
        let fake = FakeOAuth::start("CANARYrestart").await;
        let process = || {
            world
                .builder(0)
                .auth_provider("fake", fake.provider("fake", world.clock.clone()).build().unwrap())
                .build()
                .unwrap()
        };
        let first = process();
        let mut events = first.events();
        let run = first.start("restart_after_sign_in", json!({})).await.unwrap();
        run.parked().await.unwrap();
        let url = loop {
            if let RunEvent::AuthorizationRequired { url, .. } = events.recv().await.unwrap() {
                break url;
            }
        };
        let redirect = fake.follow(&provider_url(&first, &url).await, "ada").await;
        first.complete_authorization("fake", &redirect.state, &redirect.code).await.unwrap();
        loop {
            // AuthCompleted is durable and the retried attempt is running (and hangs)
            if let RunEvent::AuthorizationCompleted { .. } = events.recv().await.unwrap() {
                break;
            }
        }

        FIRST_PROCESS.store(false, Ordering::SeqCst);
        let second = process(); // a new process: its MemoryTokenStore is empty
        let mut events = second.events();
        second.recover().await.unwrap();
        let run = second.handle(run.id().clone());
        let phase = run.parked().await.unwrap();
        let failure = match &phase {
            Phase::Finished(RunOutcome::Failed(failure)) => Some(failure.clone()),
            _ => None,
        };
        assert_eq!(failure, None, "the run failed although no token was rejected");
        let asked = std::iter::from_fn(|| events.try_recv().ok())
            .any(|event| matches!(event, RunEvent::AuthorizationRequired { .. }));
        assert!(asked, "a new sign-in is asked for");
    }
}
