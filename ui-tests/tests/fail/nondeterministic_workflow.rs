// A workflow body is replayed from its journal, so it reads no clock, randomness, environment,
// file or network, and neither spawns nor sleeps outside the runtime; each error names the replacement.

use eve_tools::prelude::*;

// Stand-ins for crates a workflow body might reach for.
mod rand {
    pub fn random<T: Default>() -> T {
        T::default()
    }
}
mod uuid {
    pub struct Uuid;
    impl Uuid {
        pub fn new_v4() -> u128 {
            4
        }
    }
}
mod reqwest {
    pub async fn get(_url: &str) -> Result<(), ()> {
        Ok(())
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    path: String,
}

#[workflow_tool]
async fn audit(input: Input, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let started = std::time::SystemTime::now();
    let elapsed = std::time::Instant::now();
    let nonce: u64 = rand::random();
    let id = uuid::Uuid::new_v4();
    tokio::spawn(async {});
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let home = std::env::var("HOME");
    let text = std::fs::read_to_string(&input.path);
    let page = reqwest::get("https://example.com").await;
    let socket = std::net::TcpStream::connect("127.0.0.1:80");
    Ok(format!("{started:?} {elapsed:?} {nonce} {id} {home:?} {text:?} {page:?} {socket:?} {}", ctx.now()))
}

#[task]
async fn remind(input: Input) -> Result<String, ToolError> {
    std::thread::sleep(std::time::Duration::from_secs(1));
    Ok(input.path)
}

fn main() {}
