//! The inspector's page in a real browser (headless Chromium through WebDriver), kept in a binary
//! of its own: it needs the browser `scripts/chromium.sh` installs, and fails without it.

mod inspector;
