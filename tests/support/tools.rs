//! Tools a test needs from outside the workspace (a browser, a Prometheus server), installed by a
//! script under `scripts/` that prints one `VARIABLE=path` line for each.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The paths a script printed, by variable.
pub struct Installed {
    script: &'static str,
    printed: String,
}

impl Installed {
    /// The path the script printed for `variable`.
    pub fn path(&self, variable: &str) -> PathBuf {
        let line = self.printed.lines().find_map(|line| line.strip_prefix(variable)?.strip_prefix('='));
        PathBuf::from(line.unwrap_or_else(|| panic!("{} printed no {variable}: {}", self.script, self.printed)))
    }
}

/// Runs `scripts/<script>`, installing what it installs if needed; fails the test with the
/// script's reason when it cannot, naming what `needs` them.
pub fn installed(script: &'static str, needs: &str) -> Installed {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts").join(script);
    let ran = Command::new("bash").arg(&path).output().expect("bash runs");
    assert!(
        ran.status.success(),
        "{needs}, and {} could not provide them:\n{}",
        path.display(),
        String::from_utf8_lossy(&ran.stderr)
    );
    Installed { script, printed: String::from_utf8_lossy(&ran.stdout).into_owned() }
}
