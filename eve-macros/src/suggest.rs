//! "Did you mean": the known name closest to a misspelled one.

/// Names users reach for that are spelled differently here.
const ALIASES: &[(&str, &str)] = &[
    ("retries", "max_attempts"),
    ("max_retries", "max_attempts"),
    ("attempts", "max_attempts"),
    ("retry", "max_attempts"),
    ("delay", "backoff"),
    ("retry_delay", "backoff"),
    ("krate", "crate"),
    ("rename", "name"),
];

/// The known name `unknown` most likely meant, if one is close enough.
pub fn closest<'k>(unknown: &str, known: &[&'k str]) -> Option<&'k str> {
    if let Some((_, alias)) = ALIASES.iter().find(|(alias, _)| *alias == unknown) {
        return known.iter().copied().find(|name| name == alias);
    }
    let limit = unknown.chars().count().div_ceil(3).max(1);
    let distances = known.iter().map(|name| (distance(unknown, name), *name));
    distances.filter(|(distance, _)| *distance <= limit).min_by_key(|(distance, _)| *distance).map(|(_, name)| name)
}

/// Edits (insertions, deletions, substitutions and swaps of neighbours) between two names.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![vec![0; b.len() + 1]; a.len() + 1];
    rows[0] = (0..=b.len()).collect();
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let substitution = rows[i - 1][j - 1] + usize::from(a[i - 1] != b[j - 1]);
            let mut best = substitution.min(rows[i - 1][j] + 1).min(rows[i][j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn misspellings_get_the_closest_known_name() {
        let known = ["name", "max_attempts", "backoff", "crate"];
        let cases: &[(&str, Option<&str>)] = &[
            ("max_attempt", Some("max_attempts")),
            ("max_atempts", Some("max_attempts")),
            ("nmae", Some("name")),
            ("backof", Some("backoff")),
            ("retires", None),
            ("retries", Some("max_attempts")),
            ("delay", Some("backoff")),
            ("cratee", Some("crate")),
            ("timeout", None),
            ("x", None),
        ];
        for (unknown, expected) in cases {
            assert_eq!(closest(unknown, &known), *expected, "suggesting for `{unknown}`");
        }
    }

    #[test]
    fn aliases_only_suggest_names_the_macro_knows() {
        assert_eq!(closest("retries", &["name", "crate"]), None);
    }
}
