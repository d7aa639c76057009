//! The crates whose tools a host serves, named so that the binary links them.
//!
//! Each `#[workflow_tool]`, `#[task]` and `#[tool]` registers itself from the object code of the
//! crate that defines it. A binary links a library crate only if it names it: with the tools in
//! `lib.rs` and a host in `main.rs` that never mentions the library, the linker leaves the library
//! out whole, registrations and all, and the host serves only the provided tools. [`Host::main`]
//! therefore takes a [`Tools`], which `eve_tools::tools!(my_tools)` makes by naming each crate
//! (`use my_tools as _;` in the expansion is what keeps it linked).
//!
//! [`Host::main`]: super::Host::main

/// The crates a host names so that their tools are linked into it; see the module documentation.
/// Make one with `eve_tools::tools!(my_tools, other_tools)`, or `eve_tools::tools!()` when every
/// tool is defined in the binary itself.
///
/// ```
/// let tools = eve_tools::tools!(serde_json);
/// assert_eq!(tools.crates(), ["serde_json"]);
/// assert!(eve_tools::tools!().crates().is_empty());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tools {
    crates: &'static [&'static str],
}

impl Tools {
    /// What `eve_tools::tools!` expands to, after naming each crate; not for direct use, since a
    /// crate listed here without being named is not linked.
    #[doc(hidden)]
    pub const fn __linked(crates: &'static [&'static str]) -> Tools {
        Tools { crates }
    }

    /// The crates named, as written.
    pub fn crates(&self) -> &'static [&'static str] {
        self.crates
    }
}
