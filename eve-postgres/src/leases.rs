//! The metrics of leases: how a worker's claims of runs end, and how often another worker's claim
//! takes a run away from it. Recorded once metrics are enabled ([`eve_runtime::metrics::enable`]).
//!
//! | name | kind | labels | what |
//! | --- | --- | --- | --- |
//! | `eve_lease_claims_total` | counter | `result` | claims of runs: `claimed`, `held` (another worker's lease is live) or `error` |
//! | `eve_lease_losses_total` | counter | | renewals and appends refused because another worker's claim took the run over |

use eve_runtime::error::StoreError;
use eve_runtime::metrics::{Metric, enabled};

/// `eve_lease_claims_total`.
pub const LEASE_CLAIMS: &str = "eve_lease_claims_total";
/// `eve_lease_losses_total`.
pub const LEASE_LOSSES: &str = "eve_lease_losses_total";

inventory::submit! { Metric::counter(LEASE_CLAIMS, "Claims of runs by this worker, by result.") }
inventory::submit! { Metric::counter(LEASE_LOSSES, "Runs this worker lost to another worker's claim.") }

/// Counts a claim by how it ended.
pub(crate) fn claimed<T>(claim: &Result<T, StoreError>) {
    if enabled() {
        let result = match claim {
            Ok(_) => "claimed",
            Err(StoreError::Leased { .. }) => "held",
            Err(_) => "error",
        };
        ::metrics::counter!(LEASE_CLAIMS, "result" => result).increment(1);
    }
}

/// Counts a lost lease if a renewal or an append was refused for one.
pub(crate) fn lost_if_fenced<T>(write: &Result<T, StoreError>) {
    if enabled() && matches!(write, Err(StoreError::Fenced { .. })) {
        ::metrics::counter!(LEASE_LOSSES).increment(1);
    }
}
