//! Two tools with one name make calls ambiguous, so the runtime refuses to build and says which.
//!
//! The two tools are in `bin/duplicate_names.rs`: a binary that links them can build no runtime
//! at all, so they cannot share this test binary with the other tests.

use std::process::Command;

#[test]
fn a_runtime_refuses_tools_that_share_a_name() {
    let output = Command::new(env!("CARGO_BIN_EXE_duplicate-names")).output().expect("the binary runs");
    assert!(!output.status.success(), "the runtime must refuse ambiguous names");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "2 tools are named `refund` (duplicate_names::billing::refund_order, duplicate_names::support::refund_ticket); \
         give all but one another name with `name = \"…\"`"
    );
}
