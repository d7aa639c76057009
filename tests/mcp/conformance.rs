//! The official MCP conformance suite in server mode against eve's fixture server, run by
//! `scripts/mcp-conformance.sh`: every scenario protocol revision 2026-07-28 requires, the whole
//! active suite, and the tasks extension's scenarios. It fails on any failure not in the committed baseline (each line
//! with its reason), and when npm cannot install the pinned suite: it never skips.

use std::process::Command;

#[test]
fn the_official_conformance_suite_passes_but_for_the_baseline() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new("bash")
        .arg(root.join("scripts/mcp-conformance.sh"))
        .arg(env!("CARGO_BIN_EXE_mcp-conformance-server"))
        .output()
        .expect("bash runs the conformance script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(output.status.success(), "the MCP conformance suite failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("requirements-2026-07-28: ok"), "{stdout}");
    assert!(stdout.contains("tasks-lifecycle: ok"), "{stdout}");
}
