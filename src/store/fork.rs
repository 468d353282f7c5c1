//! What both backends' forks share: the statement that copies a table's rows from the source
//! session into the fork. Only the way a backend names its parameters (`$n`, `?n`) and how
//! it lists a table's columns differ, and those stay in the backends.

/// The `INSERT … SELECT` that copies the rows of `table` matching `filter` into the new
/// session: every one of `columns` as it is, but `id_column` (parameter 2, the new id) and
/// the `overrides` (each appended to `values`, which hold the parameters already bound, and
/// named by its place there). `parameter(n)` writes parameter `n` as the backend does.
pub(super) fn copy_rows_statement<V: Copy>(
    table: &str,
    columns: &[String],
    id_column: &str,
    overrides: &[(&str, V)],
    filter: &str,
    values: &mut Vec<V>,
    parameter: fn(usize) -> String,
) -> String {
    let selected: Vec<String> = columns
        .iter()
        .map(|column| {
            if column == id_column {
                parameter(2)
            } else if let Some((_, value)) = overrides.iter().find(|(name, _)| name == column) {
                values.push(*value);
                parameter(values.len())
            } else {
                format!("\"{column}\"")
            }
        })
        .collect();
    let quoted: Vec<String> = columns.iter().map(|c| format!("\"{c}\"")).collect();
    format!(
        "INSERT INTO {table} ({}) SELECT {} FROM {table} WHERE {filter}",
        quoted.join(", "),
        selected.join(", ")
    )
}

/// What a fork's `sessions` row holds instead of the source's (its id aside): when it was
/// made, its workspace, where it came from, and the source's prompt-cache key (which the
/// backend reads in its transaction).
pub(super) struct ForkedSession {
    now: i64,
    roots: String,
    origin: String,
    cache_key: String,
}

impl ForkedSession {
    pub(super) fn new(fork: &super::ForkRequest<'_>, cache_key: String) -> ForkedSession {
        ForkedSession {
            now: super::now_millis(),
            roots: serde_json::to_string(fork.roots).unwrap_or_else(|_| "[]".into()),
            origin: format!("{} at t{}", fork.source, fork.through),
            cache_key,
        }
    }

    /// The overrides of [`copy_rows_statement`] for the `sessions` row, each value made a
    /// backend parameter by `int` or `text`.
    pub(super) fn overrides<'a, V>(
        &'a self,
        int: fn(&'a i64) -> V,
        text: fn(&'a String) -> V,
    ) -> [(&'static str, V); 5] {
        [
            ("created_at", int(&self.now)),
            ("updated_at", int(&self.now)),
            ("workspace_roots", text(&self.roots)),
            ("forked_from", text(&self.origin)),
            ("cache_key", text(&self.cache_key)),
        ]
    }
}

/// What a fork copied: `per_table` counts the rows of each of
/// [`TURN_TABLES`](super::api::TURN_TABLES), in its order; `defs` the definitions the fork has.
pub(super) fn fork_copied(per_table: [i64; 6], defs: i64) -> super::ForkCopied {
    let [turns, iterations, history, _requests, folds, _changes] = per_table;
    super::ForkCopied {
        turns,
        iterations,
        history,
        folds,
        defs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_id_and_overrides_take_parameters_and_the_rest_is_copied() {
        let columns = ["session_id", "turn", "owner", "body"].map(String::from);
        let mut values = vec!["source", "new", "through"];
        let sql = copy_rows_statement(
            "turns",
            &columns,
            "session_id",
            &[("owner", "nobody")],
            "session_id = $1 AND turn <= $3",
            &mut values,
            |n| format!("${n}"),
        );
        assert_eq!(
            sql,
            "INSERT INTO turns (\"session_id\", \"turn\", \"owner\", \"body\") SELECT $2, \"turn\", $4, \"body\" FROM turns WHERE session_id = $1 AND turn <= $3"
        );
        assert_eq!(values, ["source", "new", "through", "nobody"]);
    }
}
