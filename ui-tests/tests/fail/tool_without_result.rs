// A tool returns `Result<T, E>`: the model sees `T`, or the error.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[tool]
async fn log(input: Input) {
    println!("{}", input.text);
}

fn main() {}
