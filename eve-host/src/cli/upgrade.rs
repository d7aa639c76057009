//! `runs upgrade`: moves the unfinished runs whose journals replay on this build to it, and lists
//! those it cannot move with where each diverges (see [`Runtime::upgrade_runs`]).

use eve_runtime::{Runtime, Upgrade};

/// Upgrades the runs and prints what was done (one JSON object with `json`); fails, saying what to
/// do, if any run cannot move.
pub(super) async fn run(runtime: &Runtime, json: bool) -> Result<(), String> {
    let upgrade = runtime.upgrade_runs().await.map_err(|error| error.to_string())?;
    if json {
        println!("{}", serde_json::to_string(&upgrade).expect("an upgrade report always serializes"));
    } else {
        print(&upgrade);
    }
    verdict(&upgrade)
}

/// What was done, in sentences, one run a line.
fn print(upgrade: &Upgrade) {
    let Upgrade { current, upgraded, refused, busy, .. } = upgrade;
    println!("{} on this build's code already", super::plural(*current, "run runs", "runs run"));
    if !upgraded.is_empty() {
        println!("moved {} to this build:", super::plural(upgraded.len(), "run", "runs"));
        for moved in upgraded {
            let from = moved.from.as_ref().map_or_else(
                || "a build its journal does not record".to_owned(),
                |build| format!("build {} (body {})", build.version, build.fingerprint),
            );
            let to = &moved.to;
            println!("  {} ({}): from {from} to build {} (body {})", moved.run, moved.tool, to.version, to.fingerprint);
        }
    }
    if !busy.is_empty() {
        println!("{} being advanced by a worker, so not looked at:", super::plural(busy.len(), "run is", "runs are"));
        for run in busy {
            println!("  {run}");
        }
    }
    if !refused.is_empty() {
        println!("cannot move {}: {} not replay on this build:", super::plural(refused.len(), "run", "runs"), {
            if refused.len() == 1 { "its journal does" } else { "their journals do" }
        });
        for run in refused {
            println!("  {run}");
        }
    }
}

/// Fails if any run could not move, saying what to do; asks for another pass for busy runs.
fn verdict(upgrade: &Upgrade) -> Result<(), String> {
    if !upgrade.busy.is_empty() {
        eprintln!("run `runs upgrade` again once the runs being advanced park or finish");
    }
    if upgrade.refused.is_empty() {
        return Ok(());
    }
    let one = upgrade.refused.len() == 1;
    let (them, they_finish) = if one { ("it", "it finishes") } else { ("them", "they finish") };
    Err(format!(
        "{} left on the build that started {them}, unfailed: run a worker of that build until {they_finish}, cancel \
         {them} (`cancel <run>`), or ship a build that replays {them} (guard the change with `ctx.patched(\"id\")` at \
         the line each divergence names) and upgrade again",
        super::plural(upgrade.refused.len(), "run is", "runs are"),
    ))
}
