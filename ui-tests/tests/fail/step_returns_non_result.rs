// A step returns `Result<T, E>`: `T` is recorded in the journal and an `E` makes the runtime retry.

use eve_tools::prelude::*;

#[step]
async fn plan(service: String) -> String {
    service
}

#[step]
async fn notify(service: String) {
    println!("{service}");
}

fn main() {}
