// Step arguments serialize the same way in every process, so replay sees the same call: a
// `HashSet` lists its elements in a random order (use a `BTreeSet`; a `HashMap` is sorted).

use std::collections::{HashMap, HashSet};

use eve_tools::prelude::*;

#[step]
async fn notify(users: HashSet<String>, counts: HashMap<String, u32>) -> Result<usize, StepError> {
    Ok(users.len() + counts.len())
}

#[step]
async fn nested(groups: Vec<std::collections::HashSet<u64>>) -> Result<usize, StepError> {
    Ok(groups.len())
}

fn main() {}
