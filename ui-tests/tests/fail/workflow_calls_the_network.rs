// A workflow body makes no network call: its answer is not journaled, so replay would call again.

use eve_tools::prelude::*;

// A stand-in for a crate a workflow body might reach for.
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
async fn audit(input: Input) -> Result<String, ToolError> {
    let page = reqwest::get("https://example.com").await;
    let socket = std::net::TcpStream::connect("127.0.0.1:80");
    Ok(format!("{} {page:?} {socket:?}", input.path))
}

fn main() {}
